//! Signed timestamps: parsing Unix seconds and checking them against now (docs/design.md C10).

use idem_core::Timestamp;

use super::VerifyError;

/// The Unix seconds in `text`: one or more ASCII digits and nothing else (no sign, no spaces),
/// small enough for an `i64`.
pub(crate) fn parse_unix_secs(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `Ok` when `timestamp` (Unix seconds) is at most `tolerance_secs` before or after `now`, both
/// taken in whole seconds as the senders sign them; otherwise
/// [`VerifyError::TimestampOutOfTolerance`].
pub(crate) fn check(
    timestamp: i64,
    now: Timestamp,
    tolerance_secs: u64,
) -> Result<(), VerifyError> {
    let now = now.as_millis().div_euclid(1000);
    if timestamp.abs_diff(now) > tolerance_secs {
        return Err(VerifyError::TimestampOutOfTolerance {
            timestamp,
            now,
            tolerance_secs,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000;

    fn at(secs: i64) -> Timestamp {
        Timestamp(secs * 1000)
    }

    #[test]
    fn parses_only_plain_decimal_seconds() {
        assert_eq!(parse_unix_secs("1700000000"), Some(NOW));
        assert_eq!(parse_unix_secs("0"), Some(0));
        for bad in [
            "",
            "abc",
            "-5",
            "+5",
            " 5",
            "5 ",
            "1.5",
            "1e9",
            "99999999999999999999",
        ] {
            assert_eq!(parse_unix_secs(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn accepts_within_tolerance_on_both_sides() {
        for offset in [-300, -290, 0, 290, 300] {
            assert_eq!(check(NOW + offset, at(NOW), 300), Ok(()), "offset {offset}");
        }
    }

    #[test]
    fn refuses_outside_tolerance_with_both_numbers() {
        let err = check(NOW - 3600, at(NOW), 300).unwrap_err();
        assert_eq!(
            err.to_string(),
            "timestamp 1699996400 is 3600 s before now (1700000000), outside the 300 s tolerance"
        );
        let err = check(NOW + 600, at(NOW), 300).unwrap_err();
        assert_eq!(
            err.to_string(),
            "timestamp 1700000600 is 600 s after now (1700000000), outside the 300 s tolerance"
        );
        assert!(check(NOW - 301, at(NOW), 300).is_err());
    }

    #[test]
    fn extreme_values_do_not_overflow() {
        assert!(check(i64::MAX, Timestamp(i64::MIN), 300).is_err());
        assert!(check(0, Timestamp(i64::MAX), u64::MAX).is_ok());
    }
}
