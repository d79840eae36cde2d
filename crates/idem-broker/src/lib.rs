//! idem over message brokers: NATS JetStream and RabbitMQ consumers that acknowledge a message
//! only after its transaction committed, and outbox relays that publish with each row's stable
//! message id to NATS JetStream, RabbitMQ or HTTP.
