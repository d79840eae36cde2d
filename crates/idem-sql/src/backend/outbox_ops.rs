//! The outbox's statements (docs/design.md C7). All but the claim are the same SQL on both databases;
//! the claim locks its rows with `FOR UPDATE SKIP LOCKED` on PostgreSQL, where several relays
//! may claim at once, and relies on SQLite's single writer there.

// The SQL text and the macro below are SQLite's and PostgreSQL's; MySQL's are in `mysql/`, so a
// build with the `mysql` feature alone has no use for them.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;
#[cfg(feature = "postgres")]
use sqlx::Postgres;
#[cfg(feature = "sqlite")]
use sqlx::{QueryBuilder, Sqlite};

/// A row of `idem_outbox` as read, in the column order of [`COLUMNS`]: seq, message_id,
/// destination, aggregate_type, aggregate_id, headers, payload, status, attempts,
/// next_attempt_at, claim_token, last_error, created_at, published_at.
pub(crate) type RawOutboxRow = (
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    Vec<u8>,
    String,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    i64,
    Option<i64>,
);

/// The columns of [`RawOutboxRow`].
const COLUMNS: &str = "seq, message_id, destination, aggregate_type, aggregate_id, headers, \
     payload, status, attempts, next_attempt_at, claim_token, last_error, created_at, published_at";

/// The rows a relay may take now ($1 = now, $3 = limit), oldest first: pending, due (never
/// claimed, or its claim expired, or its backoff over), and, for a row of an aggregate, no older
/// row of that aggregate still unpublished (pending or parked). So at most one row per aggregate
/// is ever in flight, and rows of one aggregate are published in `seq` order.
macro_rules! due_rows {
    ($lock:literal) => {
        concat!(
            "SELECT r.seq FROM idem_outbox r \
             WHERE r.status = 'pending' AND r.next_attempt_at <= $1 \
               AND (r.aggregate_type IS NULL OR NOT EXISTS ( \
                   SELECT 1 FROM idem_outbox o \
                   WHERE o.aggregate_type = r.aggregate_type AND o.aggregate_id = r.aggregate_id \
                     AND o.seq < r.seq AND o.status <> 'published')) \
             ORDER BY r.seq LIMIT $3",
            $lock
        )
    };
}

/// SQLite: one UPDATE under the database's single write lock ($2 = claim ttl, $4 = token).
#[cfg(feature = "sqlite")]
const CLAIM_SQLITE: &str = concat!(
    "UPDATE idem_outbox SET claim_token = $4, next_attempt_at = $1 + $2 WHERE seq IN (",
    due_rows!(""),
    ") RETURNING seq, message_id, destination, aggregate_type, aggregate_id, headers, payload, \
     status, attempts, next_attempt_at, claim_token, last_error, created_at, published_at"
);

/// PostgreSQL: rows another relay is claiming right now are skipped, not waited for; the claim
/// commits with the statement, so the row is then not due until the claim expires.
#[cfg(feature = "postgres")]
const CLAIM_POSTGRES: &str = concat!(
    "WITH due AS (",
    due_rows!(" FOR UPDATE OF r SKIP LOCKED"),
    ") UPDATE idem_outbox AS t SET claim_token = $4, next_attempt_at = $1 + $2 \
     FROM due WHERE t.seq = due.seq \
     RETURNING t.seq, t.message_id, t.destination, t.aggregate_type, t.aggregate_id, t.headers, \
     t.payload, t.status, t.attempts, t.next_attempt_at, t.claim_token, t.last_error, \
     t.created_at, t.published_at"
);

/// The claim by lock, for a relay that holds its transaction open while it publishes ($1 = now,
/// $2 = limit): on PostgreSQL the due rows, locked until the transaction ends, skipping rows
/// other relays hold; no row is written until the outcome is recorded, and a relay that dies
/// releases its locks with its connection. On SQLite the transaction's write lock is the claim.
macro_rules! lock_due {
    ($lock:literal) => {
        concat!(
            "SELECT seq, message_id, destination, aggregate_type, aggregate_id, headers, payload, \
     status, attempts, next_attempt_at, claim_token, last_error, created_at, published_at \
     FROM idem_outbox r \
     WHERE r.status = 'pending' AND r.next_attempt_at <= $1 \
       AND (r.aggregate_type IS NULL OR NOT EXISTS ( \
           SELECT 1 FROM idem_outbox o \
           WHERE o.aggregate_type = r.aggregate_type AND o.aggregate_id = r.aggregate_id \
             AND o.seq < r.seq AND o.status <> 'published')) \
     ORDER BY r.seq LIMIT $2",
            $lock
        )
    };
}

/// [`FAIL`] for a row held by lock in the caller's transaction: the lock is the fence.
const FAIL_LOCKED: &str = "UPDATE idem_outbox SET attempts = attempts + 1, \
         status = CASE WHEN attempts + 1 >= $2 THEN 'parked' ELSE 'pending' END, \
         next_attempt_at = $3, claim_token = NULL, last_error = $4 \
     WHERE message_id = $1 AND status = 'pending' \
     RETURNING status, attempts";

const INSERT: &str = "INSERT INTO idem_outbox \
     (message_id, destination, aggregate_type, aggregate_id, headers, payload, status, attempts, \
      next_attempt_at, created_at, consumer) \
     VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $8) \
     ON CONFLICT (message_id) DO NOTHING";

/// Fenced by the claim token: only the relay holding the claim records its failure or deferral
/// (both count an attempt; they differ only in $4, when the row is due again). Parks the row
/// when this attempt reaches $3.
const FAIL: &str = "UPDATE idem_outbox SET attempts = attempts + 1, \
         status = CASE WHEN attempts + 1 >= $3 THEN 'parked' ELSE 'pending' END, \
         next_attempt_at = $4, claim_token = NULL, last_error = $5 \
     WHERE message_id = $1 AND claim_token = $2 AND status = 'pending' \
     RETURNING status, attempts";

const REQUEUE: &str = "UPDATE idem_outbox \
     SET status = 'pending', attempts = 0, next_attempt_at = $2, claim_token = NULL \
     WHERE message_id = $1 AND status = 'parked'";

const DISCARD: &str = "DELETE FROM idem_outbox WHERE message_id = $1 AND status = 'parked'";

/// Retention (C9): published rows only, never pending or parked ones.
const GC: &str = "DELETE FROM idem_outbox WHERE seq IN \
     (SELECT seq FROM idem_outbox WHERE status = 'published' AND published_at < $1 LIMIT $2)";

/// PostgreSQL: claims and publication marks commit without waiting for the WAL flush. Losing one
/// in a database crash is harmless: the row is pending again and is republished with the same
/// message id, which C7 allows and downstream deduplication absorbs. Enqueues, which are the
/// application's own transaction, are never relaxed.
#[cfg(feature = "postgres")]
const RELAXED_COMMIT: &str = "SET LOCAL synchronous_commit = off";

/// Message ids per `mark_published` statement: far below both databases' parameter limits.
#[cfg(feature = "sqlite")]
const PUBLISHED_CHUNK: usize = 1000;

type Res<T> = Result<T, sqlx::Error>;

/// The columns of a new outbox row.
#[derive(Debug)]
pub struct NewOutboxRow<'a> {
    pub message_id: &'a str,
    pub destination: &'a str,
    pub aggregate_type: Option<&'a str>,
    pub aggregate_id: Option<&'a str>,
    pub headers: &'a str,
    pub payload: &'a [u8],
    pub now: i64,
    /// The consumer that wrote it, if known.
    pub consumer: Option<&'a str>,
}

/// The outbox's operations on one database.
pub trait OutboxOps: Database + Sized {
    /// Whether [`outbox_lock_due`](Self::outbox_lock_due) can be held across a publish: row
    /// locks that other relays skip (PostgreSQL), not the whole database's write lock (SQLite).
    const LOCKS_ROWS: bool;
    /// Claims up to `limit` due rows in the caller's transaction: row locks on PostgreSQL, the
    /// write lock on SQLite. On PostgreSQL it also relaxes the transaction's commit.
    fn outbox_lock_due(
        conn: &mut Self::Connection,
        now: i64,
        limit: i64,
    ) -> impl Future<Output = Res<Vec<RawOutboxRow>>> + Send;
    /// Marks `ids` published in the caller's transaction.
    fn outbox_mark_published_locked(
        conn: &mut Self::Connection,
        ids: &[&str],
        now: i64,
    ) -> impl Future<Output = Res<u64>> + Send;
    /// Records a failure of a row the caller's transaction holds by lock.
    fn outbox_fail_locked(
        conn: &mut Self::Connection,
        id: &str,
        max_attempts: i64,
        next_attempt_at: i64,
        reason: &str,
    ) -> impl Future<Output = Res<Option<(String, i64)>>> + Send;
    /// Inserts a pending row; `false` when the message id exists already.
    fn outbox_insert(
        conn: &mut Self::Connection,
        row: &NewOutboxRow<'_>,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Claims up to `limit` due rows with `token` until `now + ttl_ms`.
    fn outbox_claim(
        conn: &mut Self::Connection,
        now: i64,
        ttl_ms: i64,
        limit: i64,
        token: i64,
    ) -> impl Future<Output = Res<Vec<RawOutboxRow>>> + Send;
    /// Marks the rows of `ids` published at `now`; returns how many changed.
    fn outbox_mark_published(
        conn: &mut Self::Connection,
        ids: &[&str],
        now: i64,
    ) -> impl Future<Output = Res<u64>> + Send;
    /// Records a failure of the claim `token`; returns the new (status, attempts), or `None`
    /// when the claim is no longer held.
    fn outbox_fail(
        conn: &mut Self::Connection,
        id: &str,
        token: i64,
        max_attempts: i64,
        next_attempt_at: i64,
        reason: &str,
    ) -> impl Future<Output = Res<Option<(String, i64)>>> + Send;
    /// Up to `limit` rows with `status`, oldest first.
    fn outbox_list(
        conn: &mut Self::Connection,
        status: &str,
        limit: i64,
    ) -> impl Future<Output = Res<Vec<RawOutboxRow>>> + Send;
    /// The row of `id`.
    fn outbox_get(
        conn: &mut Self::Connection,
        id: &str,
    ) -> impl Future<Output = Res<Option<RawOutboxRow>>> + Send;
    /// Puts a parked row back to pending, due at `now`, with no attempts.
    fn outbox_requeue(
        conn: &mut Self::Connection,
        id: &str,
        now: i64,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Deletes a parked row.
    fn outbox_discard(
        conn: &mut Self::Connection,
        id: &str,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Deletes up to `limit` rows published before `cutoff`; returns how many.
    fn outbox_gc(
        conn: &mut Self::Connection,
        cutoff: i64,
        limit: i64,
    ) -> impl Future<Output = Res<u64>> + Send;
}

/// Marks `ids` published at `now` on `$conn`, [`PUBLISHED_CHUNK`] ids per statement.
macro_rules! mark_published {
    // PostgreSQL: one array parameter, so the statement text and its plan are the same for
    // every batch size.
    (Postgres, $conn:expr, $ids:expr, $now:expr) => {{
        sqlx::query(
            "UPDATE idem_outbox SET status = 'published', claim_token = NULL, published_at = $1 \
             WHERE status <> 'published' AND message_id = ANY($2)",
        )
        .bind($now)
        .bind($ids)
        .execute(&mut *$conn)
        .await
        .map(|done| done.rows_affected())
    }};
    ($db:ty, $conn:expr, $ids:expr, $now:expr) => {{
        let mut changed = 0;
        for chunk in $ids.chunks(PUBLISHED_CHUNK) {
            let mut query = QueryBuilder::<$db>::new(
                "UPDATE idem_outbox SET status = 'published', claim_token = NULL, published_at = ",
            );
            query.push_bind($now);
            query.push(" WHERE status <> 'published' AND message_id IN (");
            let mut list = query.separated(", ");
            for id in chunk {
                list.push_bind(*id);
            }
            query.push(")");
            changed += query.build().execute(&mut *$conn).await?.rows_affected();
        }
        Ok::<u64, sqlx::Error>(changed)
    }};
}

macro_rules! outbox_ops {
    ($db:ident, $claim:expr, $relaxed:expr, $locks_rows:expr, $lock_due:expr) => {
        impl OutboxOps for $db {
            const LOCKS_ROWS: bool = $locks_rows;

            async fn outbox_lock_due(
                conn: &mut Self::Connection,
                now: i64,
                limit: i64,
            ) -> Res<Vec<RawOutboxRow>> {
                // The whole transaction: its outcomes may be lost in a crash (republished).
                if let Some(relaxed) = $relaxed {
                    sqlx::query(relaxed).execute(&mut *conn).await?;
                }
                sqlx::query_as($lock_due)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn outbox_mark_published_locked(
                conn: &mut Self::Connection,
                ids: &[&str],
                now: i64,
            ) -> Res<u64> {
                mark_published!($db, conn, ids, now)
            }

            async fn outbox_fail_locked(
                conn: &mut Self::Connection,
                id: &str,
                max_attempts: i64,
                next_attempt_at: i64,
                reason: &str,
            ) -> Res<Option<(String, i64)>> {
                sqlx::query_as(FAIL_LOCKED)
                    .bind(id)
                    .bind(max_attempts)
                    .bind(next_attempt_at)
                    .bind(reason)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn outbox_insert(
                conn: &mut Self::Connection,
                row: &NewOutboxRow<'_>,
            ) -> Res<bool> {
                let done = sqlx::query(INSERT)
                    .bind(row.message_id)
                    .bind(row.destination)
                    .bind(row.aggregate_type)
                    .bind(row.aggregate_id)
                    .bind(row.headers)
                    .bind(row.payload)
                    .bind(row.now)
                    .bind(row.consumer)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn outbox_claim(
                conn: &mut Self::Connection,
                now: i64,
                ttl_ms: i64,
                limit: i64,
                token: i64,
            ) -> Res<Vec<RawOutboxRow>> {
                let claim = sqlx::query_as($claim)
                    .bind(now)
                    .bind(ttl_ms)
                    .bind(limit)
                    .bind(token);
                match $relaxed {
                    None => claim.fetch_all(&mut *conn).await,
                    Some(relaxed) => {
                        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                        sqlx::query(relaxed).execute(&mut *tx).await?;
                        let rows = claim.fetch_all(&mut *tx).await?;
                        tx.commit().await?;
                        Ok(rows)
                    }
                }
            }

            async fn outbox_mark_published(
                conn: &mut Self::Connection,
                ids: &[&str],
                now: i64,
            ) -> Res<u64> {
                let Some(relaxed) = $relaxed else {
                    return mark_published!($db, conn, ids, now);
                };
                let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                sqlx::query(relaxed).execute(&mut *tx).await?;
                let changed = mark_published!($db, tx, ids, now)?;
                tx.commit().await?;
                Ok(changed)
            }

            async fn outbox_fail(
                conn: &mut Self::Connection,
                id: &str,
                token: i64,
                max_attempts: i64,
                next_attempt_at: i64,
                reason: &str,
            ) -> Res<Option<(String, i64)>> {
                sqlx::query_as(FAIL)
                    .bind(id)
                    .bind(token)
                    .bind(max_attempts)
                    .bind(next_attempt_at)
                    .bind(reason)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn outbox_list(
                conn: &mut Self::Connection,
                status: &str,
                limit: i64,
            ) -> Res<Vec<RawOutboxRow>> {
                let sql = format!(
                    "SELECT {COLUMNS} FROM idem_outbox WHERE status = $1 ORDER BY seq LIMIT $2"
                );
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(status)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn outbox_get(
                conn: &mut Self::Connection,
                id: &str,
            ) -> Res<Option<RawOutboxRow>> {
                let sql = format!("SELECT {COLUMNS} FROM idem_outbox WHERE message_id = $1");
                sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn outbox_requeue(conn: &mut Self::Connection, id: &str, now: i64) -> Res<bool> {
                let done = sqlx::query(REQUEUE)
                    .bind(id)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn outbox_discard(conn: &mut Self::Connection, id: &str) -> Res<bool> {
                let done = sqlx::query(DISCARD).bind(id).execute(&mut *conn).await?;
                Ok(done.rows_affected() == 1)
            }

            async fn outbox_gc(conn: &mut Self::Connection, cutoff: i64, limit: i64) -> Res<u64> {
                let done = sqlx::query(GC)
                    .bind(cutoff)
                    .bind(limit)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

#[cfg(feature = "sqlite")]
outbox_ops!(
    Sqlite,
    CLAIM_SQLITE,
    None::<&'static str>,
    false,
    lock_due!("")
);
#[cfg(feature = "postgres")]
outbox_ops!(
    Postgres,
    CLAIM_POSTGRES,
    Some(RELAXED_COMMIT),
    true,
    lock_due!(" FOR UPDATE OF r SKIP LOCKED")
);
