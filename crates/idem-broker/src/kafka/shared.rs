//! What a [`KafkaConsumer`](crate::KafkaConsumer) and its partition workers share: where new
//! partitions start, the settings and the store, and the live counters.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idem_sql::{Backend, KafkaOffsets, Store};
use rskafka::client::Client;

use super::sink::PartitionSink;

/// Where a partition that has no stored offset yet starts (Kafka's `auto.offset.reset`, taken
/// once: the start is stored before the first message is processed, so a restart does not move
/// it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartFrom {
    /// The earliest record the partition still has (a new consumer name processes the topic's
    /// retained history).
    #[default]
    Earliest,
    /// The partition's end when the consumer first takes it: only records produced after.
    Latest,
}

/// What one process of a [`KafkaConsumer`] did with partitions so far: a snapshot of
/// [`KafkaConsumerStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionCounts {
    /// Partitions held now.
    pub held: u64,
    /// Of those, halted (not consumed).
    pub halted: u64,
    /// Partition leases taken.
    pub acquired: u64,
    /// Partition leases given up (rebalance, shutdown).
    pub released: u64,
    /// Partition leases lost (renewal refused, or the offsets row held by another member).
    pub lost: u64,
    /// Batches whose offset advance was refused because another member holds the partition.
    pub fenced: u64,
}

/// Live partition counters of one consumer.
#[derive(Debug, Clone, Default)]
pub struct KafkaConsumerStats(Arc<[AtomicU64; 6]>);

impl KafkaConsumerStats {
    /// The counts so far.
    pub fn get(&self) -> PartitionCounts {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        PartitionCounts {
            held: n(0),
            halted: n(1),
            acquired: n(2),
            released: n(3),
            lost: n(4),
            fenced: n(5),
        }
    }

    pub(crate) fn set_held(&self, held: u64, halted: u64) {
        self.0[0].store(held, Ordering::Relaxed);
        self.0[1].store(halted, Ordering::Relaxed);
    }

    pub(crate) fn add(&self, i: usize) {
        self.0[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_fenced(&self) {
        self.add(5);
    }
}

/// What the workers share: the client, the store, the sink and the settings.
pub(crate) struct Shared<DB: Backend, S: PartitionSink> {
    /// Each partition's last lag (high watermark − next offset): their sum is the consumer's
    /// lag in the registry.
    pub(crate) lags: Mutex<BTreeMap<i32, i64>>,
    /// The store of the consumer registry.
    pub(crate) store: Store<DB>,
    pub(crate) client: Arc<Client>,
    pub(crate) offsets: KafkaOffsets<DB>,
    pub(crate) topic: String,
    pub(crate) sink: S,
    pub(crate) batch_size: usize,
    pub(crate) fetch_max_bytes: i32,
    pub(crate) fetch_max_wait: Duration,
    pub(crate) start_from: StartFrom,
    pub(crate) stats: KafkaConsumerStats,
}

impl<DB: Backend, S: PartitionSink> Shared<DB, S> {
    /// Records `partition`'s lag and reports the sum over the partitions to the consumer
    /// registry (in memory until its next flush).
    pub(crate) fn report_lag(&self, partition: i32, lag: i64) {
        let total = {
            let mut lags = self.lags.lock().unwrap_or_else(|e| e.into_inner());
            lags.insert(partition, lag);
            lags.values().sum::<i64>()
        };
        self.store
            .report_lag(self.offsets.consumer(), u64::try_from(total).unwrap_or(0));
    }
}
