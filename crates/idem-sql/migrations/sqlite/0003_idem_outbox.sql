-- The transactional outbox (docs/design.md C7) on SQLite. Times are milliseconds since the Unix
-- epoch from the application's clock.
--
-- A row is written by `Outbox::enqueue` in the application's transaction and published by a
-- relay. `seq` gives rough order only (it is taken at INSERT, not at commit); relays select rows by
-- status and due time, never by "seq greater than the last one seen". While a relay holds a claim,
-- `claim_token` is its token and `next_attempt_at` is the claim's expiry, after which another
-- relay may take the row.
CREATE TABLE idem_outbox (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id      TEXT    NOT NULL UNIQUE,
    destination     TEXT    NOT NULL,
    aggregate_type  TEXT,
    aggregate_id    TEXT,
    headers         TEXT    NOT NULL,
    payload         BLOB    NOT NULL,
    status          TEXT    NOT NULL CHECK (status IN ('pending', 'published', 'parked')),
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    claim_token     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    published_at    INTEGER,
    CHECK ((aggregate_type IS NULL) = (aggregate_id IS NULL))
);
-- The relays' due-query walks the pending rows in seq order (the index holds pending rows only,
-- so published ones never slow it down); neither it nor any other index holds next_attempt_at or
-- claim_token, which every claim rewrites.
CREATE INDEX idem_outbox_pending ON idem_outbox (seq) WHERE status = 'pending';
-- The operators' list of parked rows.
CREATE INDEX idem_outbox_parked ON idem_outbox (seq) WHERE status = 'parked';
-- Per-aggregate order: "is there an older unpublished row of this aggregate?"
CREATE INDEX idem_outbox_aggregate ON idem_outbox (aggregate_type, aggregate_id, seq)
    WHERE status <> 'published';
-- Retention of published rows.
CREATE INDEX idem_outbox_published_at ON idem_outbox (published_at) WHERE status = 'published';
