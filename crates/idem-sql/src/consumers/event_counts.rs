//! Events of one consumer committed together, for [`Store::commit_counting`](crate::Store::commit_counting).

/// How many events of one consumer a committed transaction settled, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventCounts {
    /// Claimed: applied, ties and gaps.
    pub claimed: u64,
    /// Answered as duplicates.
    pub duplicates: u64,
    /// Stale: recorded, not applied.
    pub stale: u64,
    /// Of the claimed, applied past a gap in their entity's sequence.
    pub gaps: u64,
}

impl EventCounts {
    /// `claimed` events claimed, `duplicates` duplicates and `stale` stale ones; no gaps.
    pub fn new(claimed: u64, duplicates: u64, stale: u64) -> Self {
        Self {
            claimed,
            duplicates,
            stale,
            gaps: 0,
        }
    }

    /// The same counts with `gaps` of the claimed applied past a gap.
    pub fn with_gaps(self, gaps: u64) -> Self {
        Self { gaps, ..self }
    }
}
