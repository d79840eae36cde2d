//! Console sessions: a random cookie (`idem_console`, HttpOnly, `SameSite=Strict`, `Secure`
//! when `console_url` is https, `Path=/console`, ending after `console_session_ttl`) whose
//! SHA-256 is kept in `idem_gateway_console_sessions` with the session's CSRF token and end.
//! `guard::require` lets a request through only with a live session.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use cookie::{Cookie, SameSite};
use rand::Rng;
use sha2::{Digest, Sha256};

use super::state::{PREFIX, SIGN_IN};

/// The session cookie's name.
pub(crate) const COOKIE: &str = "idem_console";

/// A live session, put in the request's extensions by `guard::require`.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token its forms carry.
    pub(crate) csrf: String,
    /// The SHA-256 of its cookie, hex: its key in the table.
    pub(crate) cookie_hash: String,
}

/// The SHA-256 of a cookie value, hex.
pub(crate) fn hash(cookie: &str) -> String {
    hex::encode(Sha256::digest(cookie.as_bytes()))
}

/// A new random cookie value: 32 bytes, hex.
pub(crate) fn new_cookie() -> String {
    hex::encode(rand::rng().random::<[u8; 32]>())
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn cookie_value(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == name)
        .map(|c| c.value().to_owned())
}

/// A `Set-Cookie` of `name` = `value` for the console's path, HttpOnly, `SameSite=Strict`,
/// `Secure` when `secure`, lasting `max_age` (zero: deletes it).
pub(crate) fn set_cookie(name: &str, value: &str, max_age: Duration, secure: bool) -> HeaderValue {
    let cookie = Cookie::build((name, value))
        .path(PREFIX)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(
            i64::try_from(max_age.as_secs()).unwrap_or(i64::MAX),
        ))
        .build();
    // Names and values here are ours: ASCII letters, digits and `_`.
    HeaderValue::from_str(&cookie.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The redirect every request without a session gets: 303 to the sign-in page.
pub(crate) fn to_sign_in() -> Response {
    Redirect::to(SIGN_IN).into_response()
}
