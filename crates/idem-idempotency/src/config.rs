//! The middleware's settings, shared by the layer that builds them and the service that reads
//! them: the store (plain or transactional), the methods it covers, and the defaults of every
//! setting.

use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderName;
use http::request::Parts;
use http::{Method, StatusCode};

use crate::fingerprint::BodyMode;
use crate::key::Principal;
use crate::store::{IdempotencyStore, TransactionalStore};

/// How long a claim lasts by default while its handler runs: 60 s. A retry after a crashed
/// process waits at most this long; a handler that runs longer than its claim can be run again by
/// a retry, so set [`IdempotencyLayer::lease`](crate::IdempotencyLayer::lease) above your slowest handler.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(60);

/// The largest request body the layer reads to fingerprint by default: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1 << 20;

/// The longest `Retry-After` a 409 carries by default: 5 s. The claim's remaining lease is an
/// upper bound of the wait; most handlers finish much sooner.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(5);

/// The default start of problem `type` URIs: the relative reference `/problems/`, which RFC 9457
/// §3.1.1 allows and which resolves against the API's own origin. Set
/// [`IdempotencyLayer::problem_type_base`](crate::IdempotencyLayer::problem_type_base) to where your API documents its errors.
pub const DEFAULT_PROBLEM_TYPE_BASE: &str = "/problems/";

/// The 4xx statuses released by default instead of stored, as they are transient: 408 Request
/// Timeout, 409 Conflict, 425 Too Early and 429 Too Many Requests. A retry with the same key runs
/// the handler again.
pub const DEFAULT_TRANSIENT_CLIENT_ERRORS: [StatusCode; 4] = [
    StatusCode::REQUEST_TIMEOUT,
    StatusCode::CONFLICT,
    StatusCode::TOO_EARLY,
    StatusCode::TOO_MANY_REQUESTS,
];

type ScopeFn = dyn Fn(&Parts) -> Option<Principal> + Send + Sync;

/// The store and whether the handler runs in its transaction.
#[derive(Clone)]
pub(crate) enum Engine {
    Plain(Arc<dyn IdempotencyStore>),
    Transactional(Arc<dyn TransactionalStore>),
}

#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) engine: Engine,
    pub(crate) methods: Vec<Method>,
    pub(crate) required: Vec<Method>,
    pub(crate) scope: Arc<ScopeFn>,
    pub(crate) body_mode: BodyMode,
    pub(crate) max_body_bytes: usize,
    pub(crate) lease: Duration,
    pub(crate) replay_headers: Vec<HeaderName>,
    pub(crate) store_client_errors: bool,
    pub(crate) transient_client_errors: Vec<StatusCode>,
    pub(crate) max_retry_after: Duration,
    pub(crate) problem_type_base: String,
}

impl Config {
    pub(crate) fn handles(&self, method: &Method) -> bool {
        self.methods.contains(method) || self.required.contains(method)
    }

    pub(crate) fn requires(&self, method: &Method) -> bool {
        self.required.contains(method)
    }

    /// Whether a response with `status` is stored (else the claim is released).
    pub(crate) fn stores(&self, status: StatusCode) -> bool {
        if status.is_server_error() {
            return false;
        }
        if status.is_client_error() {
            return self.store_client_errors && !self.transient_client_errors.contains(&status);
        }
        true
    }
}
