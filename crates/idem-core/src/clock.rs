//! Time as idem sees it: milliseconds since the Unix epoch, from an injectable clock.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time: milliseconds since the Unix epoch (UTC). Stores pass it to SQL as a
/// parameter, never reading the database's own clock, so tests can move time without sleeping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Milliseconds since the Unix epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// This time plus `d`, saturating at the representable maximum.
    pub fn saturating_add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_ms(d)))
    }

    /// This time minus `d`, saturating at the representable minimum.
    pub fn saturating_sub(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(duration_ms(d)))
    }

    /// This time as operators read it in listings and logs: RFC 3339 in UTC with milliseconds
    /// (`2026-12-01T13:29:18.123Z`), from 1970 to the year 9999; a time outside that range (a
    /// corrupt or hand-edited row) as its plain number of milliseconds, never a wrong date.
    pub fn rfc3339(self) -> Rfc3339 {
        Rfc3339(self)
    }
}

/// The last millisecond RFC 3339 can write: 9999-12-31T23:59:59.999Z.
const LAST_RFC3339_MS: i64 = 253_402_300_799_999;

/// What [`Timestamp::rfc3339`] returns: displays the time, allocating nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rfc3339(Timestamp);

impl fmt::Display for Rfc3339 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const DAY_MS: i64 = 86_400_000;
        let t = self.0.0;
        if !(0..=LAST_RFC3339_MS).contains(&t) {
            return write!(f, "{t}");
        }
        let (days, ms) = (t / DAY_MS, t % DAY_MS);
        // Days since 1970-01-01 to the proleptic Gregorian civil date (Howard Hinnant's
        // `civil_from_days`, http://howardhinnant.github.io/date_algorithms.html): eras of 400
        // years (146 097 days) counted from 0000-03-01, so that the leap day ends a year.
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
            ms / 3_600_000,
            ms / 60_000 % 60,
            ms / 1000 % 60,
            ms % 1000
        )
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0)
    }
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A source of the current time. Stores take it as `Arc<dyn Clock>`.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        Timestamp(duration_ms(since_epoch))
    }
}

/// A clock that moves only when told to: for tests of leases, parking and retention without
/// sleeping. Clones share one time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.0)))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_ms(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t`.
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_writes_utc_with_milliseconds_within_1970_to_9999() {
        let shown = |t: i64| Timestamp(t).rfc3339().to_string();
        assert_eq!(shown(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(shown(1_769_860_800_250), "2026-01-31T12:00:00.250Z");
        // A leap day, the day after it, and the end of a leap century year.
        assert_eq!(shown(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(shown(951_868_800_001), "2000-03-01T00:00:00.001Z");
        assert_eq!(shown(978_307_199_999), "2000-12-31T23:59:59.999Z");
        assert_eq!(shown(1_796_131_758_123), "2026-12-01T13:29:18.123Z");
        assert_eq!(shown(LAST_RFC3339_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(shown(LAST_RFC3339_MS + 1), "253402300800000");
        assert_eq!(shown(-1), "-1");
        assert_eq!(shown(i64::MIN), "-9223372036854775808");
        assert_eq!(shown(i64::MAX), "9223372036854775807");
    }
}
