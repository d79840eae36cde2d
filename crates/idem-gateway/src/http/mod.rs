//! The HTTP surfaces: the one route table of every listener (webhooks, health, metrics, the
//! admin API and the console), and the answers to unknown paths and methods. axum is used here,
//! by the server's assembly and by the demo only.

pub(crate) mod admin;
mod admin_guard;
pub(crate) mod body_deadline;
pub mod console;
mod health;
pub(crate) mod listener;
pub(crate) mod metrics;
pub(crate) mod problem;
pub(crate) mod webhooks;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::mpsc;

use crate::gateway::Gateway;
use crate::ingest::unit::Pending;
use crate::reload_request::ReloadHandle;
use crate::store::GatewayDb;
use problem::Problem;

/// The routers of the listeners: the main one (webhooks, health, and `/admin` and `/metrics`
/// unless they have listeners of their own), the admin one and the metrics one.
pub(crate) struct Routers {
    /// Served on the main listener.
    pub main: Router,
    /// Served on `admin_listen`, when given.
    pub admin: Router,
    /// Served on `metrics_listen`, when given.
    pub metrics: Router,
}

/// The routers of `gateway`'s listeners; webhooks go to the group-commit `queue` (or commit
/// alone without one); `own_admin` and `own_metrics` say whether those have listeners of their own.
pub(crate) fn routers<DB: GatewayDb>(
    gateway: Gateway<DB>,
    queue: Option<mpsc::Sender<Pending>>,
    reload: ReloadHandle,
    own_admin: bool,
    own_metrics: bool,
) -> Routers {
    let limit = gateway.config().max_body_bytes;
    let ingest_state = webhooks::IngestState {
        gateway: gateway.clone(),
        queue,
    };
    let health = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(health::readyz::<DB>))
        .with_state(gateway.clone());
    let metrics = Router::new()
        .route("/metrics", get(metrics::render_metrics::<DB>))
        .with_state(gateway.clone());
    // The console is served where the admin API is.
    let admin = admin::router(gateway.clone(), reload).merge(console::router(gateway.clone()));
    let webhooks = Router::new()
        .route("/webhooks/{source}", post(webhooks::handle::<DB>))
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            gateway.clone(),
            webhooks::declared_length::<DB>,
        ))
        .with_state(ingest_state);
    let mut main = health.clone().merge(webhooks);
    if !own_admin {
        main = main.merge(admin.clone());
    }
    if !own_metrics {
        main = main.merge(metrics.clone());
    }
    let finish = |router: Router| {
        router
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
    };
    Routers {
        main: finish(main),
        admin: finish(health.clone().merge(admin)),
        metrics: finish(health.merge(metrics)),
    }
}

/// An unknown path: 404 problem+json naming it, like every other error.
async fn not_found(uri: axum::http::Uri) -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        format!(
            "nothing is served at {}: webhooks are POSTed to /webhooks/{{source}}; /healthz, /readyz, /metrics and /admin/… are the others",
            uri.path()
        ),
    )
    .into_response()
}

/// A known path with another method: 405 problem+json (axum keeps the `Allow` header).
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!(
            "{method} is not served at {}; the `Allow` header lists what is",
            uri.path()
        ),
    )
    .into_response()
}
