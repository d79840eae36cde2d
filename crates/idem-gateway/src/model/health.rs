//! A destination's health: the one definition of "failing" that the circuit breaker, the
//! alerts, the console and the metrics share (issue 31).
//!
//! It is read from the destination's attempts of the last `health_window` (every gateway
//! process's, from the database) and its oldest due delivery:
//!
//! - **failing**: at least `min_attempts` attempts in the window, a success rate below
//!   `failing_below`, and the latest attempt failed (so a probe that succeeds, or a destination
//!   that recovered, is no longer failing however many failures the window still holds);
//! - **degraded**: not failing, and a success rate below `degraded_below` (with at least
//!   `min_attempts` attempts), a p99 latency over `slow_after`, or a delivery due for longer
//!   than `backlog_after`;
//! - **healthy**: otherwise, and also with no attempt in the window.
//!
//! Pure: no clock, no database; [`assess`] is given what was read.

use std::time::Duration;

use serde::Serialize;

use super::text_enum::text_enum;

/// How healthy a destination is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Answers, fast enough, nothing waits too long (`healthy`).
    Healthy,
    /// Slow, partly failing, or a delivery has waited too long (`degraded`).
    Degraded,
    /// Fails most attempts and the latest one (`failing`): the breaker pauses it.
    Failing,
}

text_enum!(Health, "health", {
    Healthy => "healthy",
    Degraded => "degraded",
    Failing => "failing",
});

impl Health {
    /// The value of the `idem_destination_health` gauge: 0 healthy, 1 degraded, 2 failing.
    pub fn gauge(self) -> f64 {
        match self {
            Self::Healthy => 0.0,
            Self::Degraded => 1.0,
            Self::Failing => 2.0,
        }
    }
}

/// The thresholds of one destination (its `[[destination]]` keys; defaults in
/// [`Thresholds::default`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// The attempts read: those started within this long (`health_window`, default 5m).
    pub window: Duration,
    /// Fewer attempts than this in the window judge neither failing nor partly failing
    /// (`min_attempts`, default 10).
    pub min_attempts: u64,
    /// A success rate below this is failing (`failing_below`, default 0.3, Convoy's 70 %
    /// failure threshold).
    pub failing_below: f64,
    /// A success rate below this is degraded (`degraded_below`, default 0.95).
    pub degraded_below: f64,
    /// A p99 latency over this is degraded (`slow_after`, default 1s).
    pub slow_after: Duration,
    /// A delivery due for longer than this is degraded (`backlog_after`, default 5m).
    pub backlog_after: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(300),
            min_attempts: 10,
            failing_below: 0.3,
            degraded_below: 0.95,
            slow_after: Duration::from_secs(1),
            backlog_after: Duration::from_secs(300),
        }
    }
}

/// One attempt as the health reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sample {
    /// When it started (ms since the epoch).
    pub started_at: i64,
    /// How long it took (ms).
    pub duration_ms: i64,
    /// Whether it delivered.
    pub delivered: bool,
}

/// What [`assess`] found: the health and the figures it was judged on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Assessment {
    /// The verdict.
    pub health: Health,
    /// Attempts in the window.
    pub attempts: u64,
    /// Of them, delivered.
    pub delivered: u64,
    /// Delivered per attempt (`None` without attempts).
    pub success_rate: Option<f64>,
    /// The median attempt's duration (ms).
    pub p50_ms: Option<i64>,
    /// The 99th percentile's (ms).
    pub p99_ms: Option<i64>,
    /// How long the delivery due the longest has been due (ms), if one is.
    pub oldest_due_ms: Option<i64>,
    /// Why, in words, when not healthy (`"success rate 12% over 25 attempts"`).
    pub reason: Option<String>,
}

/// The value at quantile `q` (0 to 1) of `sorted` (nearest rank), or `None` when empty.
pub(crate) fn quantile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The health of a destination whose attempts in the window are `samples` (any order) and
/// whose delivery due the longest fell due at `oldest_due` (ms), judged at `now` (ms).
pub(crate) fn assess(
    samples: &[Sample],
    oldest_due: Option<i64>,
    thresholds: &Thresholds,
    now: i64,
) -> Assessment {
    let attempts = samples.len() as u64;
    let delivered = samples.iter().filter(|s| s.delivered).count() as u64;
    #[allow(clippy::cast_precision_loss)]
    let success_rate = (attempts > 0).then(|| delivered as f64 / attempts as f64);
    let mut durations: Vec<i64> = samples.iter().map(|s| s.duration_ms).collect();
    durations.sort_unstable();
    let p50_ms = quantile(&durations, 0.5);
    let p99_ms = quantile(&durations, 0.99);
    let latest_failed = samples
        .iter()
        .max_by_key(|s| s.started_at)
        .is_some_and(|s| !s.delivered);
    let oldest_due_ms = oldest_due.map(|at| now.saturating_sub(at).max(0));
    let enough = attempts >= thresholds.min_attempts.max(1);
    let rate = success_rate.unwrap_or(1.0);
    let percent = |rate: f64| format!("success rate {:.0}% over {attempts} attempts", rate * 100.0);
    let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let (health, reason) = if enough && rate < thresholds.failing_below && latest_failed {
        (Health::Failing, Some(percent(rate)))
    } else if enough && rate < thresholds.degraded_below {
        (Health::Degraded, Some(percent(rate)))
    } else if let Some(p99) = p99_ms.filter(|p99| *p99 > ms(thresholds.slow_after)) {
        (Health::Degraded, Some(format!("slow: p99 {p99} ms")))
    } else if let Some(age) = oldest_due_ms.filter(|age| *age > ms(thresholds.backlog_after)) {
        (
            Health::Degraded,
            Some(format!("a delivery has been due for {} s", age / 1000)),
        )
    } else {
        (Health::Healthy, None)
    };
    Assessment {
        health,
        attempts,
        delivered,
        success_rate,
        p50_ms,
        p99_ms,
        oldest_due_ms,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(outcomes: &[(bool, i64)]) -> Vec<Sample> {
        (outcomes.iter().enumerate())
            .map(|(i, (delivered, duration_ms))| Sample {
                started_at: i64::try_from(i).unwrap_or(0) * 10,
                duration_ms: *duration_ms,
                delivered: *delivered,
            })
            .collect()
    }

    fn thresholds() -> Thresholds {
        Thresholds {
            min_attempts: 4,
            ..Thresholds::default()
        }
    }

    #[test]
    fn failing_needs_enough_attempts_a_low_rate_and_a_failed_latest_attempt() {
        let t = thresholds();
        let failing = samples(&[(false, 5), (false, 5), (true, 5), (false, 5), (false, 5)]);
        let a = assess(&failing, None, &t, 1_000);
        assert_eq!(a.health, Health::Failing);
        assert_eq!((a.attempts, a.delivered), (5, 1));
        assert_eq!(
            a.reason.as_deref(),
            Some("success rate 20% over 5 attempts")
        );
        // Three failures are too few to judge.
        let few = samples(&[(false, 5), (false, 5), (false, 5)]);
        assert_eq!(assess(&few, None, &t, 1_000).health, Health::Healthy);
        // The latest attempt (a probe) succeeded: degraded, no longer failing.
        let probed = samples(&[(false, 5), (false, 5), (false, 5), (false, 5), (true, 5)]);
        assert_eq!(assess(&probed, None, &t, 1_000).health, Health::Degraded);
    }

    #[test]
    fn slowness_partial_failure_and_an_old_due_delivery_degrade() {
        let t = thresholds();
        let slow = samples(&[(true, 2_000), (true, 2_000), (true, 2_000), (true, 2_000)]);
        let a = assess(&slow, None, &t, 1_000);
        assert_eq!(
            (a.health, a.p50_ms, a.p99_ms),
            (Health::Degraded, Some(2_000), Some(2_000))
        );
        let half = samples(&[(true, 5), (false, 5), (true, 5), (false, 5), (true, 5)]);
        assert_eq!(assess(&half, None, &t, 1_000).health, Health::Degraded);
        let a = assess(&[], Some(0), &t, 301_000);
        assert_eq!(
            (a.health, a.oldest_due_ms),
            (Health::Degraded, Some(301_000))
        );
        assert_eq!(assess(&[], Some(0), &t, 299_000).health, Health::Healthy);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let sorted: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&sorted, 0.5), Some(50));
        assert_eq!(quantile(&sorted, 0.99), Some(99));
        assert_eq!(quantile(&[7], 0.99), Some(7));
        assert_eq!(quantile(&[], 0.5), None);
    }
}
