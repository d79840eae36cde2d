//! Refusals as RFC 9457 problem details, and the errors of stores.

use std::time::Duration;

use axum_core::body::Body;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use crate::fingerprint::NotJson;
use crate::key::KeyError;
use crate::record::RecordError;

/// A boxed error from a store's backend.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the layer answered a request itself instead of running (or after running) the handler.
/// Each becomes an `application/problem+json` response (RFC 9457) whose `type` is the layer's
/// [`problem_type_base`](crate::IdempotencyLayer::problem_type_base) followed by
/// [`Rejection::slug`], with `title`, `status` and `detail` members.
///
/// | status | slug | when | source |
/// |---|---|---|---|
/// | 400 | `idempotency-key-missing` | a method that requires a key came without one (or a blank one) | draft §2.7 |
/// | 400 | `idempotency-key-invalid` | the header is repeated, holds a control or non-ASCII byte, or is a malformed sf-string | RFC 8941 §3.3.3 |
/// | 400 | `idempotency-key-too-long` | the key is longer than [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES) | |
/// | 401 | `principal-missing` | a keyed request has no principal (the scope function returned `None`) | docs/design.md C8 |
/// | 413 | `body-too-large` | the body exceeds [`max_body_bytes`](crate::IdempotencyLayer::max_body_bytes) | |
/// | 400 | `body-unreadable` | the body could not be read (the client went away, bad framing) | |
/// | 400 | `body-not-json` | [`BodyMode::CanonicalJson`](crate::BodyMode) and the body is not JSON | RFC 8785 |
/// | 400 | `body-not-i-json` | [`BodyMode::CanonicalJson`](crate::BodyMode) and the body is JSON but not I-JSON: a member name repeated in one object, or an integer outside ±(2^53−1), which canonical JSON cannot tell apart from another request's | RFC 7493, RFC 8785 |
/// | 409 | `idempotency-key-in-use` | the first request with this key is still running (in transactional mode on SQLite the request waits instead; on PostgreSQL its uncommitted claim cannot be compared, so a request with another route or body gets this 409 too, not 422); with `Retry-After` | draft §2.7 |
/// | 422 | `idempotency-key-reused` | the key was used for another request (method, path, query or body) | draft §2.7, Stripe |
/// | 409 | `idempotency-lease-lost` | transactional mode: the commit was refused by the claim's fencing token (it was taken over); nothing was committed; with `Retry-After`. The SQL stores claim inside the transaction, where no one can take the claim over, so only another [`TransactionalStore`](crate::TransactionalStore) answers this | |
/// | 503 | `idempotency-store-unavailable` | the store failed (on SQLite in transactional mode, also: the write lock stayed taken past [`SQLITE_WRITE_WAIT`](crate::store::sql::SQLITE_WRITE_WAIT) or the busy timeout); the handler did not run, or its transaction was rolled back; with `Retry-After` | docs/design.md C4 |
/// | 500 | `idempotency-record-unreadable` | the stored response cannot be decoded | |
/// | 500 | `handler-panicked` | the handler panicked; the claim was released | |
/// | 500 | `response-body-failed` | the handler's response body failed while being read; the claim was released | |
/// | 500 | `transaction-missing` | a handler extracted [`Tx`](crate::Tx) on a route without a transactional layer | |
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// A required key is missing or blank.
    #[error(
        "this operation requires an Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header)"
    )]
    KeyMissing,
    /// The header could not be read as a key.
    #[error("{0}")]
    KeyInvalid(#[source] KeyError),
    /// A keyed request without a principal: refused rather than put in a shared bucket.
    #[error(
        "an Idempotency-Key is scoped to its caller, and this request has no authenticated caller"
    )]
    PrincipalMissing,
    /// The request body is larger than the limit.
    #[error("the request body exceeds {limit} bytes, the most this endpoint fingerprints")]
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The request body could not be read.
    #[error("the request body could not be read: {0}")]
    BodyUnreadable(#[source] BoxError),
    /// The body is not JSON in canonical-JSON mode.
    #[error("{0}")]
    BodyNotJson(#[source] NotJson),
    /// The first request with this key is still running.
    #[error(
        "a request with this Idempotency-Key is still being processed; retry after {} s",
        retry_after.as_secs()
    )]
    InProgress {
        /// How long the client should wait, in whole seconds (the `Retry-After` header).
        retry_after: Duration,
    },
    /// The key was used before for a different request.
    #[error(
        "this Idempotency-Key was already used for a different request (method, path, query or body); use a new key for a new request"
    )]
    FingerprintMismatch,
    /// Transactional mode: the commit was refused by the claim's fencing token (another holder
    /// took the claim over). Not answered with the SQL stores, whose claim is held by the
    /// transaction itself.
    #[error(
        "the claim on this Idempotency-Key expired and was taken over before the response could be committed; nothing was committed"
    )]
    LeaseLost,
    /// The store failed.
    #[error("the idempotency store is unavailable: {0}")]
    StoreUnavailable(#[source] StoreError),
    /// The stored response cannot be decoded.
    #[error("{0}")]
    RecordUnreadable(#[source] RecordError),
    /// The handler panicked.
    #[error(
        "the handler failed; the request was not recorded and may be retried with the same key"
    )]
    HandlerPanicked,
    /// The handler's response body failed while being read.
    #[error(
        "the handler's response could not be read: {0}; the request was not recorded and may be retried"
    )]
    ResponseBodyFailed(#[source] BoxError),
    /// [`Tx`](crate::Tx) was extracted where no transactional layer runs.
    #[error(
        "this handler needs the transactional idempotency layer, which does not run on this route"
    )]
    TransactionMissing,
}

impl Rejection {
    /// The HTTP status of the problem response (see the table above).
    pub fn status(&self) -> StatusCode {
        match self {
            Self::KeyMissing
            | Self::KeyInvalid(_)
            | Self::BodyUnreadable(_)
            | Self::BodyNotJson(_) => StatusCode::BAD_REQUEST,
            Self::PrincipalMissing => StatusCode::UNAUTHORIZED,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::InProgress { .. } | Self::LeaseLost => StatusCode::CONFLICT,
            Self::FingerprintMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            Self::StoreUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::RecordUnreadable(_)
            | Self::HandlerPanicked
            | Self::ResponseBodyFailed(_)
            | Self::TransactionMissing => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The last segment of the problem `type` (see the table above).
    pub fn slug(&self) -> &'static str {
        match self {
            Self::KeyMissing => "idempotency-key-missing",
            Self::KeyInvalid(KeyError::TooLong { .. }) => "idempotency-key-too-long",
            Self::KeyInvalid(_) => "idempotency-key-invalid",
            Self::PrincipalMissing => "principal-missing",
            Self::BodyTooLarge { .. } => "body-too-large",
            Self::BodyUnreadable(_) => "body-unreadable",
            Self::BodyNotJson(e) if e.is_not_i_json() => "body-not-i-json",
            Self::BodyNotJson(_) => "body-not-json",
            Self::InProgress { .. } => "idempotency-key-in-use",
            Self::FingerprintMismatch => "idempotency-key-reused",
            Self::LeaseLost => "idempotency-lease-lost",
            Self::StoreUnavailable(_) => "idempotency-store-unavailable",
            Self::RecordUnreadable(_) => "idempotency-record-unreadable",
            Self::HandlerPanicked => "handler-panicked",
            Self::ResponseBodyFailed(_) => "response-body-failed",
            Self::TransactionMissing => "transaction-missing",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Self::KeyMissing => "Idempotency-Key required",
            Self::KeyInvalid(KeyError::TooLong { .. }) => "Idempotency-Key too long",
            Self::KeyInvalid(_) => "Invalid Idempotency-Key",
            Self::PrincipalMissing => "Caller not authenticated",
            Self::BodyTooLarge { .. } => "Request body too large",
            Self::BodyUnreadable(_) => "Request body unreadable",
            Self::BodyNotJson(e) if e.is_not_i_json() => "Request body is not I-JSON",
            Self::BodyNotJson(_) => "Request body is not JSON",
            Self::InProgress { .. } => "Request in progress",
            Self::FingerprintMismatch => "Idempotency-Key reused for another request",
            Self::LeaseLost => "Idempotency claim lost",
            Self::StoreUnavailable(_) => "Idempotency store unavailable",
            Self::RecordUnreadable(_) => "Stored response unreadable",
            Self::HandlerPanicked => "Handler failed",
            Self::ResponseBodyFailed(_) => "Response body failed",
            Self::TransactionMissing => "Transaction not available",
        }
    }

    /// The `Retry-After` to send, in whole seconds, if any.
    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::InProgress { retry_after } => Some(retry_after.as_secs().max(1)),
            Self::LeaseLost | Self::StoreUnavailable(_) => Some(1),
            _ => None,
        }
    }

    /// The problem response: `application/problem+json` with `type` = `type_base` + the slug.
    pub fn to_response(&self, type_base: &str) -> Response<Body> {
        let problem = serde_json::json!({
            "type": format!("{type_base}{}", self.slug()),
            "title": self.title(),
            "status": self.status().as_u16(),
            "detail": self.to_string(),
        });
        let mut response = Response::new(Body::from(problem.to_string()));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(secs) = self.retry_after() {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// What went wrong in an [`IdempotencyStore`](crate::IdempotencyStore) call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A fenced write (`complete`, `release`, or a transactional commit) was refused: the token
    /// is no longer the claim's current token, or the claim is no longer running. Nothing was
    /// written; the current holder's claim or record stands.
    #[error("the claim is no longer held with this token; nothing was written")]
    Fenced,
    /// The backend could not be reached or timed out; retrying later may succeed.
    #[error("store unavailable: {0}")]
    Unavailable(#[source] BoxError),
    /// The backend answered with an error.
    #[error("store error: {0}")]
    Backend(#[source] BoxError),
    /// A stored response could not be decoded.
    #[error(transparent)]
    Record(#[from] RecordError),
}

impl StoreError {
    /// Whether trying the same call again later may succeed ([`StoreError::Unavailable`]).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_))
    }
}

impl axum_core::response::IntoResponse for Rejection {
    /// The problem response with types under
    /// [`DEFAULT_PROBLEM_TYPE_BASE`](crate::DEFAULT_PROBLEM_TYPE_BASE) (an extractor's rejection
    /// cannot see the layer's setting).
    fn into_response(self) -> axum_core::response::Response {
        self.to_response(crate::DEFAULT_PROBLEM_TYPE_BASE)
    }
}
