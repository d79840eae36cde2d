//! Times as operators write and read them: `--since 2h`, RFC 3339, or milliseconds since the
//! epoch; shown as RFC 3339 UTC with milliseconds.

/// A time in none of the forms [`parse_time`] reads. Callers whose errors are a
/// [`RequestError`](crate::RequestError) turn it into `RequestError::BadTime` with `?`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", bad_time_message(field, value))]
pub struct BadTime {
    /// The field or option (`since`, `--until`, …).
    pub field: &'static str,
    /// The text given.
    pub value: String,
}

/// What [`BadTime`] (and `RequestError::BadTime`) say: the field, the text and the forms read.
pub(crate) fn bad_time_message(field: &str, value: &str) -> String {
    format!(
        "{field} {value:?} is not a time: expected a duration ago such as \"1h\" or \"3d 12h\", \
         an RFC 3339 timestamp such as \"2026-01-31T12:00:00Z\", or milliseconds since the epoch"
    )
}

/// Reads a time as `idem replay --since/--until` and `POST /admin/replay` take it, in ms since
/// the epoch: a duration before `now` (humantime's syntax: `90s`, `1h`, `3d`, `1h 30m`), an
/// RFC 3339 timestamp with any offset (`2026-01-31T12:00:00Z`, `2026-01-31T14:00:00.250+02:00`),
/// or a whole
/// number of milliseconds since the epoch (`1769860800000`). `field` names the input in the
/// error.
///
/// # Errors
/// [`BadTime`] when `text` is none of these.
pub fn parse_time(field: &'static str, text: &str, now: i64) -> Result<i64, BadTime> {
    let trimmed = text.trim();
    if let Ok(ms) = trimmed.parse::<u64>() {
        return Ok(i64::try_from(ms).unwrap_or(i64::MAX));
    }
    if let Ok(ago) = humantime::parse_duration(trimmed) {
        return Ok(now.saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX)));
    }
    let bad = || BadTime {
        field,
        value: text.to_owned(),
    };
    // Any UTC offset (`+02:00`), as the version fields read times; humantime's reader takes
    // only `Z` and `+00:00`.
    let micros = super::fields::rfc3339_micros(trimmed)
        .filter(|m| *m >= 0)
        .ok_or_else(bad)?;
    Ok(micros / 1000)
}

/// `t` (ms since the epoch) as RFC 3339 UTC with milliseconds, for listings and logs
/// ([`Timestamp::rfc3339`](idem_core::Timestamp::rfc3339)); a time RFC 3339 cannot write
/// (before 1970 or after the year 9999, as a corrupt or hand-edited row may hold) as the plain
/// number of milliseconds (one past 9999 reads back through [`parse_time`]).
pub fn format_time(t: i64) -> String {
    idem_core::Timestamp(t).rfc3339().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_with_any_offset() {
        let utc = parse_time("since", "2026-01-31T12:00:00Z", 0).unwrap();
        assert_eq!(utc, 1_769_860_800_000);
        assert_eq!(parse_time("since", "2026-01-31T14:00:00+02:00", 0), Ok(utc));
        assert_eq!(
            parse_time("since", "2026-01-31T07:30:00.250-04:30", 0),
            Ok(utc + 250)
        );
        assert!(parse_time("since", "2026-01-31T12:00:00+25:00", 0).is_err());
    }
    use std::time::Duration;

    /// The last millisecond RFC 3339 can write: 9999-12-31T23:59:59.999Z.
    const LAST_RFC3339_MS: i64 = 253_402_300_799_999;

    /// idem-core's hand-written calendar agrees with humantime's over 1970–9999, and what it
    /// writes reads back through `parse_time`.
    #[test]
    fn format_time_agrees_with_humantime() {
        let step = 7_919_999_987; // about 92 days, and no whole number of days or seconds
        for t in (0..LAST_RFC3339_MS).step_by(step).chain([LAST_RFC3339_MS]) {
            let ms = u64::try_from(t).unwrap();
            let expected =
                humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms))
                    .to_string();
            assert_eq!(format_time(t), expected, "{t}");
            assert_eq!(parse_time("since", &expected, 0), Ok(t), "{t}");
        }
    }

    #[test]
    fn times_rfc3339_cannot_write_are_shown_as_milliseconds() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(1_769_860_800_250), "2026-01-31T12:00:00.250Z");
        assert_eq!(format_time(LAST_RFC3339_MS), "9999-12-31T23:59:59.999Z");
        // Year 10000 and beyond: humantime's Display would fail, and `to_string` panic.
        assert_eq!(format_time(LAST_RFC3339_MS + 1), "253402300800000");
        assert_eq!(format_time(i64::MAX), "9223372036854775807");
        // Before the epoch: not 1970 (which would be wrong), the number as stored.
        assert_eq!(format_time(-1), "-1");
        assert_eq!(format_time(i64::MIN), "-9223372036854775808");
        assert_eq!(
            parse_time("until", &format_time(LAST_RFC3339_MS + 1), 0),
            Ok(LAST_RFC3339_MS + 1)
        );
    }

    #[test]
    fn times_are_read_as_the_cli_and_the_admin_api_take_them() {
        let now = 1_769_860_800_000; // 2026-01-31T12:00:00Z
        assert_eq!(parse_time("since", "1h", now), Ok(now - 3_600_000));
        assert_eq!(parse_time("since", " 1h 30m ", now), Ok(now - 5_400_000));
        assert_eq!(parse_time("since", "250ms", now), Ok(now - 250));
        assert_eq!(parse_time("since", "2026-01-31T12:00:00Z", 0), Ok(now));
        assert_eq!(
            parse_time("since", "2026-01-31T12:00:00.250+00:00", 0),
            Ok(now + 250)
        );
        assert_eq!(parse_time("since", "1769860800000", 0), Ok(now));
        assert_eq!(parse_time("since", "0", now), Ok(0));
        for bad in [
            "",
            "yesterday",
            "-5",
            "1.5",
            "1969-12-31T23:59:59Z",
            "5 parsecs",
        ] {
            assert_eq!(
                parse_time("--until", bad, now),
                Err(BadTime {
                    field: "--until",
                    value: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
    }
}
