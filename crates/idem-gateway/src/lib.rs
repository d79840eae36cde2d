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
//! Events can also come from a broker: a NATS JetStream stream or a RabbitMQ queue is a source
//! like a webhook sender (see [Broker sources](#broker-sources)), each message acked only after
//! its commit. And `idem serve` can run the application's outbox relays
//! ([Outbox relays](#outbox-relays)).
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
//! ## Configuration
//!
//! ```toml
//! listen = "127.0.0.1:8080"
//! database_url = "sqlite://./idem-data/idem.db"      # or postgres://…
//! retention = "30d"                                  # at least every source's redelivery horizon
//!
//! [[source]]
//! name = "stripe"
//! kind = "stripe"                # stripe | github | shopify | standard-webhooks | generic | nats | rabbitmq
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
//! A source of `kind = "nats"` or `kind = "rabbitmq"` reads a broker instead of
//! `POST /webhooks/{source}`; `[[relay]]` sections name outbox relays:
//!
//! ```toml
//! [[source]]
//! name = "orders"
//! kind = "nats"
//! url = "nats://127.0.0.1:4222"                      # or url_env = "NATS_URL"; this is the default
//! stream = "ORDERS"                                  # must exist
//! subject = "orders.>"                               # default: every subject of the stream
//! durable = "idem-gateway-orders"                    # the default: idem-gateway-{name}
//! ack_wait = "30s"
//! max_in_flight = 256
//! entity = { json = "$.order.id" }                   # as for generic sources
//! version = { json = "$.order.version" }
//!
//! [[source]]
//! name = "billing"
//! kind = "rabbitmq"
//! url_env = "AMQP_URL"                               # default amqp://guest:guest@127.0.0.1:5672/%2f
//! queue = "billing-events"                           # must exist
//!
//! [[relay]]
//! name = "orders-out"
//! database_url_env = "APP_DATABASE_URL"              # the application's idem_outbox; default: database_url
//! target = "nats"                                    # nats | rabbitmq | http
//! url = "nats://127.0.0.1:4222"
//! batch_size = 100
//! poll_interval = "1s"
//! ```
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
//! for what the `idem` command line does ([`operations`]): list and show events, list and redrive
//! dead letters, replay a time range, collect old rows; see [the admin API](#the-admin-api).
//!
//! | module | holds |
//! |---|---|
//! | `config` (private; its types are at the crate root) | the TOML file, checked at start (fail closed) |
//! | `ingest` (private) | `POST /webhooks/{source}`: verify, read the event, group commit |
//! | `broker` (private) | NATS JetStream and RabbitMQ sources: the same ingest, ack after commit |
//! | `relays` (private) | the outbox relays `idem serve` runs |
//! | [`dispatch`] | due deliveries, entity order, leases, retries, dead letters |
//! | `store` (private; [`GatewayDb`], [`DatabaseKind`]) | the gateway's tables and SQL on SQLite and PostgreSQL |
//! | [`operations`] | operations on stored events, shared by the CLI and `/admin` |
//! | `admin` (private) | the `/admin` HTTP API |
//! | [`time`] | times as operators write and read them |
//! | `fields` (private) | where an event's id, type, entity and version are read |
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
//! | `GET /admin/events` | query `source` (optional), `limit` (default 100) | the newest events, newest first: `[`[`EventSummary`](operations::EventSummary)`]` |
//! | `GET /admin/events/{source}/{event_id}` | — | [`EventDetail`](operations::EventDetail): `{"event": {…}, "deliveries": [[delivery, [attempt, …]], …]}`; 404 `unknown-event` |
//! | `GET /admin/dlq` | query `destination` (optional), `limit` (default 100) | dead letters, oldest first: `[`[`DeliverySummary`](operations::DeliverySummary)`]` |
//! | `POST /admin/dlq/redrive` | `{"destination": "app"}`, `{"delivery": 42}` (an id from `/admin/dlq`) or `{}` (every dead letter) | `{"redriven": 1}` |
//! | `POST /admin/replay` | `{"source": "stripe", "since": "1h", "until": …, "dry_run": false, "force": false}` | [`ReplayReport`](operations::ReplayReport): `{"matched", "requeued", "in_progress", "older", "no_body"}` |
//! | `POST /admin/gc` | — | [`GcReport`](operations::GcReport): `{"inbox_keys", "events", "bodies"}` |
//!
//! ```text
//! curl -H "Authorization: Bearer $IDEM_ADMIN_TOKEN" -H 'Content-Type: application/json' \
//!      -d '{"source": "stripe", "since": "2h", "until": "1h", "dry_run": true}' \
//!      http://127.0.0.1:8080/admin/replay
//! ```
//!
//! `since` (required) and `until` (optional, default now) take what `idem replay --since` takes
//! ([`time::parse_time`]): a duration meaning that long ago (`"90s"`, `"1h"`, `"3d 12h"`), an
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
//!
//! ## Broker sources
//!
//! A `[[source]]` of `kind = "nats"` or `"rabbitmq"` takes its events from a broker; it has no
//! webhook endpoint (`POST /webhooks/{name}` answers 404 naming the stream or queue) and no
//! signature keys. Each message goes through the same durable ingest as a webhook: its dedup key
//! `{source}:{event id}` is claimed in the inbox and the event stored with its deliveries in the
//! group-commit transaction, then dispatched to the routes' destinations like any event.
//!
//! | outcome | NATS JetStream | RabbitMQ |
//! |---|---|---|
//! | stored (`accepted`), or already stored (`duplicate`, C3) | ack, after the commit | ack, after the commit |
//! | not stored: the database failed (C4) | NAK with a delay of 1 s, doubling per delivery, at most 60 s | held for that delay, then `basic.nack` with requeue |
//! | not an event: no message id, a body that is not JSON where a field reads it, a field of the wrong shape, a body over `max_body_bytes` | dead-letter row, then `Term` | dead-letter row, then `basic.reject` without requeue (to the queue's dead-letter exchange, if it has one) |
//!
//! A message that is not an event is never dropped unrecorded: it is written to idem's
//! dead-letter table under consumer `idem-gateway` (headers, body cut at `max_body_bytes` with
//! an oversize body's full length in the reason, reason, delivery count;
//! `idem dead-letters list`), logged at WARN and counted in
//! [`idem_broker_rejected_total`](metric_definitions::BROKER_REJECTED_TOTAL); if that row cannot
//! be written either, the message is retried like a store failure. While a commit is awaited a
//! JetStream message gets an in-progress ack every half of the durable consumer's own `ack_wait`. On shutdown a reader stops
//! taking messages, finishes (and acks) those it holds, and hands back those waiting for a retry;
//! messages pulled but not yet taken come again after `ack_wait` (JetStream) or at once
//! (RabbitMQ requeues a closed channel's unacked deliveries).
//!
//! The event id is the broker's message id: the `Nats-Msg-Id` header, or the AMQP `message_id`
//! property. The event type is the NATS subject, or the AMQP `type` property (else the routing
//! key). `id`, `type`, `entity`, `entity_type` and `version` may be set as for generic sources,
//! reading headers or the JSON body; broker properties are visible as headers:
//! `nats-subject`; `amqp-message-id`, `amqp-type`, `amqp-routing-key`, `content-type` (they win
//! over application headers of the same name). Those read are forwarded to destinations like
//! webhook headers. The redelivery horizon checked against `retention` is 3 days, as for generic
//! senders; keep `retention` at least as long as the stream or queue keeps messages.
//!
//! | key | kinds | meaning (default) |
//! |---|---|---|
//! | `url` or `url_env` | both | the server (`nats://127.0.0.1:4222`; `amqp://guest:guest@127.0.0.1:5672/%2f`); `nats://`/`tls://` or `amqp://`/`amqps://`; never printed with its credentials |
//! | `max_in_flight` | both | messages taken but not acked, 1 to 65535 (256): JetStream `max_ack_pending`, AMQP prefetch |
//! | `stream` | nats | the stream, required; it must exist (the gateway never creates streams) |
//! | `subject` | nats | the consumer's filter subject (every subject of the stream) |
//! | `durable` | nats | the durable pull consumer, created when missing with explicit acks (`idem-gateway-{name}`, `.` as `_`); an existing one must ack explicitly and filter as configured |
//! | `ack_wait` | nats | how long JetStream waits for an ack before redelivering, 100ms to 12h (30s); used when the consumer is created: an existing durable keeps its own `ack_wait` and `max_ack_pending` (logged at WARN when they differ from the configuration), and the in-progress acks sent while a commit is awaited follow the durable's `ack_wait` |
//! | `queue` | rabbitmq | the queue, required, at most 255 bytes; it must exist (never declared here) |
//!
//! A key of the other kind, or a signature key, on a broker source is refused
//! ([`ConfigError::MisplacedKey`]), as is a broker key on a webhook source. At start
//! ([`Server::start`]) every broker source connects and finds its stream or queue; a failure
//! stops the start with [`Error::Broker`] naming the source and what failed. Later connection
//! losses are logged and retried every second.
//!
//! ## Outbox relays
//!
//! Each `[[relay]]` publishes the `idem_outbox` rows of one database (the application's: it
//! writes them with idem's `Outbox::enqueue` in its own transactions and creates the table with
//! `Store::migrate`; the gateway never migrates it) with [`idem_broker::Relay`]: rows are claimed
//! by status, published with their stable message id, marked by id once the target confirmed,
//! backed off after a failure and parked after `max_attempts` (for `idem outbox requeue`).
//! Several gateways may run the same relay on one PostgreSQL database; a row is claimed by one
//! at a time. Relays on one database must share their target (same kind and URL): `idem_outbox`
//! has no column naming a row's relay, so relays with different targets would each publish the
//! other's rows; that is refused ([`ConfigError::RelayTargetConflict`]). "One database" is
//! what the URLs reach, not how they are written: the same PostgreSQL host (`localhost`,
//! `127.0.0.1`, `::1` and a local socket alike), port (5432 when not given) and database name,
//! whatever the other parameters (`sslmode`, a password); or the same SQLite file. Order is kept per
//! aggregate (a parked row holds back its aggregate's later rows).
//! A relay stops between cycles on shutdown, never inside one.
//!
//! | key | meaning (default) |
//! |---|---|
//! | `name` | the relay's name, in logs and the `relay` label of [`idem_relay_messages_total`](metric_definitions::RELAY_MESSAGES_TOTAL) |
//! | `database_url` or `database_url_env` | the database with `idem_outbox` (the gateway's `database_url`) |
//! | `target` | `nats` (row destination = subject, `Nats-Msg-Id`), `rabbitmq` (destination = `exchange/routing_key` or a queue, AMQP `message_id`, confirms), `http` (POST to `url` + destination path, `Idempotency-Key`) |
//! | `url` or `url_env` | the target (`nats://127.0.0.1:4222`; `amqp://guest:guest@127.0.0.1:5672/%2f`; required for `http`, `http://` only) |
//! | `batch_size` | rows per cycle, 1 to 10000 (100) |
//! | `poll_interval` | the longest wait between idle cycles, 10ms to 1h (1s); after an idle cycle the relay waits 10 ms doubling up to it, after a busy one it goes on at once |
//! | `claim_ttl` | how long a claimed row is held before another relay may take it, 1s to 1h (30s); must exceed `timeout` |
//! | `max_attempts` | failed publishes before a row is parked, at least 1 (10); backoff 1 s doubling up to 5 min |
//! | `timeout` | `http` only: one request's limit, 100ms to 30m (10s); `claim_ttl` (at most 1h) must exceed it |
//!
//! At start each relay opens its database (a SQLite file is never created) and connects to a
//! NATS or RabbitMQ target; a missing `idem_outbox` table or an unreachable broker stops the
//! start with [`Error::Relay`]. An HTTP target is not contacted at start (a probe request could
//! have effects, and an endpoint may come up after the gateway): its first publish reaches it,
//! and an unreachable one is a failed publish, retried with backoff and parked after
//! `max_attempts`, like any other. A relay cycle that fails on the database is logged and counted in
//! [`idem_relay_errors_total`](metric_definitions::RELAY_ERRORS_TOTAL).
//!
//! ## Operator commands for idem's tables
//!
//! `idem effects`, `idem outbox` and `idem dead-letters` work on idem's own tables in any
//! database, usually the application's: `--database URL` (default: the configuration's
//! `database_url`; with `--database`, the configuration is not read). They never create or
//! migrate a database: a missing table is an error naming it. Failures exit 1 with a message
//! naming the key, id or status at fault; argument errors exit 2.
//!
//! | command | does |
//! |---|---|
//! | `idem effects list [--status pending\|running\|unknown\|succeeded\|failed\|parked\|dead] [--limit N]` | effects in that status, least recently changed first; without `--status`, the parked and dead ones |
//! | `idem effects show KEY` | one effect as JSON (request and outcome as JSON, text or `{"hex": …}`) |
//! | `idem effects resolve KEY --succeeded [--outcome JSON\|@FILE]` | a parked or dead effect did happen: store the outcome (inline JSON is checked; a file's bytes are taken as they are; default empty) |
//! | `idem effects resolve KEY --failed REASON` | it did not happen and must not |
//! | `idem effects resolve KEY --retry` | run it again with the same key |
//! | `idem outbox list [--status parked\|pending\|published] [--limit N]` | rows (default parked), oldest first |
//! | `idem outbox show ID` · `requeue ID` · `discard ID` | one row as JSON; a parked row back to pending (attempts reset); a parked row deleted, never published |
//! | `idem dead-letters list [--consumer NAME] [--limit N]` | a consumer's dead letters (default `idem-gateway`: the broker messages it could not read) |
//! | `idem dead-letters show ID` · `delete ID` | one as JSON; delete it |
//!
//! Refusals: an unknown key (`no effect is stored under key K`), an effect that is not parked or
//! dead, an outbox row that is not parked, an unknown message id or dead-letter id, a message
//! id that is not 1 to 255 bytes of visible ASCII, an `--outcome` that is not JSON, an
//! `--outcome` with `--failed` or `--retry` (an argument error: only `--succeeded` stores it), a
//! `--consumer` that is not a name.
//!
//! Messages show database URLs without their password. A PostgreSQL server that refuses the
//! connection or the login is reported at once with the driver's reason; one that does not
//! answer, after 10 s. Every `idem` command whose output is cut short by its reader
//! (`idem outbox list | head -1`) exits 0 quietly. Times are RFC 3339 UTC with milliseconds; a
//! stored time RFC 3339 cannot write (before 1970, after 9999) is shown as its milliseconds.

mod admin;
mod broker;
mod config;
pub mod demo;
pub mod dispatch;
mod error;
mod fields;
mod forwarded;
mod gateway;
mod ingest;
pub mod metric_definitions;
pub mod operations;
mod problem;
mod relays;
mod server;
mod store;
pub mod time;

pub use config::{
    Broker, Config, ConfigError, DEFAULT_AMQP_URL, DEFAULT_DATABASE_URL, DEFAULT_LISTEN,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_NATS_URL, DEFAULT_RELAY_BATCH_SIZE, DEFAULT_RELAY_CLAIM_TTL,
    DEFAULT_RELAY_MAX_ATTEMPTS, DEFAULT_RELAY_POLL_INTERVAL, DEFAULT_RELAY_TIMEOUT,
    DEFAULT_RETENTION, Destination, NatsSource, Ordering, OutboxRelay, RabbitMqSource, ReadEvent,
    RelayTarget, Route, Secret, Source, SourceKind,
};
pub use error::{Error, ErrorKind, RequestError};
pub use fields::ExtractError;
pub use gateway::{Gateway, INBOX_CONSUMER, StateCounts, Stats};
pub use ingest::STATUS_HEADER;
pub use problem::{PROBLEM_JSON, Problem};
pub use server::{Server, prometheus};
pub use store::{AttemptOutcome, DatabaseKind, DeliveryState, GatewayDb};
