//! The gateway's configuration: a TOML file (see the crate documentation for its shape), checked
//! once at start. Everything that could make a source accept what it should refuse is an error
//! here, so the gateway fails closed: an unknown kind, a missing secret, a secret of the wrong
//! shape, a retention shorter than the sender's redelivery horizon (DESIGN.md C9).

mod broker;
mod duration;
mod raw;
mod relay;

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderName;
use idem_core::{Name, RetentionPolicy, horizon};
use idem_http::verify::{self, Encoding, Verifier};
use serde_json_path::JsonPath;

use crate::ingest::extract::{EntityType, Field, Fields, VersionKind};
use raw::{RawConfig, RawDestination, RawField, RawRoute, RawSource};

pub use broker::redact as redact_url;
pub use broker::{Broker, DEFAULT_AMQP_URL, DEFAULT_NATS_URL, NatsSource, RabbitMqSource};
pub use relay::{
    DEFAULT_RELAY_BATCH_SIZE, DEFAULT_RELAY_CLAIM_TTL, DEFAULT_RELAY_MAX_ATTEMPTS,
    DEFAULT_RELAY_POLL_INTERVAL, DEFAULT_RELAY_TIMEOUT, OutboxRelay, RelayTarget,
};

/// Where the gateway listens without a configuration.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The database without a configuration: SQLite in `./idem-data`.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./idem-data/idem.db";
/// How long keys are kept without a configuration: 30 days, past every sender's horizon.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The largest body accepted without a configuration: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// A destination's request timeout without a configuration.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest timeout a destination may have.
pub(crate) const MIN_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest timeout a destination may have.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// How many deliveries a destination has in flight at most, without a configuration.
pub(crate) const DEFAULT_CONCURRENCY: usize = 8;
/// The most deliveries a destination may have in flight at once.
pub(crate) const MAX_CONCURRENCY: usize = 1024;
/// The longest delay a `Retry-After` may ask for, without a configuration.
pub(crate) const DEFAULT_RETRY_AFTER_CAP: Duration = Duration::from_secs(3600);
/// The longest delay of a retry schedule step or of `retry_after_cap`: 7 days.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(7 * 86_400);
/// How often dispatchers look for due deliveries when nothing woke them.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest poll interval.
pub(crate) const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The smallest `max_body_bytes`: 1 KiB.
pub(crate) const MIN_MAX_BODY_BYTES: usize = 1024;

/// A destination's retry delays without a configuration: then the dead letter.
pub(crate) fn default_retry_schedule() -> Vec<Duration> {
    [5, 30, 300, 1800, 7200, 28_800, 86_400]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}

/// A configuration that cannot start a gateway. Each variant names what is wrong and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read configuration {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has fields of the wrong type or unknown fields.
    #[error("configuration is not valid: {0}")]
    Toml(#[from] toml::de::Error),
    /// A duration field is not a duration such as `30d`, `5s` or `250ms`.
    #[error(
        "{field} = {value:?} is not a duration; expected for example \"30d\", \"5s\" or \"250ms\""
    )]
    BadDuration {
        /// The field.
        field: String,
        /// The value.
        value: String,
    },
    /// A field holds a value outside its allowed set or shape.
    #[error("{field} = {value:?} is not valid; expected {expected}")]
    BadValue {
        /// The field.
        field: String,
        /// The value.
        value: String,
        /// What is allowed.
        expected: String,
    },
    /// A source's kind is not one the gateway can verify.
    #[error(
        "source {source_name:?} has unknown kind {kind:?}; expected stripe, github, shopify, standard-webhooks, generic, nats or rabbitmq"
    )]
    UnknownKind {
        /// The source.
        source_name: String,
        /// The kind given.
        kind: String,
    },
    /// A source has a key its kind does not take (a `queue` on a Stripe source, `secrets_env` on
    /// a NATS source): it would do nothing, so it is refused rather than ignored.
    #[error("source {source_name:?} (kind {kind}) cannot have `{key}`: {reason}")]
    MisplacedKey {
        /// The source.
        source_name: String,
        /// Its kind.
        kind: SourceKind,
        /// The key.
        key: &'static str,
        /// Which kinds take it.
        reason: &'static str,
    },
    /// A secret's environment variable is not set (or empty): the source would have no key.
    #[error("{owner} needs its secret in environment variable {var}, which is not set")]
    MissingSecret {
        /// `source "stripe"`, `destination "app"` or `admin`.
        owner: String,
        /// The variable.
        var: String,
    },
    /// A source's secrets do not make a working verifier.
    #[error("source {source_name:?}: {error}")]
    Verifier {
        /// The source.
        source_name: String,
        /// What is wrong with the key.
        error: verify::ConfigError,
    },
    /// The retention is shorter than a source's redelivery horizon (DESIGN.md C9).
    #[error("source {source_name:?} ({kind}): {error}")]
    RetentionTooShort {
        /// The source.
        source_name: String,
        /// Its kind.
        kind: SourceKind,
        /// The error naming both durations in seconds.
        error: idem_core::Error,
    },
    /// Two sources, destinations, routes or relays share a name, or two routes join the same source and
    /// destination.
    #[error("{what} {name:?} is configured twice")]
    Duplicate {
        /// `source`, `destination`, `route` or `relay`.
        what: &'static str,
        /// The name.
        name: String,
    },
    /// Two relays publish the `idem_outbox` rows of one database to different targets:
    /// `idem_outbox` has no column saying which relay a row is for, so each relay would claim
    /// and publish rows meant for the other. Relays sharing a database must have the same
    /// target (same kind and URL); several such relays are fine (they share the rows).
    #[error(
        "relays {first:?} and {second:?} both publish the idem_outbox rows of {database}, to different targets ({first_target} and {second_target}): idem_outbox has no column naming a row's relay, so each would publish the other's rows; give them the same target, or separate databases"
    )]
    RelayTargetConflict {
        /// The relay configured first.
        first: String,
        /// Its target: kind and URL, without credentials.
        first_target: String,
        /// The relay configured later on the same database.
        second: String,
        /// Its target: kind and URL, without credentials.
        second_target: String,
        /// The database, without credentials.
        database: String,
    },
    /// A route names a source or destination that is not configured.
    #[error("route {route:?} names {what} {name:?}, which is not configured")]
    UnknownReference {
        /// The route.
        route: String,
        /// `source` or `destination`.
        what: &'static str,
        /// The missing name.
        name: String,
    },
}

/// The senders the gateway knows how to verify and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceKind {
    /// Stripe: `Stripe-Signature`, event id `$.id`, entity `data.object`, version `$.created`.
    Stripe,
    /// GitHub: `X-Hub-Signature-256`, event id `X-GitHub-Delivery`, type `X-GitHub-Event`.
    GitHub,
    /// Shopify: `X-Shopify-Hmac-Sha256`, event id `X-Shopify-Event-Id` (else
    /// `X-Shopify-Webhook-Id`), type `X-Shopify-Topic`.
    Shopify,
    /// Standard Webhooks: `webhook-signature` (v1, v1a), event id `webhook-id`, type `$.type`.
    StandardWebhooks,
    /// A shared-secret HMAC of the body in a configured header; fields as configured.
    Generic,
    /// NATS JetStream messages from a stream (no signature: the broker's own authentication
    /// stands for it); event id `Nats-Msg-Id`, type the message's subject.
    Nats,
    /// RabbitMQ messages from a queue (no signature); event id the AMQP `message_id`
    /// property, type the AMQP `type` property, else the routing key.
    RabbitMq,
}

impl SourceKind {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "stripe" => Self::Stripe,
            "github" => Self::GitHub,
            "shopify" => Self::Shopify,
            "standard-webhooks" => Self::StandardWebhooks,
            "generic" => Self::Generic,
            "nats" => Self::Nats,
            "rabbitmq" => Self::RabbitMq,
            _ => return None,
        })
    }

    /// The kind as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::GitHub => "github",
            Self::Shopify => "shopify",
            Self::StandardWebhooks => "standard-webhooks",
            Self::Generic => "generic",
            Self::Nats => "nats",
            Self::RabbitMq => "rabbitmq",
        }
    }

    /// How long after the first delivery this sender may deliver an event again: the shortest
    /// retention allowed. Generic senders are held to 3 days, like the named ones; so are
    /// brokers, whose horizon is really the stream's or queue's own retention (a JetStream
    /// consumer reset to an older sequence delivers every message again): keep `retention`
    /// at least that long.
    pub fn redelivery_horizon(self) -> Duration {
        match self {
            Self::Stripe => horizon::STRIPE,
            Self::GitHub => horizon::GITHUB,
            Self::Shopify => horizon::SHOPIFY,
            Self::StandardWebhooks | Self::Generic | Self::Nats | Self::RabbitMq => {
                horizon::STANDARD_WEBHOOKS
            }
        }
    }

    /// Whether messages of this kind come from a broker (`nats`, `rabbitmq`) rather than
    /// `POST /webhooks/{source}`.
    pub fn is_broker(self) -> bool {
        matches!(self, Self::Nats | Self::RabbitMq)
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A secret read from the environment; never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A configured sender.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name in `POST /webhooks/{name}` and in every dedup key (`{name}:{event id}`).
    pub name: Name,
    /// The sender's scheme.
    pub kind: SourceKind,
    pub(crate) intake: Intake,
    pub(crate) fields: Fields,
}

/// How a source's events arrive.
#[derive(Debug, Clone)]
pub(crate) enum Intake {
    /// `POST /webhooks/{source}`, checked by this verifier.
    Webhook(Arc<dyn Verifier>),
    /// Messages from a broker.
    Broker(Broker),
}

impl Source {
    /// Where a broker source's messages come from; `None` for a webhook source.
    pub fn broker(&self) -> Option<&Broker> {
        match &self.intake {
            Intake::Broker(broker) => Some(broker),
            Intake::Webhook(_) => None,
        }
    }
}

/// Whether a route drops events older than their entity's newest (C5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ordering {
    /// Staleness is judged per (route, entity) at ingest; stale events are never sent; one
    /// delivery per entity in flight, in version order. The default.
    DropStale,
    /// Every event is sent (accumulating events, ledgers), in no particular order.
    None,
}

impl Ordering {
    /// The ordering as written in a route's `ordering`: `drop-stale` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DropStale => "drop-stale",
            Self::None => "none",
        }
    }
}

/// A configured receiving application.
#[derive(Debug, Clone)]
pub struct Destination {
    /// Its name.
    pub name: Name,
    /// Where events are POSTed (`http://` only: TLS is not built in).
    pub url: String,
    /// How long one attempt may take, connection included (default 10s; 100ms to 1h).
    pub timeout: Duration,
    /// The delays between attempts; after the last one fails, the delivery is a dead letter
    /// (default 5s, 30s, 5m, 30m, 2h, 8h, 24h; each step at most 7 days).
    pub retry_schedule: Vec<Duration>,
    /// The longest delay a `Retry-After` header may ask for (default 1h, at most 7 days).
    pub retry_after_cap: Duration,
    /// The `whsec_` secret forwarded requests are signed with (Standard Webhooks v1).
    pub signing_secret: Secret,
    /// At most this many deliveries in flight at once (default 8; 1 to 1024).
    pub concurrency: usize,
}

/// Which events of a source go to a destination.
#[derive(Debug, Clone)]
pub struct Route {
    /// Its name: the version guard's consumer for `drop-stale` (default `{source}.{destination}`).
    pub name: Name,
    /// The source.
    pub source: Name,
    /// The destination.
    pub destination: Name,
    /// Event type patterns (`invoice.*`, `customer.created`); empty means every event.
    pub event_types: Vec<String>,
    /// Staleness handling.
    pub ordering: Ordering,
}

impl Route {
    /// Whether an event of `event_type` goes this way: an exact match, or a prefix match for a
    /// pattern ending in `*`. An event without a type passes only a route without filter.
    pub fn matches(&self, event_type: Option<&str>) -> bool {
        if self.event_types.is_empty() {
            return true;
        }
        let Some(ty) = event_type else { return false };
        self.event_types
            .iter()
            .any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => ty.starts_with(prefix),
                None => ty == pattern,
            })
    }
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// `sqlite://path` or `postgres://…`.
    pub database_url: String,
    /// How long inbox keys and delivered events are kept.
    pub retention: Duration,
    /// How long raw bodies are kept, if shorter than `retention` (personal data).
    pub body_retention: Option<Duration>,
    /// The largest body accepted, in bytes (413 beyond; default 1 MiB, at least 1 KiB).
    pub max_body_bytes: usize,
    /// Whether concurrent requests share one transaction (on by default; off for comparison).
    pub group_commit: bool,
    /// How often dispatchers look for due work when nothing woke them (default 1s, at least
    /// 10ms).
    pub poll_interval: Duration,
    /// The bearer token of `/admin`, read from the environment variable `admin_token_env`
    /// names; the admin API is off without one.
    pub admin_token: Option<Secret>,
    /// The senders.
    pub sources: Vec<Source>,
    /// The receiving applications.
    pub destinations: Vec<Destination>,
    /// Which events go where.
    pub routes: Vec<Route>,
    /// The outbox relays `idem serve` runs.
    pub relays: Vec<OutboxRelay>,
}

impl Config {
    /// The built-in defaults: [`DEFAULT_LISTEN`], [`DEFAULT_DATABASE_URL`],
    /// [`DEFAULT_RETENTION`], no sources.
    pub fn defaults() -> Self {
        let empty = |_: &str| None;
        Self::from_raw(RawConfig::default(), &empty).expect("the defaults are valid")
    }

    /// Reads and checks the file at `path`, taking secrets from the process environment.
    ///
    /// # Errors
    /// [`ConfigError::Read`] when the file cannot be read; otherwise as
    /// [`from_toml`](Self::from_toml).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text, &|var| std::env::var(var).ok())
    }

    /// Checks a configuration given as TOML text, reading each secret with `env(variable name)`
    /// (`None` or an empty value: not set).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the first problem found.
    pub fn from_toml(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::from_raw(toml::from_str(text)?, env)
    }

    fn from_raw(raw: RawConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let secret = |owner: String, var: &str| match env(var) {
            Some(value) if !value.is_empty() => Ok(Secret(value)),
            _ => Err(ConfigError::MissingSecret {
                owner,
                var: var.to_owned(),
            }),
        };
        let listen_text = raw.listen.as_deref().unwrap_or(DEFAULT_LISTEN);
        let listen = listen_text.parse().map_err(|_| ConfigError::BadValue {
            field: "listen".into(),
            value: listen_text.into(),
            expected: "an address and port such as \"127.0.0.1:8080\"".into(),
        })?;
        let database_url = raw
            .database_url
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned());
        if crate::store::DatabaseKind::of(&database_url).is_none() {
            return Err(ConfigError::BadValue {
                field: "database_url".into(),
                value: redact_url(&database_url),
                expected: "a sqlite:// or postgres:// URL".into(),
            });
        }
        let retention = match &raw.retention {
            Some(text) => duration::parse("retention", text)?,
            None => DEFAULT_RETENTION,
        };
        let body_retention = raw
            .body_retention
            .as_deref()
            .map(|text| duration::parse("body_retention", text))
            .transpose()?;
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
        if let (Some(body), Some(text)) = (body_retention, &raw.body_retention)
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
            return Err(out_of_range(
                "max_body_bytes",
                &max_body_bytes.to_string(),
                "at least 1024 (1 KiB)",
            ));
        }
        let admin_token = raw
            .admin_token_env
            .as_deref()
            .map(|var| secret("admin".into(), var))
            .transpose()?;

        let mut sources = Vec::new();
        for raw_source in raw.sources {
            let source = build_source(raw_source, retention, &secret)?;
            if sources.iter().any(|s: &Source| s.name == source.name) {
                return Err(duplicate("source", &source.name));
            }
            sources.push(source);
        }
        let mut destinations = Vec::new();
        for raw_destination in raw.destinations {
            let destination = build_destination(raw_destination, &secret)?;
            if destinations
                .iter()
                .any(|d: &Destination| d.name == destination.name)
            {
                return Err(duplicate("destination", &destination.name));
            }
            destinations.push(destination);
        }
        let mut routes = Vec::new();
        let mut pairs = HashSet::new();
        for raw_route in raw.routes {
            let route = build_route(raw_route, &sources, &destinations)?;
            if routes.iter().any(|r: &Route| r.name == route.name) {
                return Err(duplicate("route", &route.name));
            }
            if !pairs.insert((route.source.clone(), route.destination.clone())) {
                return Err(duplicate("route", &route.name));
            }
            routes.push(route);
        }
        let mut relays = Vec::new();
        for raw_relay in raw.relays {
            let relay = relay::build(raw_relay, &database_url, &secret)?;
            if relays.iter().any(|r: &OutboxRelay| r.name == relay.name) {
                return Err(duplicate("relay", &relay.name));
            }
            if let Some(other) = relays.iter().find(|r: &&OutboxRelay| {
                relay::same_database(r.database_url.expose(), relay.database_url.expose())
                    && !r.target.same_as(&relay.target)
            }) {
                let describe =
                    |r: &OutboxRelay| format!("{} at {}", r.target.kind(), r.target.display_url());
                return Err(ConfigError::RelayTargetConflict {
                    first: other.name.to_string(),
                    first_target: describe(other),
                    second: relay.name.to_string(),
                    second_target: describe(&relay),
                    database: if other.display_database_url() == relay.display_database_url() {
                        relay.display_database_url()
                    } else {
                        format!(
                            "{} (the database of {} too)",
                            relay.display_database_url(),
                            other.display_database_url()
                        )
                    },
                });
            }
            relays.push(relay);
        }
        Ok(Self {
            listen,
            database_url,
            retention,
            body_retention,
            max_body_bytes,
            group_commit: raw.group_commit.unwrap_or(true),
            poll_interval,
            admin_token,
            sources,
            destinations,
            routes,
            relays,
        })
    }

    /// The source called `name`.
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.name.as_str() == name)
    }
}

fn out_of_range(field: &str, value: &str, expected: &str) -> ConfigError {
    ConfigError::BadValue {
        field: field.into(),
        value: value.into(),
        expected: expected.into(),
    }
}

fn duplicate(what: &'static str, name: &Name) -> ConfigError {
    ConfigError::Duplicate {
        what,
        name: name.to_string(),
    }
}

fn name(what: &'static str, field: &str, value: String) -> Result<Name, ConfigError> {
    Name::new(what, value.clone()).map_err(|e| ConfigError::BadValue {
        field: field.into(),
        value,
        expected: e.to_string(),
    })
}

type SecretLookup<'a> = dyn Fn(String, &str) -> Result<Secret, ConfigError> + 'a;

fn build_source(
    raw: RawSource,
    retention: Duration,
    secret: &SecretLookup<'_>,
) -> Result<Source, ConfigError> {
    let source_name = name("source", "source.name", raw.name.clone())?;
    let kind = SourceKind::parse(&raw.kind).ok_or_else(|| ConfigError::UnknownKind {
        source_name: source_name.to_string(),
        kind: raw.kind.clone(),
    })?;
    // C9: a key deleted before the sender stops redelivering lets the event through twice.
    RetentionPolicy::new(retention, kind.redelivery_horizon()).map_err(|error| {
        ConfigError::RetentionTooShort {
            source_name: source_name.to_string(),
            kind,
            error,
        }
    })?;
    let field_name = |field: &str| format!("source {:?} {field}", source_name.as_str());
    broker::refuse_foreign_keys(&raw, kind, source_name.as_str())?;
    let mut secrets = Vec::new();
    for var in &raw.secrets_env {
        secrets.push(secret(format!("source {:?}", source_name.as_str()), var)?);
    }
    let secrets: Vec<&str> = secrets.iter().map(Secret::expose).collect();
    let verifier_error = |error| ConfigError::Verifier {
        source_name: source_name.to_string(),
        error,
    };
    let webhook = |verifier: Arc<dyn Verifier>| Intake::Webhook(verifier);
    let intake = match kind {
        SourceKind::Stripe => webhook(Arc::new(
            verify::stripe::StripeVerifier::new(&secrets).map_err(verifier_error)?,
        )),
        SourceKind::GitHub => webhook(Arc::new(
            verify::github::GitHubVerifier::new(&secrets).map_err(verifier_error)?,
        )),
        SourceKind::Shopify => webhook(Arc::new(
            verify::shopify::ShopifyVerifier::new(&secrets).map_err(verifier_error)?,
        )),
        SourceKind::StandardWebhooks => webhook(Arc::new(
            verify::standard_webhooks::StandardWebhooksVerifier::new(&secrets)
                .map_err(verifier_error)?,
        )),
        SourceKind::Nats | SourceKind::RabbitMq => Intake::Broker(broker::build(
            &raw,
            kind,
            source_name.as_str(),
            secret,
            &field_name,
        )?),
        SourceKind::Generic => {
            let header = raw
                .signature_header
                .as_deref()
                .ok_or_else(|| ConfigError::BadValue {
                    field: field_name("signature_header"),
                    value: String::new(),
                    expected: "the header that carries the HMAC, such as \"X-Signature\"".into(),
                })?;
            let encoding = match raw.signature_encoding.as_deref().unwrap_or("hex") {
                "hex" => Encoding::Hex,
                "base64" => Encoding::Base64,
                other => {
                    return Err(ConfigError::BadValue {
                        field: field_name("signature_encoding"),
                        value: other.into(),
                        expected: "\"hex\" or \"base64\"".into(),
                    });
                }
            };
            let verifier =
                verify::generic_hmac::GenericHmacVerifier::new(header, encoding, &secrets)
                    .map_err(verifier_error)?;
            webhook(Arc::new(match raw.signature_prefix.as_deref() {
                Some(prefix) => verifier.with_prefix(prefix),
                None => verifier,
            }))
        }
    };
    let defaults = kind_defaults(kind);
    let id = match raw.id {
        Some(f) => field(&field_name("id"), f)?,
        None => defaults.id.ok_or_else(|| ConfigError::BadValue {
            field: field_name("id"),
            value: String::new(),
            expected:
                "where the event id is, such as { header = \"X-Event-Id\" } or { json = \"$.id\" }"
                    .into(),
        })?,
    };
    let event_type = match raw.event_type {
        Some(f) => Some(field(&field_name("type"), f)?),
        None => defaults.event_type,
    };
    let entity = match raw.entity {
        Some(f) => {
            let ty = match raw.entity_type {
                Some(ty) => name("aggregate type", &field_name("entity_type"), ty)?,
                None => source_name.clone(),
            };
            Some((EntityType::Fixed(ty), field(&field_name("entity"), f)?))
        }
        None => defaults.entity,
    };
    let version = match raw.version {
        Some(f) => {
            let kind = match f.value_type.as_deref().unwrap_or("integer") {
                "integer" => VersionKind::Sequence,
                "timestamp" => VersionKind::Timestamp,
                other => {
                    return Err(ConfigError::BadValue {
                        field: field_name("version.type"),
                        value: other.into(),
                        expected: "\"integer\" (a dense sequence) or \"timestamp\"".into(),
                    });
                }
            };
            Some((field(&field_name("version"), f)?, kind))
        }
        None => defaults.version,
    };
    if version.is_some() && entity.is_none() {
        return Err(ConfigError::BadValue {
            field: field_name("entity"),
            value: String::new(),
            expected: "an entity where the version's entity is read, such as { json = \"$.order.id\" }: a version is compared per entity, so `version` needs `entity`".into(),
        });
    }
    Ok(Source {
        name: source_name,
        kind,
        intake,
        fields: Fields {
            id,
            event_type,
            entity,
            version,
        },
    })
}

/// What each kind reads by default; `id` is `None` only for generic sources.
struct KindDefaults {
    id: Option<Field>,
    event_type: Option<Field>,
    entity: Option<(EntityType, Field)>,
    version: Option<(Field, VersionKind)>,
}

fn kind_defaults(kind: SourceKind) -> KindDefaults {
    let header = |name: &'static str| Field::Header(HeaderName::from_static(name));
    let json = |path: &'static str| {
        Field::Json(
            JsonPath::parse(path).expect("built-in JSON paths parse"),
            path.to_owned(),
        )
    };
    let none = KindDefaults {
        id: None,
        event_type: None,
        entity: None,
        version: None,
    };
    match kind {
        SourceKind::Stripe => KindDefaults {
            id: Some(json("$.id")),
            event_type: Some(json("$.type")),
            entity: Some((
                EntityType::Read(json("$.data.object.object")),
                json("$.data.object.id"),
            )),
            version: Some((json("$.created"), VersionKind::Timestamp)),
        },
        SourceKind::GitHub => KindDefaults {
            id: Some(header("x-github-delivery")),
            event_type: Some(header("x-github-event")),
            ..none
        },
        SourceKind::Shopify => KindDefaults {
            id: Some(Field::FirstOf(vec![
                header("x-shopify-event-id"),
                header("x-shopify-webhook-id"),
            ])),
            event_type: Some(header("x-shopify-topic")),
            ..none
        },
        SourceKind::StandardWebhooks => KindDefaults {
            id: Some(header("webhook-id")),
            event_type: Some(json("$.type")),
            ..none
        },
        SourceKind::Generic => none,
        // The broker's message id is the event id: JetStream's duplicate window and the
        // publisher's own retries keep it across every redelivery of one event.
        SourceKind::Nats => KindDefaults {
            id: Some(header(crate::broker::NATS_MSG_ID)),
            event_type: Some(header(crate::broker::NATS_SUBJECT)),
            ..none
        },
        SourceKind::RabbitMq => KindDefaults {
            id: Some(header(crate::broker::AMQP_MESSAGE_ID)),
            event_type: Some(Field::FirstOf(vec![
                header(crate::broker::AMQP_TYPE),
                header(crate::broker::AMQP_ROUTING_KEY),
            ])),
            ..none
        },
    }
}

fn field(name: &str, raw: RawField) -> Result<Field, ConfigError> {
    match (raw.header, raw.json) {
        (Some(header), None) => HeaderName::from_bytes(header.as_bytes())
            .map(Field::Header)
            .map_err(|_| ConfigError::BadValue {
                field: name.into(),
                value: header,
                expected: "an HTTP header name".into(),
            }),
        (None, Some(path)) => JsonPath::parse(&path)
            .map(|p| Field::Json(p, path.clone()))
            .map_err(|e| ConfigError::BadValue {
                field: name.into(),
                value: path,
                expected: format!("a JSON path such as \"$.event.id\" ({e})"),
            }),
        _ => Err(ConfigError::BadValue {
            field: name.into(),
            value: String::new(),
            expected: "exactly one of header = \"…\" or json = \"$.…\"".into(),
        }),
    }
}

fn build_destination(
    raw: RawDestination,
    secret: &SecretLookup<'_>,
) -> Result<Destination, ConfigError> {
    let dest_name = name("destination", "destination.name", raw.name)?;
    let field_name = |field: &str| format!("destination {:?} {field}", dest_name.as_str());
    // TLS is not built in (see the crate docs): refusing https here beats failing every attempt.
    if !raw.url.starts_with("http://") || reqwest::Url::parse(&raw.url).is_err() {
        return Err(ConfigError::BadValue {
            field: field_name("url"),
            value: raw.url,
            expected: "an http:// URL (put a TLS-terminating proxy in front of https endpoints)"
                .into(),
        });
    }
    let timeout = match &raw.timeout {
        Some(text) => duration::parse(&field_name("timeout"), text)?,
        None => DEFAULT_TIMEOUT,
    };
    // The delivery's lease must outlive an attempt and stay within idem's longest ttl.
    if !(MIN_TIMEOUT..=MAX_TIMEOUT).contains(&timeout) {
        return Err(out_of_range(
            &field_name("timeout"),
            raw.timeout.as_deref().unwrap_or_default(),
            "between 100ms and 1h",
        ));
    }
    // Longer delays would overflow the clock or hold an entity for ever (DESIGN.md C11).
    let retry_delay = |field: &str, text: &str| {
        let d = duration::parse(&field_name(field), text)?;
        if d > MAX_RETRY_DELAY {
            return Err(out_of_range(&field_name(field), text, "at most 7d"));
        }
        Ok(d)
    };
    let retry_schedule = match &raw.retry_schedule {
        Some(list) => list
            .iter()
            .map(|text| retry_delay("retry_schedule", text))
            .collect::<Result<_, _>>()?,
        None => default_retry_schedule(),
    };
    let retry_after_cap = match &raw.retry_after_cap {
        Some(text) => retry_delay("retry_after_cap", text)?,
        None => DEFAULT_RETRY_AFTER_CAP,
    };
    let signing_secret = secret(
        format!("destination {:?}", dest_name.as_str()),
        &raw.signing_secret_env,
    )?;
    // Fail at start, not at the first delivery, when the secret cannot sign.
    verify::standard_webhooks::sign(signing_secret.expose(), "msg_check", 0, b"").map_err(
        |error| ConfigError::BadValue {
            field: field_name("signing_secret_env"),
            value: raw.signing_secret_env.clone(),
            expected: format!("a variable holding a Standard Webhooks secret: {error}"),
        },
    )?;
    let concurrency = raw.concurrency.unwrap_or(DEFAULT_CONCURRENCY);
    if !(1..=MAX_CONCURRENCY).contains(&concurrency) {
        return Err(out_of_range(
            &field_name("concurrency"),
            &concurrency.to_string(),
            "between 1 and 1024",
        ));
    }
    Ok(Destination {
        name: dest_name,
        url: raw.url,
        timeout,
        retry_schedule,
        retry_after_cap,
        signing_secret,
        concurrency,
    })
}

fn build_route(
    raw: RawRoute,
    sources: &[Source],
    destinations: &[Destination],
) -> Result<Route, ConfigError> {
    let route_name = raw
        .name
        .unwrap_or_else(|| format!("{}.{}", raw.source, raw.destination));
    let route_name = name("route", "route.name", route_name)?;
    let source = sources
        .iter()
        .find(|s| s.name.as_str() == raw.source)
        .ok_or_else(|| ConfigError::UnknownReference {
            route: route_name.to_string(),
            what: "source",
            name: raw.source.clone(),
        })?;
    let destination = destinations
        .iter()
        .find(|d| d.name.as_str() == raw.destination)
        .ok_or_else(|| ConfigError::UnknownReference {
            route: route_name.to_string(),
            what: "destination",
            name: raw.destination.clone(),
        })?;
    let ordering = match raw.ordering.as_deref().unwrap_or("drop-stale") {
        "drop-stale" => Ordering::DropStale,
        "none" => Ordering::None,
        other => {
            return Err(ConfigError::BadValue {
                field: format!("route {:?} ordering", route_name.as_str()),
                value: other.into(),
                expected: "\"drop-stale\" or \"none\"".into(),
            });
        }
    };
    for pattern in &raw.event_types {
        let prefix = pattern.strip_suffix('*').unwrap_or(pattern);
        if pattern.is_empty() || prefix.contains('*') {
            return Err(ConfigError::BadValue {
                field: format!("route {:?} event_types", route_name.as_str()),
                value: pattern.clone(),
                expected: "an exact event type (\"invoice.paid\") or a prefix with a single trailing * (\"invoice.*\")".into(),
            });
        }
    }
    Ok(Route {
        name: route_name,
        source: source.name.clone(),
        destination: destination.name.clone(),
        event_types: raw.event_types,
        ordering,
    })
}
