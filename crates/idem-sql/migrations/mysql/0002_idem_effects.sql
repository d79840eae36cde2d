-- The effect ledger (docs/design.md C6) on MySQL and MariaDB. Times are milliseconds since the
-- Unix epoch, passed in by the application's clock. The rules of 0001 hold (statements that can
-- run again, byte-for-byte keys, InnoDB).
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
CREATE TABLE IF NOT EXISTS idem_effects (
    effect_key       VARBINARY(255) NOT NULL PRIMARY KEY,
    effect           VARBINARY(255) NOT NULL,
    request          LONGBLOB       NOT NULL,
    status           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempts         BIGINT         NOT NULL,
    next_attempt_at  BIGINT         NOT NULL,
    lease_token      BIGINT         NOT NULL,
    lease_expires_at BIGINT         NOT NULL,
    outcome          LONGBLOB,
    last_error       MEDIUMTEXT CHARACTER SET utf8mb4,
    first_attempt_at BIGINT,
    created_at       BIGINT         NOT NULL,
    updated_at       BIGINT         NOT NULL,
    -- next_attempt_at of the rows that may run, NULL for the others: with its indexes, the
    -- stand-in for PostgreSQL's partial index. The workers' due query walks one of them in due
    -- order and stops at its LIMIT, so it locks only the rows it takes: sorted any other way,
    -- InnoDB would lock every due row before sorting, and concurrent workers would find them all
    -- taken. A worker of some effects walks (effect, due_at), so it never holds, even for a
    -- moment, a row of an effect another worker is claiming (that worker's SKIP LOCKED would
    -- pass it over).
    due_at           BIGINT GENERATED ALWAYS AS (CASE WHEN status IN ('pending', 'running', 'unknown')
                         THEN next_attempt_at END) VIRTUAL,
    KEY idem_effects_due (due_at),
    KEY idem_effects_effect_due (effect, due_at),
    -- Operators' listing by status, and retention of finished rows (C9): by status, then age.
    KEY idem_effects_status_updated_at (status, updated_at),
    CONSTRAINT idem_effects_status CHECK (status IN
        ('pending', 'running', 'unknown', 'succeeded', 'failed', 'parked', 'dead'))
) ENGINE=InnoDB;
