//! # idem gateway
//!
//! The service a team puts in front of its application so that no webhook is lost, none is
//! applied twice, and none overwrites newer state. `idem serve` runs it; this crate is the same
//! gateway as a library, to embed in a Rust program.
//!
//! 1. **ingest** (`POST /webhooks/{source}`, or a NATS JetStream stream or RabbitMQ queue): the
//!    signature is checked on the raw bytes; the event's id, type, entity and version are read;
//!    its dedup key `{dedup scope}:{event id}` is claimed in idem's inbox and the event stored with
//!    one delivery per matching route, in one transaction shared by concurrent requests (group
//!    commit); the sender gets 200 `accepted` or `duplicate` (a broker its ack) only after the
//!    commit;
//! 2. **dispatch**: each destination gets the original raw body with `Idempotency-Key:
//!    "{dedup scope}:{event id}"` (an RFC 8941 String; `Idem-Event-Id` carries the bare id) and
//!    a Standard Webhooks signature, one delivery per entity at a time
//!    in version order, retried on a schedule, dead-lettered after the last attempt. Events
//!    older than their entity's newest are acknowledged and never sent.
//!
//! ## Embedding it
//!
//! Load and check a configuration ([`Config::load`]; secrets come from the environment), open
//! its database, apply the gateway's migrations ([`Gateway::migrate`]), then serve
//! ([`Server::start`]) until a signal:
//!
//! ```no_run
//! use idem_sql::SqliteStore;
//! use idem_gateway::{Config, Gateway, Server};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::load("idem.toml".as_ref())?; // secrets come from the environment
//! let store = SqliteStore::connect(&config.database_url).await?;
//! let gateway = Gateway::new(config.clone(), store);
//! gateway.migrate().await?;
//! let listener = tokio::net::TcpListener::bind(config.listen).await?;
//! let server = Server::start(gateway, listener).await?;
//! server.run_until(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(())
//! # }
//! ```
//!
//! A minimal `idem.toml`: one Stripe source forwarded to one application.
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! database_url = "sqlite://./idem-data/idem.db"      # or postgres://…, mysql://…
//!
//! [[source]]
//! name = "stripe"
//! kind = "stripe"
//! secrets_env = ["STRIPE_WEBHOOK_SECRET"]
//!
//! [[destination]]
//! name = "app"
//! url = "http://127.0.0.1:3000/events"
//! signing_secret_env = "APP_WEBHOOK_SECRET"          # a whsec_ Standard Webhooks secret
//!
//! [[route]]
//! source = "stripe"
//! destination = "app"
//! ```
//!
//! [`Config::from_toml`] checks a configuration given as text, with secrets from any lookup (a
//! test's map); [`Source::read_event`] reads an event from a delivery as ingest does. The
//! operations of the `idem` command line and of `/admin` (list and show events, in pages too,
//! redrive dead letters, replay, collect old rows, carry renamed routes over; list, pause and
//! resume destinations; list the consumer inventory) are methods of
//! [`Gateway`] ([`operations`], [`destinations`], [`consumers`]).
//!
//! ## The operator reference
//!
//! Every configuration key with its default and range, the headers sent to destinations, the
//! HTTP endpoints and admin API, the `idem` command and the metrics are described in
//! `docs/gateway.md` in the repository. The rules it follows are the contracts C1–C11 of
//! `docs/design.md`.
//!
//! ## Modules
//!
//! From the bottom layer up; a module imports only its own layer's modules that the row allows
//! and lower layers. Ingest and dispatch never import each other: what they share per
//! destination is its lane.
//!
//! | layer | module | holds |
//! |---|---|---|
//! | vocabulary | `model` (private; [`counters`], [`time`], [`DeliveryState`], [`ExtractError`]) | delivery states and `text_enum!`, per-minute counts, an event's fields, forwarded headers, the version guard's notes, times; imports nothing else of the crate |
//! | vocabulary | [`metric_definitions`], `tls` (private; [`TlsSettings`]) | the metrics' names and descriptions; rustls for `https://` destinations and relay targets |
//! | configuration, storage | `config` (private; its types are at the crate root), `store` (private; [`GatewayDb`], [`DatabaseKind`]) | the TOML file, checked at start (fail closed); the gateway's tables and SQL |
//! | coordination | `error` ([`Error`], [`Task`]), `lanes` (private), `writer_gate`, `health`, [`traces`] | the error type; one lane per destination (wake, hand-off, throttle, health, claim ttl); the writer turn; the store's health; spans and the OTLP exporter |
//! | shared state | [`Gateway`], `wiring` (private) | configuration, store and the wiring (lanes, sources, routes) behind one swap point |
//! | behaviour | `ingest` (private), [`dispatch`], `relays` (private), [`operations`], [`destinations`], [`consumers`], `monitor` (private) | group commit; due deliveries, entity order, leases, retries, dead letters, through one transport seam (HTTP today); the outbox relays; operations shared by the CLI and `/admin`; the consumer inventory (the registry with the gateway's counts); health, breakers, alerts and the consumer gauges (it may read `consumers`) |
//! | inputs, surfaces | `broker` (private), `http` (private; [`console`], [`Problem`], [`prometheus`]) | NATS JetStream, RabbitMQ and Kafka sources; every axum surface: webhooks, health, metrics, `/admin`, the console |
//! | assembly | `supervise` (private), [`Server`], [`demo`] | the one supervisor of dispatchers, broker readers and relays; the server; `idem demo` |

// Every function fits on a screen or two: 120 lines (clippy.toml), which CI's clippy keeps.
#![deny(clippy::too_many_lines)]

mod audit;
mod broker;
mod config;
pub mod consumers;
pub mod demo;
pub mod destinations;
pub mod dispatch;
mod dispatchers;
mod error;
mod gateway;
mod health;
mod http;
mod ingest;
mod lanes;
pub mod metric_definitions;
mod model;
mod monitor;
pub mod operations;
mod relays;
mod reload;
mod reload_request;
mod server;
mod store;
mod supervise;
mod tls;
pub mod traces;
mod wiring;
mod writer_gate;

pub use crate::http::console;
pub use crate::http::metrics::prometheus;
pub use crate::http::problem::{PROBLEM_JSON, Problem};
pub use crate::http::webhooks::STATUS_HEADER;
pub use config::{
    AlertConditions, AlertFormat, AlertSink, Breaker, Broker, Config, ConfigError, ConfigWarning,
    ConsoleSettings, DEFAULT_AMQP_URL, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_CONSOLE_SESSION_TTL,
    DEFAULT_DATABASE_TIMEOUT, DEFAULT_DATABASE_URL, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_KAFKA_REDELIVERY_HORIZON, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES, DEFAULT_NATS_URL,
    DEFAULT_READYZ_TIMEOUT, DEFAULT_RELAY_BATCH_SIZE, DEFAULT_RELAY_CLAIM_TTL,
    DEFAULT_RELAY_MAX_ATTEMPTS, DEFAULT_RELAY_POLL_INTERVAL, DEFAULT_RELAY_TIMEOUT,
    DEFAULT_RETENTION, DEFAULT_SERVICE_NAME, DEFAULT_SHUTDOWN_GRACE, Destination,
    DestinationTarget, KafkaSource, MIN_ADMIN_TOKEN_CHARS, NatsSource, OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SDK_DISABLED, OTEL_SERVICE_NAME, Ordering,
    OutboxRelay, RabbitMqSource, RateLimit, ReadEvent, RelayTarget, Retention, Route, Secret,
    Source, SourceKind, TelemetrySettings, known_event_types,
};
pub use dispatchers::USER_AGENT;
pub use error::{Error, ErrorKind, RequestError, Task};
pub use gateway::{Gateway, INBOX_CONSUMER, StateCounts, Stats};
pub use model::fields::ExtractError;
pub use model::health::{Assessment, Health, Thresholds};
pub use model::route_filter::{FilterError, FilterInput, FilterSyntaxError, RouteFilter};
pub use model::{counts as counters, time};
pub use reload_request::{ReloadError, ReloadHandle, ReloadReport};
pub use server::Server;
pub use store::{AttemptOutcome, DatabaseKind, DeliveryState, GatewayDb};
pub use tls::TlsSettings;
