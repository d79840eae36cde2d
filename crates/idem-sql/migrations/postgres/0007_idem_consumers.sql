-- The consumer registry (issue 34) on PostgreSQL. Times are milliseconds since the Unix epoch from
-- the application's clock.
--
-- One row per consumer: what kind it is, when it was first and last seen, and the newest lag it
-- reported. Rows are written by the consumers' own transactions (a flush rides in a commit),
-- never by a background task.
CREATE TABLE idem_consumers (
    consumer         TEXT    NOT NULL PRIMARY KEY,
    kind             TEXT    NOT NULL,
    first_seen       BIGINT  NOT NULL,
    -- FALSE for a back-filled row: first seen at or before first_seen (retention deleted older rows).
    first_seen_exact BOOLEAN NOT NULL,
    last_seen        BIGINT  NOT NULL,
    -- The newest lag reported (Kafka: high watermark - stored offset over its partitions;
    -- JetStream: the consumer's pending count) and when.
    lag              BIGINT,
    lag_at           BIGINT
);

-- Per-consumer counts in 5-minute buckets. `instance` is a random id per Store (per process):
-- no two processes ever write one row, so a frozen process never holds a row another needs.
CREATE TABLE idem_consumer_counts (
    consumer   TEXT   NOT NULL,
    instance   TEXT   NOT NULL,
    bucket     BIGINT NOT NULL,
    claimed    BIGINT NOT NULL DEFAULT 0,
    duplicates BIGINT NOT NULL DEFAULT 0,
    stale      BIGINT NOT NULL DEFAULT 0,
    gaps       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (consumer, bucket, instance)
);

-- The consumer that wrote an effect or outbox row; NULL for rows written before this migration
-- or without a consumer (shown as "unknown").
ALTER TABLE idem_effects ADD COLUMN consumer TEXT;
ALTER TABLE idem_outbox ADD COLUMN consumer TEXT;

-- Back-fill: one row per consumer name found in the existing tables, first seen "at or before"
-- the oldest row found. Kind: `kafka` for names found only in Kafka offsets, `lineage` for
-- effects scopes that are no consumer's name, else `runner`.
INSERT INTO idem_consumers (consumer, kind, first_seen, first_seen_exact, last_seen)
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
