//! Sign-in with the admin token, and sign-out. The sign-in form carries the token of a
//! short-lived sign-in cookie (double submit, see `csrf`); wrong admin tokens are limited per
//! client address (`SignInLimiter`; the address as `client_address` reads it).

use std::net::SocketAddr;
use std::time::Duration;

use axum::Extension;
use axum::extract::{ConnectInfo, State as StateOf};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use subtle::ConstantTimeEq;

use super::client_address::client_address;
use super::csrf;
use super::form::Fields;
use super::session::{self, COOKIE, Session};
use super::state::{PREFIX, SIGN_IN, State};
use super::templates::{self, Page};
use crate::store::GatewayDb;

/// The sign-in cookie's name: it carries the sign-in form's CSRF token.
const SIGN_IN_COOKIE: &str = "idem_console_sign_in";
/// How long a sign-in form may be left open before it is sent: 10 minutes.
const SIGN_IN_FORM_TTL: Duration = Duration::from_secs(600);

/// `GET /console/sign-in`: the form, with a fresh sign-in cookie.
pub(crate) async fn page<DB: GatewayDb>(StateOf(state): StateOf<State<DB>>) -> Response {
    form(&state, StatusCode::OK, None)
}

/// The sign-in form answered with `status`, showing `problem` if any.
fn form<DB: GatewayDb>(state: &State<DB>, status: StatusCode, problem: Option<&str>) -> Response {
    let token = csrf::new_token();
    let secure = state.gateway.config().console.secure_cookie();
    let body = html! {
        @if let Some(problem) = problem {
            p.problem role="alert" { (problem) }
        }
        form method="post" action=(SIGN_IN) {
            input type="hidden" name=(csrf::FIELD) value=(token);
            p {
                label for="token" { "Admin token" }
                input #token type="password" name="token" autocomplete="off" required autofocus;
            }
            p.hint {
                "The value of the environment variable that "
                code { "admin_token_env" }
                " names in the gateway's configuration."
            }
            button type="submit" { "Sign in" }
        }
    };
    let mut response = (status, Page::new("Sign in").render(body)).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(SIGN_IN_COOKIE, &token, SIGN_IN_FORM_TTL, secure),
    );
    response
}

/// `POST /console/sign-in`: checks the rate limit, the form's CSRF token and the admin token;
/// on success starts a session and redirects to the overview.
pub(crate) async fn sign_in<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    fields: Fields,
) -> Response {
    let gateway = &state.gateway;
    let now = gateway.now().as_millis();
    let address = client_address(
        peer.ip(),
        &headers,
        &gateway.config().console.trusted_proxies,
    );
    if let Err(wait_ms) = state.limiter.check(address, now) {
        let seconds = (wait_ms + 999) / 1000;
        let mut response = templates::message_page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many wrong tokens",
            &format!(
                "Sign-in from {address} is refused for {seconds} s after {} wrong tokens within \
                 {} minutes.",
                super::rate_limit::MAX_FAILURES,
                super::rate_limit::WINDOW_MS / 60_000
            ),
        );
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(u64::try_from(seconds).unwrap_or(1)),
        );
        return response;
    }
    let expected = session::cookie_value(&headers, SIGN_IN_COOKIE).unwrap_or_default();
    if !csrf::matches(&expected, fields.get(csrf::FIELD)) {
        return form(
            &state,
            StatusCode::FORBIDDEN,
            Some("The form's CSRF token is missing or has expired: sign in again from this page."),
        );
    }
    let config = gateway.config();
    let admin = config
        .admin_token
        .as_ref()
        .map(|t| t.expose().as_bytes())
        .unwrap_or_default();
    let given = fields.get("token").unwrap_or_default().as_bytes();
    if admin.is_empty() || !bool::from(admin.ct_eq(given)) {
        state.limiter.failed(address, now);
        return form(&state, StatusCode::UNAUTHORIZED, Some("Wrong admin token."));
    }
    state.limiter.succeeded(address);
    let settings = &gateway.config().console;
    let cookie = session::new_cookie();
    let expires_at = gateway
        .now()
        .saturating_add(settings.session_ttl)
        .as_millis();
    let started = async {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::delete_expired_sessions(&mut conn, now).await?;
        DB::insert_session(
            &mut conn,
            &session::hash(&cookie),
            &csrf::new_token(),
            now,
            expires_at,
        )
        .await
    };
    if let Err(e) = started.await {
        return templates::store_unavailable(&e.to_string());
    }
    let secure = settings.secure_cookie();
    let mut response = Redirect::to(PREFIX).into_response();
    let headers = response.headers_mut();
    headers.append(
        header::SET_COOKIE,
        session::set_cookie(COOKIE, &cookie, settings.session_ttl, secure),
    );
    headers.append(
        header::SET_COOKIE,
        session::set_cookie(SIGN_IN_COOKIE, "", Duration::ZERO, secure),
    );
    response
}

/// `POST /console/sign-out`: ends the session (in the database, so on every gateway process)
/// and deletes its cookie.
pub(crate) async fn sign_out<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
) -> Response {
    let gateway = &state.gateway;
    let ended = async {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::delete_session(&mut conn, &session.cookie_hash).await
    };
    if let Err(e) = ended.await {
        return templates::store_unavailable(&e.to_string());
    }
    let secure = gateway.config().console.secure_cookie();
    let mut response = Redirect::to(SIGN_IN).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        session::set_cookie(COOKIE, "", Duration::ZERO, secure),
    );
    response
}
