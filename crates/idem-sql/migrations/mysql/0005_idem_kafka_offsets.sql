-- Kafka consumer offsets stored with the output (idem-broker's Kafka consumer). Times are
-- milliseconds since the Unix epoch from the application's clock. The rules of 0001 hold
-- (statements that can run again, byte-for-byte keys, InnoDB).
--
-- One row per (consumer, topic, partition): the offset of the next message to process (Kafka's
-- "committed offset" convention), advanced by compare-and-set in the same transaction as the
-- messages' output, so that the output and the position commit together or not at all (Kafka's
-- consumer documentation, "Storing Offsets Outside Kafka").
--
-- Each partition is owned through an idem lease; the holder that takes the lease writes its lease
-- token and its member id here in the same transaction, and every later advance must present both:
-- a holder whose lease was taken over (a zombie) cannot move the offset, and so cannot commit the
-- transaction that carries its output. Retention never deletes these rows.
CREATE TABLE IF NOT EXISTS idem_kafka_offsets (
    consumer        VARBINARY(255) NOT NULL,
    topic           VARBINARY(255) NOT NULL,
    kafka_partition INTEGER        NOT NULL,
    -- NULL until the first holder chose where to start (earliest or latest).
    next_offset     BIGINT,
    fencing_token   BIGINT         NOT NULL,
    holder          VARBINARY(255) NOT NULL,
    -- Failed deliveries of the message at next_offset, and the last error: reset by every advance.
    attempts        INTEGER        NOT NULL,
    last_error      MEDIUMTEXT CHARACTER SET utf8mb4,
    updated_at      BIGINT         NOT NULL,
    PRIMARY KEY (consumer, topic, kafka_partition)
) ENGINE=InnoDB;
