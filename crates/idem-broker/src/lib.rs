//! idem over message brokers: NATS JetStream and RabbitMQ consumers that acknowledge a message
//! only after its transaction committed, and outbox relays that publish with each row's stable
//! message id to NATS JetStream, RabbitMQ or HTTP.

mod consumer;
mod jetstream_consumer;
mod rabbitmq_consumer;

pub use consumer::{
    ACK_FAILURES_TOTAL, ConsumerError, DEFAULT_MAX_DELIVERIES, DELIVERIES_TOTAL, DecodeError,
    DecodeFn, Delivery, DeliveryCounts, DeliveryStats, Disposition, HandlerFn, ObserverFn,
    Processor, RetryPolicy, decode_message_id, describe_consumer_metrics,
};
pub use jetstream_consumer::JetStreamConsumer;
pub use rabbitmq_consumer::{RabbitMqConsumer, RetryTopology, X_DEATH, X_DELIVERY_COUNT};

mod http_publisher;
mod nats_publisher;
mod publisher;
mod rabbitmq_publisher;
mod relay;

pub use http_publisher::{DEFAULT_RETRY_AFTER, DEFAULT_TIMEOUT, HttpPublisher, IDEMPOTENCY_KEY};
pub use nats_publisher::JetStreamPublisher;
pub use publisher::{PublishOutcome, Publisher, PublisherError};
pub use rabbitmq_publisher::RabbitMqPublisher;
pub use relay::{
    DEFAULT_BATCH_SIZE, DEFAULT_CLAIM_TTL, DEFAULT_MAX_WAIT, DEFAULT_MIN_WAIT,
    RELAY_MESSAGES_TOTAL, Relay, RelayError, RelayReport, describe_relay_metrics,
};
