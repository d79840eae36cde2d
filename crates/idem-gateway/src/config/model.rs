//! The checked configuration: sources, destinations, routes and the gateway's own settings.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use idem_core::{Entity, EventId, Name, Version};
use idem_http::verify::Verifier;

use super::broker::Broker;
use super::destination_target::DestinationTarget;
use super::health::{AlertConditions, AlertSink, Breaker};
use super::kind::SourceKind;
use super::rate_limit::RateLimit;
use super::relay::OutboxRelay;
use super::secret::Secret;
use crate::model::fields::{ExtractError, Fields};
use crate::model::health::Thresholds;
use crate::model::route_filter::RouteFilter;
use crate::tls::TlsSettings;

/// A configured sender.
#[derive(Debug, Clone)]
pub struct Source {
    /// The name in `POST /webhooks/{name}`, in `Idem-Source` and in metrics.
    pub name: Name,
    /// The sender's scheme.
    pub kind: SourceKind,
    /// The first part of every dedup key, `{dedup_scope}:{event id}`, and so of the outbound
    /// `Idempotency-Key` and `webhook-id` (`dedup_scope`; default the source's `name`). Sources
    /// sharing a scope read their event ids alike, so one event arriving on two paths is one
    /// event.
    pub dedup_scope: Name,
    /// Whether a W3C `traceparent` the sender sends becomes the parent of the request's
    /// `ingest` span (`trust_traceparent`, default false). Without it the span starts a trace
    /// of its own and records the sender's as a link: a sender on the internet cannot pick
    /// the trace ids a destination sees.
    pub trust_traceparent: bool,
    pub(crate) intake: Intake,
    pub(crate) fields: Fields,
}

/// What [`Source::read_event`] read from one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadEvent {
    /// The event id: its dedup key is `{dedup scope}:{event id}`.
    pub event_id: EventId,
    /// The event type, when the source has one.
    pub event_type: Option<String>,
    /// The entity and its version, when the source reads both.
    pub entity: Option<(Entity, Version)>,
}

/// How a source's events arrive.
#[derive(Debug, Clone)]
pub(crate) enum Intake {
    /// `POST /webhooks/{source}`, checked by this verifier.
    Webhook(Arc<dyn Verifier>),
    /// Messages from a broker.
    Broker(Broker),
    /// `POST /webhooks/{source}` in a configuration read for an operator command without the
    /// source's secrets: signatures cannot be checked, and such a configuration never serves.
    Unverifiable,
}

impl Source {
    /// Reads the event id, type, entity and version from one delivery (its headers and raw
    /// body) as ingest does once the signature is checked: the source's configured fields, or
    /// its kind's defaults. Never panics, whatever the bytes.
    ///
    /// # Errors
    /// [`ExtractError`] naming the field at fault: a body that is not JSON where a field reads
    /// it, a missing or unusable event id, a field of the wrong shape.
    pub fn read_event(&self, headers: &HeaderMap, body: &[u8]) -> Result<ReadEvent, ExtractError> {
        let extracted = self.fields.extract(headers, body)?;
        Ok(ReadEvent {
            event_id: extracted.event_id,
            event_type: extracted.event_type,
            entity: extracted.entity,
        })
    }

    /// Where a broker source's messages come from; `None` for a webhook source.
    pub fn broker(&self) -> Option<&Broker> {
        match &self.intake {
            Intake::Broker(broker) => Some(broker),
            Intake::Webhook(_) | Intake::Unverifiable => None,
        }
    }
}

/// How long inbox keys and finished events are kept (C9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retention {
    /// This long after they were received; then `idem gc` deletes them. At least every
    /// source's redelivery horizon.
    For(Duration),
    /// `retention = "forever"`: never deleted, so a resend however late is a duplicate. Raw
    /// bodies still go after `body_retention`.
    Forever,
}

impl Retention {
    /// The duration, or `None` for [`Retention::Forever`].
    pub fn duration(self) -> Option<Duration> {
        match self {
            Self::For(d) => Some(d),
            Self::Forever => None,
        }
    }
}

impl std::fmt::Display for Retention {
    /// `30days` (humantime's form) or `forever`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::For(d) => write!(f, "{}", humantime::format_duration(*d)),
            Self::Forever => f.write_str("forever"),
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
    /// What its events are forwarded to (`kind`, default `http`, and the keys of that kind).
    pub target: DestinationTarget,
    /// Where events are POSTed, `http://` or `https://`; for a broker destination, the server
    /// (`nats://`, `amqp://`) or the Kafka bootstrap brokers joined by `,`.
    pub url: String,
    /// How long one attempt may take, connection included (default 10s; 100ms to 1h).
    pub timeout: Duration,
    /// The delays between attempts; after the last one fails, the delivery is a dead letter
    /// (default 5s, 30s, 5m, 30m, 2h, 8h, 24h; each step at most 7 days).
    pub retry_schedule: Vec<Duration>,
    /// The longest delay a `Retry-After` header may ask for (default 1h, at most 7 days).
    pub retry_after_cap: Duration,
    /// Whether every 4xx answer is retried on the schedule (`retry_4xx`, default false). Without
    /// it only 408, 409, 425 and 429 are: any other 4xx says the request itself is refused, so
    /// the delivery is a dead letter after that one attempt.
    pub retry_4xx: bool,
    /// The `whsec_` secret forwarded requests are signed with (Standard Webhooks v1); empty for
    /// a broker destination, which signs nothing.
    pub signing_secret: Secret,
    /// At most this many deliveries in flight at once (default 8; 1 to 1024).
    pub concurrency: usize,
    /// At most this many attempts started per second or minute by each gateway process
    /// (`rate_limit`; default none).
    pub rate_limit: Option<RateLimit>,
    /// How an `https://` URL's certificate is checked and which client certificate is
    /// presented (`ca_file`, `client_cert_file`, `client_key_file`); `None`: the Mozilla roots,
    /// no client certificate.
    pub tls: Option<TlsSettings>,
    /// When it is healthy, degraded or failing (`health_window`, `min_attempts`,
    /// `failing_below`, `degraded_below`, `slow_after`, `backlog_after`).
    pub health: Thresholds,
    /// Its circuit breaker (`circuit_breaker`, `breaker_cooldown`, `breaker_cooldown_cap`).
    pub breaker: Breaker,
}

impl Destination {
    /// [`url`](Self::url) as idem shows it in messages, command output and the admin API: any
    /// user and password replaced by `***`.
    pub fn display_url(&self) -> String {
        idem_sql::redact_url(&self.url)
    }

    /// Where its events go, as `idem check-config` and `idem destination list` show it: the
    /// URL for HTTP (redacted as [`display_url`](Self::display_url)); for a broker, the kind, the
    /// server and the subject, exchange or topic (`nats nats://127.0.0.1:4222 subject
    /// orders.events`).
    pub fn describe_target(&self) -> String {
        if self.target.is_broker() {
            format!(
                "{} {} {}",
                self.target.kind(),
                self.display_url(),
                self.target.describe()
            )
        } else {
            self.display_url()
        }
    }
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
    /// The destination's index in [`Config::destinations`], resolved once when the
    /// configuration is read.
    pub(crate) destination_index: usize,
    /// Event type patterns (`invoice.*`, `customer.created`); empty means every event.
    pub event_types: Vec<String>,
    /// Staleness handling.
    pub ordering: Ordering,
    /// The route's `filter`: events of a matching type go this way only when it gives true;
    /// evaluated once per event at ingest, before the group commit, and again by replay and
    /// redrive (docs/gateway.md "Route filters"). `None`: every event of a matching type.
    pub filter: Option<RouteFilter>,
    /// `renamed_from`: the route's former name, whose stored deliveries and version-guard rows
    /// `idem serve` carries over to this name at start (docs/gateway.md "Renaming a route").
    pub renamed_from: Option<Name>,
}

impl Route {
    /// Whether an event of `event_type` goes this way: an exact match, or a prefix match for a
    /// pattern ending in `*`. An event without a type passes only a route without filter.
    pub fn matches(&self, event_type: Option<&str>) -> bool {
        if self.event_types.is_empty() {
            return true;
        }
        self.event_types
            .iter()
            .any(|pattern| type_matches(pattern, event_type))
    }
}

/// Whether an event of type `event_type` matches `pattern`: the same type, or, for a pattern
/// ending in `*`, a type starting with what comes before it (the rule of routes'
/// `event_types`). An event without a type matches no pattern.
pub(crate) fn type_matches(pattern: &str, event_type: Option<&str>) -> bool {
    let Some(ty) = event_type else {
        return false;
    };
    match pattern.strip_suffix('*') {
        Some(prefix) => ty.starts_with(prefix),
        None => ty == pattern,
    }
}

/// Whether `pattern` is an event-type pattern: an exact type, or a prefix with one trailing
/// `*`; not empty, no other `*`.
pub(crate) fn is_type_pattern(pattern: &str) -> bool {
    let prefix = pattern.strip_suffix('*').unwrap_or(pattern);
    !pattern.is_empty() && !prefix.contains('*')
}

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// `sqlite://path` or `postgres://…`.
    pub database_url: String,
    /// How long inbox keys and delivered events are kept (`retention`, default 30 days, or
    /// `"forever"`).
    pub retention: Retention,
    /// How long raw bodies are kept, if shorter than `retention` (personal data).
    pub body_retention: Option<Duration>,
    /// The largest body accepted, in bytes (413 beyond; default 1 MiB, at least 1 KiB).
    pub max_body_bytes: usize,
    /// Whether concurrent requests share one transaction (on by default; off for comparison).
    pub group_commit: bool,
    /// How often dispatchers look for due work when nothing woke them (default 1s, at least
    /// 10ms).
    pub poll_interval: Duration,
    /// Where `/admin` is served instead of `listen` (`admin_listen`; default: on `listen`).
    pub admin_listen: Option<SocketAddr>,
    /// Where `/metrics` is served instead of `listen` (`metrics_listen`; default: on `listen`).
    pub metrics_listen: Option<SocketAddr>,
    /// How long a client may take to send a request's headers before its connection is closed
    /// (`header_read_timeout`, default 10s, 100ms to 1h).
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request's body before it is answered 408 and its
    /// connection closed (`body_read_timeout`, default 30s, 100ms to 1h).
    pub body_read_timeout: Duration,
    /// How long a request waits for the database (taking a connection, then its statements)
    /// before it is answered 503 with `Retry-After` (`database_timeout`, default 2s, 100ms to
    /// 1m); the dispatchers' and admin operations' statements are bounded by it too.
    pub database_timeout: Duration,
    /// The longest `/readyz` takes to answer (`readyz_timeout`, default 1s, 100ms to 1m).
    pub readyz_timeout: Duration,
    /// How long shutdown waits for open connections, and for attempts in flight to
    /// destinations, before it cuts them (`shutdown_grace`, default 10s, 100ms to 1h).
    pub shutdown_grace: Duration,
    /// The bearer token of `/admin`, read from the environment variable `admin_token_env`
    /// names; the admin API is off without one.
    pub admin_token: Option<Secret>,
    /// The web console's settings (`console`, `console_url`, `console_session_ttl`,
    /// `console_trusted_proxies`).
    pub console: super::console::ConsoleSettings,
    /// The senders.
    pub sources: Vec<Source>,
    /// The receiving applications.
    pub destinations: Vec<Destination>,
    /// Which events go where.
    pub routes: Vec<Route>,
    /// `retired_routes`: former route names removed for good, whose stored deliveries and
    /// version-guard rows `idem serve` leaves alone instead of refusing to start.
    pub retired_routes: Vec<Name>,
    /// The outbox relays `idem serve` runs.
    pub relays: Vec<OutboxRelay>,
    /// Where traces are exported (`[telemetry]` or the `OTEL_EXPORTER_OTLP_…` variables);
    /// `None`: traces are off.
    pub telemetry: Option<super::telemetry::TelemetrySettings>,
    /// How often each process judges destination health, runs the circuit breakers and
    /// evaluates the alerts (`health_interval`, default 5s).
    pub health_interval: Duration,
    /// The alerts' thresholds (`alert_*`).
    pub alert_conditions: AlertConditions,
    /// Where alerts are sent (`[[alert]]`).
    pub alerts: Vec<AlertSink>,
    /// (owner, variable, whether it is set but empty) of each secret not loaded when the
    /// configuration was read for an operator command; empty otherwise.
    pub(crate) not_loaded: Vec<(String, String, bool)>,
}
