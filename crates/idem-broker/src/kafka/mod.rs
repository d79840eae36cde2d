//! Kafka: a consumer that stores each partition's offset in the same transaction as the output
//! (partitions assigned by idem leases, so Kafka's consumer groups are not needed), and the outbox
//! relay target `kafka`.
//!
//! The transport ([`KafkaConsumer`]: leases, fetching, per-partition order, fencing) is apart
//! from the sink ([`PartitionSink`]: what is done with one partition's batch in the store), so
//! that another sink (the gateway's durable ingest, which group-commits many batches with their
//! offsets) can drive the same transport. The library's sink is [`KafkaProcessor`].

mod client;
mod consumer;
mod error;
mod message;
mod partitioner;
mod processor;
mod publisher;
mod shared;
mod sink;
mod worker;

pub use client::{CLIENT_ID, DEFAULT_CLIENT_DEADLINE, MAX_TOPIC_BYTES, connect};
pub use consumer::{
    DEFAULT_FETCH_MAX_BYTES, DEFAULT_FETCH_MAX_WAIT, DEFAULT_KAFKA_BATCH_SIZE,
    DEFAULT_KAFKA_LEASE_TTL, KafkaConsumer, MAX_KAFKA_LEASE_TTL, MAX_MEMBER_ID_BYTES,
    MIN_KAFKA_LEASE_TTL,
};
pub use error::{KafkaError, KafkaErrorKind};
pub use message::{KafkaMessage, KafkaPosition, MESSAGE_ID_HEADER};
pub use partitioner::{murmur2, partition_for_key};
pub use processor::{
    KafkaCounts, KafkaDecodeFn, KafkaHandlerFn, KafkaProcessor, KafkaStats, PoisonPolicy,
    decode_kafka_event,
};
pub use publisher::{DEFAULT_PRODUCE_TIMEOUT, KafkaPublisher};
pub use shared::{KafkaConsumerStats, PartitionCounts, StartFrom};
pub use sink::{BatchOutcome, PartitionBatch, PartitionSink};
