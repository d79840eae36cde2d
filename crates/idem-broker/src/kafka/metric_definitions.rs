//! Every metric of the Kafka consumer, named once and described here. Recorded through the
//! [`metrics`] facade: install a recorder (Prometheus, StatsD, …) to collect them.
//!
//! The repeat rate (the share of messages that were copies of an event already processed: a
//! republish at a new offset, a producer retry) is
//! `rate(idem_kafka_messages_total{outcome="duplicate"}[5m]) / rate(idem_kafka_messages_total[5m])`
//! in PromQL, and [`KafkaCounts::repeat_rate`](crate::KafkaCounts::repeat_rate) in process.

use metrics::{Unit, describe_counter, describe_gauge};

/// Messages settled by [`KafkaProcessor`](crate::KafkaProcessor), counted after their
/// transaction committed; labels `consumer`, `topic`, `outcome` = `applied` (ties and gaps
/// included) | `duplicate` (the inbox had the event: the repeat count) | `stale` (older than its
/// entity's version) | `dead_lettered`.
pub const KAFKA_MESSAGES_TOTAL: &str = "idem_kafka_messages_total";
/// Failed deliveries (handler errors) recorded at the partition's offset and delivered again
/// after the retry policy's wait; labels `consumer`, `topic`.
pub const KAFKA_RETRIES_TOTAL: &str = "idem_kafka_retries_total";
/// Messages dead-lettered (a subset of [`KAFKA_MESSAGES_TOTAL`] `outcome="dead_lettered"`, kept as its own
/// series for alerting); labels `consumer`, `topic`, `reason` = `failed` (the retry policy's
/// deliveries all failed) | `undecodable`.
pub const KAFKA_DEAD_LETTERS_TOTAL: &str = "idem_kafka_dead_letters_total";
/// Messages the partition has that the consumer has not settled yet: the high watermark of the
/// last fetch minus the stored next offset; labels `consumer`, `topic`, `partition`.
pub const KAFKA_LAG: &str = "idem_kafka_lag";
/// Partitions this process holds; labels `consumer`, `topic`.
pub const KAFKA_PARTITIONS_HELD: &str = "idem_kafka_partitions_held";
/// Partitions this process holds but stopped consuming (a poison message under
/// [`PoisonPolicy::Halt`](crate::PoisonPolicy::Halt), or a stored offset the partition no longer
/// has); labels `consumer`, `topic`.
pub const KAFKA_PARTITIONS_HALTED: &str = "idem_kafka_partitions_halted";
/// Partition leases this process took, gave up, or lost; labels `consumer`, `topic`, `change` =
/// `acquired` | `released` | `lost` (renewal refused: another member may have it).
pub const KAFKA_LEASE_CHANGES_TOTAL: &str = "idem_kafka_lease_changes_total";
/// Batches whose offset advance was refused because the partition changed hands (a fenced
/// holder: nothing of the batch committed); labels `consumer`, `topic`.
pub const KAFKA_FENCED_TOTAL: &str = "idem_kafka_fenced_total";

/// Registers the descriptions and units above with the installed recorder. Optional: recording
/// works without it, only the help texts are missing.
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
