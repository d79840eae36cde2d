//! # Idempotency-Key for HTTP APIs
//!
//! An API that creates charges, transfers or orders must let its callers retry safely: a lost
//! response, a timeout or a crashed client must not charge twice. The caller sends an
//! `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header-06); this crate's
//! [`IdempotencyLayer`] runs the handler once per key and answers every retry with the stored
//! response. Claims carry a fencing token (idem's leases), so a request whose claim expired can
//! never overwrite the record of the one that took over.
//!
//! ```
//! use axum::extract::Request;
//! use axum::middleware::{self, Next};
//! use axum::response::{IntoResponse, Response};
//! use axum::{Router, routing::post};
//! use http::{Method, StatusCode, header};
//! use idem_idempotency::{IdempotencyLayer, Principal, SqlStore};
//! use tower::ServiceExt;
//!
//! /// Your authentication: it checks the caller's credentials and sets the caller as the
//! /// `Principal` extension, which the layer reads (its default scope). A toy token table here.
//! async fn authenticate(mut request: Request, next: Next) -> Response {
//!     let token = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
//!     let user = match token {
//!         Some("Bearer alice-token") => "alice",
//!         _ => return StatusCode::UNAUTHORIZED.into_response(),
//!     };
//!     request.extensions_mut().insert(Principal::new(user).expect("not blank"));
//!     next.run(request).await
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("app.db").display());
//! let store = idem_sql::SqliteStore::connect(&url).await?; // or idem_sql::PgStore, or a RedisStore
//! store.migrate().await?;
//!
//! let app = Router::new()
//!     .route("/payments", post(|| async { (StatusCode::CREATED, "{\"id\":\"p1\"}") }))
//!     // `route_layer`, not `layer`: see "Routes" below.
//!     .route_layer(IdempotencyLayer::new(SqlStore::new(store)).required_for([Method::POST]))
//!     // Added last, so it runs first: the principal is set before the layer looks for it.
//!     .route_layer(middleware::from_fn(authenticate));
//!
//! let request = || {
//!     http::Request::post("/payments")
//!         .header("authorization", "Bearer alice-token")
//!         .header("idempotency-key", "\"8e03978e-40d5-43e8-bc93-6894a57f9324\"")
//!         .body(axum::body::Body::from(r#"{"amount":10}"#))
//! };
//! let first = app.clone().oneshot(request()?).await?;
//! assert_eq!(first.status(), StatusCode::CREATED);
//!
//! let retry = app.clone().oneshot(request()?).await?;
//! assert_eq!(retry.status(), StatusCode::CREATED); // stored, not run again
//! assert_eq!(retry.headers()["idempotent-replayed"], "true");
//!
//! let keyless = http::Request::post("/payments")
//!     .header("authorization", "Bearer alice-token")
//!     .body(axum::body::Body::empty())?;
//! assert_eq!(app.clone().oneshot(keyless).await?.status(), StatusCode::BAD_REQUEST);
//!
//! let typo = http::Request::post("/paymnets") // an unknown path: 404, not a 400 nor stored
//!     .header("authorization", "Bearer alice-token")
//!     .body(axum::body::Body::empty())?;
//! assert_eq!(app.oneshot(typo).await?.status(), StatusCode::NOT_FOUND);
//! # Ok(())
//! # }
//! ```
//!
//! Never take the principal from a header the client chooses (say `X-User`) without
//! authenticating it: whoever sends another's name would read that user's stored responses.
//! [`IdempotencyLayer::scope`] picks the principal some other way, from the authenticated
//! request.
//!
//! **Routes.** With axum, add the layer with [`Router::route_layer`](https://docs.rs/axum/latest/axum/struct.Router.html#method.route_layer),
//! not `Router::layer`: `layer` also wraps the router's fallback, so a request to an unknown
//! path would get 400 `idempotency-key-missing` instead of 404, and a keyed request to a
//! mistyped URL would have its 404 stored and replayed under the key.
//!
//! ## What happens to a request
//!
//! | request | answer | source |
//! |---|---|---|
//! | a method the layer does not handle (default: all but POST and PATCH) | passed through; the store is not touched | draft §1 |
//! | no key, or a blank one (`""`, `"   "`), where it is optional | passed through; the store is not touched | docs/design.md C8 |
//! | no key where it is [required](IdempotencyLayer::required_for) | 400 `idempotency-key-missing` | draft §2.7 |
//! | a malformed, repeated or non-ASCII key; one over [`MAX_KEY_BYTES`] | 400 | RFC 8941 §3.3.3 |
//! | a key and no principal | 401 `principal-missing` | docs/design.md C8 |
//! | first request with a key | the handler runs under a claim; its response is stored (status, [chosen headers](IdempotencyLayer::replay_headers), body) with the claim's token checked | draft §2.6 |
//! | the same key and request again, after it completed | the stored response, with `Idempotent-Replayed: true` | draft §2.6, Stripe |
//! | the same key and request while the first still runs | 409 `idempotency-key-in-use` with `Retry-After`; in [transactional mode on SQLite](#transactional-mode), the request waits for the first one's commit instead, then gets its replay | draft §2.7 |
//! | the same key with another method, path, query or body | 422 `idempotency-key-reused`; nothing changed. In [transactional mode on PostgreSQL or MySQL](#transactional-mode), while the key's first request still runs: 409 `idempotency-key-in-use` instead (its uncommitted claim's fingerprint cannot be read), then 422 once it committed | draft §2.4, §2.7, Stripe |
//! | in canonical-JSON mode, a body that is not JSON, or JSON but not I-JSON (a repeated member name, an integer outside ±(2^53−1)) | 400 `body-not-json`, `body-not-i-json` ([`BodyMode`]) | RFC 8785, RFC 7493 |
//! | the handler answers 5xx, fails or panics | the claim is released (in transactional mode: rolled back with the handler's writes), nothing stored; a retry runs again | docs/design.md C8 |
//! | the handler answers 408, 409, 425 or 429 | released like a 5xx ([configurable](IdempotencyLayer::transient_client_errors)) | |
//! | the handler answers another 4xx | stored: it is deterministic ([configurable](IdempotencyLayer::store_client_errors)) | Stripe |
//! | the process dies while the handler runs | the claim's [lease](IdempotencyLayer::lease) expires; a retry after it runs again, and the dead holder's token can no longer complete. In transactional mode the database rolls the claim back with the transaction (see below) | docs/design.md C8 |
//!
//! Every refusal is an `application/problem+json` body (RFC 9457); [`Rejection`] lists them.
//!
//! **Key** ([`IdempotencyKey`]): an RFC 8941 sf-string (`"…"`, as the draft §2.1 specifies) or a
//! bare value (`…`, as Stripe's clients send it); both forms are the same key. **Scope**: keys
//! are per [`Principal`], kept apart from the key in every store, so two callers never see each
//! other's records. **Fingerprint** ([`Fingerprint`]): SHA-256 over the method, the path and
//! query, and the body, by default as RFC 8785 canonical JSON ([`BodyMode`]). **That default
//! refuses keyed bodies that are not JSON** (form-encoded ones included, whatever their
//! `Content-Type`) with 400 `body-not-json`: set [`BodyMode::Raw`] on routes that take them.
//!
//! ## Stores
//!
//! | store | claims and records in | transactional mode | expiry |
//! |---|---|---|---|
//! | [`SqlStore`] on SQLite, PostgreSQL or MySQL/MariaDB (feature `mysql`) | idem's `idem_leases` table | yes: [`IdempotencyLayer::transactional`] hands the handler a [`Tx`] ([below](#transactional-mode)) | [`SqlStore::gc`], in batches |
//! | [`RedisStore`] | Redis hashes, Lua scripts, an `INCR` token counter | no | Redis TTL = retention |
//!
//! Both keep records for [`DEFAULT_RETENTION`] (72 h) unless told otherwise. On Redis, records
//! survive a restart only with AOF persistence (see [`store::redis`]).
//!
//! ## Transactional mode
//!
//! With [`IdempotencyLayer::transactional`] (SQL stores), each keyed request runs in one
//! database transaction: `BEGIN`, the claim ([`idem_sql::LeaseStore::acquire_in`]), the handler's
//! writes through its [`Tx`], the stored response ([`idem_sql::LeaseStore::complete_in`]), `COMMIT`.
//! The claim, the effect and its record commit together, in one commit, or not at all: a crash
//! cannot leave an effect without its record, and a 5xx, a panic or a response that is not
//! stored rolls everything back, which also frees the key (no separate release).
//!
//! Until that commit the claim is visible to no one, so the databases differ for a second
//! request with the same key while the first runs:
//!
//! | | a second request with the same key | the process dies mid-request |
//! |---|---|---|
//! | SQLite | waits until the first request's transaction ends (it holds SQLite's one write lock from `BEGIN IMMEDIATE` to its commit; the store's transactional requests take turns in arrival order, for at most [`SQLITE_WRITE_WAIT`](store::sql::SQLITE_WRITE_WAIT), 5 s), then sees its outcome: the replay once it committed, or runs itself if it rolled back. Past the wait: 503 `idempotency-store-unavailable` with `Retry-After` | the lock dies with the process; a retry runs at once |
//! | PostgreSQL | waits at most [`CLAIM_LOCK_TIMEOUT`](store::sql::CLAIM_LOCK_TIMEOUT) (100 ms) for the key's row lock, then 409 `idempotency-key-in-use` with `Retry-After` (the lease, capped by [`max_retry_after`](IdempotencyLayer::max_retry_after)), as in the other mode. This holds for a request with another route or body too: the claim's fingerprint is not committed, so it cannot be compared, and the answer is 409 rather than 422 (a retry after the first request committed gets the 422) | PostgreSQL rolls back when the connection closes; if it stays open (a dead host), when the transaction has been idle for the [lease](IdempotencyLayer::lease) (`idle_in_transaction_session_timeout`). A retry before that gets 409 |
//! | MySQL, MariaDB | as PostgreSQL, but the wait is 1 s (`MYSQL_CLAIM_LOCK_WAIT` in [`store::sql`]): both servers count lock waits (`innodb_lock_wait_timeout`) in whole seconds, and 1 s is MySQL's least. The wait applies to the claim's statements only; the handler keeps the session's own. So a second request gets 409 with `Retry-After` after about a second, never waits longer, and never runs the handler | the server rolls back when the connection closes, at once for a process that exits or crashes. Neither server has an idle-in-transaction timeout idem could set per transaction (MariaDB's `idle_transaction_timeout` is per session), so a dead host's transaction holds the key until the server drops its session (`wait_timeout`, 8 h by default; lower it, or set MariaDB's `idle_transaction_timeout`, server-wide to bound that). A retry before that gets 409 |
//!
//! On SQLite every transaction takes the database's one write lock, so transactional requests
//! (like any writers) run one at a time, replays included; keep handlers short. Requests without a key get a
//! transaction too, so that a handler can always extract its [`Tx`].
//!
//! ```no_run
//! use axum::{Router, routing::post};
//! use idem_sql::sqlx::{self, Sqlite};
//! use idem_idempotency::{IdempotencyLayer, SqlStore, Tx};
//!
//! async fn create_payment(tx: Tx<Sqlite>) -> Result<&'static str, String> {
//!     let mut tx = tx.lock().await.map_err(|e| e.to_string())?;
//!     sqlx::query("INSERT INTO payments (amount) VALUES (10)")
//!         .execute(&mut *tx)
//!         .await
//!         .map_err(|e| e.to_string())?;
//!     Ok("created") // committed by the layer, with the claim and the stored response
//! }
//!
//! # fn app(store: idem_sql::SqliteStore) -> Router {
//! Router::new()
//!     .route("/payments", post(create_payment))
//!     .route_layer(IdempotencyLayer::transactional(SqlStore::new(store)))
//! # }
//! ```
//!
//! ## Anatomy
//!
//! As tower's middleware: [`IdempotencyLayer`] (configuration), [`Idempotency`] (the service),
//! [`ResponseFuture`], [`Rejection`] and [`StoreError`]; [`key`], [`fingerprint`] and
//! [`record`] for the pieces, [`store`] for the backends. Metrics are in
//! [`metric_definitions`].

mod config;
mod error;
pub mod fingerprint;
mod future;
pub mod key;
mod layer;
pub mod metric_definitions;
pub mod record;
mod service;
pub mod store;

pub use config::{
    DEFAULT_LEASE, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_RETRY_AFTER, DEFAULT_PROBLEM_TYPE_BASE,
    DEFAULT_TRANSIENT_CLIENT_ERRORS,
};
pub use error::{BoxError, Rejection, StoreError};
pub use fingerprint::{BodyMode, Fingerprint};
pub use future::ResponseFuture;
pub use key::{IDEMPOTENCY_KEY, IdempotencyKey, MAX_KEY_BYTES, Principal};
pub use layer::IdempotencyLayer;
pub use record::IDEMPOTENT_REPLAYED;
pub use record::StoredResponse;
pub use service::Idempotency;
#[cfg(feature = "redis")]
pub use store::redis::RedisStore;
#[cfg(feature = "sql")]
pub use store::sql::{DEFAULT_CONSUMER_NAME, SqlStore, Tx, TxFinished, TxGuard};
pub use store::{Claim, DEFAULT_RETENTION, IdempotencyStore, Scope, TransactionalStore};
