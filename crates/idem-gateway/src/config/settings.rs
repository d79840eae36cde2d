//! The process's own settings, the top-level keys of the file: the listeners, the database,
//! retention, the read and shutdown deadlines, the poll interval and the body limit. Built in
//! the order docs/gateway.md lists them, so the first problem found is the first one a reader
//! of the file meets.

use std::net::SocketAddr;
use std::time::Duration;

use super::defaults::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_DATABASE_TIMEOUT, DEFAULT_DATABASE_URL,
    DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, DEFAULT_POLL_INTERVAL,
    DEFAULT_READYZ_TIMEOUT, DEFAULT_RETENTION, DEFAULT_SHUTDOWN_GRACE, MAX_DATABASE_TIMEOUT,
    MAX_DEADLINE, MIN_DEADLINE, MIN_MAX_BODY_BYTES, MIN_POLL_INTERVAL,
};
use super::duration;
use super::error::{ConfigError, number_out_of_range, out_of_range};
use super::model::Retention;
use super::raw::RawConfig;

/// The top-level settings, checked; [`Config`](super::Config) holds them field by field.
pub(super) struct Settings {
    pub listen: SocketAddr,
    pub database_url: String,
    pub retention: Retention,
    pub body_retention: Option<Duration>,
    pub admin_listen: Option<SocketAddr>,
    pub metrics_listen: Option<SocketAddr>,
    pub deadlines: Deadlines,
    pub poll_interval: Duration,
    pub max_body_bytes: usize,
}

/// How long the server waits for a request's headers, its body, the database, a readiness
/// probe and the tasks at shutdown.
pub(super) struct Deadlines {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub database_timeout: Duration,
    pub readyz_timeout: Duration,
    pub shutdown_grace: Duration,
}

/// Builds the top-level settings of `raw`.
///
/// # Errors
/// A [`ConfigError`] naming the first key that is malformed or out of range.
pub(super) fn build(raw: &RawConfig) -> Result<Settings, ConfigError> {
    let listen = address(
        "listen",
        raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN),
        "127.0.0.1:8080",
    )?;
    let database_url = database_url(raw)?;
    let (retention, body_retention) = retention(raw)?;
    let (admin_listen, metrics_listen) = listeners(raw, listen)?;
    let deadlines = deadlines(raw)?;
    let poll_interval = match &raw.poll_interval {
        Some(text) => {
            let d = duration::parse("poll_interval", text)?;
            if d < MIN_POLL_INTERVAL {
                return Err(out_of_range("poll_interval", text, "at least 10ms"));
            }
            d
        }
        None => DEFAULT_POLL_INTERVAL,
    };
    if let (Some(body), Some(text), Some(retention)) =
        (body_retention, &raw.body_retention, retention.duration())
        && body > retention
    {
        return Err(out_of_range(
            "body_retention",
            text,
            &format!(
                "at most retention ({}): bodies cannot outlive their events",
                humantime::format_duration(retention)
            ),
        ));
    }
    let max_body_bytes = raw.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    if max_body_bytes < MIN_MAX_BODY_BYTES {
        return Err(number_out_of_range(
            "max_body_bytes",
            max_body_bytes as u64,
            "at least 1024 (1 KiB)",
        ));
    }
    Ok(Settings {
        listen,
        database_url,
        retention,
        body_retention,
        admin_listen,
        metrics_listen,
        deadlines,
        poll_interval,
        max_body_bytes,
    })
}

/// `text` as the socket address of `field`; `example` shows one in the error.
fn address(field: &str, text: &str, example: &str) -> Result<SocketAddr, ConfigError> {
    text.parse().map_err(|_| ConfigError::BadValue {
        field: field.into(),
        value: text.into(),
        expected: format!("an address and port such as \"{example}\""),
    })
}

/// `database_url`: SQLite, PostgreSQL, MySQL or MariaDB, the databases the gateway's tables live
/// in.
fn database_url(raw: &RawConfig) -> Result<String, ConfigError> {
    let database_url = raw
        .database_url
        .clone()
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
    if !super::database::holds_gateway_tables(&database_url) {
        return Err(ConfigError::BadValue {
            field: "database_url".into(),
            value: idem_sql::redact_url(&database_url),
            expected: "a sqlite://, postgres:// or mysql:// URL".into(),
        });
    }
    Ok(database_url)
}

/// `retention` (a duration or `forever`) and `body_retention`, each parsed on its own.
fn retention(raw: &RawConfig) -> Result<(Retention, Option<Duration>), ConfigError> {
    let retention = match raw.retention.as_deref().map(str::trim) {
        Some("forever") => Retention::Forever,
        Some(_) => Retention::For(duration::parse(
            "retention",
            raw.retention.as_deref().unwrap_or_default(),
        )?),
        None => Retention::For(DEFAULT_RETENTION),
    };
    let body_retention = raw
        .body_retention
        .as_deref()
        .map(|text| duration::parse("body_retention", text))
        .transpose()?;
    Ok((retention, body_retention))
}

/// `admin_listen` and `metrics_listen`, each on an address of its own and other than
/// `listen`'s: two listeners on one address would fail at bind, after the database was opened.
/// Port 0 (any free port) is never a clash.
fn listeners(
    raw: &RawConfig,
    listen: SocketAddr,
) -> Result<(Option<SocketAddr>, Option<SocketAddr>), ConfigError> {
    let optional = |field: &str, text: &Option<String>| {
        text.as_deref()
            .map(|text| address(field, text, "127.0.0.1:9090"))
            .transpose()
    };
    let admin_listen = optional("admin_listen", &raw.admin_listen)?;
    let metrics_listen = optional("metrics_listen", &raw.metrics_listen)?;
    let addresses = [
        ("listen", Some(listen)),
        ("admin_listen", admin_listen),
        ("metrics_listen", metrics_listen),
    ];
    for (i, (field, addr)) in addresses.iter().enumerate() {
        let Some(addr) = addr.filter(|a| a.port() != 0) else {
            continue;
        };
        if let Some((other, _)) = addresses[..i].iter().find(|(_, a)| *a == Some(addr)) {
            return Err(ConfigError::BadValue {
                field: (*field).into(),
                value: addr.to_string(),
                expected: format!("an address other than {other}'s"),
            });
        }
    }
    Ok((admin_listen, metrics_listen))
}

/// The read, database, readiness and shutdown deadlines, each between 100 ms and its maximum.
fn deadlines(raw: &RawConfig) -> Result<Deadlines, ConfigError> {
    const HOUR: &str = "between 100ms and 1h";
    const MINUTE: &str = "between 100ms and 1m";
    let deadline = |field: &str, value: &Option<String>, default, max, range: &str| match value {
        Some(text) => {
            let d = duration::parse(field, text)?;
            if !(MIN_DEADLINE..=max).contains(&d) {
                return Err(out_of_range(field, text, range));
            }
            Ok(d)
        }
        None => Ok(default),
    };
    Ok(Deadlines {
        header_read_timeout: deadline(
            "header_read_timeout",
            &raw.header_read_timeout,
            DEFAULT_HEADER_READ_TIMEOUT,
            MAX_DEADLINE,
            HOUR,
        )?,
        body_read_timeout: deadline(
            "body_read_timeout",
            &raw.body_read_timeout,
            DEFAULT_BODY_READ_TIMEOUT,
            MAX_DEADLINE,
            HOUR,
        )?,
        database_timeout: deadline(
            "database_timeout",
            &raw.database_timeout,
            DEFAULT_DATABASE_TIMEOUT,
            MAX_DATABASE_TIMEOUT,
            MINUTE,
        )?,
        readyz_timeout: deadline(
            "readyz_timeout",
            &raw.readyz_timeout,
            DEFAULT_READYZ_TIMEOUT,
            MAX_DATABASE_TIMEOUT,
            MINUTE,
        )?,
        shutdown_grace: deadline(
            "shutdown_grace",
            &raw.shutdown_grace,
            DEFAULT_SHUTDOWN_GRACE,
            MAX_DEADLINE,
            HOUR,
        )?,
    })
}
