-- The consumer registry (issue 34): see the SQLite and PostgreSQL migration of the same number.
-- The rules of 0001 hold (statements that can run again, byte-for-byte names, InnoDB): the
-- columns are added through a prepared statement only when missing (MySQL 8.0 has no
-- ADD COLUMN IF NOT EXISTS), and the back-fill is an INSERT IGNORE.
CREATE TABLE IF NOT EXISTS idem_consumers (
    consumer         VARBINARY(255) NOT NULL PRIMARY KEY,
    kind             VARCHAR(32) CHARACTER SET ascii NOT NULL,
    first_seen       BIGINT         NOT NULL,
    first_seen_exact BOOLEAN        NOT NULL,
    last_seen        BIGINT         NOT NULL,
    lag              BIGINT,
    lag_at           BIGINT
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS idem_consumer_counts (
    consumer   VARBINARY(255) NOT NULL,
    instance   VARBINARY(64)  NOT NULL,
    bucket     BIGINT         NOT NULL,
    claimed    BIGINT         NOT NULL DEFAULT 0,
    duplicates BIGINT         NOT NULL DEFAULT 0,
    stale      BIGINT         NOT NULL DEFAULT 0,
    gaps       BIGINT         NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, bucket, instance)
) ENGINE=InnoDB;

SET @idem_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
                     WHERE table_schema = DATABASE() AND table_name = 'idem_effects'
                       AND column_name = 'consumer') = 0,
                   'ALTER TABLE idem_effects ADD COLUMN consumer VARBINARY(255) NULL', 'DO 0');
PREPARE idem_ddl_stmt FROM @idem_ddl;
EXECUTE idem_ddl_stmt;
DEALLOCATE PREPARE idem_ddl_stmt;

SET @idem_ddl = IF((SELECT COUNT(*) FROM information_schema.columns
                     WHERE table_schema = DATABASE() AND table_name = 'idem_outbox'
                       AND column_name = 'consumer') = 0,
                   'ALTER TABLE idem_outbox ADD COLUMN consumer VARBINARY(255) NULL', 'DO 0');
PREPARE idem_ddl_stmt FROM @idem_ddl;
EXECUTE idem_ddl_stmt;
DEALLOCATE PREPARE idem_ddl_stmt;

INSERT IGNORE INTO idem_consumers (consumer, kind, first_seen, first_seen_exact, last_seen)
SELECT consumer,
       CASE WHEN MIN(source) = 'kafka' AND MAX(source) = 'kafka' THEN 'kafka'
            WHEN MIN(source) = 'scope' THEN 'lineage'
            ELSE 'runner' END,
       MIN(oldest), FALSE, MAX(newest)
FROM (
    SELECT consumer, 'row' AS source, MIN(processed_at) AS oldest, MAX(processed_at) AS newest
      FROM idem_inbox GROUP BY consumer
    UNION ALL SELECT consumer, 'row', MIN(updated_at), MAX(updated_at)
      FROM idem_versions GROUP BY consumer
    UNION ALL SELECT consumer, 'row', MIN(first_seen), MAX(first_seen)
      FROM idem_parked GROUP BY consumer
    UNION ALL SELECT consumer, 'kafka', MIN(updated_at), MAX(updated_at)
      FROM idem_kafka_offsets GROUP BY consumer
    UNION ALL SELECT consumer, 'row', MIN(first_failed_at), MAX(last_failed_at)
      FROM idem_dead_letters GROUP BY consumer
    UNION ALL SELECT consumer, 'row', MIN(declared_at), MAX(declared_at)
      FROM idem_consumer_lineage GROUP BY consumer
    UNION ALL SELECT effects_scope, 'scope', MIN(declared_at), MAX(declared_at)
      FROM idem_consumer_lineage GROUP BY effects_scope
) AS seen
GROUP BY consumer;
