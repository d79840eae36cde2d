//! idem over message brokers: NATS JetStream and RabbitMQ consumers that acknowledge a message
//! only after its transaction committed, and outbox relays that publish with each row's stable
//! message id to NATS JetStream, RabbitMQ or HTTP.
//!
//! ## Consumers: ack after commit
//!
//! A [`Processor`] turns each delivery into an idem [`Event`](idem_sql::Event) (by default keyed
//! `(source, broker message id)`: JetStream `Nats-Msg-Id`, AMQP `message_id`) and runs it through
//! an [`idem_sql::Runner`]: the claim, the version guard, the handler's writes, its effect intents
//! ([`idem_sql::EffectLedger::enqueue`]) and outbox rows ([`idem_sql::Outbox::enqueue`]) commit in
//! one transaction (docs/design.md C2), and only then is the message acknowledged.
//! [`JetStreamConsumer`] (pull consumer, explicit acks, in-progress acks while the handler runs)
//! and [`RabbitMqConsumer`] (quorum queue, retry queues declared by [`RetryTopology`]) settle
//! each delivery by its [`Disposition`]. Both are a transport ([`JetStreamSource`],
//! [`RabbitMqSource`]) under a [`Sink`]: the [`Processor`] here, the gateway's group-commit ingest
//! in `idem serve`.
//!
//! | delivery | JetStream | RabbitMQ |
//! |---|---|---|
//! | applied, duplicate, stale | ack | ack |
//! | handler or store error | NAK with the [`RetryPolicy`] delay for its delivery count | copy to retry queue *i* (TTL, then back), ack |
//! | handler error marked [permanent](idem_sql::HandlerError::permanent) | dead-letter row, TERM | dead-letter row, reject without requeue |
//! | failed on its N-th delivery, or undecodable | dead-letter row in idem's store ([`idem_sql::DeadLetters`]), TERM | dead-letter row, reject without requeue |
//!
//! A duplicate is acknowledged whatever its delivery count (C3): it never reaches the dead
//! letters. A dead letter does not block later events of its entity; redriven after a newer
//! version was applied, the version guard answers it as stale. Consumer names are versioned
//! (`billing_v2`): dedup and versions are per consumer.
//!
//! ```no_run
//! use std::time::Duration;
//! use async_nats::jetstream::{self, consumer::pull::Config};
//! use idem_broker::{Delivery, JetStreamConsumer, Processor, RetryPolicy};
//! use idem_core::Name;
//! use idem_sql::{Runner, SqliteStore, handler, sqlx};
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteStore::connect("sqlite://billing.db").await?;
//! store.migrate().await?;
//! let js = jetstream::new(async_nats::connect("127.0.0.1:4222").await?);
//! let pull = js
//!     .get_stream("ORDERS")
//!     .await?
//!     .get_or_create_consumer("billing_v2", Config {
//!         durable_name: Some("billing_v2".into()),
//!         ..Default::default()
//!     })
//!     .await?;
//! let consumer = Name::new("consumer", "billing_v2")?;
//! let processor = Processor::new(
//!     store.clone(),
//!     Runner::new(store.clone(), &consumer),
//!     Name::new("source", "orders")?,
//!     // `tx` is the transaction's connection; `?` takes any error (idem_sql::HandlerError)
//!     handler!(async move |tx, delivery: &Delivery| {
//!         sqlx::query("INSERT INTO invoices (order_json) VALUES ($1)")
//!             .bind(&delivery.payload[..])
//!             .execute(&mut *tx)
//!             .await?;
//!         Ok(())
//!     }),
//! )
//! .retry(RetryPolicy::new(5, vec![Duration::from_secs(1), Duration::from_secs(30)])?);
//! JetStreamConsumer::new(pull, processor)?
//!     .concurrency(8)
//!     .run(async { tokio::signal::ctrl_c().await.ok(); })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! ## Relays: the outbox, published
//!
//! A [`Relay`] claims due rows of an [`idem_sql::Outbox`] by status (never "id greater than the
//! last one seen": sequence order is not commit order), publishes them with a [`Publisher`] —
//! [`JetStreamPublisher`] (`Nats-Msg-Id`), [`RabbitMqPublisher`] (publisher confirms,
//! `message_id`) or [`HttpPublisher`] (`Idempotency-Key`) — marks the confirmed rows published by
//! message id, backs off on failure and parks a row after the outbox policy's attempts (C7).
//! Several relays may share one PostgreSQL database: there a relay holds its batches by row
//! locks in open transactions (`FOR UPDATE SKIP LOCKED`; a relay that dies releases them with
//! its connection), two at a time so that one is published while the other is recorded; on
//! SQLite it claims a batch with an expiry and claims the next while publishing. Order is per aggregate; rows without one are unordered. Delivery is at least once:
//! JetStream drops a republished copy only within the stream's duplicate window (2 min by
//! default), so the consumer's inbox remains the guarantee.
//!
//! ```no_run
//! use idem_broker::{JetStreamPublisher, Relay};
//! # async fn f(store: idem_sql::PgStore) -> Result<(), Box<dyn std::error::Error>> {
//! let js = async_nats::jetstream::new(async_nats::connect("127.0.0.1:4222").await?);
//! let relay = Relay::new(store.outbox(), JetStreamPublisher::new(js)).batch_size(500);
//! let totals = relay.run(async { tokio::signal::ctrl_c().await.ok(); }).await;
//! println!("published {}, duplicates {}", totals.published, totals.duplicates);
//! # Ok(())
//! # }
//! ```
//!
//! `cargo run -p idem --example upgrade_consumer` (in the facade crate) runs a consumer, an
//! effect worker and a relay end to end against a local NATS server.
//!
//! ## Kafka (feature `kafka`): the offset commits with the output
//!
//! A [`KafkaConsumer`] stores each partition's next offset in the same transaction as the
//! messages' output (Kafka's consumer documentation, "Storing Offsets Outside Kafka"), so a
//! crash, a rebalance or a replay never applies a message twice, and the inbox still catches a
//! message republished at a new offset with the same `idem-message-id`. Partitions are assigned
//! by idem leases (a fair share per live member, taken over after the lease ttl when a member
//! dies; a member whose lease was taken over is fenced), not by Kafka consumer groups. The
//! transport hands batches of one partition to a [`PartitionSink`]; the library's sink,
//! [`KafkaProcessor`], runs the inbox claim, the version guard, the handler and the offset
//! advance in one transaction, retries failures with backoff and then dead-letters the message
//! (or halts its partition, [`PoisonPolicy`]). [`KafkaPublisher`] is the relay target `kafka`
//! (key = the row's aggregate, header `idem-message-id` = its message id, `acks = all`).
//!
//! ```no_run
//! # #[cfg(feature = "kafka")]
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use idem_broker::{KafkaConsumer, KafkaMessage, KafkaProcessor, kafka_connect};
//! use idem_core::Name;
//! use idem_sql::{PgStore, handler, sqlx};
//!
//! let store = PgStore::connect("postgres://app@127.0.0.1/app").await?;
//! store.migrate().await?;
//! let client = Arc::new(kafka_connect(&["127.0.0.1:9092".to_owned()]).await?);
//! let consumer = Name::new("consumer", "billing_v2")?;
//! let processor = KafkaProcessor::new(
//!     store.clone(),
//!     &consumer,
//!     Name::new("source", "orders")?,
//!     handler!(async move |tx, message: &KafkaMessage| {
//!         sqlx::query("INSERT INTO invoices (order_json) VALUES ($1)")
//!             .bind(message.payload())
//!             .execute(&mut *tx)
//!             .await?;
//!         Ok(())
//!     }),
//! );
//! KafkaConsumer::new(client, store, &consumer, "orders", processor)?
//!     .run(async { tokio::signal::ctrl_c().await.ok(); })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! `cargo run -p idem --example kafka_consumer` runs the relay and the consumer end to end; `docs/kafka.md` says what a real Apache Kafka or Redpanda cluster must be set to.

#[cfg(feature = "rabbitmq")]
mod amqp;
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
mod consumer;
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
mod delivery;
#[cfg(feature = "nats")]
mod jetstream_consumer;
#[cfg(feature = "nats")]
mod jetstream_source;
pub mod metric_definitions;
#[cfg(feature = "rabbitmq")]
mod rabbitmq_consumer;
#[cfg(feature = "rabbitmq")]
mod rabbitmq_source;
#[cfg(feature = "rabbitmq")]
mod retry_topology;
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
mod sink;

#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub use consumer::{
    ConsumerError, ConsumerErrorKind, DEFAULT_MAX_DELIVERIES, DecodeError, DecodeFn,
    DeliveryCounts, DeliveryStats, Disposition, HandlerFn, ObserverFn, Processor, RetryPolicy,
    decode_message_id,
};
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub use delivery::Delivery;
#[cfg(feature = "nats")]
pub use jetstream_consumer::JetStreamConsumer;
#[cfg(feature = "nats")]
pub use jetstream_source::JetStreamSource;
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub use metric_definitions::{ACK_FAILURES_TOTAL, DELIVERIES_TOTAL, describe_consumer_metrics};
#[cfg(feature = "rabbitmq")]
pub use rabbitmq_consumer::RabbitMqConsumer;
#[cfg(feature = "rabbitmq")]
pub use rabbitmq_source::{RabbitMqSource, RetryVia};
#[cfg(feature = "rabbitmq")]
pub use retry_topology::{RetryTopology, X_DEATH, X_DELIVERY_COUNT, X_IDEM_DELIVERY_COUNT};
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub use sink::{Settle, Sink};

#[cfg(feature = "http")]
mod http_publisher;
#[cfg(feature = "nats")]
mod nats_publisher;
mod publisher;
#[cfg(feature = "rabbitmq")]
mod rabbitmq_publisher;
mod relay;

#[cfg(feature = "http")]
pub use http_publisher::{
    DEFAULT_HTTP_TIMEOUT, DEFAULT_RETRY_AFTER, HttpPublisher, IDEMPOTENCY_KEY, MAX_RETRY_AFTER,
    MIN_RETRY_AFTER,
};
pub use metric_definitions::{RELAY_ERRORS_TOTAL, RELAY_MESSAGES_TOTAL, describe_relay_metrics};
#[cfg(feature = "nats")]
pub use nats_publisher::{JetStreamPublisher, literal_subject};
pub use publisher::{PublishOutcome, Publisher, PublisherError, PublisherErrorKind};
#[cfg(feature = "rabbitmq")]
pub use rabbitmq_publisher::RabbitMqPublisher;
pub use relay::{
    DEFAULT_BATCH_SIZE, DEFAULT_CLAIM_TTL, DEFAULT_MAX_WAIT, DEFAULT_MIN_WAIT, DEFAULT_RELAY_NAME,
    MAX_CLAIM_TTL, MIN_CLAIM_TTL, Relay, RelayError, RelayReport,
};

// Kafka (feature `kafka`): the consumer with offsets stored in the output's transaction
// (transport, sink contract, the library's sink) and the outbox relay target `kafka`.
#[cfg(feature = "kafka")]
mod kafka;

#[cfg(feature = "kafka")]
pub use kafka::{
    BatchOutcome, CLIENT_ID as KAFKA_CLIENT_ID, DEFAULT_CLIENT_DEADLINE as KAFKA_CLIENT_DEADLINE,
    DEFAULT_FETCH_MAX_BYTES, DEFAULT_FETCH_MAX_WAIT, DEFAULT_KAFKA_BATCH_SIZE,
    DEFAULT_KAFKA_LEASE_TTL, DEFAULT_PRODUCE_TIMEOUT, KafkaConsumer, KafkaConsumerStats,
    KafkaCounts, KafkaDecodeFn, KafkaError, KafkaErrorKind, KafkaHandlerFn, KafkaMessage,
    KafkaPosition, KafkaProcessor, KafkaPublisher, KafkaStats, MAX_KAFKA_LEASE_TTL,
    MAX_MEMBER_ID_BYTES, MAX_TOPIC_BYTES, MESSAGE_ID_HEADER, MIN_KAFKA_LEASE_TTL, PartitionBatch,
    PartitionCounts, PartitionSink, PoisonPolicy, StartFrom, connect as kafka_connect,
    decode_kafka_event, murmur2, partition_for_key,
};
#[cfg(feature = "kafka")]
pub use metric_definitions::{
    KAFKA_DEAD_LETTERS_TOTAL, KAFKA_FENCED_TOTAL, KAFKA_LAG, KAFKA_LEASE_CHANGES_TOTAL,
    KAFKA_MESSAGES_TOTAL, KAFKA_PARTITIONS_HALTED, KAFKA_PARTITIONS_HELD, KAFKA_RETRIES_TOTAL,
    describe_kafka_metrics,
};
/// The rskafka this crate is built with, for building a client with TLS or SASL
/// (`rskafka::client::ClientBuilder`) and for producing records in the same types.
#[cfg(feature = "kafka")]
pub use rskafka;
