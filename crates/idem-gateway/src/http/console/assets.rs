//! The console's stylesheet, written for this project (no third-party CSS or JavaScript is
//! shipped), served without a session so that the sign-in page is styled.

use axum::http::header;
use axum::response::IntoResponse;

/// Where the stylesheet is served.
pub(crate) const STYLESHEET: &str = "/console/assets/console.css";

const CSS: &str = include_str!("assets/console.css");

/// `GET /console/assets/console.css`.
pub(crate) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
}
