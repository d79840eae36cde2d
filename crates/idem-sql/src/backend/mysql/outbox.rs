//! The outbox's statements on MySQL (docs/design.md C7). Relays claim due rows with
//! `FOR UPDATE SKIP LOCKED`: by lock for the length of a publish ([`OutboxOps::outbox_lock_due`],
//! the relays' way, since InnoDB locks rows), or by claim token in a short transaction.
//!
//! MySQL has no per-transaction way to skip the commit's log flush (PostgreSQL's
//! `synchronous_commit = off`), so the relays' commits are as durable as the application's.

use sqlx::mysql::{MySql, MySqlConnection};
use sqlx::{MySqlExecutor, QueryBuilder};

use super::{Res, inserted, opt_text, sub_transaction, text};
use crate::backend::outbox_ops::{NewOutboxRow, OutboxOps, RawOutboxRow};

/// The columns of [`RawOutboxRow`], in its order.
const COLUMNS: &str = "seq, message_id, destination, aggregate_type, aggregate_id, headers, \
     payload, status, attempts, next_attempt_at, claim_token, last_error, created_at, published_at";

/// A row as MySQL returns it: the key columns as bytes.
type Row = (
    i64,
    Vec<u8>,
    String,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
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

fn raw(r: Row) -> Res<RawOutboxRow> {
    Ok((
        r.0,
        text(r.1)?,
        r.2,
        opt_text(r.3)?,
        opt_text(r.4)?,
        r.5,
        r.6,
        r.7,
        r.8,
        r.9,
        r.10,
        r.11,
        r.12,
        r.13,
    ))
}

/// The rows a relay may take now (now, limit), oldest first, locked; rows other relays hold are
/// skipped: pending, due, and, for a row of an aggregate, no older row of that aggregate still
/// unpublished (pending or parked). The subquery is a plain read: it locks nothing.
const DUE: &str = "SELECT seq, message_id, destination, aggregate_type, aggregate_id, headers, \
     payload, status, attempts, next_attempt_at, claim_token, last_error, created_at, published_at \
     FROM idem_outbox r \
     WHERE r.status = 'pending' AND r.next_attempt_at <= ? \
       AND (r.aggregate_type IS NULL OR NOT EXISTS ( \
           SELECT 1 FROM idem_outbox o \
           WHERE o.aggregate_type = r.aggregate_type AND o.aggregate_id = r.aggregate_id \
             AND o.seq < r.seq AND o.status <> 'published')) \
     ORDER BY r.seq LIMIT ? FOR UPDATE SKIP LOCKED";

const INSERT: &str = "INSERT INTO idem_outbox \
     (message_id, destination, aggregate_type, aggregate_id, headers, payload, status, attempts, \
      next_attempt_at, created_at, consumer) \
     VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)";

/// Counts a failed attempt and parks the row when this one reaches the limit (max attempts,
/// next attempt at, reason, message id): `status` is assigned before `attempts`, as MySQL
/// assigns left to right and the CASE must see the old count.
const FAIL_SET: &str = "UPDATE idem_outbox SET \
     status = CASE WHEN attempts + 1 >= ? THEN 'parked' ELSE 'pending' END, \
     attempts = attempts + 1, next_attempt_at = ?, claim_token = NULL, last_error = ? \
     WHERE message_id = ? AND status = 'pending'";

const STATUS: &str = "SELECT status, attempts FROM idem_outbox WHERE message_id = ?";

const REQUEUE: &str = "UPDATE idem_outbox \
     SET status = 'pending', attempts = 0, next_attempt_at = ?, claim_token = NULL \
     WHERE message_id = ? AND status = 'parked'";

const DISCARD: &str = "DELETE FROM idem_outbox WHERE message_id = ? AND status = 'parked'";

/// Retention (C9): published rows only, never pending or parked ones.
const GC: &str = "DELETE FROM idem_outbox WHERE status = 'published' AND published_at < ? LIMIT ?";

/// Message ids per `mark_published` statement.
const PUBLISHED_CHUNK: usize = 1000;

async fn due(conn: impl MySqlExecutor<'_>, now: i64, limit: i64) -> Res<Vec<RawOutboxRow>> {
    let rows: Vec<Row> = sqlx::query_as(DUE)
        .bind(now)
        .bind(limit)
        .fetch_all(conn)
        .await?;
    rows.into_iter().map(raw).collect()
}

async fn mark_published(conn: &mut MySqlConnection, ids: &[&str], now: i64) -> Res<u64> {
    let mut changed = 0;
    for chunk in ids.chunks(PUBLISHED_CHUNK) {
        let mut query = QueryBuilder::<MySql>::new(
            "UPDATE idem_outbox SET status = 'published', claim_token = NULL, published_at = ",
        );
        query.push_bind(now);
        query.push(" WHERE status <> 'published' AND message_id IN (");
        let mut list = query.separated(", ");
        for id in chunk {
            list.push_bind(*id);
        }
        query.push(")");
        changed += query.build().execute(&mut *conn).await?.rows_affected();
    }
    Ok(changed)
}

/// Counts a failed attempt of `id`, if the claim `token` is still the row's (`None` for a row
/// this transaction holds by lock: the lock is the fence); then reads the row's new state.
async fn fail(
    conn: &mut MySqlConnection,
    id: &str,
    token: Option<i64>,
    max_attempts: i64,
    next_attempt_at: i64,
    reason: &str,
) -> Res<Option<(String, i64)>> {
    let sql = match token {
        Some(_) => format!("{FAIL_SET} AND claim_token = ?"),
        None => FAIL_SET.to_owned(),
    };
    let mut update = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(max_attempts)
        .bind(next_attempt_at)
        .bind(reason)
        .bind(id);
    if let Some(token) = token {
        update = update.bind(token);
    }
    if update.execute(&mut *conn).await?.rows_affected() != 1 {
        return Ok(None);
    }
    sqlx::query_as(STATUS)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await
}

impl OutboxOps for MySql {
    const LOCKS_ROWS: bool = true;

    async fn outbox_lock_due(
        conn: &mut MySqlConnection,
        now: i64,
        limit: i64,
    ) -> Res<Vec<RawOutboxRow>> {
        due(&mut *conn, now, limit).await
    }

    async fn outbox_mark_published_locked(
        conn: &mut MySqlConnection,
        ids: &[&str],
        now: i64,
    ) -> Res<u64> {
        mark_published(conn, ids, now).await
    }

    async fn outbox_fail_locked(
        conn: &mut MySqlConnection,
        id: &str,
        max_attempts: i64,
        next_attempt_at: i64,
        reason: &str,
    ) -> Res<Option<(String, i64)>> {
        fail(conn, id, None, max_attempts, next_attempt_at, reason).await
    }

    async fn outbox_insert(conn: &mut MySqlConnection, row: &NewOutboxRow<'_>) -> Res<bool> {
        inserted(
            sqlx::query(INSERT)
                .bind(row.message_id)
                .bind(row.destination)
                .bind(row.aggregate_type)
                .bind(row.aggregate_id)
                .bind(row.headers)
                .bind(row.payload)
                .bind(row.now)
                .bind(row.now)
                .bind(row.consumer)
                .execute(&mut *conn)
                .await,
        )
    }

    /// One short transaction: the due rows locked (skipping other relays' claims), then their
    /// claim written; the claim holds after the commit until `now + ttl_ms`.
    async fn outbox_claim(
        conn: &mut MySqlConnection,
        now: i64,
        ttl_ms: i64,
        limit: i64,
        token: i64,
    ) -> Res<Vec<RawOutboxRow>> {
        let mut tx = sub_transaction(conn).await?;
        let mut rows = due(&mut *tx, now, limit).await?;
        if !rows.is_empty() {
            let until = now.saturating_add(ttl_ms);
            let mut claim = QueryBuilder::<MySql>::new("UPDATE idem_outbox SET claim_token = ");
            claim.push_bind(token);
            claim.push(", next_attempt_at = ").push_bind(until);
            claim.push(" WHERE seq IN (");
            let mut list = claim.separated(", ");
            for row in &rows {
                list.push_bind(row.0);
            }
            claim.push(")");
            claim.build().execute(&mut *tx).await?;
            for row in &mut rows {
                row.9 = until;
                row.10 = Some(token);
            }
        }
        tx.commit().await?;
        Ok(rows)
    }

    async fn outbox_mark_published(conn: &mut MySqlConnection, ids: &[&str], now: i64) -> Res<u64> {
        mark_published(conn, ids, now).await
    }

    async fn outbox_fail(
        conn: &mut MySqlConnection,
        id: &str,
        token: i64,
        max_attempts: i64,
        next_attempt_at: i64,
        reason: &str,
    ) -> Res<Option<(String, i64)>> {
        let mut tx = sub_transaction(conn).await?;
        let result = fail(
            &mut tx,
            id,
            Some(token),
            max_attempts,
            next_attempt_at,
            reason,
        )
        .await?;
        tx.commit().await?;
        Ok(result)
    }

    async fn outbox_list(
        conn: &mut MySqlConnection,
        status: &str,
        limit: i64,
    ) -> Res<Vec<RawOutboxRow>> {
        let sql =
            format!("SELECT {COLUMNS} FROM idem_outbox WHERE status = ? ORDER BY seq LIMIT ?");
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(status)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        rows.into_iter().map(raw).collect()
    }

    async fn outbox_get(conn: &mut MySqlConnection, id: &str) -> Res<Option<RawOutboxRow>> {
        let sql = format!("SELECT {COLUMNS} FROM idem_outbox WHERE message_id = ?");
        let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.map(raw).transpose()
    }

    async fn outbox_requeue(conn: &mut MySqlConnection, id: &str, now: i64) -> Res<bool> {
        let done = sqlx::query(REQUEUE)
            .bind(now)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn outbox_discard(conn: &mut MySqlConnection, id: &str) -> Res<bool> {
        let done = sqlx::query(DISCARD).bind(id).execute(&mut *conn).await?;
        Ok(done.rows_affected() == 1)
    }

    async fn outbox_gc(conn: &mut MySqlConnection, cutoff: i64, limit: i64) -> Res<u64> {
        let done = sqlx::query(GC)
            .bind(cutoff)
            .bind(limit)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    }
}
