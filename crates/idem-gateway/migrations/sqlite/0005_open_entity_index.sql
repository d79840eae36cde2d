-- The entity-order check of the due query ("is an older delivery of this entity still open?")
-- reads only the open deliveries of one entity through this index, however many delivered ones
-- the entity has: one index probe per candidate instead of a scan of the entity's history.
CREATE INDEX idem_gateway_deliveries_open_entity
    ON idem_gateway_deliveries (destination, route, entity, version)
    WHERE state IN ('pending', 'in_flight') AND entity IS NOT NULL;
