//! The web console at `/console`: server-rendered HTML pages (plain forms, no JavaScript) over
//! the same [operations](crate::operations) as the `idem` command and `/admin`. Served where
//! `/admin` is (on `admin_listen` when set) when the configuration has an admin token and
//! `console` is not false; docs/gateway.md ("The console") is its operator reference.
//!
//! Every page but sign-in and the stylesheet needs a session (module `session`): without one,
//! any request is redirected to sign-in. Every POST carries the session's CSRF token (`csrf`);
//! wrong admin tokens are limited per client address (`rate_limit`): the TCP peer's, or behind
//! a trusted proxy the client it names (`client_address`).
//! [`Gateway::overview`](crate::Gateway::overview) reads what the overview shows.

mod assets;
mod charts;
mod client_address;
mod csrf;
mod form;
mod guard;
mod overview;
mod pages;
mod rate_limit;
mod session;
mod sign_in;
mod state;
mod templates;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::routing::{get, post};

use crate::gateway::Gateway;
use crate::store::GatewayDb;
pub(crate) use client_address::client_address;
pub use overview::{
    AlertRow, BacklogRow, BreakerState, DESTINATION_METRICS, DispatcherHealth, Failing, Health,
    HealthRow, Overview, REJECTION_REASONS, Range, RejectedRow, SOURCE_METRICS, SeriesRow,
};
pub(crate) use rate_limit::{MAX_FAILURES, SignInLimiter, WINDOW_MS};
use state::{Console, State};
pub use state::{PREFIX, SIGN_IN};

/// `/console/…`, when the configuration has an admin token and the console is enabled;
/// otherwise no routes.
pub(crate) fn router<DB: GatewayDb>(gateway: Gateway<DB>) -> Router {
    let config = gateway.config();
    if config.admin_token.is_none() || !config.console.enabled {
        return Router::new();
    }
    let state: State<DB> = Arc::new(Console {
        gateway,
        limiter: SignInLimiter::default(),
    });
    let pages = Router::new()
        .route("/console", get(pages::overview::page::<DB>))
        .route("/console/events", get(pages::events::page::<DB>))
        .route("/console/event", get(pages::event::page::<DB>))
        .route("/console/event/resend", post(pages::resend::resend::<DB>))
        .route(
            "/console/dead-letters",
            get(pages::dead_letters::page::<DB>),
        )
        .route(
            "/console/dead-letters/redrive",
            post(pages::dead_letters::redrive::<DB>),
        )
        .route(
            "/console/replay",
            get(pages::replay::page::<DB>).post(pages::replay::replay::<DB>),
        )
        .route("/console/rebuild", post(pages::rebuild::rebuild::<DB>))
        .route("/console/consumers", get(pages::consumers::page::<DB>))
        .route("/console/consumer", get(pages::consumers::one::<DB>))
        .route("/console/configuration", get(pages::config::page::<DB>))
        .route("/console/sign-out", post(sign_in::sign_out::<DB>))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            guard::require::<DB>,
        ));
    let public = Router::new()
        .route(
            SIGN_IN,
            get(sign_in::page::<DB>).post(sign_in::sign_in::<DB>),
        )
        .route(assets::STYLESHEET, get(assets::stylesheet));
    pages
        .merge(public)
        .layer(middleware::map_response(security_headers))
        .with_state(state)
}

/// What every console answer carries: no caching of pages that show events, no framing, no
/// script and no other origin's content (CSP), no referrer sent elsewhere.
async fn security_headers(mut response: axum::response::Response) -> axum::response::Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}
