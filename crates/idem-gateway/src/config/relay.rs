//! Outbox relays in the configuration: `[[relay]]`, each publishing the `idem_outbox` rows of
//! one database to NATS JetStream, RabbitMQ, Kafka or HTTP.

use std::time::Duration;

use idem_core::Name;

use idem_sql::redact_url as redact;

use super::broker::{DEFAULT_AMQP_URL, DEFAULT_NATS_URL};
use super::defaults::MIN_TIMEOUT;
use super::duration;
use super::error::{ConfigError, name, number_out_of_range, out_of_range};
use super::http_target::{self, TimeoutBounds, TlsKeys};
use super::raw::RawRelay;
use super::secret::{Secret, SecretLookup, SecretRef};
use crate::tls::TlsSettings;

/// Rows a relay claims and publishes per cycle, without `batch_size`.
pub const DEFAULT_RELAY_BATCH_SIZE: u32 = 100;
/// The most rows one cycle may claim.
pub(crate) const MAX_RELAY_BATCH_SIZE: u32 = 10_000;
/// The longest wait between cycles while nothing is due, without `poll_interval`.
pub const DEFAULT_RELAY_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest `poll_interval`.
pub(crate) const MIN_RELAY_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The longest `poll_interval`: an idle relay still looks for rows at least hourly.
pub(crate) const MAX_RELAY_POLL_INTERVAL: Duration = Duration::from_secs(3600);
/// How long a claimed row is held by one relay, without `claim_ttl`.
pub const DEFAULT_RELAY_CLAIM_TTL: Duration = Duration::from_secs(30);
/// The shortest `claim_ttl`: a claim must outlive one publish round trip and its mark.
pub(crate) const MIN_RELAY_CLAIM_TTL: Duration = Duration::from_secs(1);
/// The longest `claim_ttl`: a row claimed by a relay that died waits at most this long.
pub(crate) const MAX_RELAY_CLAIM_TTL: Duration = Duration::from_secs(3600);
/// Failed publishes after which a row is parked, without `max_attempts`.
pub const DEFAULT_RELAY_MAX_ATTEMPTS: u32 = 10;
/// One HTTP publish's time limit, without `timeout`.
pub const DEFAULT_RELAY_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `timeout`: `claim_ttl` must exceed it and is at most [`MAX_RELAY_CLAIM_TTL`],
/// so this leaves room for one.
pub(crate) const MAX_RELAY_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Where a relay publishes.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RelayTarget {
    /// NATS JetStream: each row's destination is the subject, its message id the
    /// `Nats-Msg-Id` header. The streams that take the subjects must exist.
    Nats {
        /// The server URL (default [`DEFAULT_NATS_URL`]).
        url: Secret,
    },
    /// RabbitMQ with publisher confirms: each row's destination is `exchange/routing_key` (or a
    /// queue name on the default exchange), its message id the AMQP `message_id`.
    RabbitMq {
        /// The AMQP URL (default [`DEFAULT_AMQP_URL`]).
        url: Secret,
    },
    /// Kafka, through idem-broker's `KafkaPublisher`: each row's destination is the topic, the
    /// record key its aggregate (`{type}:{id}`, so one entity's rows keep their order in one
    /// partition), the header `idem-message-id` its message id; every produce request is
    /// sent with `acks = all` and answered before the rows are marked. The topics must exist.
    Kafka {
        /// The bootstrap brokers, `host:port` each (`brokers`, required).
        brokers: Vec<String>,
    },
    /// HTTP POST with `Idempotency-Key` = the message id: each row's destination is a path
    /// joined to `url`, or a full URL.
    Http {
        /// The base URL, `http://` or `https://`.
        url: String,
        /// One request's time limit, connection included (default 10s, 100ms to 30m: less
        /// than `claim_ttl`, which is at most 1h).
        timeout: Duration,
        /// How an `https://` target's certificate is checked and which client certificate is
        /// presented (`ca_file`, `client_cert_file`, `client_key_file`); `None`: the Mozilla
        /// roots, no client certificate.
        tls: Option<TlsSettings>,
    },
}

impl RelayTarget {
    /// `nats`, `rabbitmq`, `kafka` or `http`, as written in `target`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Nats { .. } => "nats",
            Self::RabbitMq { .. } => "rabbitmq",
            Self::Kafka { .. } => "kafka",
            Self::Http { .. } => "http",
        }
    }

    /// Whether `other` publishes to the same place: the same kind and URL (an HTTP target's
    /// `timeout` aside).
    pub(crate) fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Nats { url: a }, Self::Nats { url: b })
            | (Self::RabbitMq { url: a }, Self::RabbitMq { url: b }) => a == b,
            (Self::Http { url: a, .. }, Self::Http { url: b, .. }) => a == b,
            (Self::Kafka { brokers: a }, Self::Kafka { brokers: b }) => a == b,
            _ => false,
        }
    }

    /// The URL with any user and password replaced by `***` (a Kafka target's brokers, joined
    /// by `,`).
    pub fn display_url(&self) -> String {
        match self {
            Self::Kafka { brokers } => brokers.join(","),
            Self::Nats { url } | Self::RabbitMq { url } => redact(url.expose()),
            Self::Http { url, .. } => redact(url),
        }
    }
}

/// A configured outbox relay: `idem serve` publishes the `idem_outbox` rows of `database_url`
/// to `target`, marks them published after the target confirmed, backs off and parks failures
/// (docs/design.md C7). Several gateways may run the same relay on one PostgreSQL database: a row is
/// claimed by one relay at a time.
#[derive(Debug, Clone)]
pub struct OutboxRelay {
    /// Its name, in log lines and metrics.
    pub name: Name,
    /// The database holding `idem_outbox`: the application's (`database_url`, or the variable
    /// `database_url_env` names; default the gateway's own `database_url`). The application
    /// creates the table with idem's `Store::migrate`; the gateway never migrates it.
    pub database_url: Secret,
    /// Where rows are published.
    pub target: RelayTarget,
    /// Rows claimed and published per cycle (default 100, 1 to 10000).
    pub batch_size: u32,
    /// The longest wait between cycles while nothing is due (default 1s, 10ms to 1h): after
    /// an idle cycle the relay waits 10 ms (or `poll_interval` if shorter), doubling per idle
    /// cycle up to this; after a cycle that published, it goes on at once.
    pub poll_interval: Duration,
    /// How long a claimed row is held before another relay may claim it again (default 30s, 1s
    /// to 1h); it must cover a whole cycle, so for `http` it must exceed `timeout`.
    pub claim_ttl: Duration,
    /// Failed publishes after which a row is parked for `idem outbox requeue` (default 10;
    /// backoff 1s doubling up to 5m between them).
    pub max_attempts: u32,
}

impl OutboxRelay {
    /// The database URL with any user and password replaced by `***`, for logs and
    /// `idem check-config`.
    pub fn display_database_url(&self) -> String {
        redact(self.database_url.expose())
    }
}

/// Builds relay `raw`; `gateway_database` is the gateway's own database URL.
pub(super) fn build(
    raw: RawRelay,
    gateway_database: &str,
    secret: &SecretLookup<'_>,
) -> Result<OutboxRelay, ConfigError> {
    let relay_name = name("relay", "relay.name", raw.name.clone())?;
    let field_name = |field: &str| format!("relay {:?} {field}", relay_name.as_str());
    let owner = || format!("relay {:?}", relay_name.as_str());
    let either = |value: &Option<String>, var: &Option<String>, key: &str| match (value, var) {
        (Some(_), Some(var)) => Err(ConfigError::BadValue {
            field: field_name(&format!("{key}_env")),
            value: var.clone(),
            expected: format!("either {key} or {key}_env, not both"),
        }),
        (Some(value), None) => Ok(Some(Secret::new(value.clone()))),
        (None, Some(var)) => secret(owner(), SecretRef::Env(var)).map(Some),
        (None, None) => Ok(None),
    };
    let database_url = either(&raw.database_url, &raw.database_url_env, "database_url")?
        .unwrap_or_else(|| Secret::new(gateway_database));
    if database_url.is_loaded() && !super::database::holds_idem_tables(database_url.expose()) {
        return Err(ConfigError::BadValue {
            field: field_name("database_url"),
            value: redact(database_url.expose()),
            expected: "a sqlite://, postgres:// or mysql:// URL".into(),
        });
    }
    let url = either(&raw.url, &raw.url_env, "url")?;
    keys_of_other_targets(&raw, &field_name)?;
    let target = target(&raw, url, &field_name)?;
    let (batch_size, poll_interval) = pace(&raw, &field_name)?;
    let claim_ttl = claim_ttl(&raw, &target, &field_name)?;
    let max_attempts = raw.max_attempts.unwrap_or(DEFAULT_RELAY_MAX_ATTEMPTS);
    if max_attempts == 0 {
        return Err(number_out_of_range(
            &field_name("max_attempts"),
            0,
            "at least 1",
        ));
    }
    Ok(OutboxRelay {
        name: relay_name,
        database_url,
        target,
        batch_size,
        poll_interval,
        claim_ttl,
        max_attempts,
    })
}

/// Refuses a key of another kind of target: `timeout` and the TLS files are `http`'s,
/// `brokers` is `kafka`'s.
fn keys_of_other_targets(
    raw: &RawRelay,
    field_name: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    if raw.timeout.is_some() && raw.target != "http" {
        return Err(ConfigError::BadValue {
            field: field_name("timeout"),
            value: raw.timeout.clone().unwrap_or_default(),
            expected: "no timeout: it is a key of target = \"http\" relays (NATS, RabbitMQ and Kafka publishes wait for the broker's confirm)".into(),
        });
    }
    if raw.brokers.is_some() && raw.target != "kafka" {
        return Err(ConfigError::BadValue {
            field: field_name("brokers"),
            value: raw.brokers.clone().unwrap_or_default().join(","),
            expected:
                "no brokers: it is a key of target = \"kafka\" relays (the others take `url`)"
                    .into(),
        });
    }
    let tls_keys = [&raw.ca_file, &raw.client_cert_file, &raw.client_key_file];
    if raw.target != "http"
        && let Some((key, value)) = ["ca_file", "client_cert_file", "client_key_file"]
            .into_iter()
            .zip(tls_keys)
            .find_map(|(key, value)| Some((key, value.as_ref()?)))
    {
        return Err(ConfigError::BadValue {
            field: field_name(key),
            value: value.clone(),
            expected: format!(
                "no {key}: it is a key of target = \"http\" relays (give a NATS relay a tls:// URL, a RabbitMQ relay an amqps:// one)"
            ),
        });
    }
    Ok(())
}

/// `url_env` when the URL came from a variable, else `url`: the key an error names.
fn url_key(raw: &RawRelay) -> &'static str {
    if raw.url_env.is_some() {
        "url_env"
    } else {
        "url"
    }
}

/// The target of `raw` (`target`, with `url`, the URL read from `url` or `url_env`).
fn target(
    raw: &RawRelay,
    url: Option<Secret>,
    field_name: &dyn Fn(&str) -> String,
) -> Result<RelayTarget, ConfigError> {
    let check_scheme = |url: &Secret, schemes: &[&str]| {
        if !url.is_loaded() || schemes.iter().any(|s| url.expose().starts_with(s)) {
            Ok(())
        } else {
            Err(ConfigError::BadValue {
                field: field_name(url_key(raw)),
                value: redact(url.expose()),
                expected: format!("a URL starting with {}", schemes.join(" or ")),
            })
        }
    };
    Ok(match raw.target.as_str() {
        "nats" => {
            let url = url.unwrap_or_else(|| Secret::new(DEFAULT_NATS_URL));
            check_scheme(&url, &["nats://", "tls://"])?;
            RelayTarget::Nats { url }
        }
        "rabbitmq" => {
            let url = url.unwrap_or_else(|| Secret::new(DEFAULT_AMQP_URL));
            check_scheme(&url, &["amqp://", "amqps://"])?;
            RelayTarget::RabbitMq { url }
        }
        "kafka" => {
            if url.is_some() {
                return Err(ConfigError::BadValue {
                    field: field_name(url_key(raw)),
                    // Not the URL itself: it may hold a password.
                    value: "a URL, not shown".into(),
                    expected: "no url: a target = \"kafka\" relay takes `brokers`, such as [\"kafka-1:9092\"]".into(),
                });
            }
            RelayTarget::Kafka {
                brokers: super::broker::bootstrap_brokers(
                    raw.brokers.as_deref(),
                    &field_name("brokers"),
                )?,
            }
        }
        "http" => http(raw, url, field_name)?,
        other => {
            return Err(ConfigError::BadValue {
                field: field_name("target"),
                value: other.into(),
                expected: "\"nats\", \"rabbitmq\", \"kafka\" or \"http\"".into(),
            });
        }
    })
}

/// An `http` target: its base URL (required), TLS files and `timeout`.
fn http(
    raw: &RawRelay,
    url: Option<Secret>,
    field_name: &dyn Fn(&str) -> String,
) -> Result<RelayTarget, ConfigError> {
    let Some(url) = url else {
        return Err(ConfigError::BadValue {
            field: field_name("url"),
            value: String::new(),
            expected: "the base URL rows' paths are joined to, such as \"http://127.0.0.1:3000\""
                .into(),
        });
    };
    let tls_keys = TlsKeys {
        ca_file: raw.ca_file.clone(),
        client_cert_file: raw.client_cert_file.clone(),
        client_key_file: raw.client_key_file.clone(),
    };
    http_target::check_url(
        field_name,
        url_key(raw),
        url.is_loaded().then(|| url.expose()),
        &|| redact(url.expose()),
        &tls_keys,
    )?;
    let (tls, timeout) = http_target::tls_and_timeout(
        field_name,
        tls_keys,
        raw.timeout.as_deref(),
        &TimeoutBounds {
            default: DEFAULT_RELAY_TIMEOUT,
            min: MIN_TIMEOUT,
            max: MAX_RELAY_TIMEOUT,
            expected: "between 100ms and 30m (claim_ttl, at most 1h, must exceed it)",
        },
    )?;
    Ok(RelayTarget::Http {
        url: url.expose().to_owned(),
        timeout,
        tls,
    })
}

/// `batch_size` and `poll_interval`.
fn pace(
    raw: &RawRelay,
    field_name: &dyn Fn(&str) -> String,
) -> Result<(u32, Duration), ConfigError> {
    let batch_size = raw.batch_size.unwrap_or(DEFAULT_RELAY_BATCH_SIZE);
    if !(1..=MAX_RELAY_BATCH_SIZE).contains(&batch_size) {
        return Err(number_out_of_range(
            &field_name("batch_size"),
            batch_size as u64,
            "between 1 and 10000",
        ));
    }
    let poll_interval = match &raw.poll_interval {
        Some(text) => {
            let d = duration::parse(&field_name("poll_interval"), text)?;
            if !(MIN_RELAY_POLL_INTERVAL..=MAX_RELAY_POLL_INTERVAL).contains(&d) {
                return Err(out_of_range(
                    &field_name("poll_interval"),
                    text,
                    "between 10ms and 1h",
                ));
            }
            d
        }
        None => DEFAULT_RELAY_POLL_INTERVAL,
    };
    Ok((batch_size, poll_interval))
}

/// `claim_ttl`, which must outlive an HTTP target's `timeout`.
fn claim_ttl(
    raw: &RawRelay,
    target: &RelayTarget,
    field_name: &dyn Fn(&str) -> String,
) -> Result<Duration, ConfigError> {
    let claim_ttl = match &raw.claim_ttl {
        Some(text) => {
            let d = duration::parse(&field_name("claim_ttl"), text)?;
            if !(MIN_RELAY_CLAIM_TTL..=MAX_RELAY_CLAIM_TTL).contains(&d) {
                return Err(out_of_range(
                    &field_name("claim_ttl"),
                    text,
                    "between 1s and 1h",
                ));
            }
            d
        }
        None => DEFAULT_RELAY_CLAIM_TTL,
    };
    let RelayTarget::Http { timeout, .. } = target else {
        return Ok(claim_ttl);
    };
    if claim_ttl > *timeout {
        return Ok(claim_ttl);
    }
    let timeout = humantime::format_duration(*timeout);
    let why = "a claim must outlive the requests of its cycle, or another relay publishes the same rows meanwhile";
    let fix = format!("set claim_ttl between {timeout} and 1h");
    // Name the key the user wrote: a default claim_ttl is not theirs to find.
    Err(match &raw.claim_ttl {
        Some(text) => out_of_range(
            &field_name("claim_ttl"),
            text,
            &format!("more than timeout ({timeout}): {why}; {fix}"),
        ),
        None => out_of_range(
            &field_name("timeout"),
            raw.timeout.as_deref().unwrap_or_default(),
            &format!(
                "less than claim_ttl, which is {} by default: {why}; {fix}",
                humantime::format_duration(claim_ttl)
            ),
        ),
    })
}
