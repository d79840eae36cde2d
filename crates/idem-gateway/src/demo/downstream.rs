//! The demo's application: verifies idem's signature, counts deliveries by Idempotency-Key,
//! keeps each Stripe object's newest event, and fails the first attempt of some events.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use idem_core::{Clock, SystemClock};
use idem_http::verify::Verifier;
use idem_http::verify::standard_webhooks::StandardWebhooksVerifier;
use tokio::sync::watch;

use crate::Error;

/// What the application saw.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// Requests answered 2xx, per Idempotency-Key.
    pub delivered: HashMap<String, u32>,
    /// Requests refused on purpose (first attempt of a chosen event), per key.
    pub failed: HashMap<String, u32>,
    /// Requests whose idem signature did not verify.
    pub bad_signatures: u32,
    /// Per Stripe object id, the event id of the last event applied.
    pub objects: HashMap<String, String>,
}

#[derive(Clone)]
struct App {
    verifier: Arc<StandardWebhooksVerifier>,
    seen: Arc<Mutex<Seen>>,
}

/// A running demo application.
#[derive(Debug)]
pub(crate) struct Downstream {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
    stop: watch::Sender<bool>,
}

/// Whether the demo application refuses the first attempt of the event with `key`: about one
/// event in six, chosen by the key so that a run is reproducible.
pub(crate) fn fails_first_attempt(key: &str) -> bool {
    key.bytes().map(u32::from).sum::<u32>() % 6 == 0
}

impl Downstream {
    /// Starts the application on 127.0.0.1 at a free port, verifying with `secret`.
    pub(crate) async fn start(secret: &str) -> Result<Self, Error> {
        let verifier = StandardWebhooksVerifier::new([secret]).map_err(|e| Error::Io {
            what: "configuring the demo application".into(),
            source: std::io::Error::other(e),
        })?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let app = App {
            verifier: Arc::new(verifier),
            seen: Arc::clone(&seen),
        };
        let router = Router::new()
            .route("/events", post(receive))
            .with_state(app);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|source| Error::Io {
                what: "binding the demo application".into(),
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Io {
            what: "reading the demo application's address".into(),
            source,
        })?;
        let (stop, mut stopped) = watch::channel(false);
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await;
        });
        Ok(Self { addr, seen, stop })
    }

    /// Stops the application.
    pub(crate) fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

/// The dedup key an `Idempotency-Key` carries as an RFC 8941 String (`"stripe:evt_1"`, each
/// `"` and `\` escaped), as an application reads it; a value of another form as it is.
fn dedup_key(header: &str) -> String {
    let Some(inner) = header.strip_prefix('"').and_then(|h| h.strip_suffix('"')) else {
        return header.to_owned();
    };
    let mut key = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        key.push(if c == '\\' {
            chars.next().unwrap_or(c)
        } else {
            c
        });
    }
    key
}

async fn receive(State(app): State<App>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let mut seen = app.seen.lock().unwrap_or_else(|e| e.into_inner());
    if app
        .verifier
        .verify(&headers, &body, SystemClock.now())
        .is_err()
    {
        seen.bad_signatures += 1;
        return StatusCode::BAD_REQUEST;
    }
    let key = dedup_key(text("idempotency-key"));
    if text("idem-attempt") == "1" && fails_first_attempt(&key) {
        *seen.failed.entry(key).or_default() += 1;
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    if text("idem-source") == "stripe" {
        let object = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["data"]["object"]["id"].as_str().map(str::to_owned));
        if let Some(object) = object {
            seen.objects
                .insert(object, text("idem-event-id").to_owned());
        }
    }
    *seen.delivered.entry(key).or_default() += 1;
    StatusCode::OK
}
