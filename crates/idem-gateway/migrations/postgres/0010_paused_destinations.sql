-- Issue 16: destinations an operator paused (`idem destination pause`, `POST
-- /admin/destinations/{name}/pause`). While a destination has a row, no gateway process on this
-- database claims its deliveries: they stay pending, with no attempt made or counted, until the
-- row is deleted (resume). In the database, so every process sees it and it survives restarts.
-- `paused_at` is in ms since the Unix epoch, from the gateway's clock.
CREATE TABLE idem_gateway_paused_destinations (
    destination TEXT    PRIMARY KEY,
    paused_at   BIGINT NOT NULL
);
