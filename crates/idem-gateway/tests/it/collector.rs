//! An OpenTelemetry collector inside the test: it takes `POST /v1/traces` with protobuf bodies
//! (OTLP specification, "OTLP/HTTP"), decodes each `ExportTraceServiceRequest` and keeps its
//! spans; and the runtime a traced test runs on, whose every thread sends the gateway's spans
//! through the trace pipeline to it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing;
use idem_gateway::Config;
use idem_gateway::traces::Traces;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;
use tracing_subscriber::layer::SubscriberExt as _;

/// The service name the traced tests export under.
pub(crate) const SERVICE: &str = "idem-under-test";

/// A span as the collector received it; ids in lower-case hex.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// OTLP `SpanKind`: 2 server, 3 client, 1 internal.
    pub kind: i32,
    pub attributes: HashMap<String, String>,
    /// (trace id, span id) of each link.
    pub links: Vec<(String, String)>,
    /// OTLP `Status.code`: 0 unset, 1 ok, 2 error.
    pub status: i32,
    /// The `service.name` of the resource it came with.
    pub service: String,
}

impl Span {
    /// The value of attribute `key`, as text.
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// The collector, and the pipeline whose spans it takes.
#[derive(Clone)]
pub(crate) struct Collector {
    spans: Arc<Mutex<Vec<Span>>>,
    traces: Arc<Traces>,
}

impl Collector {
    /// Every span exported so far: the pipeline is flushed first, so every span that ended
    /// before the call is in.
    pub(crate) async fn spans(&self) -> Vec<Span> {
        let traces = Arc::clone(&self.traces);
        tokio::task::spawn_blocking(move || traces.flush())
            .await
            .unwrap()
            .expect("the spans are exported to the collector");
        self.spans.lock().unwrap().clone()
    }

    /// The one span named `name` whose attribute `key` is `value`.
    pub(crate) async fn one(&self, name: &str, key: &str, value: &str) -> Span {
        let found: Vec<Span> = self
            .spans()
            .await
            .into_iter()
            .filter(|s| s.name == name && s.attr(key) == Some(value))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one {name} span with {key} = {value}: {found:#?}"
        );
        found.into_iter().next().unwrap()
    }

    async fn serve(listener: std::net::TcpListener, traces: Arc<Traces>) -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        let app = axum::Router::new().route(
            "/v1/traces",
            routing::post(move |headers: HeaderMap, body: Bytes| {
                let kept = Arc::clone(&kept);
                async move {
                    // OTLP/HTTP binary protobuf, as the gateway is to send it.
                    if headers.get("content-type").and_then(|v| v.to_str().ok())
                        != Some("application/x-protobuf")
                    {
                        return StatusCode::UNSUPPORTED_MEDIA_TYPE;
                    }
                    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                        return StatusCode::BAD_REQUEST;
                    };
                    kept.lock().unwrap().extend(received(request));
                    StatusCode::OK
                }
            }),
        );
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { spans, traces }
    }
}

fn text(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, String> {
    list.iter()
        .map(|kv| (kv.key.clone(), text(kv.value.as_ref())))
        .collect()
}

fn received(request: ExportTraceServiceRequest) -> Vec<Span> {
    let mut spans = Vec::new();
    for resource_spans in request.resource_spans {
        let resource = attributes(
            &resource_spans
                .resource
                .map(|r| r.attributes)
                .unwrap_or_default(),
        );
        let service = resource.get("service.name").cloned().unwrap_or_default();
        for span in resource_spans
            .scope_spans
            .into_iter()
            .flat_map(|scope| scope.spans)
        {
            spans.push(Span {
                name: span.name,
                trace_id: hex::encode(&span.trace_id),
                span_id: hex::encode(&span.span_id),
                parent_span_id: hex::encode(&span.parent_span_id),
                kind: span.kind,
                attributes: attributes(&span.attributes),
                links: span
                    .links
                    .iter()
                    .map(|l| (hex::encode(&l.trace_id), hex::encode(&l.span_id)))
                    .collect(),
                status: span.status.map_or(0, |s| s.code),
                service: service.clone(),
            });
        }
    }
    spans
}

/// Runs `test` with a collector on a runtime whose every thread (workers, blocking pool and
/// this one) has a subscriber with the gateway's trace layer, from a `[telemetry]` table
/// pointing at the collector. The subscriber is this test's alone: the other tests, on other
/// threads, keep the process's.
pub(crate) fn traced<F, Fut>(test: F)
where
    F: FnOnce(Collector) -> Fut,
    Fut: Future<Output = ()>,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let telemetry = format!(
        "[telemetry]\nendpoint = \"http://{}\"\nservice_name = \"{SERVICE}\"\n",
        listener.local_addr().unwrap()
    );
    let config = Config::from_toml(&telemetry, &|_| None).unwrap();
    let traces = Arc::new(Traces::start(config.telemetry.as_ref().unwrap()).unwrap());
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(traces.layer()));
    let on_start = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        // The thread keeps its subscriber for as long as it runs.
        .on_thread_start(move || std::mem::forget(tracing::dispatcher::set_default(&on_start)))
        .build()
        .unwrap();
    let _here = tracing::dispatcher::set_default(&dispatch);
    runtime.block_on(async {
        let collector = Collector::serve(listener, Arc::clone(&traces)).await;
        test(collector).await;
        tokio::task::spawn_blocking(move || traces.shutdown())
            .await
            .unwrap()
            .unwrap();
    });
}
