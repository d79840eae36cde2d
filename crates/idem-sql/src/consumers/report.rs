//! What the registry says about one consumer.

use std::collections::BTreeMap;

use idem_core::Timestamp;

use super::serde_time;
use crate::{ConsumerFlag, ConsumerKind};

/// One consumer as [`Consumers::list`](crate::Consumers::list) and
/// [`Consumers::show`](crate::Consumers::show) report it. Times are serialized as milliseconds
/// since the Unix epoch.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct ConsumerReport {
    /// The consumer's name.
    pub name: String,
    /// What kind of consumer it is.
    pub kind: ConsumerKind,
    /// When it was first seen: exactly then when `first_seen_exact`, else at or before (a row
    /// back-filled from tables that retention had already thinned).
    #[serde(serialize_with = "serde_time::millis")]
    pub first_seen: Timestamp,
    /// Whether `first_seen` is exact (false: "at or before").
    pub first_seen_exact: bool,
    /// When it last flushed counts or wrote its registry row.
    #[serde(serialize_with = "serde_time::millis")]
    pub last_seen: Timestamp,
    /// Its counts over the last hour, 24 hours and 30 days, in that order.
    pub windows: Vec<WindowCounts>,
    /// Its effects (`idem_effects` rows it wrote) by status (`pending`, `succeeded`, …).
    pub effects_by_status: BTreeMap<String, u64>,
    /// Its outbox rows by status (`pending`, `published`, `parked`).
    pub outbox_by_status: BTreeMap<String, u64>,
    /// What it still holds.
    pub holds: Holds,
    /// The newest lag it reported, if its source knows one.
    pub lag: Option<Lag>,
    /// The consumer that succeeds it in `idem_consumer_lineage`, if any.
    pub successor: Option<String>,
    /// What is wrong with it, judged by the listing's thresholds.
    pub flags: Vec<ConsumerFlag>,
}

/// A consumer's counts over one window ending at the listing's `now`. Counts are kept in
/// 5-minute buckets, so a window holds the buckets that start within it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct WindowCounts {
    /// The window's length, in seconds (3600, 86 400, 2 592 000).
    pub window_secs: u64,
    /// Events claimed: applied, ties and gaps.
    pub claimed: u64,
    /// Deliveries answered as duplicates.
    pub duplicates: u64,
    /// duplicates ÷ (claimed + duplicates + stale); 0 with no deliveries.
    pub repeat_rate: f64,
    /// Stale events (recorded, not applied).
    pub stale: u64,
    /// Events applied past a gap in their entity's sequence.
    pub gaps: u64,
    /// Dead letters whose last failure falls in the window (read from `idem_dead_letters`).
    pub dead_letters: u64,
}

/// What a consumer still holds: the reasons a stopped consumer is an orphan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Holds {
    /// Running, unexpired leases in its scope (its own name, or `kafka/{name}`).
    pub leases: u64,
    /// Its stored Kafka partition offsets.
    pub kafka_offsets: u64,
    /// Its effects not finished: pending, running or unknown.
    pub pending_effects: u64,
    /// Its outbox rows not published: pending or parked.
    pub open_outbox: u64,
}

impl Holds {
    /// Whether it holds anything at all.
    pub fn any(&self) -> bool {
        self.leases + self.kafka_offsets + self.pending_effects + self.open_outbox > 0
    }
}

/// A lag a consumer reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct Lag {
    /// Messages behind: Kafka's high watermark − the stored offset, summed over partitions;
    /// JetStream's pending count.
    pub value: u64,
    /// When it was reported.
    #[serde(serialize_with = "serde_time::millis")]
    pub at: Timestamp,
}
