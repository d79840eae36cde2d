//! `POST /webhooks/{source}`: read the body within its limits, hand it to ingest (which
//! verifies the signature on the raw bytes and reads the event), submit it to the group commit,
//! then answer 200 with `idem-status`, or a problem+json (docs/design.md C2, C3, C10, C11).

use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::problem::Problem;
use crate::gateway::Gateway;
use crate::health::rejection_reason;
use crate::ingest::answer::Answer;
use crate::ingest::unit::{Pending, Unavailable};
use crate::ingest::{Refused, accept, submit};
use crate::metric_definitions::{INGEST_DURATION_SECONDS, INGEST_TOTAL, WEBHOOK_REJECTED_TOTAL};
use crate::store::GatewayDb;
use crate::traces::{self, TraceHeaders};
use crate::wiring::Wiring;

/// The header that tells the sender how its request was taken: `accepted` or `duplicate`.
pub const STATUS_HEADER: &str = "idem-status";

/// The state the ingest handler runs with.
pub(crate) struct IngestState<DB: GatewayDb> {
    pub gateway: Gateway<DB>,
    /// The group-commit queue; `None` when each request commits on its own.
    pub queue: Option<mpsc::Sender<Pending>>,
}

impl<DB: GatewayDb> Clone for IngestState<DB> {
    fn clone(&self) -> Self {
        Self {
            gateway: self.gateway.clone(),
            queue: self.queue.clone(),
        }
    }
}

/// The body of a 200 answer.
#[derive(Debug, Serialize)]
struct Accepted<'a> {
    event_id: &'a str,
    status: &'static str,
}

/// Refuses a webhook whose declared `Content-Length` is over `max_body_bytes` at once (413),
/// before a byte of its body is read: reading stops only at the limit otherwise, or holds the
/// connection until `body_read_timeout` when the client waits for `100 Continue` or sends less.
/// Counted as a refusal of the source the path names, when one of that name is configured.
pub(crate) async fn declared_length<DB: GatewayDb>(
    State(gateway): State<Gateway<DB>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let wiring = gateway.wiring();
    let limit = wiring.config().max_body_bytes;
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        let source = (request.uri().path().strip_prefix("/webhooks/"))
            .and_then(|name| wiring.source_index(name))
            .map(|index| wiring.source(index).name.to_string());
        if let Some(source) = source {
            gateway.rejections().add(&source, "too_large");
            metrics::counter!(WEBHOOK_REJECTED_TOTAL, "source" => source, "reason" => "too_large")
                .increment(1);
        }
        return Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body-too-large",
            "Body too large",
            format!("the body is larger than the limit of {limit} bytes"),
        )
        .into_response();
    }
    next.run(request).await
}

/// The handler of `POST /webhooks/{source}`.
pub(crate) async fn handle<DB: GatewayDb>(
    State(state): State<IngestState<DB>>,
    source: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let source = match source {
        Ok(Path(source)) => source,
        Err(rejection) => {
            return Problem::new(
                rejection.status(),
                "bad-path",
                "Bad path",
                format!(
                    "the path cannot be read ({}); expected /webhooks/{{source}}, the name \
                     percent-encoded UTF-8",
                    rejection.body_text()
                ),
            )
            .into_response();
        }
    };
    let gateway = &state.gateway;
    // Sources are only ever added by a reload, so an index stays this source's.
    let wiring = gateway.wiring();
    let Some(index) = wiring.source_index(&source) else {
        return Problem::new(
            StatusCode::NOT_FOUND,
            "unknown-source",
            "Unknown source",
            format!("no source named {source:?} is configured"),
        )
        .into_response();
    };
    if let Some(broker) = wiring.source(index).broker() {
        return Problem::new(
            StatusCode::NOT_FOUND,
            "unknown-source",
            "Unknown source",
            format!(
                "source {source:?} takes its events from {}, not from webhooks",
                broker.describe()
            ),
        )
        .into_response();
    }
    let source = &wiring.source(index).name;
    let span = traces::ingest_span(source.as_str());
    let trace = traces::start_ingest(&span, &headers, wiring.source(index).trust_traceparent);
    let ingested = ingest(&state, &wiring, index, &headers, body, trace, &span)
        .instrument(span.clone())
        .await;
    let (response, status) = match ingested {
        Ok((event_id, answer)) => {
            let status = match answer {
                Answer::Accepted => "accepted",
                Answer::Duplicate => "duplicate",
            };
            let mut response = Json(Accepted {
                event_id: &event_id,
                status,
            })
            .into_response();
            response
                .headers_mut()
                .insert(STATUS_HEADER, HeaderValue::from_static(status));
            (response, status)
        }
        Err(problem) => {
            let status = if problem.status == StatusCode::SERVICE_UNAVAILABLE.as_u16() {
                "unavailable"
            } else {
                tracing::info!(%source, problem = %problem.problem_type, detail = %problem.detail, "delivery rejected");
                let code = problem.problem_type.trim_start_matches("urn:idem:problem:");
                if let Some(reason) = rejection_reason(code) {
                    gateway.rejections().add(source.as_str(), reason);
                    metrics::counter!(WEBHOOK_REJECTED_TOTAL, "source" => source.to_string(), "reason" => reason)
                        .increment(1);
                }
                "rejected"
            };
            (problem.into_response(), status)
        }
    };
    traces::ingest_answered(&span, response.status().as_u16(), status);
    metrics::counter!(INGEST_TOTAL, "source" => source.to_string(), "status" => status)
        .increment(1);
    metrics::histogram!(INGEST_DURATION_SECONDS, "source" => source.to_string())
        .record(started.elapsed().as_secs_f64());
    response
}

/// Verifies, reads and commits one webhook of source `index` of `wiring` (the one the request
/// looked its source up in), whose trace context to store is `trace` and whose `ingest` span is
/// `span`.
async fn ingest<DB: GatewayDb>(
    state: &IngestState<DB>,
    wiring: &Wiring,
    index: usize,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    trace: Option<TraceHeaders>,
    span: &tracing::Span,
) -> Result<(String, Answer), Problem> {
    let gateway = &state.gateway;
    let source = wiring.source(index);
    let body = body.map_err(|rejection| {
        if super::body_deadline::is_body_timeout(&rejection) {
            Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "body-timeout",
                "Body not received in time",
                format!(
                    "the body was not received within body_read_timeout ({:?}); nothing was kept, send it again",
                    wiring.config().body_read_timeout
                ),
            )
        } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body-too-large",
                "Body too large",
                format!(
                    "the body is larger than the limit of {} bytes",
                    wiring.config().max_body_bytes
                ),
            )
        } else {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "unreadable-body",
                "Unreadable body",
                rejection.body_text(),
            )
        }
    })?;
    let incoming =
        accept(source, index, headers, body, gateway.now(), trace, span).map_err(|refused| {
            match refused {
                Refused::NoWebhooks => Problem::new(
                    StatusCode::NOT_FOUND,
                    "unknown-source",
                    "Unknown source",
                    format!("source {:?} takes no webhooks", source.name.as_str()),
                ),
                Refused::Signature(e) => Problem::new(
                    StatusCode::BAD_REQUEST,
                    "bad-signature",
                    "Signature check failed",
                    e.to_string(),
                )
                .with_reason(e.reason()),
                Refused::Event(e) => {
                    let title = match e.code() {
                        "malformed-json" => "Malformed JSON",
                        "no-event-id" => "No event id",
                        _ => "Bad event field",
                    };
                    Problem::new(StatusCode::BAD_REQUEST, e.code(), title, e.to_string())
                }
            }
        })?;
    let event_id = incoming.event.event_id.to_string();
    let answer = submit(gateway, state.queue.as_ref(), incoming).await;
    let answer = answer.map_err(|Unavailable| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Store unavailable",
            "the event could not be stored; nothing was kept, send it again",
        )
    })?;
    if answer == Answer::Duplicate {
        tracing::debug!(source = %source.name, %event_id, "duplicate acknowledged");
    }
    Ok((event_id, answer))
}
