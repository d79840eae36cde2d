//! # idem gateway
//!
//! The service a team puts in front of its application so that no webhook is lost, none is
//! applied twice, and none overwrites newer state:
//!
//! 1. **ingest** (`POST /webhooks/{source}`): the signature is checked on the raw bytes; the
//!    event's id, type, entity and version are read; its dedup key `{source}:{event id}` is
//!    claimed in idem's inbox and the event stored with one delivery per matching route, in one
//!    transaction shared by every concurrent request (group commit); the sender gets 200
//!    `accepted` or `duplicate` only after the commit;
//! 2. **dispatch**: each destination gets the original raw body with `Idempotency-Key:
//!    {source}:{event id}` and a Standard Webhooks signature, one delivery per entity at a time
//!    in version order, retried on a schedule, dead-lettered after the last attempt. Events
//!    older than their entity's newest (judged at ingest, per route) are acknowledged and never
//!    sent.
//!
//! ```no_run
//! use idem::SqliteStore;
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
//! ## Configuration
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! database_url = "sqlite://./idem-data/idem.db"      # or postgres://…
//! retention = "30d"                                  # at least every source's redelivery horizon
//!
//! [[source]]
//! name = "stripe"
//! kind = "stripe"                # stripe | github | shopify | standard-webhooks | generic
//! secrets_env = ["STRIPE_WEBHOOK_SECRET"]
//!
//! [[source]]
//! name = "acme"
//! kind = "generic"
//! secrets_env = ["ACME_SECRET"]
//! signature_header = "X-Acme-Signature"              # HMAC-SHA256 of the body, hex
//! id = { header = "X-Event-Id" }                     # or { json = "$.event.id" }
//! entity = { json = "$.order.id" }
//! entity_type = "order"
//! version = { json = "$.order.version", type = "integer" }
//!
//! [[destination]]
//! name = "app"
//! url = "http://127.0.0.1:3000/events"               # http only: TLS is not built in
//! timeout = "10s"
//! retry_schedule = ["5s", "30s", "5m", "30m", "2h", "8h", "24h"]
//! signing_secret_env = "APP_WEBHOOK_SECRET"          # a whsec_ Standard Webhooks secret
//!
//! [[route]]
//! source = "stripe"
//! destination = "app"
//! event_types = ["customer.subscription.*", "invoice.*"]
//! ordering = "drop-stale"                            # or "none"
//! ```
//!
//! Other optional top-level keys: `body_retention` (at most `retention`), `max_body_bytes`
//! (default 1 MiB, at least 1 KiB), `group_commit` (default true), `poll_interval` (default 1s,
//! at least 10ms), `admin_token_env`.
//!
//! Source keys besides those above: `type` (where the event type is read, `{ header = … }` or
//! `{ json = … }`; kinds have defaults), `entity_type` (the entity's type in its `type:id` key;
//! default the source's name), `signature_encoding` (generic: `"hex"`, the default, or
//! `"base64"`) and `signature_prefix` (generic: text before the HMAC in the header, such as
//! `"sha256="`). A `version` needs an `entity`.
//!
//! Destination keys: `timeout` (default 10s, between 100ms and 1h), `retry_schedule` (default
//! `["5s", "30s", "5m", "30m", "2h", "8h", "24h"]`, each step at most 7d, ±20% jitter; after the
//! last step fails the delivery is a dead letter, so `retry_schedule = []` dead-letters after the
//! first failure), `concurrency` (default 8, 1 to 1024), `retry_after_cap` (default 1h, at most
//! 7d). Route `event_types`: exact names or a prefix with one trailing `*`.
//!
//! Durations use humantime's syntax: `250ms`, `5s`, `30m`, `2h`, `30d`, `1w` (and combinations
//! such as `1h 30m`); zero is refused.
//!
//! A route's name (default `{source}.{destination}`) is the version guard's consumer: renaming
//! a route starts its staleness judgement afresh. Several gateway processes on one PostgreSQL
//! database hand deliveries over with leases of `timeout + 5s`
//! ([`dispatch::LEASE_MARGIN`]): their clocks must agree to well within that margin.
//!
//! ## Headers sent to a destination
//!
//! | header | value |
//! |---|---|
//! | `Idempotency-Key` | `{source}:{event id}`, the same on every attempt, redrive and replay |
//! | `Idem-Event-Id`, `Idem-Source`, `Idem-Event-Type` | the event's id, source and type |
//! | `Idem-Attempt` | 1, 2, … |
//! | `Idem-Version-Tie` | `true` when the event has the same version as its entity's newest |
//! | `webhook-id`, `webhook-timestamp`, `webhook-signature` | Standard Webhooks v1, with the destination's secret; `webhook-id` is derived from (event, destination) |
//!
//! plus the `Content-Type` and the headers the source's fields were read from (such as
//! `X-GitHub-Event`).
//!
//! ## Operating it
//!
//! `GET /healthz`, `GET /readyz` (the database answers) and `GET /metrics` (Prometheus; names in
//! [`metric_definitions`]). With `admin_token_env` set, `/admin` answers bearer-token requests
//! for what the `idem` command line does ([`admin`]): list and show events, list and redrive
//! dead letters, replay a time range, collect old rows; see [the admin API](#the-admin-api).
//!
//! | module | holds |
//! |---|---|
//! | `config` (private; its types are at the crate root) | the TOML file, checked at start (fail closed) |
//! | `ingest` (private) | `POST /webhooks/{source}`: verify, read the event, group commit |
//! | [`dispatch`] | due deliveries, entity order, leases, retries, dead letters |
//! | `store` (private; [`GatewayDb`], [`DatabaseKind`]) | the gateway's tables and SQL on SQLite and PostgreSQL |
//! | [`admin`] | operations on stored events and the `/admin` API |
//! | [`demo`] | `idem demo` |
//!
//! ## The admin API
//!
//! `/admin` exists only when `admin_token_env` names an environment variable holding a token;
//! every request needs `Authorization: Bearer <that token>` (the scheme in any case), checked
//! before anything else is read: without it, 401. Times in answers are milliseconds since the
//! Unix epoch (UTC); durations (`duration_ms`) are milliseconds. Answers are JSON; errors are
//! `application/problem+json` (RFC 9457, [`Problem`]) whose `type` is `urn:idem:problem:{code}`
//! and whose `detail` names the problem and what was expected.
//!
//! | method and path | input | answer (200) |
//! |---|---|---|
//! | `GET /admin/events` | query `source` (optional), `limit` (default 100) | the newest events, newest first: `[`[`EventSummary`](admin::EventSummary)`]` |
//! | `GET /admin/events/{source}/{event_id}` | — | [`EventDetail`](admin::EventDetail): `{"event": {…}, "deliveries": [[delivery, [attempt, …]], …]}`; 404 `unknown-event` |
//! | `GET /admin/dlq` | query `destination` (optional), `limit` (default 100) | dead letters, oldest first: `[`[`DeliverySummary`](admin::DeliverySummary)`]` |
//! | `POST /admin/dlq/redrive` | `{"destination": "app"}`, `{"delivery": 42}` (an id from `/admin/dlq`) or `{}` (every dead letter) | `{"redriven": 1}` |
//! | `POST /admin/replay` | `{"source": "stripe", "since": "1h", "until": …, "dry_run": false, "force": false}` | [`ReplayReport`](admin::ReplayReport): `{"matched", "requeued", "in_progress", "older", "no_body"}` |
//! | `POST /admin/gc` | — | [`GcReport`](admin::GcReport): `{"inbox_keys", "events", "bodies"}` |
//!
//! ```text
//! curl -H "Authorization: Bearer $IDEM_ADMIN_TOKEN" -H 'Content-Type: application/json' \
//!      -d '{"source": "stripe", "since": "2h", "until": "1h", "dry_run": true}' \
//!      http://127.0.0.1:8080/admin/replay
//! ```
//!
//! `since` (required) and `until` (optional, default now) take what `idem replay --since` takes
//! ([`admin::parse_time`]): a duration meaning that long ago (`"90s"`, `"1h"`, `"3d 12h"`), an
//! RFC 3339 timestamp (`"2026-01-31T12:00:00Z"`), or milliseconds since the epoch (a JSON
//! number or a string of digits). The range is `since` inclusive to `until` exclusive, by the
//! time each event was received. `dry_run` counts without changing anything; `force` also
//! re-sends, on a `drop-stale` route, events older than their entity's newest. Redrive and
//! replay make new attempts of the same event (same `Idempotency-Key`), never new events;
//! the answer comes once they are due, and the dispatchers send them from there.
//!
//! Bodies must be sent with `Content-Type: application/json`; unknown fields and unknown query
//! parameters are refused, so that a typo (`"dryrun"`) never acts. Errors:
//!
//! | status | `type` code | when |
//! |---|---|---|
//! | 400 | `malformed-json` | the body is not JSON |
//! | 422 | `invalid-body` | the JSON lacks a required field, has an unknown one, or a value of the wrong type |
//! | 415 | `unsupported-media-type` | the body is not sent as `application/json` |
//! | 400 | `bad-query` | the query string does not fit (`?limit=abc`, an unknown parameter) |
//! | 400 | `unknown-source`, `unknown-destination` | the name is not configured; `detail` lists the configured names |
//! | 400 | `bad-time` | `since` or `until` is none of the forms above |
//! | 400 | `empty-range` | `since` is not before `until`; `detail` shows both times |
//! | 401 | `unauthorized` | no or wrong bearer token |
//! | 404 | `unknown-event` | `GET /admin/events/…` of an event not stored |
//! | 405 | `method-not-allowed` | a known path with another method (`GET /admin/replay`); the `Allow` header names the right one |
//! | 503 | `store-unavailable` | the database failed; nothing or part was done, retry |

pub mod admin;
mod config;
pub mod demo;
pub mod dispatch;
mod error;
mod gateway;
mod ingest;
pub mod metric_definitions;
mod problem;
mod server;
mod store;

pub use config::{
    Config, ConfigError, DEFAULT_DATABASE_URL, DEFAULT_LISTEN, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_RETENTION, Destination, Ordering, Route, Secret, Source, SourceKind,
};
pub use error::Error;
pub use gateway::{Gateway, INBOX_CONSUMER, StateCounts, Stats};
pub use ingest::STATUS_HEADER;
pub use problem::{PROBLEM_JSON, Problem};
pub use server::{Server, prometheus};
pub use store::{DatabaseKind, GatewayDb};
