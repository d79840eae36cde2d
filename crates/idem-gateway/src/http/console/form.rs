//! Form fields of a console POST (`application/x-www-form-urlencoded`), read whole: a field
//! may repeat (the ticked dead letters), which serde's form decoding does not take.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// The largest form body taken: the longest form (every dead letter of a page ticked) is far
/// smaller.
pub(crate) const MAX_FORM_BYTES: usize = 64 * 1024;

/// A form's fields, in the order sent.
#[derive(Debug, Clone, Default)]
pub(crate) struct Fields(Vec<(String, String)>);

impl Fields {
    /// The fields of a form body.
    pub(crate) fn parse(body: &[u8]) -> Self {
        Self(form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first value of `name`, trimmed; `None` when absent or blank.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Every non-blank value of `name`.
    pub(crate) fn all(&self, name: &str) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The time range of a replay or rebuild form, in ms since the epoch: `since` and `until`
    /// as typed (`2h`, an RFC 3339 time; `until` absent = just after `now`), or, `confirmed`,
    /// the `since_ms` and `until_ms` the dry-run count fixed, so that the confirmed run covers
    /// the range counted.
    ///
    /// # Errors
    /// [`RequestError::BadTime`](crate::error::RequestError::BadTime) (from
    /// [`parse_time`](crate::model::time::parse_time)) naming the field.
    pub(crate) fn time_range(
        &self,
        confirmed: bool,
        now: i64,
    ) -> Result<(i64, i64), crate::error::RequestError> {
        use crate::model::time::parse_time;
        let (since_field, until_field) = if confirmed {
            ("since_ms", "until_ms")
        } else {
            ("since", "until")
        };
        let since = parse_time("since", self.get(since_field).unwrap_or_default(), now)?;
        let until = match self.get(until_field) {
            Some(text) => parse_time("until", text, now)?,
            None => now + 1,
        };
        Ok((since, until))
    }

    /// Whether the checkbox or button `name` was sent with `value`.
    pub(crate) fn is(&self, name: &str, value: &str) -> bool {
        self.get(name) == Some(value)
    }
}

impl<S: Send + Sync> FromRequest<S> for Fields {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let body = Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        Ok(Self::parse(&body))
    }
}

/// Reads `request`'s body (at most [`MAX_FORM_BYTES`]) and returns its fields with the request
/// rebuilt around the same bytes, for the handler to read again.
///
/// # Errors
/// 413 when the body is larger, 400 when it cannot be read.
pub(crate) async fn read(request: Request) -> Result<(Fields, Request), Response> {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|_| {
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                "the form is too large or could not be read",
            )
                .into_response()
        })?;
    let fields = Fields::parse(&bytes);
    Ok((
        fields,
        Request::from_parts(parts, axum::body::Body::from(bytes)),
    ))
}
