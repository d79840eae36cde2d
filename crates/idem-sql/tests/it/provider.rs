//! A recording effect provider (a small axum server that keeps every `Idempotency-Key` it is
//! called with) and the effect worker that calls it: what the lineage and replay tests check
//! "no effect ran again" against.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use idem_core::Name;
use idem_sql::{CallOutcome, EffectCall, EffectWorker, Store};
use idem_testkit::AppDb;

/// A provider that records every `Idempotency-Key` it is called with and answers 200.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    calls: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    /// Starts the provider on a free port; returns it and its URL.
    pub(crate) async fn start() -> (Self, String) {
        let recorder = Self::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/receipts", listener.local_addr().unwrap());
        let app = Router::new()
            .route(
                "/receipts",
                post(|State(r): State<Recorder>, headers: HeaderMap| async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    r.calls.lock().unwrap().push(key);
                    "sent"
                }),
            )
            .with_state(recorder.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        (recorder, url)
    }

    /// Every key called with, in order, repeats included.
    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// The distinct keys called with.
    pub(crate) fn keys(&self) -> BTreeSet<String> {
        self.calls().into_iter().collect()
    }

    /// How many distinct keys it was called with.
    pub(crate) fn distinct(&self) -> usize {
        self.keys().len()
    }
}

/// An effect worker of `effect` that posts each call to `url` with its key as the
/// `Idempotency-Key`.
pub(crate) fn http_worker<DB: AppDb>(
    store: &Store<DB>,
    effect: &Name,
    url: &str,
) -> EffectWorker<DB> {
    let client = idem_testkit::http_client();
    let url = url.to_owned();
    EffectWorker::new(store.clone(), move |call: EffectCall| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            match client
                .post(&url)
                .header("Idempotency-Key", call.key.as_str())
                .body(call.request)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => CallOutcome::Succeeded(b"sent".to_vec()),
                Ok(r) => CallOutcome::Failed {
                    retryable: true,
                    reason: r.status().to_string(),
                },
                Err(e) => CallOutcome::Unknown {
                    reason: e.to_string(),
                },
            }
        }
    })
    .effects([effect.clone()])
    .batch_size(200)
}

/// Runs the effect worker of `effect` against the provider at `url` until nothing is due.
pub(crate) async fn drain<DB: AppDb>(store: &Store<DB>, effect: &Name, url: &str) {
    let worker = http_worker(store, effect, url);
    while worker.run_once().await.unwrap().claimed > 0 {}
}
