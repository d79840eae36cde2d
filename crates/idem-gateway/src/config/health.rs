//! Destination health, the circuit breaker and alerts (issue 31): a destination's thresholds
//! and breaker keys, the top-level `health_interval` and `alert_*` keys, and `[[alert]]` sinks.

use std::time::Duration;

use idem_core::Name;

use super::duration;
use super::error::{ConfigError, duplicate, name, number_out_of_range, out_of_range};
use super::raw::{RawAlert, RawConfig, RawDestination};
use super::secret::{Secret, SecretLookup, SecretRef};
use crate::model::health::Thresholds;

/// How often each gateway process judges health, runs the breaker and the alerts, without a
/// configuration.
pub(crate) const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(5);
/// A breaker's first cool-down before a probe, without a configuration.
pub(crate) const DEFAULT_BREAKER_COOLDOWN: Duration = Duration::from_secs(30);
/// The longest a breaker's cool-down doubles to, without a configuration.
pub(crate) const DEFAULT_BREAKER_COOLDOWN_CAP: Duration = Duration::from_secs(600);

/// A destination's circuit breaker (`circuit_breaker`, `breaker_cooldown`,
/// `breaker_cooldown_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    /// Whether a `failing` destination is paused automatically (default true).
    pub enabled: bool,
    /// How long after the automatic pause the first probe is sent (default 30s).
    pub cooldown: Duration,
    /// The longest cool-down: each failed probe doubles it up to this (default 10m).
    pub cooldown_cap: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            enabled: true,
            cooldown: DEFAULT_BREAKER_COOLDOWN,
            cooldown_cap: DEFAULT_BREAKER_COOLDOWN_CAP,
        }
    }
}

/// What the alerts watch beyond a destination's health and breaker: the top-level `alert_*`
/// keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertConditions {
    /// Dead letters of one destination in `dead_letters_window` over this fire
    /// `dead_letters` (`alert_dead_letters_over`, default 0: any dead letter).
    pub dead_letters_over: u64,
    /// (`alert_dead_letters_window`, default 15m).
    pub dead_letters_window: Duration,
    /// A destination's delivery due for longer than this fires `backlog_age`
    /// (`alert_backlog_after`, default 15m).
    pub backlog_after: Duration,
    /// A source's requests refused for a bad signature in `rejected_window` over this fire
    /// `rejected_requests` (`alert_rejected_over`, default 10).
    pub rejected_over: u64,
    /// (`alert_rejected_window`, default 5m).
    pub rejected_window: Duration,
}

impl Default for AlertConditions {
    fn default() -> Self {
        Self {
            dead_letters_over: 0,
            dead_letters_window: Duration::from_secs(900),
            backlog_after: Duration::from_secs(900),
            rejected_over: 10,
            rejected_window: Duration::from_secs(300),
        }
    }
}

/// How an `[[alert]]` sink is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AlertFormat {
    /// A JSON notification, signed with Standard Webhooks when `secret_env` is set (`json`).
    Json,
    /// A Slack-compatible incoming webhook: `{"text": …}` (`slack`).
    Slack,
}

/// An `[[alert]]` sink.
#[derive(Debug, Clone)]
pub struct AlertSink {
    /// Its name (unique; the notifications' rows name it).
    pub name: Name,
    /// Where notifications are POSTed.
    pub url: String,
    /// `json` (default) or `slack`.
    pub format: AlertFormat,
    /// The `whsec_` secret JSON notifications are signed with; `None`: unsigned.
    pub secret: Option<Secret>,
}

/// The health keys of destination `raw`: its thresholds and breaker.
///
/// # Errors
/// A [`ConfigError`] naming the key.
pub(super) fn destination(
    raw: &RawDestination,
    field_name: &dyn Fn(&str) -> String,
) -> Result<(Thresholds, Breaker), ConfigError> {
    let defaults = Thresholds::default();
    let span = |key: &str, value: Option<&String>, default: Duration| match value {
        Some(text) => duration::parse(&field_name(key), text),
        None => Ok(default),
    };
    let rate = |key: &str, value: Option<f64>, default: f64| match value {
        Some(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        Some(rate) => Err(out_of_range(
            &field_name(key),
            &rate.to_string(),
            "a success rate between 0.0 and 1.0",
        )),
        None => Ok(default),
    };
    let min_attempts = raw.min_attempts.unwrap_or(defaults.min_attempts);
    if min_attempts == 0 {
        return Err(number_out_of_range(
            &field_name("min_attempts"),
            0,
            "at least 1",
        ));
    }
    let thresholds = Thresholds {
        window: span("health_window", raw.health_window.as_ref(), defaults.window)?,
        min_attempts,
        failing_below: rate("failing_below", raw.failing_below, defaults.failing_below)?,
        degraded_below: rate(
            "degraded_below",
            raw.degraded_below,
            defaults.degraded_below,
        )?,
        slow_after: span("slow_after", raw.slow_after.as_ref(), defaults.slow_after)?,
        backlog_after: span(
            "backlog_after",
            raw.backlog_after.as_ref(),
            defaults.backlog_after,
        )?,
    };
    if thresholds.failing_below > thresholds.degraded_below {
        return Err(out_of_range(
            &field_name("failing_below"),
            &thresholds.failing_below.to_string(),
            "at most degraded_below",
        ));
    }
    let breaker = Breaker {
        enabled: raw.circuit_breaker.unwrap_or(true),
        cooldown: span(
            "breaker_cooldown",
            raw.breaker_cooldown.as_ref(),
            DEFAULT_BREAKER_COOLDOWN,
        )?,
        cooldown_cap: span(
            "breaker_cooldown_cap",
            raw.breaker_cooldown_cap.as_ref(),
            DEFAULT_BREAKER_COOLDOWN_CAP,
        )?,
    };
    if breaker.cooldown_cap < breaker.cooldown {
        return Err(out_of_range(
            &field_name("breaker_cooldown_cap"),
            raw.breaker_cooldown_cap.as_deref().unwrap_or_default(),
            "at least breaker_cooldown",
        ));
    }
    Ok((thresholds, breaker))
}

/// The top-level `health_interval` and `alert_*` keys.
///
/// # Errors
/// A [`ConfigError`] naming the key.
pub(super) fn settings(raw: &RawConfig) -> Result<(Duration, AlertConditions), ConfigError> {
    let defaults = AlertConditions::default();
    let span = |key: &str, value: Option<&String>, default: Duration| match value {
        Some(text) => duration::parse(key, text),
        None => Ok(default),
    };
    let interval = span(
        "health_interval",
        raw.health_interval.as_ref(),
        DEFAULT_HEALTH_INTERVAL,
    )?;
    if interval < Duration::from_millis(50) {
        return Err(out_of_range(
            "health_interval",
            raw.health_interval.as_deref().unwrap_or_default(),
            "at least 50ms",
        ));
    }
    Ok((
        interval,
        AlertConditions {
            dead_letters_over: raw
                .alert_dead_letters_over
                .unwrap_or(defaults.dead_letters_over),
            dead_letters_window: span(
                "alert_dead_letters_window",
                raw.alert_dead_letters_window.as_ref(),
                defaults.dead_letters_window,
            )?,
            backlog_after: span(
                "alert_backlog_after",
                raw.alert_backlog_after.as_ref(),
                defaults.backlog_after,
            )?,
            rejected_over: raw.alert_rejected_over.unwrap_or(defaults.rejected_over),
            rejected_window: span(
                "alert_rejected_window",
                raw.alert_rejected_window.as_ref(),
                defaults.rejected_window,
            )?,
        },
    ))
}

/// The `[[alert]]` sinks.
///
/// # Errors
/// A [`ConfigError`] naming the sink's key; [`ConfigError::Duplicate`] for a name used twice.
pub(super) fn sinks(
    raw: Vec<RawAlert>,
    secret: &SecretLookup<'_>,
) -> Result<Vec<AlertSink>, ConfigError> {
    let mut sinks: Vec<AlertSink> = Vec::new();
    for raw in raw {
        let sink_name = name("alert", "alert.name", raw.name)?;
        let field = |key: &str| format!("alert {:?} {key}", sink_name.as_str());
        let url = raw.url;
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(out_of_range(
                &field("url"),
                &idem_sql::redact_url(&url),
                "an http:// or https:// URL",
            ));
        }
        let format = match raw.format.as_deref().unwrap_or("json") {
            "json" => AlertFormat::Json,
            "slack" => AlertFormat::Slack,
            other => {
                return Err(out_of_range(
                    &field("format"),
                    other,
                    "\"json\" or \"slack\"",
                ));
            }
        };
        let at = SecretRef::either(
            || format!("alert {:?}", sink_name.as_str()),
            ("secret_env", raw.secret_env.as_deref()),
            ("secret_file", raw.secret_file.as_deref()),
        )?;
        let secret = match at {
            Some(_) if format == AlertFormat::Slack => {
                return Err(out_of_range(
                    &field("secret_env"),
                    "set",
                    "no secret_env with format = \"slack\": a Slack webhook is not signed",
                ));
            }
            Some(at) => Some(secret(format!("alert {:?}", sink_name.as_str()), at)?),
            None => None,
        };
        if let Some(loaded) = secret.as_ref().filter(|s| s.is_loaded())
            && idem_http::verify::standard_webhooks::sign(loaded.expose(), "check", 0, b"").is_err()
        {
            return Err(out_of_range(
                &field("secret_env"),
                "set",
                "a whsec_ secret (whsec_ and the base64 of the key)",
            ));
        }
        if sinks.iter().any(|s| s.name == sink_name) {
            return Err(duplicate("alert", &sink_name));
        }
        sinks.push(AlertSink {
            name: sink_name,
            url,
            format,
            secret,
        });
    }
    Ok(sinks)
}
