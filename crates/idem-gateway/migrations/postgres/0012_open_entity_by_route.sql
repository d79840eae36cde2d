-- Issue 14. The entity-order check reads an entity's open deliveries by (route, entity): a route
-- has one destination, so the destination adds nothing to the key, and without it as the leading
-- column no other index can serve the check. With (destination, …) first, PostgreSQL with stale
-- statistics (a busy new table between two ANALYZE runs) probed the due index by destination
-- alone instead and filtered every open delivery of the destination for each candidate: 452 rows
-- and 70 ms per due query of 64 at a backlog of a few thousand, measured during the bench.
CREATE INDEX idem_gateway_deliveries_open_by_route
    ON idem_gateway_deliveries (route, entity, version, id)
    WHERE state IN ('pending', 'in_flight') AND entity IS NOT NULL;
DROP INDEX idem_gateway_deliveries_open_entity;
