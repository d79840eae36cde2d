//! Doubling pauses between retries: the one rule every retry loop of idem follows (effect
//! attempts, outbox publishes, transaction conflicts, store failures of the gateway's ingest and
//! broker sources).

use std::time::Duration;

/// The pause before the next try after a failure: `initial × 2^(attempt − 1)`, capped at `max`
/// (attempt counts from 1). Saturating: no attempt number overflows or panics.
///
/// ```
/// use std::time::Duration;
/// use idem_core::Backoff;
///
/// let backoff = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60));
/// let pauses: Vec<u64> = [1, 2, 3, 7, 8, u32::MAX].map(|n| backoff.delay(n).as_secs()).to_vec();
/// assert_eq!(pauses, [1, 2, 4, 60, 60, 60]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
}

impl Default for Backoff {
    /// 1 s, 2 s, 4 s, … capped at 1 h.
    fn default() -> Self {
        Self::exponential(Duration::from_secs(1), Duration::from_secs(3600))
    }
}

impl Backoff {
    /// A schedule starting at `initial` and doubling up to `max` (a `max` below `initial` is
    /// raised to `initial`).
    pub const fn exponential(initial: Duration, max: Duration) -> Self {
        let max = if max.as_nanos() < initial.as_nanos() {
            initial
        } else {
            max
        };
        Self { initial, max }
    }

    /// The first pause.
    pub const fn initial(&self) -> Duration {
        self.initial
    }

    /// The longest pause.
    pub const fn max(&self) -> Duration {
        self.max
    }

    /// The pause after attempt `attempt` (1-based; 0 is taken as 1).
    pub fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(31);
        self.initial
            .checked_mul(1u32 << doublings)
            .map_or(self.max, |d| d.min(self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let b = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(10));
        let delays: Vec<u64> = (0..=6).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 1, 2, 4, 8, 10, 10]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(10));
        let odd = Backoff::exponential(Duration::from_secs(5), Duration::from_secs(1));
        assert_eq!(
            odd.delay(3),
            Duration::from_secs(5),
            "max raised to initial"
        );
        assert_eq!(
            Backoff::default().delay(100),
            Duration::from_secs(3600),
            "default cap 1 h"
        );
    }
}
