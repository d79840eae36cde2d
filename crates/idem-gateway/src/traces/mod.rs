//! Traces: the spans the gateway makes with `tracing` and how they join W3C trace contexts
//! (W3C Trace Context Level 1). A program exports them by adding [`Traces::layer`] to its
//! subscriber (`idem serve` does when `[telemetry]` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set).
//!
//! - `ingest`, one per webhook request, from its arrival to its answer (signature check, event
//!   read, the wait for its commit), with a link to the `ingest_batch` span of the group
//!   commit that stored it. A sender's `traceparent` is its parent on a source with
//!   `trust_traceparent = true`; on any other source the span starts a trace of its own and
//!   links to the sender's.
//! - `ingest_batch`, one per group-commit transaction, the root of a trace of its own.
//! - `dispatch`, one per attempt, a child of the context stored with the event (the `ingest`
//!   span's, or with traces off a trusted sender's), so every attempt of an event, after a
//!   restart or days later, is in the event's trace; its own context is the `traceparent` the
//!   destination receives.
//!
//! Every span has target [`TARGET`]. No subscriber wants that target unless it asks for it, so
//! with traces off each span is a disabled `Span` and nothing of OpenTelemetry is made: the
//! only work per request is looking up the `traceparent` header, and storing and sending it
//! for trusted sources.

mod context;
mod export;

use std::str::FromStr;

use http::HeaderMap;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

pub(crate) use context::TraceHeaders;
use context::TraceParent;
pub use context::{TRACEPARENT, TRACESTATE};
pub use export::Traces;

/// The `tracing` target of every span the gateway makes for traces. A log filter should leave
/// it out (`idem serve` does: `idem_gateway::traces=off`), or each request pays for a span the
/// log does not print.
pub const TARGET: &str = "idem_gateway::traces";

/// A new `ingest` span for a webhook of `source`, with no parent yet.
pub(crate) fn ingest_span(source: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "ingest",
        otel.kind = "server",
        idem.source = source,
        idem.event_id = Empty,
        idem.outcome = Empty,
        http.response.status_code = Empty,
        otel.status_code = Empty,
    )
}

/// Puts `span`, a new `ingest` span, in the trace the request's `headers` carry: as its child
/// when the source is `trusted`, else linked to it. Returns the trace context to store with
/// the event: the span's own; with traces off, a trusted sender's as it came; otherwise none.
pub(crate) fn start_ingest(
    span: &Span,
    headers: &HeaderMap,
    trusted: bool,
) -> Option<TraceHeaders> {
    let incoming = context::incoming(headers);
    if span.is_disabled() {
        return passed_on(incoming.filter(|_| trusted));
    }
    if let Some((parent, state)) = &incoming {
        let remote = remote(parent, state.as_deref());
        if trusted {
            // Not yet entered, so the parent can still be set.
            let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
        } else {
            span.add_link(remote);
        }
    }
    own(span).or_else(|| passed_on(incoming.filter(|_| trusted)))
}

/// The `ingest` span's outcome: the HTTP `status` of the answer and `outcome` (`accepted`,
/// `duplicate`, `rejected`, `unavailable`); a 5xx is an error (OpenTelemetry's HTTP server
/// span convention: a 4xx is the client's fault, not the server's).
pub(crate) fn ingest_answered(span: &Span, status: u16, outcome: &'static str) {
    span.record("http.response.status_code", status);
    span.record("idem.outcome", outcome);
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
}

/// A new `ingest_batch` span for a group commit of `requests`, the root of its own trace.
pub(crate) fn batch_span(requests: usize) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "ingest_batch",
        idem.batch_size = requests,
        otel.status_code = Empty,
    )
}

/// Links each `ingest` span of `requests` to `batch`, the span of the commit they are in.
pub(crate) fn link_to_batch<'a>(batch: &Span, requests: impl IntoIterator<Item = &'a Span>) {
    if batch.is_disabled() {
        return;
    }
    let cx = batch.context();
    let batch = cx.span().span_context().clone();
    if !batch.is_valid() {
        return;
    }
    for span in requests.into_iter().filter(|s| !s.is_disabled()) {
        span.add_link(batch.clone());
    }
}

/// Marks `span` (an `ingest_batch`) failed: its requests were answered 503.
pub(crate) fn batch_failed(span: &Span) {
    span.record("otel.status_code", "error");
}

/// A new `dispatch` span for attempt number `attempt` of event `event_id` of `source` at
/// `destination`, with no parent yet.
pub(crate) fn dispatch_span(destination: &str, source: &str, event_id: &str, attempt: i64) -> Span {
    tracing::info_span!(
        target: TARGET,
        parent: None,
        "dispatch",
        otel.kind = "client",
        idem.destination = destination,
        idem.source = source,
        idem.event_id = event_id,
        idem.attempt = attempt,
        idem.outcome = Empty,
        http.response.status_code = Empty,
        otel.status_code = Empty,
    )
}

/// Makes `span`, a new `dispatch` span, a child of the event's stored context (`traceparent`,
/// `tracestate`; a root without one). Returns the headers the attempt sends: the span's own
/// context; with traces off, the stored one as it is.
pub(crate) fn start_dispatch(
    span: &Span,
    traceparent: Option<String>,
    tracestate: Option<String>,
) -> Option<TraceHeaders> {
    let stored = traceparent.map(|traceparent| TraceHeaders {
        traceparent,
        tracestate,
    });
    if span.is_disabled() {
        return stored;
    }
    if let Some(parent) = stored
        .as_ref()
        .and_then(|s| TraceParent::parse(&s.traceparent))
    {
        let remote = remote(
            &parent,
            stored.as_ref().and_then(|s| s.tracestate.as_deref()),
        );
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    own(span).or(stored)
}

/// The `dispatch` span's outcome: the response's `status` (none without one) and `outcome`
/// (`delivered`, `retry`, `dead`); anything but delivered is an error.
pub(crate) fn attempt_ended(span: &Span, status: Option<u16>, outcome: &'static str) {
    if let Some(status) = status {
        span.record("http.response.status_code", status);
    }
    span.record("idem.outcome", outcome);
    if outcome != "delivered" {
        span.record("otel.status_code", "error");
    }
}

/// A trusted sender's context, passed on as it came (normalised to version 00).
fn passed_on(incoming: Option<(TraceParent, Option<String>)>) -> Option<TraceHeaders> {
    let (parent, tracestate) = incoming?;
    Some(TraceHeaders {
        traceparent: parent.header(),
        tracestate,
    })
}

/// The context of `span` as W3C headers, when an OpenTelemetry layer records it (another
/// subscriber may have enabled the span without one).
fn own(span: &Span) -> Option<TraceHeaders> {
    let cx = span.context();
    let own = cx.span().span_context().clone();
    if !own.is_valid() {
        return None;
    }
    let state = own.trace_state().header();
    Some(TraceHeaders {
        traceparent: format!(
            "00-{}-{}-{:02x}",
            own.trace_id(),
            own.span_id(),
            own.trace_flags().to_u8()
        ),
        tracestate: (!state.is_empty()).then_some(state),
    })
}

/// A remote span context of `parent` and `tracestate` (dropped when OpenTelemetry cannot read
/// it, as W3C Trace Context §3.3.1.5 allows).
fn remote(parent: &TraceParent, tracestate: Option<&str>) -> SpanContext {
    let state = tracestate
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    SpanContext::new(
        TraceId::from_bytes(parent.trace_id),
        SpanId::from_bytes(parent.parent_id),
        TraceFlags::new(parent.flags),
        true,
        state,
    )
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use tracing_subscriber::EnvFilter;

    use super::*;

    const SENDER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    /// Under a log filter that leaves the target out (as `idem serve`'s does) and no trace
    /// layer, every span is disabled, so nothing of OpenTelemetry is made; a trusted sender's
    /// context is still passed on as it came, an untrusted one's is not.
    #[test]
    fn with_traces_off_no_span_is_made_and_only_a_trusted_context_passes() {
        let filter = EnvFilter::new(format!("trace,{TARGET}=off"));
        let subscriber = tracing_subscriber::fmt().with_env_filter(filter).finish();
        tracing::subscriber::with_default(subscriber, || {
            let mut headers = HeaderMap::new();
            headers.insert(TRACEPARENT, HeaderValue::from_static(SENDER));
            headers.insert(TRACESTATE, HeaderValue::from_static("congo=t61rcWkgMzE"));
            let span = ingest_span("stripe");
            assert!(span.is_disabled());
            assert!(batch_span(1).is_disabled());
            assert_eq!(start_ingest(&span, &headers, false), None);
            let passed = start_ingest(&span, &headers, true).expect("passed on");
            assert_eq!(passed.traceparent, SENDER);
            assert_eq!(passed.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));

            let dispatch = dispatch_span("app", "stripe", "evt_1", 2);
            assert!(dispatch.is_disabled());
            let sent = start_dispatch(
                &dispatch,
                Some(passed.traceparent.clone()),
                passed.tracestate.clone(),
            );
            assert_eq!(sent, Some(passed));
            assert_eq!(start_dispatch(&dispatch, None, None), None);
        });
    }
}
