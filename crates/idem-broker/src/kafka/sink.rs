//! The contract between the Kafka transport ([`KafkaConsumer`](crate::KafkaConsumer): partition
//! assignment by leases, fetching, per-partition order, fencing) and a sink (what is done with a
//! batch of one partition's messages in the store).

use std::future::Future;
use std::time::Duration;

use idem_sql::PartitionFence;

use super::message::KafkaMessage;

/// Consecutive messages of one partition, handed to a [`PartitionSink`].
///
/// The first message's offset is at or after [`from`](Self::from), the stored next offset of the
/// partition; the offsets ascend. (They need not be contiguous: compaction and transaction
/// markers leave holes.) The transport hands a partition's next batch only after the sink
/// returned for this one, so one partition's batches never overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionBatch {
    /// What the sink presents to advance the partition's offset
    /// ([`idem_sql::KafkaOffsets::advance_in`]).
    pub fence: PartitionFence,
    /// The partition's stored next offset: where [`advance_in`](idem_sql::KafkaOffsets::advance_in)
    /// moves from.
    pub from: i64,
    /// Failed deliveries so far of the message at `from` (its [`KafkaMessage::delivered`] is one
    /// more).
    pub attempts: u32,
    /// The messages, at least one, in offset order.
    pub messages: Vec<KafkaMessage>,
    /// The partition's high watermark (the offset after its last record) when fetched.
    pub high_watermark: i64,
}

impl PartitionBatch {
    /// The offset to store when every message settled: one past the last message's offset.
    pub fn end(&self) -> i64 {
        self.messages
            .last()
            .map_or(self.from, |m| m.offset.saturating_add(1))
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        self.fence.topic()
    }

    /// The partition.
    pub fn partition(&self) -> i32 {
        self.fence.partition()
    }
}

/// What a sink did with a batch. The offsets it names are stored: committed with the output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchOutcome {
    /// Every message settled (applied, duplicate, stale or dead-lettered); the stored offset is
    /// [`PartitionBatch::end`].
    Settled,
    /// The messages before `next_offset` settled and `next_offset` is stored; the message there
    /// failed and is delivered again, with the rest, after `after`.
    Retry {
        /// The stored offset: the failed message's.
        next_offset: i64,
        /// Failed deliveries of that message so far.
        attempts: u32,
        /// The wait before the next delivery.
        after: Duration,
    },
    /// The messages before `next_offset` settled and it is stored; the partition is not
    /// consumed further by this process (it keeps the lease, so no other member takes the
    /// partition over and meets the same message). A restart delivers the message again.
    Halt {
        /// The stored offset: the message the partition stopped at.
        next_offset: i64,
        /// Why, for the logs.
        reason: String,
    },
}

/// What is done with a batch of one partition's messages: in one database transaction (or
/// several, in order), settle a prefix of the messages and advance the partition's stored offset
/// over it with [`idem_sql::KafkaOffsets::advance_in`] in the same transaction as their output.
///
/// The library's sink is [`KafkaProcessor`](crate::KafkaProcessor) (the handler, the inbox
/// claim, the version guard and the offset advance in one transaction). Another sink may put
/// the batches of many partitions into one group commit, as long as each partition's advance
/// commits with that partition's output.
///
/// The transport calls `apply` for one batch of a partition at a time and does not cancel it,
/// also at shutdown: a batch in flight is finished.
pub trait PartitionSink: Send + Sync + 'static {
    /// Settles a prefix of `batch` (the whole batch for [`BatchOutcome::Settled`]) and stores the
    /// next offset in the same transaction as the output.
    ///
    /// # Errors
    /// An [`idem_sql::Error`] when nothing more could be settled. Of kind
    /// [`Fenced`](idem_sql::ErrorKind::Fenced) when the advance was refused (another member took
    /// the partition, or the stored offset is not `batch.from`): the transport reads the stored
    /// offset again and goes on from there if the partition is still its own, else drops it.
    /// Any other error: the transport waits (100 ms, doubling to 5 s), reads the stored offset
    /// again (a commit whose answer was lost has moved it) and delivers from there.
    fn apply(
        &self,
        batch: &PartitionBatch,
    ) -> impl Future<Output = Result<BatchOutcome, idem_sql::Error>> + Send;
}
