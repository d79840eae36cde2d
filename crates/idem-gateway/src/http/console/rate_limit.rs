//! Wrong admin tokens, limited per client address: after [`MAX_FAILURES`] wrong tokens within
//! [`WINDOW_MS`], that address's sign-ins are refused (even with the right token, or guessing
//! would simply go on) until the oldest of them is older than the window; the admin API
//! (`http::admin_guard`) counts its wrong bearer tokens the same way but never refuses the
//! right one.
//! Times come from the gateway's clock, so tests move them with a `ManualClock`.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;

/// Wrong tokens allowed per address within [`WINDOW_MS`].
pub(crate) const MAX_FAILURES: usize = 5;
/// The window the failures are counted over: 15 minutes.
pub(crate) const WINDOW_MS: i64 = 15 * 60 * 1000;
/// Addresses remembered at most; past it the ones whose failures all left the window are
/// forgotten, so that a flood of addresses cannot grow the table without bound.
const MAX_ADDRESSES: usize = 10_000;

/// Failed sign-ins per client address, in memory (per gateway process).
#[derive(Debug, Default)]
pub(crate) struct SignInLimiter {
    failures: Mutex<HashMap<IpAddr, VecDeque<i64>>>,
}

impl SignInLimiter {
    /// `Ok` when `address` may try to sign in at `now` (ms); otherwise how long until it may,
    /// in ms (at least 1).
    pub(crate) fn check(&self, address: IpAddr, now: i64) -> Result<(), i64> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let Some(times) = failures.get_mut(&address) else {
            return Ok(());
        };
        while times.front().is_some_and(|t| *t <= now - WINDOW_MS) {
            times.pop_front();
        }
        match times.front() {
            Some(oldest) if times.len() >= MAX_FAILURES => Err((oldest + WINDOW_MS - now).max(1)),
            _ => Ok(()),
        }
    }

    /// Records a wrong token from `address` at `now`.
    pub(crate) fn failed(&self, address: IpAddr, now: i64) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.len() >= MAX_ADDRESSES {
            failures.retain(|_, times| times.back().is_some_and(|t| *t > now - WINDOW_MS));
        }
        let times = failures.entry(address).or_default();
        times.push_back(now);
        while times.len() > MAX_FAILURES {
            times.pop_front();
        }
    }

    /// Forgets `address`'s failures after it signed in.
    pub(crate) fn succeeded(&self, address: IpAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.remove(&address);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sixth_try_waits_until_the_first_failure_leaves_the_window() {
        let limiter = SignInLimiter::default();
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        for i in 0..5 {
            assert_eq!(limiter.check(a, 1_000 + i), Ok(()));
            limiter.failed(a, 1_000 + i);
        }
        assert_eq!(limiter.check(a, 2_000), Err(1_000 + WINDOW_MS - 2_000));
        assert_eq!(limiter.check(b, 2_000), Ok(()));
        assert_eq!(limiter.check(a, 1_000 + WINDOW_MS - 1), Err(1));
        assert_eq!(limiter.check(a, 1_000 + WINDOW_MS), Ok(()));
        limiter.failed(a, 1_000 + WINDOW_MS);
        assert_eq!(limiter.check(a, 1_000 + WINDOW_MS), Err(1));
        limiter.succeeded(a);
        assert_eq!(limiter.check(a, 1_000 + WINDOW_MS), Ok(()));
    }
}
