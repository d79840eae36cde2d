//! A handler whose state is right but that answers 409 to a redelivery is flagged: senders
//! retry on 4xx and 5xx (docs/design.md C3), so a non-2xx answer to a duplicate is a finding.

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use idem_verify::{Commands, Mode, Non2xx, Options, Signer, Target, Verdict, events};

type Seen = Arc<Mutex<HashSet<String>>>;

async fn webhook(State(seen): State<Seen>, body: Bytes) -> StatusCode {
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let id = v["id"].as_str().unwrap_or_default().to_owned();
    let fresh = seen.lock().map(|mut s| s.insert(id)).unwrap_or(false);
    if fresh {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_on_redelivery_is_a_finding() {
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/webhook", post(webhook))
        .route(
            "/reset",
            post(|State(seen): State<Seen>| async move {
                if let Ok(mut s) = seen.lock() {
                    s.clear();
                }
            }),
        )
        .route("/state", get(|| async { "{}" }))
        .with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/stripe-events/events.jsonl");
    // The first 20 events are enough: every one gets a 409 on its second copy.
    let mut events = events::load(&file).unwrap();
    events.truncate(20);
    let first = events[0].id.clone();
    let out = tempfile::tempdir().unwrap();
    let options = Options {
        events,
        target: Target::new(&format!("http://{addr}/webhook"), Signer::None).unwrap(),
        commands: Commands {
            reset: format!("curl -sf -X POST http://{addr}/reset"),
            state: format!("curl -sf http://{addr}/state"),
            ignore: Vec::new(),
            restart: None,
            successor: None,
        },
        modes: vec![Mode::Duplicate, Mode::Shuffle],
        seed: 7,
        budget: Duration::from_secs(60),
        out_dir: Some(out.path().to_owned()),
        keep_entity_order: false,
    };
    let report = idem_verify::run(&options, &|_| {}).await.unwrap();
    let duplicate = &report.modes[0];
    assert_eq!(duplicate.verdict, Verdict::Diverged);
    assert!(duplicate.state_diff.is_empty());
    // Every event was sent 2 or 3 times: one 409 per extra copy.
    assert_eq!(
        duplicate.duplicate_non_2xx.len(),
        duplicate.deliveries - 20,
        "{duplicate:#?}"
    );
    assert_eq!(
        duplicate.duplicate_non_2xx[0],
        Non2xx {
            event_id: first.clone(),
            step: 1,
            status: 409
        }
    );
    let minimal = duplicate.minimal.as_ref().unwrap();
    assert_eq!(minimal.deliveries.len(), 2, "{}", minimal.explanation);
    assert_eq!(minimal.duplicate_non_2xx.len(), 1);
    assert_eq!(minimal.duplicate_non_2xx[0].status, 409);
    assert_eq!(report.modes[1].verdict, Verdict::Matched);
    assert!(!report.passed);
}
