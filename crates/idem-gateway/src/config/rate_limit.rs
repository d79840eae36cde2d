//! A destination's `rate_limit`: `"200/s"` or `"600/m"`.

use std::fmt;
use std::time::Duration;

use super::error::ConfigError;

/// The most attempts a `rate_limit` may allow per second (per minute: 60 times as many).
pub(crate) const MAX_PER_SECOND: u64 = 100_000;

/// How many attempts a destination may start per second or per minute, in each gateway process
/// (`rate_limit`): a token bucket holding one second's worth (at least one attempt), full at
/// the start. With several gateways on one database each allows this many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Attempts per `per`: 1 to 100000 per second, or 1 to 6000000 per minute.
    pub count: u64,
    /// One second (`/s`) or one minute (`/m`).
    pub per: Duration,
}

impl RateLimit {
    /// The attempts that may start at once after an idle second: one second's worth, rounded
    /// down, and at least one (`30/m` allows one attempt every 2 s, never two at once).
    pub fn burst(self) -> u64 {
        let per_ms = self.per_ms();
        (self.count * 1000 / per_ms).max(1)
    }

    /// `per` in milliseconds (1000 or 60000).
    pub(crate) fn per_ms(self) -> u64 {
        u64::try_from(self.per.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// Reads `text` (`"200/s"`, `"600/m"`) for field `field`.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] when `text` is not a whole number, `/`, and `s` or `m`, or the
    /// number is 0 or more than 100000 per second.
    pub(crate) fn parse(field: &str, text: &str) -> Result<Self, ConfigError> {
        let bad = || ConfigError::BadValue {
            field: field.to_owned(),
            value: text.to_owned(),
            expected: "attempts per second or per minute, such as \"200/s\" or \"600/m\" \
                       (1 to 100000 per second, 1 to 6000000 per minute)"
                .into(),
        };
        let (count, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        let count = count.trim();
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let count: u64 = count.parse().map_err(|_| bad())?;
        let (per, max) = match unit.trim() {
            "s" => (Duration::from_secs(1), MAX_PER_SECOND),
            "m" => (Duration::from_secs(60), MAX_PER_SECOND * 60),
            _ => return Err(bad()),
        };
        if !(1..=max).contains(&count) {
            return Err(bad());
        }
        Ok(Self { count, per })
    }
}

impl fmt::Display for RateLimit {
    /// `200/s` or `600/m`, as written in the configuration.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = if self.per == Duration::from_secs(60) {
            "m"
        } else {
            "s"
        };
        write!(f, "{}/{unit}", self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_per_second_and_per_minute() {
        let limit = RateLimit::parse("rate_limit", "200/s").unwrap();
        assert_eq!(limit.count, 200);
        assert_eq!(limit.per, Duration::from_secs(1));
        assert_eq!(limit.burst(), 200);
        assert_eq!(limit.to_string(), "200/s");
        let limit = RateLimit::parse("rate_limit", " 600 / m ").unwrap();
        assert_eq!((limit.count, limit.burst()), (600, 10));
        assert_eq!(limit.to_string(), "600/m");
        // Less than one a second: one at a time.
        assert_eq!(RateLimit::parse("f", "30/m").unwrap().burst(), 1);
        assert_eq!(RateLimit::parse("f", "100000/s").unwrap().burst(), 100_000);
        assert_eq!(RateLimit::parse("f", "6000000/m").unwrap().burst(), 100_000);
    }

    #[test]
    fn refuses_what_is_no_rate() {
        for bad in [
            "",
            "200",
            "0/s",
            "-1/s",
            "1.5/s",
            "200/h",
            "200/sec",
            "/s",
            "100001/s",
            "6000001/m",
            "99999999999999999999999/s",
        ] {
            let error = RateLimit::parse("destination \"app\" rate_limit", bad).unwrap_err();
            assert!(
                error.to_string().contains("such as \"200/s\""),
                "{bad:?}: {error}"
            );
        }
    }
}
