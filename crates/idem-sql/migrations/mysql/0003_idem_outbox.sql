-- The transactional outbox (docs/design.md C7) on MySQL and MariaDB. Times are milliseconds since
-- the Unix epoch from the application's clock. The rules of 0001 hold (statements that can run
-- again, byte-for-byte keys, InnoDB).
--
-- A row is written by `Outbox::enqueue` in the application's transaction and published by a
-- relay. `seq` gives rough order only (it is taken at INSERT, not at commit); relays select rows by
-- status and due time, never by "seq greater than the last one seen". While a relay holds a claim,
-- `claim_token` is its token and `next_attempt_at` is the claim's expiry, after which another
-- relay may take the row.
CREATE TABLE IF NOT EXISTS idem_outbox (
    seq             BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    message_id      VARBINARY(255) NOT NULL,
    destination     VARCHAR(1024) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    aggregate_type  VARBINARY(255),
    aggregate_id    VARBINARY(255),
    headers         MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
    payload         LONGBLOB       NOT NULL,
    status          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
    attempts        BIGINT         NOT NULL,
    next_attempt_at BIGINT         NOT NULL,
    claim_token     BIGINT,
    last_error      MEDIUMTEXT CHARACTER SET utf8mb4,
    created_at      BIGINT         NOT NULL,
    published_at    BIGINT,
    UNIQUE KEY idem_outbox_message_id (message_id),
    -- The relays' due query walks the pending rows in seq order, and operators list parked ones.
    KEY idem_outbox_status_seq (status, seq),
    -- Per-aggregate order: "is there an older unpublished row of this aggregate?"
    KEY idem_outbox_aggregate (aggregate_type, aggregate_id, seq),
    -- Retention of published rows.
    KEY idem_outbox_published_at (status, published_at),
    CONSTRAINT idem_outbox_status CHECK (status IN ('pending', 'published', 'parked')),
    CONSTRAINT idem_outbox_aggregate_pair CHECK ((aggregate_type IS NULL) = (aggregate_id IS NULL))
) ENGINE=InnoDB;
