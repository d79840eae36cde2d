//! Issue 16, item 2: OpenTelemetry traces. A collector inside the test decodes what the
//! gateway exports and the downstream records the `traceparent` each attempt sends: the span
//! tree of an event (`ingest` linked to its `ingest_batch`, each `dispatch` a child of the
//! event's stored context), `trust_traceparent`, a retry after a restart, and what is passed on
//! with traces off. On SQLite and PostgreSQL.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_core::{ManualClock, Timestamp};
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::{github, stripe};
use idem_sql::Store;

use idem_testkit::downstream::Received;

use crate::collector::{Collector, SERVICE, Span};
use crate::support::{
    APP_SECRET, Answer, Downstream, GITHUB_SECRET, Running, STRIPE_SECRET, config_text, env,
    stripe_event, unix_now,
};

/// A sender's context (W3C Trace Context's own example ids).
const SENDER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SENDER_SPAN: &str = "00f067aa0ba902b7";
const SENDER_STATE: &str = "congo=t61rcWkgMzE";

/// The test configuration with the `github` source trusting its sender's `traceparent`.
fn config(downstream: &Downstream, schedule: &str) -> Config {
    let text = config_text(downstream.addr, schedule).replace(
        "kind = \"github\"\n",
        "kind = \"github\"\ntrust_traceparent = true\n",
    );
    Config::from_toml(&text, &env).unwrap()
}

/// The sender's `traceparent`, sampled.
fn sender_traceparent() -> String {
    format!("00-{SENDER_TRACE}-{SENDER_SPAN}-01")
}

/// POSTs a GitHub push with delivery id `id` and `extra` headers.
async fn post_github<DB: GatewayDb>(
    gw: &Running<DB>,
    id: &str,
    extra: &[(&str, String)],
) -> Answer {
    let body = format!(r#"{{"ref":"refs/heads/main","delivery":"{id}"}}"#);
    let mut headers = vec![
        (
            "x-hub-signature-256",
            github::sign(GITHUB_SECRET, body.as_bytes()),
        ),
        ("x-github-event", "push".to_owned()),
        ("x-github-delivery", id.to_owned()),
    ];
    headers.extend(extra.iter().cloned());
    gw.post("github", &headers, body.as_bytes()).await
}

/// POSTs Stripe event `id` with `extra` headers.
async fn post_stripe<DB: GatewayDb>(
    gw: &Running<DB>,
    id: &str,
    extra: &[(&str, String)],
) -> Answer {
    let body = stripe_event(id, "customer.updated", "customer", &format!("cus_{id}"), 1);
    let mut headers = vec![(
        "stripe-signature",
        stripe::sign(STRIPE_SECRET, unix_now(), &body),
    )];
    headers.extend(extra.iter().cloned());
    gw.post("stripe", &headers, &body).await
}

/// The `traceparent` a destination received, split into (trace id, span id, flags).
fn parts(traceparent: Option<&str>) -> (String, String, String) {
    let parts: Vec<&str> = traceparent
        .expect("a traceparent header")
        .split('-')
        .collect();
    assert_eq!((parts.len(), parts[0]), (4, "00"), "{parts:?}");
    (
        parts[1].to_owned(),
        parts[2].to_owned(),
        parts[3].to_owned(),
    )
}

/// A clock standing at the real time (the Stripe signatures are checked against it).
fn clock_now() -> ManualClock {
    ManualClock::new(Timestamp(unix_now() * 1000))
}

/// Turns `async fn name<DB: GatewayDb>(store: Store<DB>, clock: ManualClock, collector:
/// Collector)` into `name::sqlite`, `name::postgres` and `name::mysql`, traced (see `collector::traced`).
macro_rules! traced_on_every_store {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                $crate::collector::traced(|collector| async move {
                    let clock = super::clock_now();
                    let (_dir, store) = $crate::support::sqlite(std::sync::Arc::new(clock.clone())).await;
                    super::$name(store, clock, collector).await;
                });
            }

            #[test]
            fn postgres() {
                $crate::collector::traced(|collector| async move {
                    let clock = super::clock_now();
                    let (_dir, store) = $crate::support::postgres(std::sync::Arc::new(clock.clone())).await;
                    super::$name(store, clock, collector).await;
                });
            }

            #[test]
            fn mysql() {
                $crate::collector::traced(|collector| async move {
                    let clock = super::clock_now();
                    let (_dir, store) = $crate::support::mysql(std::sync::Arc::new(clock.clone())).await;
                    super::$name(store, clock, collector).await;
                });
            }
        }
    )+};
}

traced_on_every_store!(
    an_event_is_one_trace_from_ingest_to_destination,
    a_trusted_traceparent_is_the_parent_and_another_a_link,
    a_retry_after_a_restart_continues_the_event_trace,
);

both_stores!(with_traces_off_a_trusted_context_is_passed_on_unchanged);

/// An event from a source that does not trust traceparent, sent without one: its `ingest`
/// span is a root (server kind, its source and event id, answered 200), linked to the
/// `ingest_batch` span of its commit, the root of another trace; the `dispatch` span of its
/// attempt is the ingest span's child (client kind, destination, attempt 1, status 200) and
/// its id is in the `traceparent` the destination received. No attribute holds the body or a
/// secret.
async fn an_event_is_one_trace_from_ingest_to_destination<DB: GatewayDb>(
    store: Store<DB>,
    _clock: ManualClock,
    collector: Collector,
) {
    let downstream = Downstream::ok().await;
    let gw = Running::start(config(&downstream, r#"["10ms"]"#), store).await;
    assert_eq!(post_stripe(&gw, "evt_tree", &[]).await.status, 200);
    gw.settle().await;

    let ingest = collector.one("ingest", "idem.event_id", "evt_tree").await;
    assert_eq!(ingest.service, SERVICE);
    assert_eq!(ingest.kind, 2, "server");
    assert_eq!(ingest.parent_span_id, "", "a root");
    assert_eq!(ingest.attr("idem.source"), Some("stripe"));
    assert_eq!(ingest.attr("http.response.status_code"), Some("200"));
    assert_eq!(ingest.attr("idem.outcome"), Some("accepted"));

    let spans = collector.spans().await;
    let batches: Vec<&Span> = spans.iter().filter(|s| s.name == "ingest_batch").collect();
    assert_eq!(ingest.links.len(), 1, "{ingest:#?}");
    let (link_trace, link_span) = &ingest.links[0];
    let batch = batches
        .iter()
        .find(|b| &b.span_id == link_span)
        .unwrap_or_else(|| panic!("the ingest span links to a batch span: {batches:#?}"));
    assert_eq!(&batch.trace_id, link_trace);
    assert_eq!(batch.parent_span_id, "", "a batch is a trace of its own");
    assert_ne!(batch.trace_id, ingest.trace_id);
    assert_eq!(batch.attr("idem.batch_size"), Some("1"));

    let dispatch = collector.one("dispatch", "idem.event_id", "evt_tree").await;
    assert_eq!(dispatch.kind, 3, "client");
    assert_eq!(dispatch.trace_id, ingest.trace_id);
    assert_eq!(dispatch.parent_span_id, ingest.span_id);
    assert_eq!(dispatch.attr("idem.destination"), Some("app"));
    assert_eq!(dispatch.attr("idem.source"), Some("stripe"));
    assert_eq!(dispatch.attr("idem.attempt"), Some("1"));
    assert_eq!(dispatch.attr("http.response.status_code"), Some("200"));
    assert_eq!(dispatch.attr("idem.outcome"), Some("delivered"));

    let sent = downstream.with_key("stripe:evt_tree");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        parts(sent[0].header("traceparent")),
        (
            dispatch.trace_id.clone(),
            dispatch.span_id.clone(),
            "01".to_owned()
        )
    );
    assert_eq!(sent[0].header("tracestate"), None);

    let body = String::from_utf8(sent[0].body.to_vec()).unwrap();
    for span in &spans {
        for (key, value) in &span.attributes {
            for secret in [body.as_str(), STRIPE_SECRET, APP_SECRET, "cus_evt_tree"] {
                assert!(!value.contains(secret), "{}: {key} = {value}", span.name);
            }
        }
    }
    gw.server.shutdown().await.unwrap();
}

/// `trust_traceparent = true` (github): the sender's context is the `ingest` span's parent,
/// so the event's trace is the sender's, and its `tracestate` goes on to the destination.
/// Without it (stripe): the `ingest` span starts a trace of its own and links to the sender's,
/// and the destination sees the gateway's trace, not the one the sender picked.
async fn a_trusted_traceparent_is_the_parent_and_another_a_link<DB: GatewayDb>(
    store: Store<DB>,
    _clock: ManualClock,
    collector: Collector,
) {
    let downstream = Downstream::ok().await;
    let gw = Running::start(config(&downstream, r#"["10ms"]"#), store).await;
    let sender = [
        ("traceparent", sender_traceparent()),
        ("tracestate", SENDER_STATE.to_owned()),
    ];
    assert_eq!(post_github(&gw, "d-trusted", &sender).await.status, 200);
    assert_eq!(post_stripe(&gw, "evt_untrusted", &sender).await.status, 200);
    gw.settle().await;

    let trusted = collector.one("ingest", "idem.event_id", "d-trusted").await;
    assert_eq!(trusted.trace_id, SENDER_TRACE);
    assert_eq!(trusted.parent_span_id, SENDER_SPAN);
    let dispatch = collector
        .one("dispatch", "idem.event_id", "d-trusted")
        .await;
    assert_eq!(
        (dispatch.trace_id.as_str(), dispatch.parent_span_id.as_str()),
        (SENDER_TRACE, trusted.span_id.as_str())
    );
    let sent = downstream.with_key("github:d-trusted");
    assert_eq!(
        parts(sent[0].header("traceparent")),
        (
            SENDER_TRACE.to_owned(),
            dispatch.span_id.clone(),
            "01".to_owned()
        )
    );
    assert_eq!(sent[0].header("tracestate"), Some(SENDER_STATE));

    let untrusted = collector
        .one("ingest", "idem.event_id", "evt_untrusted")
        .await;
    assert_ne!(untrusted.trace_id, SENDER_TRACE);
    assert_eq!(untrusted.parent_span_id, "", "a root");
    assert!(
        untrusted
            .links
            .contains(&(SENDER_TRACE.to_owned(), SENDER_SPAN.to_owned())),
        "linked to the sender's context: {untrusted:#?}"
    );
    let dispatch = collector
        .one("dispatch", "idem.event_id", "evt_untrusted")
        .await;
    assert_eq!(dispatch.trace_id, untrusted.trace_id);
    let sent = downstream.with_key("stripe:evt_untrusted");
    assert_eq!(parts(sent[0].header("traceparent")).0, untrusted.trace_id);
    assert_eq!(sent[0].header("tracestate"), None);
    gw.server.shutdown().await.unwrap();
}

/// Attempt 1 fails (503) and the gateway stops; a new gateway on the same database sends the
/// retry an hour later (by the clock): its `dispatch` span is in the event's trace, a child of
/// the same `ingest` span, and the destination sees that trace in both attempts.
async fn a_retry_after_a_restart_continues_the_event_trace<DB: GatewayDb>(
    store: Store<DB>,
    clock: ManualClock,
    collector: Collector,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let downstream = Downstream::start(Arc::new(move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let first = Running::start(config(&downstream, r#"["1h"]"#), store.clone()).await;
    assert_eq!(post_stripe(&first, "evt_restart", &[]).await.status, 200);
    wait_for_retry(&first).await;
    first.server.shutdown().await.unwrap();

    // Past the retry's time, jitter included.
    clock.advance(Duration::from_secs(2 * 3600));
    let second = Running::start(config(&downstream, r#"["1h"]"#), store).await;
    second.settle().await;

    let ingest = collector
        .one("ingest", "idem.event_id", "evt_restart")
        .await;
    let attempts = collector.spans().await;
    let mut attempts: Vec<&Span> = attempts
        .iter()
        .filter(|s| s.name == "dispatch" && s.attr("idem.event_id") == Some("evt_restart"))
        .collect();
    attempts.sort_by_key(|s| s.attr("idem.attempt").map(str::to_owned));
    let seen: Vec<String> = attempts
        .iter()
        .map(|s| {
            let attr = |key| s.attr(key).unwrap_or("none");
            format!(
                "attempt {} status {} {} (otel status {})",
                attr("idem.attempt"),
                attr("http.response.status_code"),
                attr("idem.outcome"),
                s.status
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            "attempt 1 status 503 retry (otel status 2)",
            "attempt 2 status 200 delivered (otel status 0)",
        ]
    );
    for attempt in &attempts {
        assert_eq!(attempt.trace_id, ingest.trace_id);
        assert_eq!(attempt.parent_span_id, ingest.span_id);
    }
    let sent: Vec<(String, String, String)> = downstream
        .with_key("stripe:evt_restart")
        .iter()
        .map(|r| parts(r.header("traceparent")))
        .collect();
    let expected: Vec<(String, String, String)> = attempts
        .iter()
        .map(|s| (ingest.trace_id.clone(), s.span_id.clone(), "01".to_owned()))
        .collect();
    assert_eq!(sent, expected);
    second.server.shutdown().await.unwrap();
}

/// With no trace layer installed: a trusted sender's `traceparent` and `tracestate` reach the
/// destination as they came, on the first attempt (handed over from ingest) and on the retry
/// (read back from the database); an untrusted sender's reach it on neither.
async fn with_traces_off_a_trusted_context_is_passed_on_unchanged<DB: GatewayDb>(store: Store<DB>) {
    // Each event's first attempt fails, so its second is read back from the database.
    let tried = Arc::new(Mutex::new(HashSet::new()));
    let downstream = Downstream::start(Arc::new(move |request: &Received| {
        let key = request
            .header("idempotency-key")
            .unwrap_or_default()
            .to_owned();
        if tried.lock().unwrap().insert(key) {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let gw = Running::start(config(&downstream, r#"["10ms", "10ms"]"#), store).await;
    let sender = [
        ("traceparent", sender_traceparent()),
        ("tracestate", SENDER_STATE.to_owned()),
    ];
    assert_eq!(post_github(&gw, "d-off", &sender).await.status, 200);
    assert_eq!(post_stripe(&gw, "evt_off", &sender).await.status, 200);
    gw.settle().await;

    let trusted = downstream.with_key("github:d-off");
    assert_eq!(trusted.len(), 2, "a failed attempt and its retry");
    for sent in &trusted {
        assert_eq!(
            sent.header("traceparent"),
            Some(sender_traceparent().as_str())
        );
        assert_eq!(sent.header("tracestate"), Some(SENDER_STATE));
    }
    let untrusted = downstream.with_key("stripe:evt_off");
    assert_eq!(untrusted.len(), 2, "a failed attempt and its retry");
    for sent in &untrusted {
        assert_eq!(sent.header("traceparent"), None);
        assert_eq!(sent.header("tracestate"), None);
    }
    gw.server.shutdown().await.unwrap();
}

/// Waits (up to 10 s) until the event's first attempt failed and its retry is scheduled: one
/// delivery pending, none in flight.
async fn wait_for_retry<DB: GatewayDb>(gw: &Running<DB>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = gw.gateway.stats().await.expect("stats");
        let app = &stats.destinations["app"];
        if app.pending == 1 && app.in_flight == 0 && stats.failed_attempts == 1 {
            return;
        }
        assert!(Instant::now() < deadline, "no retry scheduled: {stats:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
