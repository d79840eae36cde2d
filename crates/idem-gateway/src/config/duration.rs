//! Durations in the configuration: `"30d"`, `"5s"`, `"250ms"` (humantime's syntax).

use std::time::Duration;

use super::ConfigError;

/// Parses the duration `value` of configuration field `field`.
///
/// # Errors
/// [`ConfigError::BadDuration`] naming the field and the value when it is not a duration such as
/// `30d`, `5s` or `250ms`; [`ConfigError::ZeroDuration`] when it is zero (no field of the
/// configuration means "never").
pub(crate) fn parse(field: &str, value: &str) -> Result<Duration, ConfigError> {
    match humantime::parse_duration(value.trim()) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(ConfigError::ZeroDuration {
            field: field.to_owned(),
            value: value.to_owned(),
        }),
        Err(_) => Err(ConfigError::BadDuration {
            field: field.to_owned(),
            value: value.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_of_the_example_config() {
        assert_eq!(
            parse("retention", "30d").unwrap(),
            Duration::from_secs(30 * 86_400)
        );
        assert_eq!(parse("timeout", "5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse("retry", "250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("retry", "2h").unwrap(), Duration::from_secs(7_200));
        for bad in ["", "five", "-1s", "5 parsecs"] {
            assert!(
                matches!(parse("retry", bad), Err(ConfigError::BadDuration { .. })),
                "{bad:?}"
            );
        }
        // Issue 15, item 8: zero is a duration, refused as zero.
        for zero in ["0s", " 0ms ", "0d 0h"] {
            assert_eq!(
                parse("retention", zero).unwrap_err().to_string(),
                format!(
                    "retention = {zero:?} is zero; expected a duration greater than zero (no key of the configuration means \"never\")"
                ),
            );
        }
    }
}
