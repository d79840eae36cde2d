//! What holds a destination's attempts back besides its permits: a pause, and the token bucket
//! of its `rate_limit`. Both the due path and the hand-off from ingest take a token before they
//! claim a delivery, so a delivery waiting for one stays pending in its row: it is not claimed,
//! no attempt is counted, and the due query keeps its entity's order when it is claimed later.
//!
//! The pause is the database's (`idem_gateway_paused_destinations`): the operation that pauses
//! or resumes sets it here at once, and the dispatcher reads it from the database at least every
//! [`PAUSE_REFRESH`] (or `poll_interval`, if shorter), so that every process sees it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use idem_core::Timestamp;

use super::bucket::TokenBucket;
use crate::config::RateLimit;

/// How often a dispatcher reads its destination's pause from the database, at least.
pub const PAUSE_REFRESH: Duration = Duration::from_secs(1);

/// One destination's pause and rate limit in this process.
#[derive(Debug)]
pub(crate) struct Throttle {
    paused: AtomicBool,
    /// How many pauses and resumes this process made: a read of the database begun before one
    /// of them must not undo it.
    changes: Mutex<u64>,
    /// `None` without a `rate_limit`.
    bucket: Option<Mutex<TokenBucket>>,
}

impl Throttle {
    /// Running, with a full bucket for `limit` at `now`.
    pub(crate) fn new(limit: Option<RateLimit>, now: Timestamp) -> Self {
        Self {
            paused: AtomicBool::new(false),
            changes: Mutex::new(0),
            bucket: limit.map(|limit| Mutex::new(TokenBucket::new(limit, now))),
        }
    }

    /// Whether the destination is paused, as this process last read or set it.
    pub(crate) fn paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }

    /// Sets the pause this process just wrote to the database; returns what it was.
    pub(crate) fn set_paused(&self, paused: bool) -> bool {
        let mut changes = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        *changes += 1;
        self.paused.swap(paused, Ordering::AcqRel)
    }

    /// To call before reading the pause from the database; its answer goes to
    /// [`apply_read`](Self::apply_read).
    pub(crate) fn read_started(&self) -> u64 {
        *self.changes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the pause read from the database by a read begun at `started`, unless this process
    /// paused or resumed since (the read may predate that write); returns what it was, or
    /// `None` when the read was left unapplied.
    pub(crate) fn apply_read(&self, paused: bool, started: u64) -> Option<bool> {
        let changes = self.changes.lock().unwrap_or_else(PoisonError::into_inner);
        (*changes == started).then(|| self.paused.swap(paused, Ordering::AcqRel))
    }

    fn with_bucket<T>(&self, f: impl FnOnce(&mut TokenBucket) -> T) -> Option<T> {
        self.bucket
            .as_ref()
            .map(|bucket| f(&mut bucket.lock().unwrap_or_else(PoisonError::into_inner)))
    }

    /// Whether a rate limit applies.
    pub(crate) fn is_limited(&self) -> bool {
        self.bucket.is_some()
    }

    /// How many attempts may start at `now` (`usize::MAX` without a rate limit).
    pub(crate) fn available(&self, now: Timestamp) -> usize {
        self.with_bucket(|bucket| usize::try_from(bucket.available(now)).unwrap_or(usize::MAX))
            .unwrap_or(usize::MAX)
    }

    /// Takes tokens for up to `wanted` attempts at `now`; returns for how many.
    pub(crate) fn take(&self, wanted: usize, now: Timestamp) -> usize {
        self.with_bucket(|bucket| {
            let wanted = u64::try_from(wanted).unwrap_or(u64::MAX);
            usize::try_from(bucket.take(wanted, now)).unwrap_or(usize::MAX)
        })
        .unwrap_or(wanted)
    }

    /// Puts back the tokens of `unused` attempts that were not started.
    pub(crate) fn give_back(&self, unused: usize) {
        self.with_bucket(|bucket| bucket.give_back(u64::try_from(unused).unwrap_or(u64::MAX)));
    }

    /// How long after `now` the next token is held (zero without a rate limit).
    pub(crate) fn next_token_in(&self, now: Timestamp) -> Duration {
        self.with_bucket(|bucket| bucket.next_token_in(now))
            .unwrap_or(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The race CI met: the dispatcher's read of the database began before this process
    /// paused, and ended after it; the stale "running" it read must not undo the pause.
    #[test]
    fn a_read_begun_before_a_local_pause_does_not_undo_it() {
        let throttle = Throttle::new(None, Timestamp(0));
        let started = throttle.read_started();
        assert!(!throttle.set_paused(true));
        assert_eq!(throttle.apply_read(false, started), None);
        assert!(throttle.paused());
        // A read begun after the pause is applied, whatever it says.
        let started = throttle.read_started();
        assert_eq!(throttle.apply_read(false, started), Some(true));
        assert!(!throttle.paused());
    }
}
