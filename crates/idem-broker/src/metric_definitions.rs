//! Every metric idem-broker records, named once and described here: the consumers' (NATS
//! JetStream, RabbitMQ), the outbox relays' and the Kafka consumer's. Recorded through the
//! [`metrics`] facade: install a recorder (Prometheus, StatsD, …) to collect them, and call
//! [`describe`] (or the `describe_*_metrics` function of the part you use) for the help texts.
//!
//! The Kafka repeat rate (the share of messages that were copies of an event already processed:
//! a republish at a new offset, a producer retry) is
//! `rate(idem_kafka_messages_total{outcome="duplicate"}[5m]) / rate(idem_kafka_messages_total[5m])`
//! in PromQL, and `KafkaCounts::repeat_rate` in process.

#[cfg(feature = "kafka")]
use metrics::describe_gauge;
use metrics::{Unit, describe_counter};

// ---- broker consumers (features `nats`, `rabbitmq`, `kafka`)

/// Counter of deliveries settled by a consumer; labels `consumer`, `broker` (`jetstream` |
/// `rabbitmq`) and `outcome` = `applied` | `duplicate` | `stale` | `retried` | `dead_lettered`.
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub const DELIVERIES_TOTAL: &str = "idem_broker_deliveries_total";
/// Counter of acknowledgements (ack, NAK, TERM, retry-queue publish) the broker client could not
/// send; labels `consumer`, `broker`. The broker redelivers such a message; the inbox answers the
/// redelivery as a duplicate when the transaction had committed.
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub const ACK_FAILURES_TOTAL: &str = "idem_broker_ack_failures_total";

/// Registers the descriptions of [`DELIVERIES_TOTAL`] and [`ACK_FAILURES_TOTAL`] with the
/// installed `metrics` recorder. Optional: recording works without it.
#[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
pub fn describe_consumer_metrics() {
    describe_counter!(
        DELIVERIES_TOTAL,
        Unit::Count,
        "Broker deliveries by outcome (applied, duplicate, stale, retried, dead_lettered)."
    );
    describe_counter!(
        ACK_FAILURES_TOTAL,
        Unit::Count,
        "Acknowledgements the broker client could not send."
    );
}

// ---- outbox relays

/// Messages handled by relays; labels `relay` (the relay's [name](crate::Relay::name)) and `outcome` =
/// `published` | `duplicate` (JetStream had the message id already) | `failed` (backing off) |
/// `parked` (after the outbox policy's attempts) | `deferred` (HTTP 409: waiting for the
/// destination's `Retry-After`, counted as an attempt).
pub const RELAY_MESSAGES_TOTAL: &str = "idem_relay_messages_total";
/// Relay cycles that failed on the outbox's database (claiming or recording), counted by
/// [`Relay::run`](crate::Relay::run); label `relay`.
pub const RELAY_ERRORS_TOTAL: &str = "idem_relay_errors_total";

/// Registers the descriptions of [`RELAY_MESSAGES_TOTAL`] and [`RELAY_ERRORS_TOTAL`] with the
/// installed metrics recorder.
/// Call once after installing it; recording works without this call, only the help text is
/// missing.
pub fn describe_relay_metrics() {
    describe_counter!(
        RELAY_MESSAGES_TOTAL,
        Unit::Count,
        "Outbox messages handled by relays, by relay and outcome (published, duplicate, failed, parked, deferred)."
    );
    describe_counter!(
        RELAY_ERRORS_TOTAL,
        Unit::Count,
        "Relay cycles that failed on the outbox's database, by relay."
    );
}

// ---- the Kafka consumer (feature `kafka`)

/// Messages settled by [`KafkaProcessor`](crate::KafkaProcessor), counted after their
/// transaction committed; labels `consumer`, `topic`, `outcome` = `applied` (ties and gaps
/// included) | `duplicate` (the inbox had the event: the repeat count) | `stale` (older than its
/// entity's version) | `dead_lettered`.
#[cfg(feature = "kafka")]
pub const KAFKA_MESSAGES_TOTAL: &str = "idem_kafka_messages_total";
/// Failed deliveries (handler errors) recorded at the partition's offset and delivered again
/// after the retry policy's wait; labels `consumer`, `topic`.
#[cfg(feature = "kafka")]
pub const KAFKA_RETRIES_TOTAL: &str = "idem_kafka_retries_total";
/// Messages dead-lettered (a subset of [`KAFKA_MESSAGES_TOTAL`] `outcome="dead_lettered"`, kept as its own
/// series for alerting); labels `consumer`, `topic`, `reason` = `failed` (the retry policy's
/// deliveries all failed) | `undecodable`.
#[cfg(feature = "kafka")]
pub const KAFKA_DEAD_LETTERS_TOTAL: &str = "idem_kafka_dead_letters_total";
/// Messages the partition has that the consumer has not settled yet: the high watermark of the
/// last fetch minus the stored next offset; labels `consumer`, `topic`, `partition`.
#[cfg(feature = "kafka")]
pub const KAFKA_LAG: &str = "idem_kafka_lag";
/// Partitions this process holds; labels `consumer`, `topic`.
#[cfg(feature = "kafka")]
pub const KAFKA_PARTITIONS_HELD: &str = "idem_kafka_partitions_held";
/// Partitions this process holds but stopped consuming (a poison message under
/// [`PoisonPolicy::Halt`](crate::PoisonPolicy::Halt), or a stored offset the partition no longer
/// has); labels `consumer`, `topic`.
#[cfg(feature = "kafka")]
pub const KAFKA_PARTITIONS_HALTED: &str = "idem_kafka_partitions_halted";
/// Partition leases this process took, gave up, or lost; labels `consumer`, `topic`, `change` =
/// `acquired` | `released` | `lost` (renewal refused: another member may have it).
#[cfg(feature = "kafka")]
pub const KAFKA_LEASE_CHANGES_TOTAL: &str = "idem_kafka_lease_changes_total";
/// Batches whose offset advance was refused because the partition changed hands (a fenced
/// holder: nothing of the batch committed); labels `consumer`, `topic`.
#[cfg(feature = "kafka")]
pub const KAFKA_FENCED_TOTAL: &str = "idem_kafka_fenced_total";

/// Registers the descriptions and units above with the installed recorder. Optional: recording
/// works without it, only the help texts are missing.
#[cfg(feature = "kafka")]
pub fn describe_kafka_metrics() {
    describe_counter!(
        KAFKA_MESSAGES_TOTAL,
        Unit::Count,
        "Kafka messages settled, by outcome (applied, duplicate, stale, dead_lettered)."
    );
    describe_counter!(
        KAFKA_RETRIES_TOTAL,
        Unit::Count,
        "Failed Kafka deliveries, delivered again after a wait."
    );
    describe_counter!(
        KAFKA_DEAD_LETTERS_TOTAL,
        Unit::Count,
        "Kafka messages dead-lettered, by reason (failed, undecodable)."
    );
    describe_gauge!(
        KAFKA_LAG,
        Unit::Count,
        "Messages not yet settled per partition: high watermark minus stored offset."
    );
    describe_gauge!(
        KAFKA_PARTITIONS_HELD,
        Unit::Count,
        "Kafka partitions held by this process."
    );
    describe_gauge!(
        KAFKA_PARTITIONS_HALTED,
        Unit::Count,
        "Kafka partitions held but not consumed (poison message halted, offset out of range)."
    );
    describe_counter!(
        KAFKA_LEASE_CHANGES_TOTAL,
        Unit::Count,
        "Kafka partition leases acquired, released or lost."
    );
    describe_counter!(
        KAFKA_FENCED_TOTAL,
        Unit::Count,
        "Kafka batches refused because the partition changed hands."
    );
}

/// Registers the descriptions and units of every metric above that this build records.
/// Optional: recording works without it, only the help texts are missing.
pub fn describe() {
    #[cfg(any(feature = "nats", feature = "rabbitmq", feature = "kafka"))]
    describe_consumer_metrics();
    describe_relay_metrics();
    #[cfg(feature = "kafka")]
    describe_kafka_metrics();
}
