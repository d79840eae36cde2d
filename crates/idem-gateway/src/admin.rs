//! Operations on stored events: list and show them, list and redrive dead letters, replay a
//! time range, collect old rows; and the `/admin` HTTP API (bearer token) that exposes them
//! (its endpoints are listed in the [crate documentation](crate#the-admin-api)). The `idem`
//! command line calls the same functions.

use std::num::NonZeroU32;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use idem_core::RetentionPolicy;
use serde::de::{self, DeserializeOwned};
use serde::{Deserialize, Deserializer, Serialize};
use subtle::ConstantTimeEq;

use crate::Error;
use crate::config::Ordering;
use crate::gateway::Gateway;
use crate::problem::Problem;
use crate::store::{DeliveryRow, EventRow, GatewayDb};

/// Rows deleted or changed per statement by [`Gateway::gc`], so that ingest is never blocked
/// for long.
pub const GC_BATCH: u32 = 500;

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventSummary {
    /// The source name.
    pub source: String,
    /// The event id.
    pub event_id: String,
    /// The event type, when the source has one.
    pub event_type: Option<String>,
    /// `type:id` of the entity, when read.
    pub entity: Option<String>,
    /// The entity's version carried by this event.
    pub version: Option<i64>,
    /// When it was accepted, in ms since the epoch.
    pub received_at: i64,
    /// Whether the raw body is still kept (body_retention drops it).
    pub body_kept: bool,
}

/// One delivery of an event to a destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliverySummary {
    /// The delivery's id (for `dlq redrive --id`).
    pub id: i64,
    /// The route it came by.
    pub route: String,
    /// The destination.
    pub destination: String,
    /// `pending`, `in_flight`, `delivered`, `stale` or `dead`.
    pub state: String,
    /// Sent with `Idem-Version-Tie: true`.
    pub tie: bool,
    /// Why it is stale: both versions.
    pub note: Option<String>,
    /// Attempts made so far.
    pub attempts: i64,
    /// When it is next due (pending), in ms since the epoch.
    pub next_attempt_at: i64,
    /// When its state last changed, in ms since the epoch.
    pub updated_at: i64,
    /// The event's source.
    pub source: String,
    /// The event id.
    pub event_id: String,
    /// The event type.
    pub event_type: Option<String>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// 1, 2, …
    pub attempt: i64,
    /// When it started, in ms since the epoch.
    pub started_at: i64,
    /// How long it took, in ms.
    pub duration_ms: i64,
    /// The HTTP status; `None` for a timeout or refused connection.
    pub status: Option<i64>,
    /// `delivered`, `retry` or `dead`.
    pub outcome: String,
    /// The start of the response body, or the transport error.
    pub excerpt: String,
}

/// An event with every delivery and attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventDetail {
    /// The event.
    pub event: EventSummary,
    /// Its deliveries, each with its attempts.
    pub deliveries: Vec<(DeliverySummary, Vec<AttemptRecord>)>,
}

/// What to replay. [`parse_time`] reads times as the command line and `POST /admin/replay`
/// take them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    /// The source whose events are replayed; it must be configured.
    pub source: String,
    /// From this time (ms since the epoch), inclusive.
    pub since: i64,
    /// Up to this time (ms since the epoch), exclusive; `None` = now. It must be after `since`.
    pub until: Option<i64>,
    /// Count only; change nothing.
    pub dry_run: bool,
    /// On drop-stale routes, also re-send events older than their entity's highest version.
    pub force: bool,
}

/// An admin request the gateway refuses, naming what was wrong and what it accepts; nothing
/// was changed. `/admin` answers it with 400 problem+json (types `unknown-source`,
/// `unknown-destination`, `bad-time`, `empty-range`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No source of this name is configured.
    #[error(
        "no source {name:?} is configured; configured sources: {}",
        names(known)
    )]
    UnknownSource {
        /// The name asked for.
        name: String,
        /// The configured sources.
        known: Vec<String>,
    },
    /// No destination of this name is configured.
    #[error(
        "no destination {name:?} is configured; configured destinations: {}",
        names(known)
    )]
    UnknownDestination {
        /// The name asked for.
        name: String,
        /// The configured destinations.
        known: Vec<String>,
    },
    /// A time in none of the forms [`parse_time`] reads.
    #[error(
        "{field} {value:?} is not a time: expected a duration ago such as \"1h\" or \"3d 12h\", \
         an RFC 3339 timestamp such as \"2026-01-31T12:00:00Z\", or milliseconds since the epoch"
    )]
    BadTime {
        /// The field or option (`since`, `--until`, …).
        field: &'static str,
        /// The text given.
        value: String,
    },
    /// A replay range with `since` not before `until`: it would match nothing.
    #[error(
        "since {} ({since} ms) is not before until {} ({until} ms): the range is empty",
        format_time(*since),
        format_time(*until)
    )]
    EmptyRange {
        /// The start, in ms since the epoch.
        since: i64,
        /// The end (now when none was given), in ms since the epoch.
        until: i64,
    },
}

impl RequestError {
    /// The problem type (`urn:idem:problem:{code}`) `/admin` answers this error with.
    fn code(&self) -> &'static str {
        match self {
            Self::UnknownSource { .. } => "unknown-source",
            Self::UnknownDestination { .. } => "unknown-destination",
            Self::BadTime { .. } => "bad-time",
            Self::EmptyRange { .. } => "empty-range",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Self::UnknownSource { .. } => "Unknown source",
            Self::UnknownDestination { .. } => "Unknown destination",
            Self::BadTime { .. } => "Bad time",
            Self::EmptyRange { .. } => "Empty time range",
        }
    }
}

/// `"a", "b"`, or `(none)`.
fn names(known: &[String]) -> String {
    if known.is_empty() {
        "(none)".to_owned()
    } else {
        known
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Reads a time as `idem replay --since/--until` and `POST /admin/replay` take it, in ms since
/// the epoch: a duration before `now` (humantime's syntax: `90s`, `1h`, `3d`, `1h 30m`), an
/// RFC 3339 timestamp (`2026-01-31T12:00:00Z`, `2026-01-31T12:00:00.250+00:00`), or a whole
/// number of milliseconds since the epoch (`1769860800000`). `field` names the input in the
/// error.
///
/// # Errors
/// [`RequestError::BadTime`] when `text` is none of these.
pub fn parse_time(field: &'static str, text: &str, now: i64) -> Result<i64, RequestError> {
    let trimmed = text.trim();
    if let Ok(ms) = trimmed.parse::<u64>() {
        return Ok(i64::try_from(ms).unwrap_or(i64::MAX));
    }
    if let Ok(ago) = humantime::parse_duration(trimmed) {
        return Ok(now.saturating_sub(i64::try_from(ago.as_millis()).unwrap_or(i64::MAX)));
    }
    let bad = || RequestError::BadTime {
        field,
        value: text.to_owned(),
    };
    let time = humantime::parse_rfc3339_weak(trimmed).map_err(|_| bad())?;
    let since_epoch = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| bad())?;
    Ok(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
}

/// What a replay did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    /// Deliveries of events in the range.
    pub matched: u64,
    /// Made due again (new attempts, same Idempotency-Key).
    pub requeued: u64,
    /// Skipped: still pending or in flight.
    pub in_progress: u64,
    /// Skipped on a drop-stale route: older than the entity's highest version (without force).
    pub older: u64,
    /// Skipped: the raw body was dropped by body_retention.
    pub no_body: u64,
}

/// What one [`Gateway::gc`] run removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Inbox keys past the retention (idem's table).
    pub inbox_keys: u64,
    /// Finished events past the retention, with their deliveries and attempts.
    pub events: u64,
    /// Raw bodies past body_retention.
    pub bodies: u64,
}

fn event(row: EventRow) -> EventSummary {
    let (_, source, event_id, event_type, aggregate_type, aggregate_id, version, received_at, body) =
        row;
    EventSummary {
        source,
        event_id,
        event_type,
        entity: aggregate_type
            .zip(aggregate_id)
            .map(|(t, i)| format!("{t}:{i}")),
        version,
        received_at,
        body_kept: body,
    }
}

fn delivery(row: DeliveryRow) -> DeliverySummary {
    let (
        id,
        route,
        destination,
        state,
        tie,
        note,
        attempts,
        next_attempt_at,
        updated_at,
        source,
        event_id,
        event_type,
    ) = row;
    DeliverySummary {
        id,
        route,
        destination,
        state,
        tie,
        note,
        attempts,
        next_attempt_at,
        updated_at,
        source,
        event_id,
        event_type,
    }
}

impl<DB: GatewayDb> Gateway<DB> {
    /// The newest `limit` events, of `source` or of every source.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn list_events(
        &self,
        source: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventSummary>, Error> {
        let mut conn = self.store().pool().acquire().await?;
        let rows = DB::list_events(&mut conn, source.unwrap_or(""), i64::from(limit)).await?;
        Ok(rows.into_iter().map(event).collect())
    }

    /// The event `event_id` of `source` with its deliveries and attempts; `None` when unknown.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn show_event(
        &self,
        source: &str,
        event_id: &str,
    ) -> Result<Option<EventDetail>, Error> {
        let mut conn = self.store().pool().acquire().await?;
        let Some(row) = DB::find_event(&mut conn, source, event_id).await? else {
            return Ok(None);
        };
        let mut deliveries = Vec::new();
        for row in DB::deliveries_of(&mut conn, row.0).await? {
            let attempts = DB::attempts_of(&mut conn, row.0)
                .await?
                .into_iter()
                .map(
                    |(attempt, started_at, duration_ms, status, outcome, excerpt)| AttemptRecord {
                        attempt,
                        started_at,
                        duration_ms,
                        status,
                        outcome,
                        excerpt,
                    },
                )
                .collect();
            deliveries.push((delivery(row), attempts));
        }
        Ok(Some(EventDetail {
            event: event(row),
            deliveries,
        }))
    }

    /// Dead letters, oldest first, of `destination` or of every destination, at most `limit`.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn dead_letters(
        &self,
        destination: Option<&str>,
        limit: u32,
    ) -> Result<Vec<DeliverySummary>, Error> {
        let mut conn = self.store().pool().acquire().await?;
        let rows = DB::dead_letters(&mut conn, destination.unwrap_or(""), i64::from(limit)).await?;
        Ok(rows.into_iter().map(delivery).collect())
    }

    /// Makes dead letters due again with a fresh retry schedule: the dead letter `delivery`, or
    /// every dead letter of `destination` (or of all destinations). Attempts keep their numbers
    /// and the Idempotency-Key stays the same. Returns how many were redriven.
    ///
    /// # Errors
    /// [`Error::Request`] ([`RequestError::UnknownDestination`]) when `destination` is not
    /// configured; [`Error::Store`].
    pub async fn redrive(
        &self,
        destination: Option<&str>,
        delivery: Option<i64>,
    ) -> Result<u64, Error> {
        if let Some(name) = destination {
            let known = &self.config().destinations;
            if !known.iter().any(|d| d.name.as_str() == name) {
                return Err(RequestError::UnknownDestination {
                    name: name.to_owned(),
                    known: known.iter().map(|d| d.name.as_str().to_owned()).collect(),
                }
                .into());
            }
        }
        let mut conn = self.store().pool().acquire().await?;
        let now = self.now().as_millis();
        let n = DB::redrive(
            &mut conn,
            destination.unwrap_or(""),
            delivery.unwrap_or(0),
            now,
        )
        .await?;
        self.wake_all();
        Ok(n)
    }

    /// Replays the deliveries of `request.source`'s events received in the range: each finished
    /// delivery (delivered, stale, dead) becomes due again, a new attempt of the same event.
    /// On a drop-stale route, an event older than its entity's highest version is skipped
    /// unless `force`. `progress(done, total)` is called after each delivery.
    ///
    /// # Errors
    /// [`Error::Request`] when the source is not configured
    /// ([`RequestError::UnknownSource`]) or `since` is not before `until`
    /// ([`RequestError::EmptyRange`]), before anything is changed; [`Error::Store`]: the
    /// deliveries requeued before the error stay requeued.
    pub async fn replay(
        &self,
        request: &ReplayRequest,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> Result<ReplayReport, Error> {
        let sources = &self.config().sources;
        if !sources.iter().any(|s| s.name.as_str() == request.source) {
            return Err(RequestError::UnknownSource {
                name: request.source.clone(),
                known: sources.iter().map(|s| s.name.as_str().to_owned()).collect(),
            }
            .into());
        }
        let now = self.now().as_millis();
        // Without `until`, the range ends now, inclusive.
        let until = request.until.unwrap_or(now + 1);
        if request.since >= until {
            return Err(RequestError::EmptyRange {
                since: request.since,
                until: request.until.unwrap_or(now),
            }
            .into());
        }
        let mut conn = self.store().pool().acquire().await?;
        let rows = DB::replay_candidates(&mut conn, &request.source, request.since, until).await?;
        let mut report = ReplayReport {
            matched: rows.len() as u64,
            ..ReplayReport::default()
        };
        for (done, (id, route, state, version, body_kept, highest)) in rows.into_iter().enumerate()
        {
            let drop_stale = self
                .config()
                .routes
                .iter()
                .any(|r| r.name.as_str() == route && r.ordering == Ordering::DropStale);
            if matches!(state.as_str(), "pending" | "in_flight") {
                report.in_progress += 1;
            } else if !body_kept {
                report.no_body += 1;
            } else if drop_stale
                && !request.force
                && (state == "stale" || version.zip(highest).is_some_and(|(v, h)| v < h))
            {
                report.older += 1;
            } else if request.dry_run || DB::requeue(&mut conn, id, self.now().as_millis()).await? {
                report.requeued += 1;
            }
            progress(done as u64 + 1, report.matched);
        }
        if !request.dry_run {
            self.wake_all();
        }
        Ok(report)
    }

    /// Deletes what the retention no longer needs, in small batches (C9): inbox keys and
    /// finished events older than `retention` (never an event still to be sent or a dead
    /// letter, never version-guard rows), and raw bodies older than `body_retention`.
    ///
    /// # Errors
    /// [`Error::Store`]; batches before the error stay done.
    pub async fn gc(&self) -> Result<GcReport, Error> {
        let config = self.config();
        let batch = NonZeroU32::new(GC_BATCH).unwrap_or(NonZeroU32::MIN);
        // Checked against every source's horizon when the configuration was loaded.
        let policy = RetentionPolicy::new(config.retention, Duration::ZERO)
            .map_err(idem_sql::Error::from)?;
        let inbox = self.store().gc(&policy, batch).await?;
        let mut report = GcReport {
            inbox_keys: inbox.inbox,
            ..GcReport::default()
        };
        let cutoff = self.now().saturating_sub(config.retention).as_millis();
        loop {
            let mut tx = self.store().begin().await?;
            let n = DB::collect_events(&mut tx, cutoff, i64::from(GC_BATCH)).await?;
            tx.commit().await.map_err(idem_sql::Error::from)?;
            report.events += n;
            if n < u64::from(GC_BATCH) {
                break;
            }
        }
        if let Some(keep) = config.body_retention {
            let cutoff = self.now().saturating_sub(keep).as_millis();
            loop {
                let mut conn = self.store().pool().acquire().await?;
                let n = DB::drop_bodies(&mut conn, cutoff, i64::from(GC_BATCH)).await?;
                report.bodies += n;
                if n < u64::from(GC_BATCH) {
                    break;
                }
            }
        }
        Ok(report)
    }

    fn wake_all(&self) {
        for index in 0..self.config().destinations.len() {
            self.wake(index);
        }
    }
}

/// `/admin/…`, when the configuration has an admin token; otherwise no routes. The token is
/// checked before anything else of the request is read.
pub(crate) fn router<DB: GatewayDb>(gateway: Gateway<DB>) -> Router {
    if gateway.config().admin_token.is_none() {
        return Router::new();
    }
    Router::new()
        .route("/admin/events", get(list_events::<DB>))
        .route("/admin/events/{source}/{event_id}", get(show_event::<DB>))
        .route("/admin/dlq", get(dead_letters::<DB>))
        .route("/admin/dlq/redrive", post(redrive::<DB>))
        .route("/admin/replay", post(replay::<DB>))
        .route("/admin/gc", post(gc::<DB>))
        .method_not_allowed_fallback(wrong_method)
        .route_layer(middleware::from_fn_with_state(
            gateway.clone(),
            require_token::<DB>,
        ))
        .with_state(gateway)
}

async fn require_token<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    request: Request,
    next: Next,
) -> Response {
    if authorized(&gateway, request.headers()) {
        next.run(request).await
    } else {
        unauthorized()
    }
}

/// Whether the request carries `Authorization: Bearer <admin token>` (compared in constant
/// time).
fn authorized<DB: GatewayDb>(gateway: &Gateway<DB>, headers: &HeaderMap) -> bool {
    let expected = gateway
        .config()
        .admin_token
        .as_ref()
        .map(|t| t.expose().as_bytes());
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110 §11.1): `bearer`, `BEARER` too.
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim_start())
        })
        .map(str::as_bytes);
    matches!((expected, given), (Some(e), Some(g)) if bool::from(e.ct_eq(g)))
}

fn unauthorized() -> Response {
    let mut response = Problem::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "Unauthorized",
        "the admin API needs `Authorization: Bearer <admin token>`, the token being the value \
         of the environment variable that admin_token_env names",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// A known `/admin` path with a method it does not serve (axum keeps the `Allow` header).
async fn wrong_method(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!(
            "{method} is not served at {}; the `Allow` header lists what is (see the admin API \
             in the documentation)",
            uri.path()
        ),
    )
    .into_response()
}

fn answer<T: Serialize>(result: Result<T, Error>) -> Response {
    match result {
        Ok(value) => Json(value).into_response(),
        Err(Error::Request(e)) => refused(&e),
        Err(e) => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Store unavailable",
            e.to_string(),
        )
        .into_response(),
    }
}

fn refused(e: &RequestError) -> Response {
    Problem::new(StatusCode::BAD_REQUEST, e.code(), e.title(), e.to_string()).into_response()
}

/// What an endpoint's JSON body or query string should look like, for the problem that
/// answers one that does not fit.
trait Expected {
    const EXPECTED: &'static str;
}

/// [`Json`] answering a body it cannot read with problem+json that names the problem and
/// what the endpoint expects, instead of axum's plain-text rejection.
struct Body<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Expected> FromRequest<S> for Body<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(body_problem(&rejection, T::EXPECTED)),
        }
    }
}

fn body_problem(rejection: &JsonRejection, expected: &str) -> Response {
    let cause = || {
        std::error::Error::source(rejection)
            .map_or_else(|| rejection.body_text(), ToString::to_string)
    };
    let (code, title, problem) = match rejection {
        JsonRejection::MissingJsonContentType(_) => (
            "unsupported-media-type",
            "Unsupported media type",
            "the body must be sent with `Content-Type: application/json`".to_owned(),
        ),
        JsonRejection::JsonSyntaxError(_) => (
            "malformed-json",
            "Malformed JSON",
            format!("the body is not valid JSON ({})", cause()),
        ),
        JsonRejection::JsonDataError(_) => (
            "invalid-body",
            "Invalid body",
            format!("the body does not fit this endpoint ({})", cause()),
        ),
        _ => (
            "unreadable-body",
            "Unreadable body",
            format!("the body cannot be read ({})", rejection.body_text()),
        ),
    };
    Problem::new(
        rejection.status(),
        code,
        title,
        format!("{problem}; expected {expected}"),
    )
    .into_response()
}

/// [`Query`] answering a query string it cannot read with problem+json (400 `bad-query`).
struct Params<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Expected> FromRequestParts<S> for Params<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(Self(value)),
            Err(rejection) => Err(query_problem(&rejection, T::EXPECTED)),
        }
    }
}

fn query_problem(rejection: &QueryRejection, expected: &str) -> Response {
    let cause = std::error::Error::source(rejection)
        .map_or_else(|| rejection.body_text(), ToString::to_string);
    Problem::new(
        StatusCode::BAD_REQUEST,
        "bad-query",
        "Bad query string",
        format!("the query string does not fit this endpoint ({cause}); expected {expected}"),
    )
    .into_response()
}

/// `{source}/{event_id}` of `GET /admin/events/…`, answering a path it cannot read (bad
/// percent-encoding) with problem+json (400 `bad-path`).
struct EventPath(String, String);

impl<S: Send + Sync> FromRequestParts<S> for EventPath {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Path::<(String, String)>::from_request_parts(parts, state).await {
            Ok(Path((source, event_id))) => Ok(Self(source, event_id)),
            Err(rejection) => Err(path_problem(&rejection)),
        }
    }
}

fn path_problem(rejection: &PathRejection) -> Response {
    Problem::new(
        rejection.status(),
        "bad-path",
        "Bad path",
        format!(
            "the path cannot be read ({}); expected /admin/events/{{source}}/{{event id}}, \
             each percent-encoded UTF-8",
            rejection.body_text()
        ),
    )
    .into_response()
}

/// The `limit` of the list endpoints when none is given.
const DEFAULT_LIMIT: u32 = 100;

/// Query of `GET /admin/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    source: Option<String>,
    limit: Option<u32>,
}

impl Expected for EventsQuery {
    const EXPECTED: &'static str =
        "optional `source` (a source name) and `limit` (a whole number, default 100)";
}

/// Query of `GET /admin/dlq`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DlqQuery {
    destination: Option<String>,
    limit: Option<u32>,
}

impl Expected for DlqQuery {
    const EXPECTED: &'static str =
        "optional `destination` (a destination name) and `limit` (a whole number, default 100)";
}

/// Body of `POST /admin/dlq/redrive`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RedriveBody {
    destination: Option<String>,
    delivery: Option<i64>,
}

impl Expected for RedriveBody {
    const EXPECTED: &'static str = "a JSON object with optional \"destination\" (a configured \
        destination's name) and \"delivery\" (a dead letter's id, a whole number), such as \
        {\"destination\": \"app\"}; {} redrives every dead letter";
}

/// Body of `POST /admin/replay`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    source: String,
    since: TimeText,
    #[serde(default)]
    until: Option<TimeText>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    force: bool,
}

impl Expected for ReplayBody {
    const EXPECTED: &'static str = "a JSON object with \"source\" (a configured source's name), \
        \"since\" and optional \"until\" (each a duration ago such as \"1h\", an RFC 3339 \
        timestamp, or milliseconds since the epoch), optional \"dry_run\" and \"force\" \
        (booleans), such as {\"source\": \"stripe\", \"since\": \"1h\", \"dry_run\": true}";
}

/// A time of [`ReplayBody`]: a string for [`parse_time`], or a number of ms since the epoch.
#[derive(Debug)]
struct TimeText(String);

impl<'de> Deserialize<'de> for TimeText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = TimeText;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "a duration ago such as \"1h\", an RFC 3339 timestamp, or milliseconds since \
                     the epoch",
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<TimeText, E> {
                Ok(TimeText(v.to_owned()))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TimeText, E> {
                Ok(TimeText(v.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl ReplayBody {
    fn resolve(self, now: i64) -> Result<ReplayRequest, RequestError> {
        Ok(ReplayRequest {
            since: parse_time("since", &self.since.0, now)?,
            until: self
                .until
                .map(|t| parse_time("until", &t.0, now))
                .transpose()?,
            source: self.source,
            dry_run: self.dry_run,
            force: self.force,
        })
    }
}

async fn list_events<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Params(query): Params<EventsQuery>,
) -> Response {
    answer(
        gateway
            .list_events(
                query.source.as_deref(),
                query.limit.unwrap_or(DEFAULT_LIMIT),
            )
            .await,
    )
}

async fn show_event<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    EventPath(source, event_id): EventPath,
) -> Response {
    match gateway.show_event(&source, &event_id).await {
        Ok(Some(detail)) => Json(detail).into_response(),
        Ok(None) => Problem::new(
            StatusCode::NOT_FOUND,
            "unknown-event",
            "Unknown event",
            format!("no event {event_id:?} of source {source:?} is stored"),
        )
        .into_response(),
        Err(e) => answer::<()>(Err(e)),
    }
}

async fn dead_letters<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Params(query): Params<DlqQuery>,
) -> Response {
    answer(
        gateway
            .dead_letters(
                query.destination.as_deref(),
                query.limit.unwrap_or(DEFAULT_LIMIT),
            )
            .await,
    )
}

async fn redrive<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Body(request): Body<RedriveBody>,
) -> Response {
    let redriven = gateway
        .redrive(request.destination.as_deref(), request.delivery)
        .await;
    answer(redriven.map(|n| serde_json::json!({ "redriven": n })))
}

async fn replay<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Body(body): Body<ReplayBody>,
) -> Response {
    match body.resolve(gateway.now().as_millis()) {
        Ok(request) => answer(gateway.replay(&request, &|_, _| {}).await),
        Err(e) => refused(&e),
    }
}

async fn gc<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    answer(gateway.gc().await)
}

/// The last millisecond RFC 3339 can write: 9999-12-31T23:59:59.999Z.
const LAST_RFC3339_MS: i64 = 253_402_300_799_999;

/// `t` (ms since the epoch) as RFC 3339 UTC with milliseconds, for listings; a time RFC 3339
/// cannot write (before 1970 or after the year 9999, as a corrupt or hand-edited row may hold)
/// as the plain number of milliseconds (one past 9999 reads back through [`parse_time`]).
pub fn format_time(t: i64) -> String {
    match u64::try_from(t) {
        Ok(ms) if t <= LAST_RFC3339_MS => {
            humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_millis(ms))
                .to_string()
        }
        // humantime's Display fails past 9999, and `to_string` panics on that.
        _ => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_rfc3339_cannot_write_are_shown_as_milliseconds() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_time(1_769_860_800_250), "2026-01-31T12:00:00.250Z");
        assert_eq!(format_time(LAST_RFC3339_MS), "9999-12-31T23:59:59.999Z");
        // Year 10000 and beyond: humantime's Display would fail, and `to_string` panic.
        assert_eq!(format_time(LAST_RFC3339_MS + 1), "253402300800000");
        assert_eq!(format_time(i64::MAX), "9223372036854775807");
        // Before the epoch: not 1970 (which would be wrong), the number as stored.
        assert_eq!(format_time(-1), "-1");
        assert_eq!(format_time(i64::MIN), "-9223372036854775808");
        assert_eq!(
            parse_time("until", &format_time(LAST_RFC3339_MS + 1), 0),
            Ok(LAST_RFC3339_MS + 1)
        );
    }

    #[test]
    fn times_are_read_as_the_cli_and_the_admin_api_take_them() {
        let now = 1_769_860_800_000; // 2026-01-31T12:00:00Z
        assert_eq!(parse_time("since", "1h", now), Ok(now - 3_600_000));
        assert_eq!(parse_time("since", " 1h 30m ", now), Ok(now - 5_400_000));
        assert_eq!(parse_time("since", "250ms", now), Ok(now - 250));
        assert_eq!(parse_time("since", "2026-01-31T12:00:00Z", 0), Ok(now));
        assert_eq!(
            parse_time("since", "2026-01-31T12:00:00.250+00:00", 0),
            Ok(now + 250)
        );
        assert_eq!(parse_time("since", "1769860800000", 0), Ok(now));
        assert_eq!(parse_time("since", "0", now), Ok(0));
        for bad in [
            "",
            "yesterday",
            "-5",
            "1.5",
            "1969-12-31T23:59:59Z",
            "5 parsecs",
        ] {
            assert_eq!(
                parse_time("--until", bad, now),
                Err(RequestError::BadTime {
                    field: "--until",
                    value: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
    }
}
