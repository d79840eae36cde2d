//! Where claims and stored responses are kept: the [`IdempotencyStore`] trait and its SQL and
//! Redis implementations.

#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "sql")]
pub mod sql;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use idem_core::{FencingToken, Timestamp, Ttl};

use crate::error::StoreError;
use crate::fingerprint::Fingerprint;
use crate::key::{IdempotencyKey, Principal};
use crate::record::StoredResponse;

/// How long completed records are kept by default: 72 hours, longer than the 24 hours Stripe
/// promises for its own keys and than the 3 days over which idem's senders redeliver.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(72 * 3600);

/// A boxed, sendable future, as the store traits return (they are object-safe, so the layer
/// holds one `Arc<dyn IdempotencyStore>` whatever the backend).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a key is scoped by: the principal and the key, kept as two separate values by every
/// store (two principals never see each other's records, docs/design.md C8).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    principal: Principal,
    key: IdempotencyKey,
}

impl Scope {
    /// The scope of `key` sent by `principal`.
    pub fn new(principal: Principal, key: IdempotencyKey) -> Self {
        Self { principal, key }
    }

    /// The principal.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The key.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}/{:?}", self.principal.as_str(), self.key.as_str())
    }
}

/// The answer to [`IdempotencyStore::claim`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// The caller holds the claim: run the handler, then `complete` or `release` with `token`.
    Acquired {
        /// The fencing token every later write must present.
        token: FencingToken,
        /// When the claim lapses: a retry after this runs the handler again.
        expires_at: Timestamp,
    },
    /// Another request with this scope and fingerprint holds a live claim (a 409).
    InProgress {
        /// When that claim lapses.
        until: Timestamp,
    },
    /// A request with this scope and fingerprint completed: its response, to replay.
    Completed(StoredResponse),
    /// The scope is live or completed for another fingerprint (a 422). Nothing was changed.
    Mismatch,
}

/// Keeps claims and stored responses for the layer.
///
/// Every implementation keeps these rules, which the test suite checks on each store:
/// - `claim` is atomic: of two concurrent claims of one free scope, exactly one is
///   [`Claim::Acquired`];
/// - a claim that is free (absent, released, or running past its expiry) is acquired with a
///   token greater than every token handed out for this scope before (the token survives
///   release and, on Redis, the record's expiry);
/// - a live or completed claim is never changed by `claim`: it answers
///   [`Claim::Mismatch`], [`Claim::InProgress`] or [`Claim::Completed`];
/// - `complete` and `release` succeed only with the current token of a running claim, else
///   [`StoreError::Fenced`] and nothing is written.
///
/// Times come from the store's clock ([`now`](Self::now)), so that tests can move time.
pub trait IdempotencyStore: Send + Sync + fmt::Debug + 'static {
    /// Claims `scope` for the request with `fingerprint`, for `lease`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Backend`]; [`StoreError::Record`] when a
    /// completed record cannot be decoded.
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>>;

    /// Stores `response` and marks the claim completed, if `token` is current.
    ///
    /// # Errors
    /// [`StoreError::Fenced`] when `token` is not the current token of a running claim;
    /// [`StoreError::Unavailable`] or [`StoreError::Backend`].
    fn complete<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Gives the claim up without a response, if `token` is current: the next claim runs the
    /// handler again.
    ///
    /// # Errors
    /// As [`complete`](Self::complete).
    fn release<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The current time on the store's clock (for `Retry-After`).
    fn now(&self) -> Timestamp;
}

/// A shared store is a store: keep an `Arc` to call [`SqlStore::gc`](sql::SqlStore::gc) or to
/// hand one store to several layers.
impl<T: IdempotencyStore + ?Sized> IdempotencyStore for std::sync::Arc<T> {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        (**self).claim(scope, fingerprint, lease)
    }

    fn complete<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).complete(scope, token, response)
    }

    fn release<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        (**self).release(scope, token)
    }

    fn now(&self) -> Timestamp {
        (**self).now()
    }
}

/// A store that can also open a database transaction for the request and claim, run and
/// complete in it (transactional mode, SQL stores only): the claim, the handler's writes and the
/// stored response commit together, in one commit, or not at all.
pub trait TransactionalStore: IdempotencyStore {
    /// Begins a transaction.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Backend`]; on SQLite, whose
    /// transactions take the database's one write lock at once, [`StoreError::Unavailable`]
    /// when other transactions held it for longer than
    /// [`SQLITE_WRITE_WAIT`](sql::SQLITE_WRITE_WAIT) or the busy timeout (5 s each).
    fn begin(&self) -> BoxFuture<'_, Result<Box<dyn OpenTransaction>, StoreError>>;
}

/// A transaction begun by [`TransactionalStore::begin`] for one request.
///
/// The layer calls [`claim`](Self::claim) first, then (when acquired) runs the handler with
/// [`expose`](Self::expose)d access, then [`commit`](Self::commit)s with the response or
/// [`rollback`](Self::rollback)s; rolling back (or dropping) also undoes the claim, so the key
/// is free again without a separate release.
pub trait OpenTransaction: Send {
    /// Claims `scope` for the request with `fingerprint` inside the transaction, with the
    /// answers and rules of [`IdempotencyStore::claim`]. The claim is visible to other requests
    /// only once the transaction commits; until then, a concurrent claim of the same scope
    /// either waits for this transaction and sees its outcome (SQLite) or answers
    /// [`Claim::InProgress`] (PostgreSQL, after a short lock wait).
    ///
    /// # Errors
    /// As [`IdempotencyStore::claim`]. After an error, or any answer but
    /// [`Claim::Acquired`], the transaction should be rolled back.
    fn claim<'a>(
        &'a mut self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>>;

    /// Puts the handler's handle on the transaction (for SQL stores, a [`Tx`](crate::Tx)) into
    /// the request's extensions.
    fn expose(&self, extensions: &mut http::Extensions);

    /// Commits, first completing `claim` (scope, token, response) inside the transaction when
    /// given.
    ///
    /// # Errors
    /// [`StoreError::Fenced`] when the token is no longer current (the transaction was rolled
    /// back, nothing of it is kept); [`StoreError::Unavailable`] or [`StoreError::Backend`]
    /// when the completion or the commit failed (likewise rolled back).
    fn commit<'a>(
        self: Box<Self>,
        claim: Option<(&'a Scope, FencingToken, &'a StoredResponse)>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Rolls back: the handler's writes and the claim made by [`claim`](Self::claim).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Backend`] when the rollback statement
    /// failed (the database rolls the transaction back itself when its connection closes).
    fn rollback(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>>;
}
