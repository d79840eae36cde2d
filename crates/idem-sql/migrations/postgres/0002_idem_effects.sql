-- The effect ledger (docs/design.md C6) on PostgreSQL. Times are milliseconds since the Unix epoch,
-- passed in by the application's clock.
--
-- One row per effect key (the idempotency key sent to the provider). The intent is written in
-- the handler's transaction (status 'pending') before any call; workers claim due rows by taking
-- the lease (lease_token + 1, lease_expires_at), and every later write of a worker is checked
-- against its token, so a worker whose lease lapsed cannot overwrite its successor.
--
-- status: pending   waiting for its first or next attempt (after a retryable failure)
--         running   a worker holds the lease and is calling the provider; a running row whose
--                   lease lapsed is an attempt with an unknown result
--         unknown   the last call's result is unknown (timeout); retried with the same key while
--                   the provider keeps keys (now - first_attempt_at < key retention)
--         succeeded the provider succeeded; outcome holds its answer
--         failed    resolved as failed by an operator (finished)
--         parked    unknown past the key retention: waits for reconciliation by an operator
--         dead      failed past the retry policy: a dead letter, waits for an operator
CREATE TABLE idem_effects (
    effect_key       TEXT    NOT NULL PRIMARY KEY,
    effect           TEXT    NOT NULL,
    request          BYTEA   NOT NULL,
    status           TEXT    NOT NULL CHECK (status IN
                         ('pending', 'running', 'unknown', 'succeeded', 'failed', 'parked', 'dead')),
    attempts         BIGINT  NOT NULL,
    next_attempt_at  BIGINT  NOT NULL,
    lease_token      BIGINT  NOT NULL,
    lease_expires_at BIGINT  NOT NULL,
    outcome          BYTEA,
    last_error       TEXT,
    first_attempt_at BIGINT,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL
);
-- The workers' due query: rows that may run, by due time.
CREATE INDEX idem_effects_due ON idem_effects (next_attempt_at)
    WHERE status IN ('pending', 'running', 'unknown');
-- Operators' listing by status, and retention of finished rows (C9): by status, then age.
CREATE INDEX idem_effects_status_updated_at ON idem_effects (status, updated_at);
