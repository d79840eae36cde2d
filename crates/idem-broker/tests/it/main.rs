//! idem-broker's integration tests, against real NATS JetStream, RabbitMQ and Kafka-protocol
//! (tansu) brokers: consumers that ack after commit (on SQLite and PostgreSQL), and on SQLite,
//! PostgreSQL and MySQL (MariaDB) outbox relays, dead letters, Kafka offsets and Kafka consumers
//! killed with SIGKILL.

mod consumer_common;
mod consumer_dead_letters;
mod consumer_jetstream;
mod consumer_rabbitmq;
#[cfg(feature = "kafka")]
mod kafka_consumer;
#[cfg(feature = "kafka")]
mod kafka_crash;
#[cfg(feature = "kafka")]
mod kafka_crash_consumer;
#[cfg(feature = "kafka")]
mod kafka_offsets;
#[cfg(feature = "kafka")]
mod kafka_relay;
#[cfg(feature = "kafka")]
mod kafka_support;
mod relay;
