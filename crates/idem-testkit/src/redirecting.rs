//! A real local HTTP server that answers every POST to `path` with 302 Found to `/elsewhere`,
//! and counts the requests `/elsewhere` receives: a client that follows the redirect shows up
//! in the count (tests that a 3xx is not followed).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{StatusCode, header};
use axum::routing;

/// A running redirecting server.
#[derive(Debug, Clone)]
pub struct Redirecting {
    /// Where it listens.
    pub addr: SocketAddr,
    followed: Arc<AtomicUsize>,
}

impl Redirecting {
    /// Starts one at a free port on 127.0.0.1, answering POST `path` with 302 to `/elsewhere`.
    ///
    /// # Panics
    /// When no local port can be bound.
    pub async fn start(path: &str) -> Self {
        let followed = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&followed);
        let app = axum::Router::new()
            .route(
                path,
                routing::post(|| async { (StatusCode::FOUND, [(header::LOCATION, "/elsewhere")]) }),
            )
            .route(
                "/elsewhere",
                routing::any(move || async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    StatusCode::OK
                }),
            );
        let addr = crate::downstream::serve_local(app).await;
        Self { addr, followed }
    }

    /// How many requests reached `/elsewhere`: redirects followed.
    pub fn followed(&self) -> usize {
        self.followed.load(Ordering::SeqCst)
    }
}
