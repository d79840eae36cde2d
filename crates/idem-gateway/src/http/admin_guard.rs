//! The admin API's bearer token check: `Authorization: Bearer <admin token>`, compared in
//! constant time; wrong tokens counted per client address as the console's sign-in counts
//! them (after [`MAX_FAILURES`] within [`WINDOW_MS`] an address gets 429 with `Retry-After`),
//! except that the right token is never refused — the limit slows guessing, not the operator.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::console::{MAX_FAILURES, SignInLimiter, WINDOW_MS, client_address};
use crate::gateway::Gateway;
use crate::http::problem::Problem;
use crate::metric_definitions::ADMIN_UNAUTHORIZED_TOTAL;
use crate::store::GatewayDb;

/// What the check needs: the gateway (its token, clock and trusted proxies) and the wrong
/// tokens seen, per client address, by this process.
pub(crate) struct Guard<DB: GatewayDb> {
    pub(crate) gateway: Gateway<DB>,
    pub(crate) wrong: SignInLimiter,
}

/// Lets a request with the admin token through; answers 401 to a wrong or missing one, or 429
/// once its address has sent too many.
pub(crate) async fn require_token<DB: GatewayDb>(
    State(guard): State<Arc<Guard<DB>>>,
    request: Request,
    next: Next,
) -> Response {
    let gateway = &guard.gateway;
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
    let address = client_address(
        peer,
        request.headers(),
        &gateway.config().console.trusted_proxies,
    );
    if authorized(gateway, request.headers()) {
        guard.wrong.succeeded(address);
        return next.run(request).await;
    }
    metrics::counter!(ADMIN_UNAUTHORIZED_TOTAL).increment(1);
    let now = gateway.now().as_millis();
    if let Err(wait_ms) = guard.wrong.check(address, now) {
        return too_many(address, wait_ms);
    }
    guard.wrong.failed(address, now);
    unauthorized()
}

/// Whether the request carries `Authorization: Bearer <admin token>` (compared in constant
/// time).
fn authorized<DB: GatewayDb>(gateway: &Gateway<DB>, headers: &HeaderMap) -> bool {
    let config = gateway.config();
    let expected = config.admin_token.as_ref().map(|t| t.expose().as_bytes());
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110 §11.1): `bearer`, `BEARER` too.
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then(|| token.trim_start())
        })
        .map(str::as_bytes);
    matches!((expected, given), (Some(e), Some(g)) if bool::from(e.ct_eq(g)))
}

fn unauthorized() -> Response {
    let mut response = Problem::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "Unauthorized",
        "the admin API needs `Authorization: Bearer <admin token>`, the token being the value \
         of the environment variable admin_token_env names, or of the file admin_token_file names",
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

fn too_many(address: std::net::IpAddr, wait_ms: i64) -> Response {
    let seconds = (wait_ms + 999) / 1000;
    let mut response = Problem::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too-many-wrong-tokens",
        "Too many wrong tokens",
        format!(
            "{address} sent {MAX_FAILURES} wrong admin tokens within {} minutes: a wrong or \
             missing token from it is refused for {seconds} s (the right token still works)",
            WINDOW_MS / 60_000
        ),
    )
    .into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(u64::try_from(seconds).unwrap_or(1)),
    );
    response
}
