//! `idem serve` with a `[telemetry]` table exports its spans (issue 16, item 2): the binary
//! installs the trace layer and sends the spans still queued when it stops on SIGTERM. The span
//! tree itself is tested in idem-gateway's `traces` tests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use idem_http::verify::stripe;

use crate::serve_process::{STRIPE_SECRET, ServeProcess, free_port, write_config};
use crate::support::{Downstream, unix_now};

/// The bodies of the OTLP/HTTP protobuf exports a local collector received.
async fn collector() -> (std::net::SocketAddr, Arc<Mutex<Vec<Bytes>>>) {
    let exports = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&exports);
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let kept = Arc::clone(&kept);
            async move {
                if headers.get("content-type").and_then(|v| v.to_str().ok())
                    != Some("application/x-protobuf")
                {
                    return StatusCode::UNSUPPORTED_MEDIA_TYPE;
                }
                kept.lock().unwrap().push(body);
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, exports)
}

/// Whether `haystack` holds `needle`: protobuf carries strings and ids as raw bytes, so a span
/// name, an event id and a trace id are found in an export as they are.
fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// An event through a traced `idem serve`: the destination gets a `traceparent`, and once the
/// process stopped on SIGTERM the collector holds the event's `ingest`, `ingest_batch` and
/// `dispatch` spans, in the trace id the destination saw, under the configured service name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_exports_the_spans_of_an_event_by_its_exit() {
    let (collector_addr, exports) = collector().await;
    let app = Downstream::ok().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let telemetry = format!(
        "[telemetry]\nendpoint = \"http://{collector_addr}\"\nservice_name = \"idem-cli-test\"\n"
    );
    let config = write_config(dir.path(), port, app.addr, &telemetry);
    let serve = ServeProcess::start(&config, port).await;

    let body = br#"{"id":"evt_traced","object":"event","type":"customer.created","created":1,"data":{"object":{"id":"cus_1","object":"customer"}}}"#;
    let answer = idem_testkit::http_client()
        .post(format!("{}/webhooks/stripe", serve.base))
        .header(
            "stripe-signature",
            stripe::sign(STRIPE_SECRET, unix_now(), body),
        )
        .body(&body[..])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.with_key("stripe:evt_traced").is_empty() {
        assert!(Instant::now() < deadline, "the event was not forwarded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let sent = app.with_key("stripe:evt_traced");
    let traceparent = sent[0]
        .header("traceparent")
        .expect("a traceparent")
        .to_owned();
    let trace_id = hex::decode(traceparent.split('-').nth(1).unwrap()).unwrap();

    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");

    let exports = exports.lock().unwrap().concat();
    for needle in [
        &b"idem-cli-test"[..],
        b"ingest_batch",
        b"dispatch",
        b"evt_traced",
        &trace_id,
    ] {
        assert!(
            holds(&exports, needle),
            "the exports hold {:?}",
            String::from_utf8_lossy(needle)
        );
    }
}
