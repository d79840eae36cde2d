//! The thresholds a consumer report's flags are judged by.

use std::time::Duration;

/// When [`ConsumerFlag`](crate::ConsumerFlag)s are raised. [`Default`] gives the documented
/// defaults; set fields to change them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct Thresholds {
    /// A consumer not seen for this long, with no successor and still holding something, is
    /// [`Orphaned`](crate::ConsumerFlag::Orphaned). Default 7 days: a week covers a weekend and
    /// a holiday of a consumer that runs on business days, and is short enough that a leftover
    /// lease or parked outbox row is found within the sprint that stopped it. Serialized as
    /// seconds.
    #[serde(serialize_with = "super::serde_time::seconds")]
    pub orphan_after: Duration,
    /// Over the last hour, duplicates ÷ deliveries above this is unhealthy. Default 0.5: more
    /// duplicates than fresh events means the sender redelivers what was acknowledged (a lost
    /// ack, an offset not stored), not the occasional retry.
    pub max_repeat_rate: f64,
    /// The repeat rate is judged only with at least this many deliveries in the last hour.
    /// Default 100: below that a handful of retries makes any rate.
    pub min_deliveries: u64,
    /// Dead letters of the last 24 hours above this are unhealthy. Default 0: every dead letter
    /// is an event that was not applied and waits for an operator.
    pub max_dead_letters: u64,
    /// A reported lag (messages behind) above this is unhealthy. Default 10 000: a few seconds
    /// of a busy topic's traffic, beyond a batch in flight.
    pub max_lag: u64,
}

/// [`Thresholds::orphan_after`]'s default: 7 days.
pub const DEFAULT_ORPHAN_AFTER: Duration = Duration::from_secs(7 * 24 * 3600);

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            orphan_after: DEFAULT_ORPHAN_AFTER,
            max_repeat_rate: 0.5,
            min_deliveries: 100,
            max_dead_letters: 0,
            max_lag: 10_000,
        }
    }
}
