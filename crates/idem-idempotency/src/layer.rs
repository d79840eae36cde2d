//! The layer: configuration of the Idempotency-Key middleware.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderName};
use http::request::Parts;
use http::{Method, StatusCode};
use idem_core::Ttl;
use tower::Layer;

use crate::config::{
    Config, DEFAULT_LEASE, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_PROBLEM_TYPE_BASE, DEFAULT_TRANSIENT_CLIENT_ERRORS, Engine,
};
use crate::fingerprint::BodyMode;
use crate::key::Principal;
use crate::service::Idempotency;
use crate::store::{IdempotencyStore, TransactionalStore};

/// The Idempotency-Key middleware (draft-ietf-httpapi-idempotency-key-header-06), as a
/// [`tower::Layer`]: see the [crate documentation](crate) for the semantics and an example.
///
/// Made with a store, then configured with the builder methods below; every setting has a
/// documented default.
///
/// With axum, add it with `Router::route_layer`, not `Router::layer`: `layer` also wraps the
/// router's fallback, so unknown paths would answer 400 `idempotency-key-missing` (on a
/// required method) instead of 404, and a keyed request to a mistyped URL would have its 404
/// stored and replayed under that key.
#[derive(Clone)]
pub struct IdempotencyLayer {
    config: Arc<Config>,
}

impl fmt::Debug for IdempotencyLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        f.debug_struct("IdempotencyLayer")
            .field(
                "transactional",
                &matches!(c.engine, Engine::Transactional(_)),
            )
            .field("methods", &c.methods)
            .field("required", &c.required)
            .field("body_mode", &c.body_mode)
            .field("max_body_bytes", &c.max_body_bytes)
            .field("lease", &c.lease)
            .field("replay_headers", &c.replay_headers)
            .field("store_client_errors", &c.store_client_errors)
            .field("transient_client_errors", &c.transient_client_errors)
            .finish_non_exhaustive()
    }
}

impl IdempotencyLayer {
    /// A layer keeping claims and responses in `store` ([`SqlStore`](crate::SqlStore),
    /// [`RedisStore`](crate::RedisStore) or your own [`IdempotencyStore`]); the handler makes its
    /// own writes. Defaults: a key is optional on POST and PATCH (the draft's non-idempotent
    /// methods) and not looked at on other methods; the principal is the request's
    /// [`Principal`] extension; [`BodyMode::CanonicalJson`]; bodies up to
    /// [`DEFAULT_MAX_BODY_BYTES`]; a [`DEFAULT_LEASE`]; `Content-Type`, `Content-Language`,
    /// `Location`, `ETag` and `Last-Modified` replayed; 2xx, 3xx and 4xx stored except
    /// [`DEFAULT_TRANSIENT_CLIENT_ERRORS`].
    pub fn new(store: impl IdempotencyStore) -> Self {
        Self::with_engine(Engine::Plain(Arc::new(store)))
    }

    /// A layer in transactional mode (SQL stores): for every request it handles, it begins a
    /// transaction, claims the key in it, and hands it to the handler as a [`Tx`](crate::Tx);
    /// when the response is to be stored, the record is written in that transaction and the
    /// claim, the handler's writes and the record commit together, in one commit, so a crash
    /// cannot leave an effect without its record. When it is not stored (5xx, transient 4xx,
    /// panic, or the request is cancelled) the transaction is rolled back, which undoes the claim
    /// as well. A replay, 409 or 422 rolls back the transaction it opened (nothing was written).
    /// Requests without a key get a transaction too (committed by the same rule), so a handler
    /// can always extract its `Tx`. Same defaults as [`new`](Self::new).
    ///
    /// The claim is uncommitted while the handler runs, so a second request with the same key
    /// waits for the first one's commit on SQLite (then replays) and gets 409 after a
    /// [short lock wait](crate::store::sql::CLAIM_LOCK_TIMEOUT) on PostgreSQL: see the
    /// [crate documentation](crate#transactional-mode).
    pub fn transactional(store: impl TransactionalStore) -> Self {
        Self::with_engine(Engine::Transactional(Arc::new(store)))
    }

    fn with_engine(engine: Engine) -> Self {
        Self {
            config: Arc::new(Config {
                engine,
                methods: vec![Method::POST, Method::PATCH],
                required: Vec::new(),
                scope: Arc::new(|parts: &Parts| parts.extensions.get::<Principal>().cloned()),
                body_mode: BodyMode::default(),
                max_body_bytes: DEFAULT_MAX_BODY_BYTES,
                lease: DEFAULT_LEASE,
                replay_headers: vec![
                    header::CONTENT_TYPE,
                    header::CONTENT_LANGUAGE,
                    header::LOCATION,
                    header::ETAG,
                    header::LAST_MODIFIED,
                ],
                store_client_errors: true,
                transient_client_errors: DEFAULT_TRANSIENT_CLIENT_ERRORS.to_vec(),
                max_retry_after: DEFAULT_MAX_RETRY_AFTER,
                problem_type_base: DEFAULT_PROBLEM_TYPE_BASE.to_owned(),
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// The methods on which a key is honoured when sent but not required (default POST and
    /// PATCH). Requests with other methods pass straight through, never touching the store.
    pub fn methods(self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.edit(|c| c.methods = methods.into_iter().collect())
    }

    /// The methods on which a key is required: a request without one (or with a blank one) is
    /// answered 400 `idempotency-key-missing` (draft §2.7). They are handled in addition to
    /// [`methods`](Self::methods).
    pub fn required_for(self, methods: impl IntoIterator<Item = Method>) -> Self {
        self.edit(|c| c.required = methods.into_iter().collect())
    }

    /// How the principal of a request is found: `f` gets the request's head and returns its
    /// [`Principal`], or `None` when it has none. A request with a key and no principal is
    /// answered 401 `principal-missing`, never put in a shared bucket (docs/design.md C8). Keyless
    /// requests do not call `f`. The default reads the [`Principal`] request extension, which
    /// the application's authentication layer (placed outside this one) inserts.
    pub fn scope<F>(self, f: F) -> Self
    where
        F: Fn(&Parts) -> Option<Principal> + Send + Sync + 'static,
    {
        self.edit(|c| c.scope = Arc::new(f))
    }

    /// How the body enters the fingerprint (default [`BodyMode::CanonicalJson`]).
    pub fn body_mode(self, mode: BodyMode) -> Self {
        self.edit(|c| c.body_mode = mode)
    }

    /// The largest request body, in bytes, read for a keyed request (default
    /// [`DEFAULT_MAX_BODY_BYTES`]); a larger one is answered 413 `body-too-large`. Keyless
    /// requests are not read by the layer.
    pub fn max_body_bytes(self, limit: usize) -> Self {
        self.edit(|c| c.max_body_bytes = limit)
    }

    /// How long a claim lasts while the handler runs (default [`DEFAULT_LEASE`]). After it, a
    /// retry takes the claim over and runs the handler again (a crashed process's claim ends
    /// this way); the first holder's completion is then refused by its fencing token. A 409
    /// carries the claim's remaining lease as `Retry-After` (capped by
    /// [`max_retry_after`](Self::max_retry_after)).
    ///
    /// In [transactional mode](Self::transactional) the claim is held by the open transaction
    /// and cannot be taken over while it is; it ends with the transaction. On PostgreSQL the
    /// lease is also the transaction's `idle_in_transaction_session_timeout`: a transaction
    /// left idle for longer (its process or host died, or the handler waited that long between
    /// two statements) is ended by the database and rolled back.
    pub fn lease(self, lease: Ttl) -> Self {
        self.edit(|c| c.lease = lease.get())
    }

    /// The response headers stored and replayed (default `Content-Type`, `Content-Language`,
    /// `Location`, `ETag`, `Last-Modified`). The first response carries all its headers; a
    /// replay carries these, `Content-Length` and `Idempotent-Replayed: true`.
    pub fn replay_headers(self, names: impl IntoIterator<Item = HeaderName>) -> Self {
        self.edit(|c| c.replay_headers = names.into_iter().collect())
    }

    /// Whether 4xx responses are stored (default `true`: they are deterministic, and a retry
    /// should get the same answer), apart from the [transient ones](Self::transient_client_errors).
    /// With `false` every 4xx releases the claim. 5xx responses are never stored (docs/design.md C8).
    pub fn store_client_errors(self, store: bool) -> Self {
        self.edit(|c| c.store_client_errors = store)
    }

    /// The 4xx statuses that release the claim instead of being stored (default
    /// [`DEFAULT_TRANSIENT_CLIENT_ERRORS`]).
    pub fn transient_client_errors(self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.edit(|c| c.transient_client_errors = statuses.into_iter().collect())
    }

    /// The longest `Retry-After` on a 409 (default [`DEFAULT_MAX_RETRY_AFTER`]); the header
    /// is the claim's remaining lease, rounded up to whole seconds, between 1 s and this. (In
    /// transactional mode on PostgreSQL the other request's claim is not committed yet, so its
    /// expiry is unknown: the whole lease is used, so this maximum in practice.)
    pub fn max_retry_after(self, max: Duration) -> Self {
        self.edit(|c| c.max_retry_after = max)
    }

    /// The start of every problem `type` URI (default [`DEFAULT_PROBLEM_TYPE_BASE`]); the
    /// [`Rejection::slug`](crate::Rejection::slug) follows it.
    pub fn problem_type_base(self, base: impl Into<String>) -> Self {
        let base = base.into();
        self.edit(|c| c.problem_type_base = base)
    }
}

impl<S> Layer<S> for IdempotencyLayer {
    type Service = Idempotency<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Idempotency::new(inner, Arc::clone(&self.config))
    }
}
