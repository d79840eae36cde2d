-- Dead letters of broker consumers: deliveries whose handler failed on every one of the retry
-- policy's N deliveries, kept with the event's metadata for inspection and redrive. Times are
-- milliseconds since the Unix epoch from the application's clock. Retention never deletes these
-- rows (docs/design.md C9): an operator deletes a row after redriving or discarding it. The rules
-- of 0001 hold (statements that can run again, byte-for-byte keys, InnoDB).
CREATE TABLE IF NOT EXISTS idem_dead_letters (
    id              BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    consumer        VARBINARY(255) NOT NULL,
    source          VARBINARY(255) NOT NULL,
    -- The broker message id (JetStream `Nats-Msg-Id`, AMQP `message_id`), when the message had one.
    event_id        TEXT CHARACTER SET utf8mb4,
    -- NULL when the message could not be decoded into an event (no id): such rows never merge
    -- (a unique index holds any number of NULLs).
    dedup_key       VARBINARY(512),
    aggregate_type  TEXT CHARACTER SET utf8mb4,
    aggregate_id    TEXT CHARACTER SET utf8mb4,
    -- The NATS subject or the RabbitMQ queue the message was consumed from.
    destination     TEXT CHARACTER SET utf8mb4 NOT NULL,
    -- The message's headers as a JSON array of [name, value] pairs, in arrival order.
    headers         MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
    payload         LONGBLOB       NOT NULL,
    error           MEDIUMTEXT CHARACTER SET utf8mb4 NOT NULL,
    delivery_count  BIGINT         NOT NULL,
    first_failed_at BIGINT         NOT NULL,
    last_failed_at  BIGINT         NOT NULL,
    -- Recording one event twice (a redelivery after a lost ack) updates its row.
    UNIQUE KEY idem_dead_letters_event (consumer, dedup_key),
    KEY idem_dead_letters_consumer (consumer, id),
    KEY idem_dead_letters_last_failed_at (last_failed_at)
) ENGINE=InnoDB;
