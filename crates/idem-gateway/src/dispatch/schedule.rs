//! When a failed delivery is tried again: the destination's schedule with ±20% jitter, a
//! `Retry-After` that may lengthen the delay (capped), and the dead letter after the last one.

use std::time::Duration;

/// How far a delay may move either way, as a fraction: ±20%, so that deliveries that failed
/// together do not all come back at once.
pub(crate) const JITTER: f64 = 0.2;

/// What follows a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Next {
    /// Try again after this delay.
    Retry(Duration),
    /// Every attempt of the schedule failed.
    Dead,
}

/// The step after the failure that follows `failures` earlier failures: `schedule[failures]`,
/// scaled by `1 + JITTER × jitter` (`jitter` in −1..=1), lengthened to `retry_after` (at most
/// `cap`) when the destination asked for more; [`Next::Dead`] past the end of the schedule.
pub(crate) fn after_failure(
    schedule: &[Duration],
    failures: i64,
    retry_after: Option<Duration>,
    cap: Duration,
    jitter: f64,
) -> Next {
    let Some(base) = usize::try_from(failures).ok().and_then(|i| schedule.get(i)) else {
        return Next::Dead;
    };
    // Saturating: a delay too long for `Duration` is the longest one, never a panic.
    let factor = 1.0 + JITTER * jitter.clamp(-1.0, 1.0);
    let delay = Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(Duration::MAX);
    Next::Retry(match retry_after {
        Some(asked) => delay.max(asked.min(cap)),
        None => delay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn schedule_then_dead_letter() {
        let schedule = [100 * MS, 200 * MS];
        let cap = Duration::from_secs(60);
        assert_eq!(
            after_failure(&schedule, 0, None, cap, 0.0),
            Next::Retry(100 * MS)
        );
        assert_eq!(
            after_failure(&schedule, 1, None, cap, 0.0),
            Next::Retry(200 * MS)
        );
        assert_eq!(after_failure(&schedule, 2, None, cap, 0.0), Next::Dead);
        assert_eq!(after_failure(&[], 0, None, cap, 0.0), Next::Dead);
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        let schedule = [1000 * MS];
        let cap = Duration::from_secs(60);
        assert_eq!(
            after_failure(&schedule, 0, None, cap, -1.0),
            Next::Retry(800 * MS)
        );
        assert_eq!(
            after_failure(&schedule, 0, None, cap, 1.0),
            Next::Retry(1200 * MS)
        );
        assert_eq!(
            after_failure(&schedule, 0, None, cap, 7.0),
            Next::Retry(1200 * MS)
        );
    }

    /// Delays too long for `Duration::mul_f64` saturate instead of panicking (the configuration
    /// refuses them, but the arithmetic must not rely on it).
    #[test]
    fn huge_delays_saturate() {
        let cap = Duration::from_secs(60);
        let huge = humantime::parse_duration("580000000000y").unwrap();
        assert_eq!(
            after_failure(&[huge], 0, None, cap, 1.0),
            Next::Retry(Duration::MAX)
        );
        assert_eq!(
            after_failure(&[Duration::MAX], 0, None, cap, 1.0),
            Next::Retry(Duration::MAX)
        );
        let Next::Retry(d) = after_failure(&[huge], 0, None, cap, -1.0) else {
            panic!("a retry")
        };
        assert!(d > Duration::from_secs(86_400 * 365 * 1_000_000));
    }

    #[test]
    fn retry_after_lengthens_but_never_shortens_and_is_capped() {
        let schedule = [1000 * MS];
        let cap = Duration::from_secs(30);
        let longer = Some(Duration::from_secs(10));
        assert_eq!(
            after_failure(&schedule, 0, longer, cap, 0.0),
            Next::Retry(Duration::from_secs(10))
        );
        assert_eq!(
            after_failure(&schedule, 0, Some(MS), cap, 0.0),
            Next::Retry(1000 * MS)
        );
        let huge = Some(Duration::from_secs(86_400));
        assert_eq!(
            after_failure(&schedule, 0, huge, cap, 0.0),
            Next::Retry(cap)
        );
    }
}
