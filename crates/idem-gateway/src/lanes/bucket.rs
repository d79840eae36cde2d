//! The token bucket of a destination's `rate_limit`, on the gateway's clock (milliseconds), so
//! that a test drives it with a manual clock.
//!
//! Integer arithmetic: the level is kept in units of `1 / per_ms` of a token, and each
//! millisecond adds `count` units, so `200/s` gives one token every 5 ms and `120/m` one every
//! 500 ms with no rounding error piling up while tokens are taken as they accrue.

use std::time::Duration;

use idem_core::Timestamp;

use crate::config::RateLimit;

/// A token per attempt: `count` per `per`, holding at most [`RateLimit::burst`] tokens, full
/// at the start.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    /// Units per token: `per` in milliseconds.
    per_ms: u64,
    /// Units added per millisecond.
    count: u64,
    /// The most units held.
    capacity: u64,
    /// Units held as of `at`.
    level: u64,
    /// The clock's time of `level`, ms since the epoch.
    at: i64,
}

impl TokenBucket {
    /// A full bucket for `limit` at `now`.
    pub(crate) fn new(limit: RateLimit, now: Timestamp) -> Self {
        let per_ms = limit.per_ms();
        let capacity = limit.burst().saturating_mul(per_ms);
        Self {
            per_ms,
            count: limit.count,
            capacity,
            level: capacity,
            at: now.as_millis(),
        }
    }

    /// Adds what accrued since the last look. A clock that went back adds nothing until it
    /// passes the last look again.
    fn refill(&mut self, now: Timestamp) {
        let now = now.as_millis();
        if now <= self.at {
            return;
        }
        let elapsed = u64::try_from(now - self.at).unwrap_or(u64::MAX);
        self.level = (self
            .level
            .saturating_add(elapsed.saturating_mul(self.count)))
        .min(self.capacity);
        self.at = now;
    }

    /// Whole tokens held at `now`.
    pub(crate) fn available(&mut self, now: Timestamp) -> u64 {
        self.refill(now);
        self.level / self.per_ms
    }

    /// Takes up to `wanted` tokens at `now`; returns how many it took.
    pub(crate) fn take(&mut self, wanted: u64, now: Timestamp) -> u64 {
        let taken = wanted.min(self.available(now));
        self.level -= taken * self.per_ms;
        taken
    }

    /// Puts back `tokens` taken for attempts that were not started (up to the burst).
    pub(crate) fn give_back(&mut self, tokens: u64) {
        self.level = (self
            .level
            .saturating_add(tokens.saturating_mul(self.per_ms)))
        .min(self.capacity);
    }

    /// How long after `now` the next whole token is held (zero when one is).
    pub(crate) fn next_token_in(&mut self, now: Timestamp) -> Duration {
        self.refill(now);
        if self.level >= self.per_ms {
            return Duration::ZERO;
        }
        Duration::from_millis((self.per_ms - self.level).div_ceil(self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_769_860_800_000;

    fn limit(text: &str) -> RateLimit {
        RateLimit::parse("rate_limit", text).unwrap()
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp(T0 + ms)
    }

    /// `10/s`: a burst of 10 at the start, then one token per 100 ms of the clock, never more
    /// than 10 held.
    #[test]
    fn ten_per_second_refills_one_per_hundred_milliseconds() {
        let mut bucket = TokenBucket::new(limit("10/s"), at(0));
        assert_eq!(bucket.take(25, at(0)), 10);
        assert_eq!(bucket.take(1, at(0)), 0);
        assert_eq!(bucket.next_token_in(at(0)), Duration::from_millis(100));
        assert_eq!(bucket.take(1, at(99)), 0);
        assert_eq!(bucket.next_token_in(at(99)), Duration::from_millis(1));
        assert_eq!(bucket.take(5, at(100)), 1);
        assert_eq!(bucket.take(5, at(250)), 1);
        // 50 ms of the next token accrued at 250: it is due at 300.
        assert_eq!(bucket.next_token_in(at(250)), Duration::from_millis(50));
        assert_eq!(bucket.take(5, at(300)), 1);
        // An idle hour refills one second's worth, not an hour's.
        assert_eq!(bucket.available(at(3_600_000)), 10);
        assert_eq!(bucket.take(11, at(3_600_000)), 10);
    }

    #[test]
    fn tokens_given_back_are_taken_again_up_to_the_burst() {
        let mut bucket = TokenBucket::new(limit("10/s"), at(0));
        assert_eq!(bucket.take(10, at(0)), 10);
        bucket.give_back(3);
        assert_eq!(bucket.take(10, at(0)), 3);
        bucket.give_back(50);
        assert_eq!(bucket.available(at(0)), 10);
    }

    /// `120/m`: a burst of 2, then one token every 500 ms: 120 in the minute after it.
    /// `90/m` (a burst of 1): the next token 666⅔ ms on, rounded up to the millisecond.
    #[test]
    fn per_minute_rates() {
        let mut bucket = TokenBucket::new(limit("120/m"), at(0));
        assert_eq!(bucket.take(5, at(0)), 2);
        let mut taken = 0;
        for ms in 1..=60_000 {
            taken += bucket.take(1, at(ms));
        }
        assert_eq!(taken, 120);
        let mut bucket = TokenBucket::new(limit("90/m"), at(0));
        assert_eq!(bucket.take(5, at(0)), 1);
        assert_eq!(bucket.next_token_in(at(0)), Duration::from_millis(667));
        assert_eq!(bucket.take(1, at(666)), 0);
        assert_eq!(bucket.take(1, at(667)), 1);
    }

    #[test]
    fn a_clock_going_back_adds_nothing() {
        let mut bucket = TokenBucket::new(limit("10/s"), at(1_000));
        assert_eq!(bucket.take(10, at(1_000)), 10);
        assert_eq!(bucket.take(1, at(0)), 0);
        assert_eq!(bucket.take(1, at(1_050)), 0);
        assert_eq!(bucket.take(1, at(1_100)), 1);
    }
}
