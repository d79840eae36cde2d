-- Dead letters of broker consumers: deliveries whose handler failed on every one of the retry
-- policy's N deliveries, kept with the event's metadata for inspection and redrive. Times are
-- milliseconds since the Unix epoch from the application's clock. Retention never deletes these
-- rows (docs/design.md C9): an operator deletes a row after redriving or discarding it.
CREATE TABLE idem_dead_letters (
    id              BIGSERIAL PRIMARY KEY,
    consumer        TEXT    NOT NULL,
    source          TEXT    NOT NULL,
    -- The broker message id (JetStream `Nats-Msg-Id`, AMQP `message_id`), when the message had one.
    event_id        TEXT,
    -- NULL when the message could not be decoded into an event (no id): such rows never merge.
    dedup_key       TEXT,
    aggregate_type  TEXT,
    aggregate_id    TEXT,
    -- The NATS subject or the RabbitMQ queue the message was consumed from.
    destination     TEXT    NOT NULL,
    -- The message's headers as a JSON array of [name, value] pairs, in arrival order.
    headers         TEXT    NOT NULL,
    payload         BYTEA   NOT NULL,
    error           TEXT    NOT NULL,
    delivery_count  BIGINT  NOT NULL,
    first_failed_at BIGINT  NOT NULL,
    last_failed_at  BIGINT  NOT NULL,
    -- Recording one event twice (a redelivery after a lost ack) updates its row.
    UNIQUE (consumer, dedup_key)
);
CREATE INDEX idem_dead_letters_consumer ON idem_dead_letters (consumer, id);
CREATE INDEX idem_dead_letters_last_failed_at ON idem_dead_letters (last_failed_at);
