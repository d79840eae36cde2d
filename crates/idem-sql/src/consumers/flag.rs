//! What a consumer report warns about.

/// A warning on a [`ConsumerReport`](crate::ConsumerReport), judged by its
/// [`Thresholds`](crate::Thresholds). Serialized with a `flag` field (`superseded`, `orphaned`,
/// `unhealthy`) beside the variant's own.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "flag", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConsumerFlag {
    /// A consumer that succeeds this one (`idem_consumer_lineage`) was seen after it: this
    /// version is being replaced. Not an orphan, whatever it holds.
    Superseded {
        /// The successor's name.
        by: String,
    },
    /// Not seen for [`Thresholds::orphan_after`](crate::Thresholds::orphan_after) or longer, no
    /// successor, and still holding leases, Kafka offsets, pending effects or open outbox rows
    /// ([`Holds`](crate::Holds)).
    Orphaned {
        /// Whole days since it was last seen.
        days_unseen: u64,
    },
    /// Figures above the thresholds: each reason names the figure, its value and the threshold
    /// (`repeat rate 0.62 over the last hour > 0.5`).
    Unhealthy {
        /// What is above its threshold.
        reasons: Vec<String>,
    },
}
