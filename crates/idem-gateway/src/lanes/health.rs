//! Whether a destination's dispatcher can use the database now, as its last claim and its
//! outcome writer's last batch found it: what the console's overview shows per destination
//! (as the store's health shows it for ingest). A failed attempt at the destination is no
//! failure here: it is the destination's answer, recorded like any other.
//!
//! Kept in memory by each process. A failure records its reason and when the first failure of
//! the run began; the next success of the same part clears it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

/// A part that fails now: the last reason, and since when it fails (ms since the epoch, the
/// gateway's clock).
pub(crate) type Failing = (String, i64);

/// One part's state: a flag read on every success (so that a working part takes no lock), and
/// the failure.
#[derive(Debug, Default)]
struct Part {
    failing: AtomicBool,
    failure: Mutex<Option<Failing>>,
}

impl Part {
    fn failed(&self, reason: String, now: i64) {
        let mut failure = self.failure.lock().unwrap_or_else(PoisonError::into_inner);
        let since = failure.as_ref().map_or(now, |(_, since)| *since);
        *failure = Some((reason, since));
        self.failing.store(true, Ordering::Release);
    }

    fn succeeded(&self) {
        if self.failing.swap(false, Ordering::AcqRel) {
            *self.failure.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
    }

    fn failure(&self) -> Option<Failing> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One destination's dispatcher, as the database lets it work.
#[derive(Debug, Default)]
pub(crate) struct DispatchHealth {
    /// Due queries and claim transactions.
    claims: Part,
    /// The outcome writer's group commits.
    outcomes: Part,
}

impl DispatchHealth {
    /// A due query or claim failed at `now` (ms) with `reason`.
    pub(crate) fn claim_failed(&self, reason: String, now: i64) {
        self.claims.failed(reason, now);
    }

    /// A due query and its claim succeeded.
    pub(crate) fn claimed(&self) {
        self.claims.succeeded();
    }

    /// A batch of outcomes was not written at `now` (ms), with `reason`.
    pub(crate) fn outcomes_failed(&self, reason: String, now: i64) {
        self.outcomes.failed(reason, now);
    }

    /// A batch of outcomes was written.
    pub(crate) fn outcomes_written(&self) {
        self.outcomes.succeeded();
    }

    /// Why claims fail now, and since when; `None` while they work.
    pub(crate) fn claims(&self) -> Option<Failing> {
        self.claims.failure()
    }

    /// Why outcome writes fail now, and since when; `None` while they work.
    pub(crate) fn outcomes(&self) -> Option<Failing> {
        self.outcomes.failure()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_lasts_until_the_same_part_succeeds_and_keeps_its_start() {
        let health = DispatchHealth::default();
        assert_eq!((health.claims(), health.outcomes()), (None, None));
        health.claim_failed("locked".into(), 1_000);
        health.claim_failed("timed out".into(), 2_000);
        assert_eq!(health.claims(), Some(("timed out".into(), 1_000)));
        health.outcomes_written();
        assert_eq!(health.claims(), Some(("timed out".into(), 1_000)));
        health.outcomes_failed("gone".into(), 3_000);
        health.claimed();
        assert_eq!(health.claims(), None);
        assert_eq!(health.outcomes(), Some(("gone".into(), 3_000)));
        health.outcomes_written();
        assert_eq!(health.outcomes(), None);
        health.claim_failed("again".into(), 4_000);
        assert_eq!(health.claims(), Some(("again".into(), 4_000)));
    }
}
