//! The store on SQLite, PostgreSQL and MySQL (MariaDB), over idem's fenced leases
//! ([`idem_sql::LeaseStore`]).

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use axum_core::extract::FromRequestParts;
use idem_core::{Acquire, FencingToken, LeaseKey, Name, RetentionPolicy, Timestamp, Ttl};
use idem_sql::sqlx::{self, Database, Pool, Postgres, Sqlite, Transaction};
use idem_sql::{Backend, ConsumerKind, ErrorKind, EventCounts, LeaseStore, Store};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};

use super::{BoxFuture, Claim, IdempotencyStore, OpenTransaction, Scope, TransactionalStore};
use crate::error::{Rejection, StoreError};
use crate::fingerprint::Fingerprint;
use crate::record::StoredResponse;
use crate::store::DEFAULT_RETENTION;

/// The prefix of the lease scope of every idempotency record: `idempotency/{principal}`. It keeps
/// these leases apart from other users of `idem_leases` (effect workers, forwarding), so that
/// [`SqlStore::gc`] deletes only these. The principal and the key stay in separate columns.
pub const SCOPE_PREFIX: &str = "idempotency/";

/// A [`SqlStore`]'s name in the consumer registry unless [`SqlStore::name`] sets one.
pub const DEFAULT_CONSUMER_NAME: &str = "idempotency_keys";

/// [`DEFAULT_CONSUMER_NAME`] as a [`Name`].
fn default_name() -> Name {
    match Name::new("consumer", DEFAULT_CONSUMER_NAME) {
        Ok(name) => name,
        // A constant the unit test below checks.
        Err(e) => unreachable!("{e}"),
    }
}

/// What a claim adds to the registry's counts: a fresh claim is claimed, a replay of a stored
/// response a duplicate; the others (in progress, mismatch) count nothing but mark it seen.
fn claim_counts(claim: &Claim) -> EventCounts {
    match claim {
        Claim::Acquired { .. } => EventCounts::new(1, 0, 0),
        Claim::Completed(_) => EventCounts::new(0, 1, 0),
        _ => EventCounts::default(),
    }
}

/// Idempotency records in idem's `idem_leases` table, on SQLite, PostgreSQL or MySQL (MariaDB;
/// feature `mysql`).
///
/// A claim is a lease on `(scope = "idempotency/{principal}", lease_key = key)` carrying the
/// request's [`Fingerprint`] and a fencing token; a stored response is the lease's record, in
/// the [`StoredResponse`] byte format. Each call is one autocommitted statement (two when a
/// claim finds the lease taken); the time is the store's clock ([`Store::with_clock`]).
///
/// Transactional mode ([`IdempotencyLayer::transactional`](crate::IdempotencyLayer::transactional))
/// opens one transaction per request ([`Store::begin`]: `BEGIN IMMEDIATE` on SQLite, `READ
/// COMMITTED` on PostgreSQL), claims in it with [`LeaseStore::acquire_in`], hands it to the
/// handler as a [`Tx`], and completes the lease in it with [`LeaseStore::complete_in`]: one
/// commit for the claim, the handler's writes and the record, and a rollback frees the key.
/// While that transaction is open, another claim of the same key waits for it on SQLite (its
/// turn for the write lock, up to [`SQLITE_WRITE_WAIT`]) and answers [`Claim::InProgress`] on
/// PostgreSQL after [`CLAIM_LOCK_TIMEOUT`] and on MySQL after `MYSQL_CLAIM_LOCK_WAIT` (1 s); see the
/// [crate documentation](crate#transactional-mode).
///
/// Records are kept until [`gc`](Self::gc) deletes them, at least the retention after they
/// completed: run it periodically.
pub struct SqlStore<DB: Backend> {
    store: Store<DB>,
    /// Its name in the consumer registry.
    name: Name,
    leases: LeaseStore<DB>,
    retention: Duration,
    /// SQLite: one transactional request at a time, in arrival order (see
    /// [`SQLITE_WRITE_WAIT`]); `None` on PostgreSQL.
    turn: Option<Arc<Semaphore>>,
}

impl<DB: Backend> Clone for SqlStore<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            name: self.name.clone(),
            leases: self.leases.clone(),
            retention: self.retention,
            turn: self.turn.clone(),
        }
    }
}

impl<DB: Backend> std::fmt::Debug for SqlStore<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("store", &self.store)
            .field("name", &self.name)
            .field("retention", &self.retention)
            .finish_non_exhaustive()
    }
}

impl<DB: SqlBackend> SqlStore<DB> {
    /// Keeps records in `store` (migrated with [`Store::migrate`]) for [`DEFAULT_RETENTION`],
    /// named [`DEFAULT_CONSUMER_NAME`] in the consumer registry (registered as
    /// [`ConsumerKind::IdempotencyKey`]).
    pub fn new(store: Store<DB>) -> Self {
        let name = default_name();
        store.register_consumer(&name, ConsumerKind::IdempotencyKey);
        Self {
            name,
            leases: store.leases(),
            store,
            retention: DEFAULT_RETENTION,
            turn: DB::ONE_WRITER.then(|| Arc::new(Semaphore::new(1))),
        }
    }

    /// Keeps records for `policy.keep()` instead: a policy made with
    /// [`RetentionPolicy::new`], which refuses a retention shorter than the time over which
    /// your clients retry (docs/design.md C9).
    pub fn retention(self, policy: &RetentionPolicy) -> Self {
        Self {
            retention: policy.keep(),
            ..self
        }
    }

    /// Names this layer's store `name` in the consumer registry (default
    /// [`DEFAULT_CONSUMER_NAME`]), registered as [`ConsumerKind::IdempotencyKey`]: its claims
    /// are counted there (a fresh claim as claimed, a replay as a duplicate) and update its
    /// last seen. Give each service its own name.
    pub fn name(self, name: &Name) -> Self {
        self.store
            .register_consumer(name, ConsumerKind::IdempotencyKey);
        Self {
            name: name.clone(),
            ..self
        }
    }

    /// The underlying store.
    pub fn store(&self) -> &Store<DB> {
        &self.store
    }

    /// Deletes idempotency records (and released or expired claims) last written more than the
    /// retention ago, in batches of `batch_size` rows, each batch one autocommitted statement.
    /// Running claims that have not expired are never deleted, nor are other users' leases.
    /// Returns the number of rows deleted.
    ///
    /// A deleted claim's token is forgotten: a holder stalled for longer than the retention
    /// could then complete a newer claim of the same key that happens to have its token. Keep
    /// the retention far above the lease ttl (the defaults are 72 h and 60 s).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] or [`StoreError::Backend`] for a failed batch (the batches
    /// before it stay deleted).
    pub async fn gc(&self, batch_size: NonZeroU32) -> Result<u64, StoreError> {
        let cutoff = self.store.now().saturating_sub(self.retention).as_millis();
        let limit = i64::from(batch_size.get());
        let mut total = 0;
        loop {
            let deleted = DB::gc_idempotency_batch(self.store.pool(), cutoff, limit)
                .await
                .map_err(|e| map_error(idem_sql::Error::Database(e)))?;
            total += deleted;
            if deleted < u64::from(batch_size.get()) {
                return Ok(total);
            }
        }
    }

    async fn claim_scope(
        &self,
        scope: &Scope,
        fingerprint: &Fingerprint,
        lease: Ttl,
    ) -> Result<Claim, StoreError> {
        let key = lease_key(scope)?;
        let answer = self
            .leases
            .acquire_with_fingerprint(&key, fingerprint.as_bytes(), lease)
            .await
            .map_err(map_error)?;
        let claim = to_claim(answer)?;
        self.store
            .count_consumer_events(&self.name, claim_counts(&claim));
        // Outside any transaction of the request's: the flush, when due, runs in its own.
        if let Err(e) = self.store.flush_consumer_counts_if_due().await {
            tracing::warn!(error = %e, "flushing the consumer registry failed; kept for the next flush");
        }
        Ok(claim)
    }
}

fn to_claim(answer: Acquire) -> Result<Claim, StoreError> {
    Ok(match answer {
        Acquire::Acquired {
            token, expires_at, ..
        } => Claim::Acquired { token, expires_at },
        Acquire::InProgress { until } => Claim::InProgress { until },
        Acquire::Completed { record } => Claim::Completed(StoredResponse::decode(&record)?),
        Acquire::FingerprintMismatch => Claim::Mismatch,
    })
}

impl<DB: SqlBackend> IdempotencyStore for SqlStore<DB> {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(self.claim_scope(scope, fingerprint, lease))
    }

    fn complete<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let key = lease_key(scope)?;
            self.leases
                .complete(&key, token, &response.encode())
                .await
                .map_err(map_error)
        })
    }

    fn release<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let key = lease_key(scope)?;
            self.leases.release(&key, token).await.map_err(map_error)
        })
    }

    fn now(&self) -> Timestamp {
        self.store.now()
    }
}

impl<DB: SqlBackend> TransactionalStore for SqlStore<DB> {
    fn begin(&self) -> BoxFuture<'_, Result<Box<dyn OpenTransaction>, StoreError>> {
        Box::pin(async move {
            let turn = match &self.turn {
                Some(turn) => {
                    let waited = Arc::clone(turn).acquire_owned();
                    match tokio::time::timeout(SQLITE_WRITE_WAIT, waited).await {
                        Ok(Ok(permit)) => Some(permit),
                        Ok(Err(closed)) => return Err(StoreError::Backend(closed.into())),
                        Err(_) => {
                            return Err(StoreError::Unavailable(
                                WriteLockWait(SQLITE_WRITE_WAIT).into(),
                            ));
                        }
                    }
                }
                None => None,
            };
            let tx = self.store.begin().await.map_err(map_error)?;
            let open: Box<dyn OpenTransaction> = Box::new(SqlTransaction {
                name: self.name.clone(),
                tx: Tx(Arc::new(Mutex::new(Some(tx)))),
                leases: self.leases.clone(),
                store: self.store.clone(),
                _turn: turn,
            });
            Ok(open)
        })
    }
}

/// The request's database transaction in transactional mode, for the handler's writes: they
/// commit together with the claim and the stored response, after the handler returns, or roll
/// back with the claim when it fails (5xx, panic) or the response is not stored.
///
/// The transaction holds the claim (and, on SQLite, the database's write lock) until the layer
/// commits it: other requests with the same key wait for it (SQLite) or get 409 (PostgreSQL,
/// MySQL).
///
/// An axum extractor (or read it from the request's extensions). Lock it for each use and do
/// not keep the guard past the handler's return; the guard is the transaction's connection,
/// `&mut *tx` for sqlx and for idem's writes, as in a runner's handler:
///
/// ```no_run
/// use idem_sql::sqlx::{self, Sqlite};
/// use idem_idempotency::Tx;
///
/// async fn create_payment(tx: Tx<Sqlite>) -> Result<&'static str, String> {
///     let mut tx = tx.lock().await.map_err(|e| e.to_string())?;
///     sqlx::query("INSERT INTO payments (id, amount) VALUES ('p1', 10)")
///         .execute(&mut *tx)
///         .await
///         .map_err(|e| e.to_string())?;
///     Ok("created")
/// }
/// ```
///
/// Without a transactional layer on the route the extractor answers 500
/// (`transaction-missing`).
pub struct Tx<DB: Backend>(Arc<Mutex<Option<Transaction<'static, DB>>>>);

impl<DB: Backend> Clone for Tx<DB> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<DB: Backend> std::fmt::Debug for Tx<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tx")
    }
}

/// The request's transaction was already committed or rolled back (the handler kept its
/// [`Tx`] past its own return).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request's transaction has already been committed or rolled back")]
pub struct TxFinished;

/// Exclusive use of the request's transaction, from [`Tx::lock`]: the transaction's connection,
/// `&mut *guard` for sqlx and idem's writes. Owned (it holds no borrow of the `Tx`), so it can
/// be kept across awaits.
pub type TxGuard<DB> =
    OwnedMappedMutexGuard<Option<Transaction<'static, DB>>, <DB as Database>::Connection>;

/// The transaction itself, for the layer's own claim and completion.
type TransactionGuard<DB> =
    OwnedMappedMutexGuard<Option<Transaction<'static, DB>>, Transaction<'static, DB>>;

impl<DB: Backend> Tx<DB> {
    /// Waits for exclusive use of the transaction.
    ///
    /// The future is declared `Send + 'static` (it owns a handle to the transaction), so that
    /// handlers generic over the database stay `Send`.
    ///
    /// # Errors
    /// [`TxFinished`] after the layer committed or rolled it back.
    pub fn lock(&self) -> impl Future<Output = Result<TxGuard<DB>, TxFinished>> + Send + 'static {
        let mutex = Arc::clone(&self.0);
        async move {
            OwnedMutexGuard::try_map(mutex.lock_owned().await, Option::as_deref_mut)
                .map_err(|_| TxFinished)
        }
    }

    async fn lock_transaction(&self) -> Result<TransactionGuard<DB>, TxFinished> {
        let guard = Arc::clone(&self.0).lock_owned().await;
        OwnedMutexGuard::try_map(guard, Option::as_mut).map_err(|_| TxFinished)
    }

    async fn take(&self) -> Option<Transaction<'static, DB>> {
        self.0.lock().await.take()
    }
}

impl<S: Send + Sync, DB: Backend> FromRequestParts<S> for Tx<DB> {
    type Rejection = Rejection;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Self>()
            .cloned()
            .ok_or(Rejection::TransactionMissing)
    }
}

struct SqlTransaction<DB: Backend> {
    /// The store's name in the consumer registry.
    name: Name,
    tx: Tx<DB>,
    leases: LeaseStore<DB>,
    store: Store<DB>,
    /// Held until the commit or rollback has finished (this value is dropped after them).
    _turn: Option<OwnedSemaphorePermit>,
}

/// SQLite: a transactional request waited [`SQLITE_WRITE_WAIT`] for its turn.
#[derive(Debug, thiserror::Error)]
#[error("waited {0:?} for SQLite's write lock, held by other requests' transactions; retry later")]
struct WriteLockWait(Duration);

impl<DB: SqlBackend> OpenTransaction for SqlTransaction<DB> {
    fn claim<'a>(
        &'a mut self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        Box::pin(async move {
            let key = lease_key(scope)?;
            let mut tx = self
                .tx
                .lock_transaction()
                .await
                .map_err(|e| StoreError::Backend(e.into()))?;
            match DB::claim_in(&self.leases, &mut tx, &key, fingerprint.as_bytes(), lease).await {
                Ok(answer) => {
                    // Counted in memory; written with a later commit (`commit` below).
                    let claim = to_claim(answer)?;
                    self.store
                        .count_consumer_events(&self.name, claim_counts(&claim));
                    Ok(claim)
                }
                // PostgreSQL, MySQL: another open transaction claimed this key. Its lease's
                // expiry is not visible (uncommitted); a full lease from now is an upper bound.
                Err(e) if is_lock_wait_ended::<DB>(&e) => Ok(Claim::InProgress {
                    until: self.store.now().saturating_add(lease.get()),
                }),
                Err(e) => Err(map_error(e)),
            }
        })
    }

    fn expose(&self, extensions: &mut http::Extensions) {
        extensions.insert(self.tx.clone());
    }

    fn commit<'a>(
        self: Box<Self>,
        claim: Option<(&'a Scope, FencingToken, &'a StoredResponse)>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut tx = self
                .tx
                .take()
                .await
                .ok_or_else(|| StoreError::Backend(TxFinished.into()))?;
            if let Some((scope, token, response)) = claim {
                // On failure `tx` is dropped here, which rolls it back.
                self.leases
                    .complete_in(&mut tx, &lease_key(scope)?, token, &response.encode())
                    .await
                    .map_err(map_error)?;
            }
            // The consumer registry's pending rows ride in this commit when a flush is due.
            self.store
                .commit_counting(tx, &self.name, EventCounts::default())
                .await
                .map_err(map_error)
        })
    }

    fn rollback(self: Box<Self>) -> BoxFuture<'static, Result<(), StoreError>> {
        Box::pin(async move {
            match self.tx.take().await {
                Some(tx) => tx
                    .rollback()
                    .await
                    .map_err(|e| map_error(idem_sql::Error::Database(e))),
                None => Ok(()),
            }
        })
    }
}

fn lease_key(scope: &Scope) -> Result<LeaseKey, StoreError> {
    // Both parts were checked (non-blank; principal ≤ 200 bytes, key ≤ 255), so this succeeds;
    // an error is still reported rather than unwrapped.
    LeaseKey::new(
        format!("{SCOPE_PREFIX}{}", scope.principal().as_str()),
        scope.key().as_str(),
    )
    .map_err(|e| StoreError::Backend(e.into()))
}

/// Whether `e` ended a claim's wait for a key another transaction holds (see
/// [`SqlBackend::lock_wait_ended`]).
fn is_lock_wait_ended<DB: SqlBackend>(e: &idem_sql::Error) -> bool {
    match e {
        idem_sql::Error::Database(sqlx::Error::Database(db)) => DB::lock_wait_ended(db.as_ref()),
        _ => false,
    }
}

fn map_error(e: idem_sql::Error) -> StoreError {
    match e.kind() {
        ErrorKind::Fenced => StoreError::Fenced,
        ErrorKind::Unavailable | ErrorKind::Conflict => StoreError::Unavailable(e.into()),
        _ => StoreError::Backend(e.into()),
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for idem_sql::sqlx::Sqlite {}
    impl Sealed for idem_sql::sqlx::Postgres {}
    #[cfg(feature = "mysql")]
    impl Sealed for idem_sql::sqlx::MySql {}
}

/// The databases [`SqlStore`] runs on: [`sqlx::Sqlite`], [`sqlx::Postgres`] and (feature
/// `mysql`) `sqlx::MySql`. Sealed.
pub trait SqlBackend: Backend + sealed::Sealed {
    /// Whether the database has one writer at a time (SQLite), so that transactional requests
    /// take turns in-process (see [`SQLITE_WRITE_WAIT`]).
    #[doc(hidden)]
    const ONE_WRITER: bool;

    /// Deletes up to `limit` idempotency leases written before `cutoff` (ms since the epoch)
    /// that are completed, released, or expired before it; returns how many.
    #[doc(hidden)]
    fn gc_idempotency_batch(
        pool: &Pool<Self>,
        cutoff: i64,
        limit: i64,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send;

    /// Whether `e` is the database's error for a lock wait that [`claim_in`](Self::claim_in)
    /// cut short: a key another open transaction holds.
    #[doc(hidden)]
    fn lock_wait_ended(e: &dyn sqlx::error::DatabaseError) -> bool;

    /// Acquires the lease `key` inside `tx` ([`LeaseStore::acquire_in`]), with the database's
    /// own rule for a key locked by another open transaction (see [`CLAIM_LOCK_TIMEOUT`]).
    #[doc(hidden)]
    fn claim_in(
        leases: &LeaseStore<Self>,
        tx: &mut Transaction<'static, Self>,
        key: &LeaseKey,
        fingerprint: &[u8],
        lease: Ttl,
    ) -> impl Future<Output = Result<Acquire, idem_sql::Error>> + Send;
}

/// The same SQL on both databases: `substr` with literal bounds compares bytes on SQLite and
/// characters under a deterministic collation on PostgreSQL, so no collation can widen the match
/// (as `LIKE` does on SQLite, case-insensitively).
const GC_BATCH: &str = "DELETE FROM idem_leases WHERE (scope, lease_key) IN \
     (SELECT scope, lease_key FROM idem_leases \
      WHERE substr(scope, 1, 12) = 'idempotency/' \
        AND updated_at < $1 AND (state <> 'running' OR expires_at < $1) \
      LIMIT $2)";

const _: () = assert!(SCOPE_PREFIX.len() == 12);

/// On SQLite, the longest a transactional request waits for its turn to open its transaction: 5
/// s, the busy timeout of idem's `SqliteStore::connect`; then 503 `idempotency-store-unavailable`.
///
/// SQLite has one writer at a time, and a transactional request holds the write lock from its
/// `BEGIN IMMEDIATE` to its commit. A [`SqlStore`] on SQLite (and its clones) therefore lets its
/// transactional requests begin one at a time, in arrival order, each woken as soon as the one
/// before it ends, rather than all polling the database's lock (SQLite's busy handler sleeps
/// between tries, up to 100 ms, so the lock would often sit free while everyone sleeps). Other
/// writers (other stores, processes, or non-transactional requests) are still ordered by
/// SQLite's busy timeout.
pub const SQLITE_WRITE_WAIT: Duration = Duration::from_secs(5);

/// How long a transactional claim on PostgreSQL waits for the lock on its key's row before it
/// answers [`Claim::InProgress`] (a 409): 100 ms. The row is locked by another request's open
/// transaction that claimed the same key (or, briefly, by a concurrent claim or replay); the
/// wait is set with `set_config('lock_timeout', …, true)` (as `SET LOCAL`) for the claim's
/// statements only, and the transaction's previous `lock_timeout` is restored for the handler
/// (two statements more than on SQLite). SQLite has no such wait: its transactions queue for
/// the one write lock (see [`SqlStore`]).
pub const CLAIM_LOCK_TIMEOUT: Duration = Duration::from_millis(100);

/// PostgreSQL, before a transactional claim: returns the transaction's `lock_timeout`, then
/// sets it to $1 (ms) and `idle_in_transaction_session_timeout` to $2 (ms, the lease), both
/// for this transaction only. The subquery (kept apart by `OFFSET 0`) reads the old value before
/// the outer `set_config` calls run.
const PG_BEFORE_CLAIM: &str = "SELECT old, set_config('lock_timeout', $1, true), \
     set_config('idle_in_transaction_session_timeout', $2, true) \
     FROM (SELECT current_setting('lock_timeout') AS old OFFSET 0) AS previous";

/// PostgreSQL, after a transactional claim was acquired: the handler's statements run with the
/// transaction's previous `lock_timeout` ($1).
const PG_AFTER_CLAIM: &str = "SELECT set_config('lock_timeout', $1, true)";

/// PostgreSQL's SQLSTATE 55P03 `lock_not_available`, raised when `lock_timeout` ends a wait.
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// One batch of [`SqlStore::gc`], the same statement on both databases.
macro_rules! gc_batch {
    ($pool:expr, $cutoff:expr, $limit:expr) => {
        Ok(sqlx::query(GC_BATCH)
            .bind($cutoff)
            .bind($limit)
            .execute($pool)
            .await?
            .rows_affected())
    };
}

impl SqlBackend for Sqlite {
    const ONE_WRITER: bool = true;

    /// No claim waits for a lock: the transaction holds the write lock.
    fn lock_wait_ended(_e: &dyn sqlx::error::DatabaseError) -> bool {
        false
    }

    async fn gc_idempotency_batch(
        pool: &Pool<Self>,
        cutoff: i64,
        limit: i64,
    ) -> Result<u64, sqlx::Error> {
        gc_batch!(pool, cutoff, limit)
    }

    /// The transaction began with `BEGIN IMMEDIATE`, so it holds the write lock: no other claim
    /// of any key is running, and none can start before this transaction ends.
    async fn claim_in(
        leases: &LeaseStore<Self>,
        tx: &mut Transaction<'static, Self>,
        key: &LeaseKey,
        fingerprint: &[u8],
        lease: Ttl,
    ) -> Result<Acquire, idem_sql::Error> {
        leases.acquire_in(tx, key, fingerprint, lease).await
    }
}

impl SqlBackend for Postgres {
    const ONE_WRITER: bool = false;

    /// PostgreSQL's `lock_not_available`, which ends a wait past `lock_timeout`.
    fn lock_wait_ended(e: &dyn sqlx::error::DatabaseError) -> bool {
        e.code().as_deref() == Some(LOCK_NOT_AVAILABLE)
    }

    async fn gc_idempotency_batch(
        pool: &Pool<Self>,
        cutoff: i64,
        limit: i64,
    ) -> Result<u64, sqlx::Error> {
        gc_batch!(pool, cutoff, limit)
    }

    /// Waits at most [`CLAIM_LOCK_TIMEOUT`] for the key's row, and ends the session if the
    /// transaction stays idle (the process or its host died mid-request) for longer than the
    /// lease, so that PostgreSQL rolls it back and frees the key as an expired lease would be.
    async fn claim_in(
        leases: &LeaseStore<Self>,
        tx: &mut Transaction<'static, Self>,
        key: &LeaseKey,
        fingerprint: &[u8],
        lease: Ttl,
    ) -> Result<Acquire, idem_sql::Error> {
        let lock_ms = CLAIM_LOCK_TIMEOUT.as_millis().to_string();
        let previous: String = sqlx::query_scalar(PG_BEFORE_CLAIM)
            .bind(lock_ms)
            .bind(lease.as_millis().to_string())
            .fetch_one(&mut **tx)
            .await?;
        let answer = leases.acquire_in(tx, key, fingerprint, lease).await?;
        if matches!(answer, Acquire::Acquired { .. }) {
            sqlx::query(PG_AFTER_CLAIM)
                .bind(previous)
                .execute(&mut **tx)
                .await?;
        }
        Ok(answer)
    }
}

/// On MySQL and MariaDB, how long a transactional claim waits for the lock on its key's row
/// before it answers [`Claim::InProgress`] (a 409): 1 s. Both servers count lock waits in whole
/// seconds (`innodb_lock_wait_timeout`), and 1 s is the least MySQL 8.0 accepts; PostgreSQL's
/// 100 ms cannot be had. The row is locked by another request's open transaction that claimed
/// the same key (or, for a few milliseconds, by a concurrent claim or replay, which a wait of a
/// second outlasts). The wait is set for the claim's statements only: the session's own value is
/// read first and put back after the claim, whatever its outcome, so the handler and later users
/// of the pooled connection wait as the application set.
///
/// MySQL has no idle-in-transaction timeout (MariaDB's `idle_transaction_timeout` is not set by
/// idem): a request whose process dies is rolled back when its connection closes, at once for a
/// process that exits or crashes; a host that vanishes without closing its connections holds the
/// key, and every retry gets 409, until the server drops the session (`wait_timeout`, 8 h by
/// default; lower it, or set MariaDB's `idle_transaction_timeout`, to bound that).
#[cfg(feature = "mysql")]
pub const MYSQL_CLAIM_LOCK_WAIT: Duration = Duration::from_secs(1);

/// MySQL, before a transactional claim: keeps the session's lock wait in a user variable and
/// sets [`MYSQL_CLAIM_LOCK_WAIT`].
#[cfg(feature = "mysql")]
const MYSQL_BEFORE_CLAIM: &str = "SET @idem_lock_wait = @@SESSION.innodb_lock_wait_timeout, \
     SESSION innodb_lock_wait_timeout = 1";

/// MySQL, after a transactional claim: the session's own lock wait again.
#[cfg(feature = "mysql")]
const MYSQL_AFTER_CLAIM: &str = "SET SESSION innodb_lock_wait_timeout = @idem_lock_wait";

#[cfg(feature = "mysql")]
const _: () = assert!(MYSQL_CLAIM_LOCK_WAIT.as_secs() == 1);

/// MySQL's and MariaDB's one statement for [`SqlStore::gc`]: they delete with `LIMIT` directly
/// (and refuse `LIMIT` in an `IN` subquery); `SUBSTRING` of a `VARBINARY` compares bytes.
#[cfg(feature = "mysql")]
const MYSQL_GC_BATCH: &str = "DELETE FROM idem_leases \
     WHERE SUBSTRING(scope, 1, 12) = 'idempotency/' \
       AND updated_at < ? AND (state <> 'running' OR expires_at < ?) LIMIT ?";

#[cfg(feature = "mysql")]
impl SqlBackend for idem_sql::sqlx::MySql {
    const ONE_WRITER: bool = false;

    /// 1205 `ER_LOCK_WAIT_TIMEOUT`, which ends a wait past `innodb_lock_wait_timeout`.
    fn lock_wait_ended(e: &dyn sqlx::error::DatabaseError) -> bool {
        e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .is_some_and(|my| my.number() == 1205)
    }

    async fn gc_idempotency_batch(
        pool: &Pool<Self>,
        cutoff: i64,
        limit: i64,
    ) -> Result<u64, sqlx::Error> {
        Ok(sqlx::query(MYSQL_GC_BATCH)
            .bind(cutoff)
            .bind(cutoff)
            .bind(limit)
            .execute(pool)
            .await?
            .rows_affected())
    }

    /// Waits at most [`MYSQL_CLAIM_LOCK_WAIT`] for the key's row, then puts the session's own
    /// lock wait back (also when the claim failed).
    async fn claim_in(
        leases: &LeaseStore<Self>,
        tx: &mut Transaction<'static, Self>,
        key: &LeaseKey,
        fingerprint: &[u8],
        lease: Ttl,
    ) -> Result<Acquire, idem_sql::Error> {
        sqlx::query(MYSQL_BEFORE_CLAIM).execute(&mut **tx).await?;
        let answer = leases.acquire_in(tx, key, fingerprint, lease).await;
        let restored = sqlx::query(MYSQL_AFTER_CLAIM).execute(&mut **tx).await;
        let answer = answer?;
        restored?;
        Ok(answer)
    }
}

#[cfg(test)]
mod name_tests {
    /// The default registry name is a valid consumer name (`default_name` relies on it).
    #[test]
    fn the_default_name_is_valid() {
        assert_eq!(super::default_name().as_str(), super::DEFAULT_CONSUMER_NAME);
    }
}
