//! The gate in front of every console page but sign-in: a live session, and for a POST the
//! session's CSRF token.

use axum::extract::{Request, State as StateOf};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::session::{COOKIE, Session, cookie_value, hash, to_sign_in};
use super::state::State;
use super::templates::{self, message_page};
use super::{csrf, form};
use crate::store::GatewayDb;

/// Lets the request through with its [`Session`] when its cookie names a live one and, for a
/// POST, its form carries the session's CSRF token. Without a session: a redirect to sign-in
/// (whatever the method). Without the token: 403.
pub(crate) async fn require<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(cookie) = cookie_value(request.headers(), COOKIE) else {
        return to_sign_in();
    };
    let gateway = &state.gateway;
    let cookie_hash = hash(&cookie);
    let found = async {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::find_session(&mut conn, &cookie_hash, gateway.now().as_millis()).await
    };
    let session = match found.await {
        Ok(Some((csrf, _))) => Session { csrf, cookie_hash },
        Ok(None) => return to_sign_in(),
        Err(e) => return templates::store_unavailable(&e.to_string()),
    };
    let mut request = request;
    if request.method() == Method::POST {
        let (fields, rebuilt) = match form::read(request).await {
            Ok(read) => read,
            Err(response) => return response,
        };
        if !csrf::matches(&session.csrf, fields.get(csrf::FIELD)) {
            return message_page(
                StatusCode::FORBIDDEN,
                "Refused: missing CSRF token",
                "This form did not carry the token of your session, so it was refused and \
                 nothing was changed. Reload the page you came from and send the form again.",
            );
        }
        request = rebuilt;
    }
    request.extensions_mut().insert(session);
    next.run(request).await
}
