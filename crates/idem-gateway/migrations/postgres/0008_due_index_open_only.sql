-- Issue 14. The due index holds only the deliveries its queries read: pending and in flight (the
-- due query, the next due time) and dead (dead letters, redrive, the open counts). PostgreSQL
-- writes a new entry in every index a row is in each time the row's state changes (no update of
-- an indexed column is HOT), so a delivered or stale delivery no longer costs an entry here, and
-- the index stays the size of the backlog instead of the whole history. (SQLite keeps the full
-- index: it rewrites only the indexes whose columns change, and uses a partial index only for
-- queries that repeat its WHERE clause.)
CREATE INDEX idem_gateway_deliveries_due_open
    ON idem_gateway_deliveries (destination, state, next_attempt_at, id)
    WHERE state IN ('pending', 'in_flight', 'dead');
DROP INDEX idem_gateway_deliveries_due_in_order;
