//! A real local HTTP application that records every request it receives and answers as the
//! test says: the destination of gateway and relay tests.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing;

/// One request the downstream received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

impl Received {
    /// The value of header `name`, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// Decides the downstream's answer to a request.
pub type Behaviour = Arc<dyn Fn(&Received) -> StatusCode + Send + Sync>;

/// A local HTTP server on 127.0.0.1 taking `POST /events`; cheap to clone (clones share the
/// record).
#[derive(Clone)]
pub struct Downstream {
    /// Where it listens.
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl std::fmt::Debug for Downstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Downstream")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Downstream {
    /// Starts one at a free port, answering as `behaviour` says (body `downstream says hi`).
    ///
    /// # Panics
    /// When no local port can be bound.
    pub async fn start(behaviour: Behaviour) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&received);
        let app = Router::new().route(
            "/events",
            routing::post(move |headers: HeaderMap, body: Bytes| {
                let log = Arc::clone(&log);
                let behaviour = Arc::clone(&behaviour);
                async move {
                    // On the blocking pool: a behaviour may sleep or wait for the test, which
                    // on a runtime worker could stall the gateway's tasks queued behind it (a
                    // task in a worker's LIFO slot is not stolen by the others).
                    let (request, status) = tokio::task::spawn_blocking(move || {
                        let request = Received { headers, body };
                        let status = behaviour(&request);
                        (request, status)
                    })
                    .await
                    .expect("the behaviour does not panic");
                    log.lock().expect("not poisoned").push(request);
                    (status, "downstream says hi").into_response()
                }
            }),
        );
        let addr = serve_local(app).await;
        Self { addr, received }
    }

    /// One that answers 200 to everything.
    pub async fn ok() -> Self {
        Self::start(Arc::new(|_| StatusCode::OK)).await
    }

    /// Every request received so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("not poisoned").clone()
    }

    /// The requests whose `Idempotency-Key` is dedup key `key` (printable ASCII) as the gateway
    /// sends it: an RFC 8941 String, `"stripe:evt_1"` (draft-ietf-httpapi-idempotency-key-header
    /// §2.1), `"` and `\` escaped with a backslash.
    pub fn with_key(&self, key: &str) -> Vec<Received> {
        let quoted = format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""));
        self.received()
            .into_iter()
            .filter(|r| r.header("idempotency-key") == Some(quoted.as_str()))
            .collect()
    }
}

/// Serves `app` on a free port of 127.0.0.1 in a background task; returns its address.
///
/// # Panics
/// When no local port can be bound.
pub(crate) async fn serve_local(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a local port");
    let addr = listener.local_addr().expect("a local address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
