//! HTTP errors as `application/problem+json` (RFC 9457): a `type` naming the problem, a `title`,
//! the `status` and a `detail` for the sender's logs.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The media type of every error answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One problem, answered with its status.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// `urn:idem:problem:{code}`, such as `urn:idem:problem:bad-signature`.
    #[serde(rename = "type")]
    pub problem_type: String,
    /// A short summary that is the same for every occurrence of this type.
    pub title: &'static str,
    /// The HTTP status.
    pub status: u16,
    /// What exactly was wrong with this request.
    pub detail: String,
    /// For signature failures, the verifier's stable reason (`no_matching_signature`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
}

impl Problem {
    /// A problem of type `code` (`bad-signature`, `no-event-id`, …).
    pub fn new(
        status: StatusCode,
        code: &str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            problem_type: format!("urn:idem:problem:{code}"),
            title,
            status: status.as_u16(),
            detail: detail.into(),
            reason: None,
        }
    }

    /// The same problem with a machine-readable reason.
    pub fn with_reason(self, reason: &'static str) -> Self {
        Self {
            reason: Some(reason),
            ..self
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry = status == StatusCode::SERVICE_UNAVAILABLE;
        let mut response = (status, axum::Json(self)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if retry {
            headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // RFC 9110 §15.5.9: a server that answers 408 closes the connection.
        if status == StatusCode::REQUEST_TIMEOUT {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}
