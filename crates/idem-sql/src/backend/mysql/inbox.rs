//! The inbox (claims), parked gaps and retention of the core tables on MySQL.

use std::collections::HashSet;

use sqlx::QueryBuilder;
use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, inserted, text};
use crate::backend::ops::GcTable;

/// Keys per claim statement: 3 parameters each, far below the 65,535 of a prepared statement.
const CLAIM_CHUNK: usize = 1000;

/// The claim (docs/design.md C1): a plain INSERT; error 1062 means a committed row (or one of
/// this transaction's) holds the key. A concurrent uncommitted insert of the key makes this one
/// wait for its end: duplicate if it committed, fresh if it rolled back.
const CLAIM: &str = "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) VALUES (?, ?, ?)";

const IS_CLAIMED: &str = "SELECT 1 FROM idem_inbox WHERE consumer = ? AND dedup_key = ?";

const PARKED_SINCE: &str =
    "SELECT first_seen FROM idem_parked WHERE consumer = ? AND dedup_key = ?";

const PARK: &str = "INSERT INTO idem_parked (consumer, dedup_key, first_seen) VALUES (?, ?, ?)";

/// Retention (C9), each a batch of `?` rows older than the cutoff: processed inbox keys; leases
/// completed or released before the cutoff, or running but expired before it; parked markers.
/// MySQL deletes with `LIMIT` directly (it refuses `LIMIT` in an `IN` subquery).
const GC_INBOX: &str = "DELETE FROM idem_inbox WHERE processed_at < ? LIMIT ?";

const GC_LEASES: &str = "DELETE FROM idem_leases \
     WHERE updated_at < ? AND (state <> 'running' OR expires_at < ?) LIMIT ?";

const GC_PARKED: &str = "DELETE FROM idem_parked WHERE first_seen < ? LIMIT ?";

pub(super) async fn claim(
    conn: &mut MySqlConnection,
    consumer: &str,
    key: &str,
    now: i64,
) -> Res<bool> {
    inserted(
        sqlx::query(CLAIM)
            .bind(consumer)
            .bind(key)
            .bind(now)
            .execute(&mut *conn)
            .await,
    )
}

pub(super) async fn is_claimed(conn: &mut MySqlConnection, consumer: &str, key: &str) -> Res<bool> {
    let row: Option<i32> = sqlx::query_scalar(IS_CLAIMED)
        .bind(consumer)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.is_some())
}

/// Claims `keys` (distinct, sorted, so two batches lock shared keys in one order): one
/// multi-row INSERT per chunk, which fails as a whole on the first duplicate. Then the keys
/// already there are read (a committed row, or one of this transaction's, is final) and the
/// others inserted again, until an INSERT succeeds: each failure removes at least the key it
/// failed on, since an INSERT that meets another transaction's uncommitted key waits for it.
pub(super) async fn claim_many(
    conn: &mut MySqlConnection,
    consumer: &str,
    keys: &[&str],
    now: i64,
) -> Res<Vec<String>> {
    let mut fresh = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(CLAIM_CHUNK) {
        let mut pending: Vec<&str> = chunk.to_vec();
        while !pending.is_empty() {
            let mut insert = QueryBuilder::<MySql>::new(
                "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) ",
            );
            insert.push_values(&pending, |mut row, key| {
                row.push_bind(consumer).push_bind(*key).push_bind(now);
            });
            if inserted(insert.build().execute(&mut *conn).await)? {
                fresh.extend(pending.iter().map(|key| (*key).to_owned()));
                break;
            }
            let there = existing(conn, consumer, &pending).await?;
            pending.retain(|key| !there.contains(*key));
        }
    }
    Ok(fresh)
}

/// Which of `keys` the inbox of `consumer` holds, as this transaction sees it.
async fn existing(
    conn: &mut MySqlConnection,
    consumer: &str,
    keys: &[&str],
) -> Res<HashSet<String>> {
    let mut query =
        QueryBuilder::<MySql>::new("SELECT dedup_key FROM idem_inbox WHERE consumer = ");
    query.push_bind(consumer).push(" AND dedup_key IN (");
    let mut list = query.separated(", ");
    for key in keys {
        list.push_bind(*key);
    }
    query.push(")");
    let rows: Vec<Vec<u8>> = query.build_query_scalar().fetch_all(&mut *conn).await?;
    rows.into_iter().map(text).collect()
}

pub(super) async fn parked_since(
    conn: &mut MySqlConnection,
    consumer: &str,
    key: &str,
) -> Res<Option<i64>> {
    sqlx::query_scalar(PARKED_SINCE)
        .bind(consumer)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
}

/// Records the first time a gap was seen; a second park of the key keeps the first time.
pub(super) async fn park(
    conn: &mut MySqlConnection,
    consumer: &str,
    key: &str,
    now: i64,
) -> Res<()> {
    inserted(
        sqlx::query(PARK)
            .bind(consumer)
            .bind(key)
            .bind(now)
            .execute(&mut *conn)
            .await,
    )?;
    Ok(())
}

pub(super) async fn gc_batch(
    conn: &mut MySqlConnection,
    table: GcTable,
    cutoff: i64,
    limit: i64,
) -> Res<u64> {
    let done = match table {
        GcTable::Inbox => sqlx::query(GC_INBOX).bind(cutoff).bind(limit),
        GcTable::Leases => sqlx::query(GC_LEASES).bind(cutoff).bind(cutoff).bind(limit),
        GcTable::Parked => sqlx::query(GC_PARKED).bind(cutoff).bind(limit),
    }
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}
