//! The `/admin` HTTP API (bearer token) over the [operations](crate::operations) on stored
//! events; its endpoints are listed in docs/gateway.md ("The admin API").

use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json};
use idem_core::Timestamp;
use idem_sql::ListOptions;
use serde::de::{self, DeserializeOwned};
use serde::{Deserialize, Deserializer, Serialize};

use super::admin_guard::{Guard, require_token};
use super::console::SignInLimiter;
use crate::Error;
use crate::error::RequestError;
use crate::gateway::Gateway;
use crate::http::problem::Problem;
use crate::model::time::parse_time;
use crate::operations::{RebuildRequest, RedriveRequest, ReplayRequest};
use crate::reload_request::ReloadHandle;
use crate::store::GatewayDb;

/// `/admin/…`, when the configuration has an admin token; otherwise no routes. The token is
/// checked before anything else of the request is read.
pub(crate) fn router<DB: GatewayDb>(gateway: Gateway<DB>, reload: ReloadHandle) -> Router {
    if gateway.config().admin_token.is_none() {
        return Router::new();
    }
    Router::new()
        .route("/admin/events", get(list_events::<DB>))
        .route("/admin/events/{source}/{event_id}", get(show_event::<DB>))
        .route(
            "/admin/events/{source}/{event_id}/resend",
            post(resend::<DB>),
        )
        .route("/admin/dlq", get(dead_letters::<DB>))
        .route("/admin/dlq/redrive", post(redrive::<DB>))
        .route("/admin/replay", post(replay::<DB>))
        .route("/admin/gc", post(gc::<DB>))
        .route(
            "/admin/reload",
            post(reload_config).layer(Extension(reload)),
        )
        .route("/admin/destinations", get(destinations::<DB>))
        .route("/admin/destinations/{destination}/pause", post(pause::<DB>))
        .route(
            "/admin/destinations/{destination}/resume",
            post(resume::<DB>),
        )
        .route("/admin/consumers", get(list_consumers::<DB>))
        .route("/admin/consumers/{name}", get(show_consumer::<DB>))
        .route("/admin/consumers/{name}/reset", post(reset_consumer::<DB>))
        .route_layer(middleware::from_fn_with_state(
            Arc::new(Guard {
                gateway: gateway.clone(),
                wrong: SignInLimiter::default(),
            }),
            require_token::<DB>,
        ))
        .with_state(gateway)
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
    let status = if e.is_conflict() {
        StatusCode::CONFLICT
    } else {
        StatusCode::BAD_REQUEST
    };
    Problem::new(status, e.code(), e.title(), e.to_string()).into_response()
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

/// `{destination}` of `POST /admin/destinations/{destination}/pause` and `…/resume`, answering
/// a path it cannot read (bad percent-encoding) with problem+json (400 `bad-path`).
struct DestinationPath(String);

impl<S: Send + Sync> FromRequestParts<S> for DestinationPath {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(destination)) => Ok(Self(destination)),
            Err(rejection) => Err(Problem::new(
                rejection.status(),
                "bad-path",
                "Bad path",
                format!(
                    "the path cannot be read ({}); expected /admin/destinations/{{destination}}/pause \
                     or …/resume, the name percent-encoded UTF-8",
                    rejection.body_text()
                ),
            )
            .into_response()),
        }
    }
}

/// The `limit` of the list endpoints when none is given.
const DEFAULT_LIMIT: u32 = 100;
/// The largest `limit` the list endpoints take: a list is one answer, held in memory.
pub(crate) const MAX_LIMIT: u32 = 1000;

/// `limit` as given (1 to [`MAX_LIMIT`]) or [`DEFAULT_LIMIT`]; another is refused.
fn limit(given: Option<u32>) -> Result<u32, Box<Response>> {
    match given {
        Some(0) => Err(Box::new(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-limit",
            "Limit out of range",
            format!("limit=0 lists nothing; expected a whole number from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"),
        )
        .into_response())),
        Some(n) if n > MAX_LIMIT => Err(Box::new(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-limit",
            "Limit too large",
            format!("limit={n} is more than {MAX_LIMIT}; expected a whole number from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"),
        )
        .into_response())),
        Some(n) => Ok(n),
        None => Ok(DEFAULT_LIMIT),
    }
}

/// Query of `GET /admin/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    source: Option<String>,
    limit: Option<u32>,
    unrouted: Option<bool>,
    after: Option<String>,
}

impl Expected for EventsQuery {
    const EXPECTED: &'static str = "optional `source` (a source name), `limit` (a whole number up to 1000, default 100), `unrouted` (true: only events no route took) and `after` (the cursor of a `Link: <…>; rel=\"next\"` header)";
}

/// Query of `GET /admin/dlq`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DlqQuery {
    destination: Option<String>,
    limit: Option<u32>,
    after: Option<String>,
}

impl Expected for DlqQuery {
    const EXPECTED: &'static str = "optional `destination` (a destination name), `limit` (a whole number up to 1000, default 100) and `after` (the cursor of a `Link: <…>; rel=\"next\"` header)";
}

/// Body of `POST /admin/dlq/redrive`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RedriveBody {
    destination: Option<String>,
    delivery: Option<i64>,
    #[serde(default)]
    deliveries: Vec<i64>,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
}

impl Expected for RedriveBody {
    const EXPECTED: &'static str = "a JSON object with optional \"destination\" (a configured \
        destination's name), \"delivery\" (a dead letter's id, a whole number), \"deliveries\" \
        (a list of them), \"force\" and \"dry_run\" (booleans), such as {\"destination\": \
        \"app\"} or {\"deliveries\": [4, 7]}; {} redrives every dead letter";
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
    event_type: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    backfill: bool,
    #[serde(default)]
    rebuild: bool,
    #[serde(default)]
    destination: Option<String>,
    #[serde(default)]
    skip_missing_bodies: bool,
}

impl Expected for ReplayBody {
    const EXPECTED: &'static str = "a JSON object with \"source\" (a configured source's name), \
        \"since\" and optional \"until\" (each a duration ago such as \"1h\", an RFC 3339 \
        timestamp, or milliseconds since the epoch), optional \"event_type\" (a type, or a \
        prefix ending in *), optional \"dry_run\", \"force\" and \"backfill\" \
        (booleans), or \"rebuild\": true with \"destination\" (a destination a route of the \
        source leads to) and optional \"skip_missing_bodies\" (a boolean), such as \
        {\"source\": \"stripe\", \"since\": \"1h\", \"dry_run\": true}";
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
            event_type: self.event_type,
            dry_run: self.dry_run,
            force: self.force,
        })
    }
}

async fn list_events<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Params(query): Params<EventsQuery>,
) -> Response {
    let limit = match limit(query.limit) {
        Ok(limit) => limit,
        Err(refused) => return *refused,
    };
    let unrouted = query.unrouted == Some(true);
    let page = gateway
        .events_page(
            query.source.as_deref(),
            unrouted,
            limit,
            query.after.as_deref(),
        )
        .await;
    let mut next = vec![("limit", limit.to_string())];
    next.extend(query.source.map(|source| ("source", source)));
    if unrouted {
        next.push(("unrouted", "true".to_owned()));
    }
    paged("/admin/events", &next, page)
}

/// `page`'s rows as a JSON array, with a `Link: <path?query&after=…>; rel="next"` header
/// (RFC 8288 §3) when more rows follow; `query` is the request's own, without `after`.
fn paged<T: Serialize>(
    path: &str,
    query: &[(&str, String)],
    page: Result<crate::operations::Page<T>, Error>,
) -> Response {
    let page = match page {
        Ok(page) => page,
        Err(e) => return answer::<()>(Err(e)),
    };
    let mut response = Json(page.items).into_response();
    if let Some(after) = page.next {
        let mut target = form_urlencoded::Serializer::new(String::new());
        for (key, value) in query {
            target.append_pair(key, value);
        }
        target.append_pair("after", &after);
        let link = format!("<{path}?{}>; rel=\"next\"", target.finish());
        if let Ok(value) = axum::http::HeaderValue::from_str(&link) {
            response
                .headers_mut()
                .insert(axum::http::header::LINK, value);
        }
    }
    response
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

/// Query of `POST /admin/events/{source}/{event_id}/resend`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResendQuery {
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
}

impl Expected for ResendQuery {
    const EXPECTED: &'static str = "optional `force` and `dry_run` (true or false)";
}

async fn resend<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    EventPath(source, event_id): EventPath,
    Params(query): Params<ResendQuery>,
) -> Response {
    match gateway
        .resend(&source, &event_id, query.force, query.dry_run)
        .await
    {
        Ok(Some(report)) => Json(report).into_response(),
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
    let limit = match limit(query.limit) {
        Ok(limit) => limit,
        Err(refused) => return *refused,
    };
    let page = gateway
        .dead_letters_page(query.destination.as_deref(), limit, query.after.as_deref())
        .await;
    let mut next = vec![("limit", limit.to_string())];
    next.extend(
        query
            .destination
            .map(|destination| ("destination", destination)),
    );
    paged("/admin/dlq", &next, page)
}

async fn redrive<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Body(request): Body<RedriveBody>,
) -> Response {
    let request = RedriveRequest {
        destination: request.destination,
        deliveries: request
            .delivery
            .into_iter()
            .chain(request.deliveries)
            .collect(),
        force: request.force,
        dry_run: request.dry_run,
    };
    answer(gateway.redrive(&request).await)
}

async fn replay<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Body(body): Body<ReplayBody>,
) -> Response {
    if let Some(mix) = body.mixed_modes() {
        return Problem::new(StatusCode::BAD_REQUEST, "bad-body", "Bad body", mix).into_response();
    }
    let (backfill, rebuild) = (body.backfill, body.rebuild);
    let destination = body.destination.clone().unwrap_or_default();
    let skip_missing_bodies = body.skip_missing_bodies;
    match body.resolve(gateway.now().as_millis()) {
        Ok(request) if backfill => answer(gateway.backfill(&request).await),
        Ok(request) if rebuild => {
            let request = RebuildRequest {
                source: request.source,
                since: request.since,
                until: request.until,
                event_type: request.event_type,
                destination,
                dry_run: request.dry_run,
                skip_missing_bodies,
            };
            answer(gateway.rebuild(&request).await)
        }
        Ok(request) => answer(gateway.replay(&request, &|_, _| {}).await),
        Err(e) => refused(&e),
    }
}

impl ReplayBody {
    /// Why the body mixes what its modes take, if it does: `force` with a backfill or a
    /// rebuild, both modes at once, a rebuild without its destination, or a rebuild's fields
    /// without `rebuild`.
    fn mixed_modes(&self) -> Option<&'static str> {
        if self.backfill && self.rebuild {
            Some("\"backfill\" and \"rebuild\" are two kinds of replay; send one or the other")
        } else if self.backfill && self.force {
            Some(
                "\"force\" does not apply to a backfill (its new deliveries go through the version guard); send one or the other",
            )
        } else if self.rebuild && self.force {
            Some(
                "\"force\" does not apply to a rebuild (it sends stale and older events anyway); leave it out",
            )
        } else if self.rebuild && self.destination.is_none() {
            Some(
                "a rebuild needs \"destination\": the destination whose consumer is rebuilt, one a route of the source leads to",
            )
        } else if !self.rebuild && (self.destination.is_some() || self.skip_missing_bodies) {
            Some(
                "\"destination\" and \"skip_missing_bodies\" apply to a rebuild only; add \"rebuild\": true",
            )
        } else {
            None
        }
    }
}

async fn gc<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    answer(gateway.gc().await)
}

/// `POST /admin/reload`: the configuration file read again and applied (docs/gateway.md,
/// "Reload"): 200 with what changed, or 409 with why nothing was applied.
async fn reload_config(Extension(reload): Extension<ReloadHandle>) -> Response {
    match reload.reload().await {
        Ok(report) => Json(report).into_response(),
        Err(e) => Problem::new(
            StatusCode::CONFLICT,
            e.kind(),
            "Configuration not reloaded",
            e.to_string(),
        )
        .into_response(),
    }
}

async fn destinations<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    answer(gateway.destinations().await)
}

async fn pause<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    DestinationPath(destination): DestinationPath,
) -> Response {
    answer(gateway.pause(&destination).await)
}

async fn resume<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    DestinationPath(destination): DestinationPath,
) -> Response {
    answer(gateway.resume(&destination).await)
}

/// `{name}` of `GET /admin/consumers/{name}` and `POST /admin/consumers/{name}/reset`, answering a path it cannot read (bad
/// percent-encoding) with problem+json (400 `bad-path`).
struct ConsumerPath(String);

impl<S: Send + Sync> FromRequestParts<S> for ConsumerPath {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(name)) => Ok(Self(name)),
            Err(rejection) => Err(Problem::new(
                rejection.status(),
                "bad-path",
                "Bad path",
                format!(
                    "the path cannot be read ({}); expected /admin/consumers/{{name}}/reset, the \
                     name percent-encoded UTF-8",
                    rejection.body_text()
                ),
            )
            .into_response()),
        }
    }
}

/// Body of `POST /admin/consumers/{name}/reset`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetBody {
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    confirm: bool,
}

impl Expected for ResetBody {
    const EXPECTED: &'static str = "a JSON object with \"confirm\": true (required unless \
        \"dry_run\": true) and optional \"dry_run\" (a boolean), such as {\"confirm\": true} \
        or {\"dry_run\": true}";
}

/// `POST /admin/consumers/{name}/reset`: the consumer's inbox keys, version-guard rows, parked
/// markers and Kafka offsets deleted (docs/gateway.md, "Reset a consumer"): 200 with the rows
/// per table; 400 without `"confirm": true`; 409 for a live consumer or one the gateway keeps;
/// 404 for an unknown one.
async fn reset_consumer<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    ConsumerPath(name): ConsumerPath,
    Body(body): Body<ResetBody>,
) -> Response {
    if !body.confirm && !body.dry_run {
        // What would refuse the reset (a live, protected or unknown consumer) is said first.
        match gateway.reset_consumer(&name, true).await {
            Err(Error::Store(e)) => return reset_refused(e),
            Err(e) => return answer::<()>(Err(e)),
            Ok(_) => {}
        }
        return Problem::new(
            StatusCode::BAD_REQUEST,
            "confirm-required",
            "Confirmation required",
            format!(
                "resetting consumer {name:?} deletes its inbox keys, version-guard rows, parked \
                 markers and Kafka offsets: send {{\"confirm\": true}} to do it, or \
                 {{\"dry_run\": true}} to count them first"
            ),
        )
        .into_response();
    }
    match gateway.reset_consumer(&name, body.dry_run).await {
        Err(Error::Store(e)) => reset_refused(e),
        result => answer(result),
    }
}

/// A consumer reset's refusal from the store as problem+json: 409 `consumer-live` or
/// `gateway-consumer`, 404 `unknown-consumer`, 400 `invalid`; anything else as [`answer`] does.
fn reset_refused(e: idem_sql::Error) -> Response {
    let (status, code, title) = match &e {
        idem_sql::Error::ConsumerLive { .. } => {
            (StatusCode::CONFLICT, "consumer-live", "Consumer is live")
        }
        idem_sql::Error::ConsumerProtected { .. } => (
            StatusCode::CONFLICT,
            "gateway-consumer",
            "Consumer kept by the gateway",
        ),
        idem_sql::Error::UnknownConsumer { .. } => (
            StatusCode::NOT_FOUND,
            "unknown-consumer",
            "Unknown consumer",
        ),
        _ => return answer::<()>(Err(Error::Store(e))),
    };
    Problem::new(status, code, title, e.to_string()).into_response()
}

/// Query of `GET /admin/consumers`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsumersQuery {
    since: Option<String>,
}

impl Expected for ConsumersQuery {
    const EXPECTED: &'static str = "optional `since`: only consumers first seen since then (a \
        duration ago such as `90d`, an RFC 3339 time, or ms since the epoch)";
}

/// `GET /admin/consumers`: every consumer (first seen since `since`, when given), by name;
/// 400 `bad-time` for a `since` that is no time.
async fn list_consumers<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    Params(query): Params<ConsumersQuery>,
) -> Response {
    let now = gateway.now().as_millis();
    let mut options = ListOptions::at(Timestamp(now));
    if let Some(since) = &query.since {
        match parse_time("since", since, now) {
            Ok(since) => options = options.since(Timestamp(since)),
            Err(e) => return answer::<()>(Err(Error::Request(RequestError::from(e)))),
        }
    }
    answer(gateway.consumers(&options).await)
}

/// `GET /admin/consumers/{name}`: one consumer; 404 `unknown-consumer` naming the known ones.
async fn show_consumer<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    ConsumerPath(name): ConsumerPath,
) -> Response {
    let options = ListOptions::at(gateway.now());
    match gateway.consumer(&name, &options).await {
        Err(Error::Store(e)) => reset_refused(e),
        result => answer(result),
    }
}
