//! Fenced leases on MySQL: no conditional upsert and no `RETURNING`, so a taken lease is read
//! under its row lock and then written, in one (sub)transaction.

use sqlx::Connection;
use sqlx::mysql::MySqlConnection;

use super::{Res, inserted, sub_transaction};
use crate::backend::ops::{Acquired, LeaseRow};

/// A lease taken for the first time: token 1.
const INSERT: &str = "INSERT INTO idem_leases \
     (scope, lease_key, token, state, expires_at, record, fingerprint, takeover, updated_at) \
     VALUES (?, ?, 1, 'running', ?, NULL, ?, FALSE, ?)";

const LOCK: &str = "SELECT state, expires_at, token FROM idem_leases \
     WHERE scope = ? AND lease_key = ? FOR UPDATE";

/// The next holder of a free lease (released, or running past its expiry), read under lock.
const TAKE: &str = "UPDATE idem_leases SET token = ?, state = 'running', expires_at = ?, \
     record = NULL, fingerprint = ?, takeover = ?, updated_at = ? \
     WHERE scope = ? AND lease_key = ?";

const LOAD: &str = "SELECT state, expires_at, record, fingerprint FROM idem_leases \
     WHERE scope = ? AND lease_key = ?";

/// A row read by [`LOAD`]: state, expiry, record, fingerprint.
type LoadedRow = (String, i64, Option<Vec<u8>>, Vec<u8>);

/// Fenced writes: each matches only the holder's current token on a running lease (sqlx's
/// connections count matched rows, so an unchanged row still counts).
const COMPLETE: &str = "UPDATE idem_leases SET state = 'completed', record = ?, updated_at = ? \
     WHERE scope = ? AND lease_key = ? AND token = ? AND state = 'running'";

const RELEASE: &str = "UPDATE idem_leases SET state = 'released', record = NULL, updated_at = ? \
     WHERE scope = ? AND lease_key = ? AND token = ? AND state = 'running'";

/// Renews a live lease only.
const EXTEND: &str = "UPDATE idem_leases SET expires_at = ?, updated_at = ? \
     WHERE scope = ? AND lease_key = ? AND token = ? AND state = 'running' AND expires_at > ?";

/// Takes the lease if it is free: absent, released, or running past its expiry; `None` when it
/// is live or completed (or was inserted by another transaction meanwhile).
///
/// Outside a transaction a new lease is one autocommitted INSERT. Otherwise, and when that
/// INSERT finds the key, the row is locked first (`FOR UPDATE`) and then inserted or taken: an
/// INSERT that found the row would hold a shared lock on it, and two takers upgrading theirs
/// would deadlock.
pub(super) async fn acquire(
    conn: &mut MySqlConnection,
    scope: &str,
    key: &str,
    fingerprint: &[u8],
    now: i64,
    ttl_ms: i64,
) -> Res<Option<Acquired>> {
    let expires_at = now.saturating_add(ttl_ms);
    let first = Acquired {
        token: 1,
        expires_at,
        takeover: false,
    };
    if !conn.is_in_transaction()
        && insert(&mut *conn, scope, key, fingerprint, now, expires_at).await?
    {
        return Ok(Some(first));
    }
    let mut tx = sub_transaction(conn).await?;
    let row: Option<(String, i64, i64)> = sqlx::query_as(LOCK)
        .bind(scope)
        .bind(key)
        .fetch_optional(&mut *tx)
        .await?;
    let acquired = match row {
        None => insert(&mut tx, scope, key, fingerprint, now, expires_at)
            .await?
            .then_some(first),
        Some((state, lease_expires_at, token)) => {
            let running = state == "running";
            if state == "released" || (running && lease_expires_at <= now) {
                sqlx::query(TAKE)
                    .bind(token + 1)
                    .bind(expires_at)
                    .bind(fingerprint)
                    .bind(running)
                    .bind(now)
                    .bind(scope)
                    .bind(key)
                    .execute(&mut *tx)
                    .await?;
                Some(Acquired {
                    token: token + 1,
                    expires_at,
                    takeover: running,
                })
            } else {
                None
            }
        }
    };
    tx.commit().await?;
    Ok(acquired)
}

async fn insert(
    conn: &mut MySqlConnection,
    scope: &str,
    key: &str,
    fingerprint: &[u8],
    now: i64,
    expires_at: i64,
) -> Res<bool> {
    inserted(
        sqlx::query(INSERT)
            .bind(scope)
            .bind(key)
            .bind(expires_at)
            .bind(fingerprint)
            .bind(now)
            .execute(&mut *conn)
            .await,
    )
}

pub(super) async fn load(
    conn: &mut MySqlConnection,
    scope: &str,
    key: &str,
) -> Res<Option<LeaseRow>> {
    let row: Option<LoadedRow> = sqlx::query_as(LOAD)
        .bind(scope)
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(
        row.map(|(state, expires_at, record, fingerprint)| LeaseRow {
            state,
            expires_at,
            record,
            fingerprint,
        }),
    )
}

pub(super) async fn complete(
    conn: &mut MySqlConnection,
    scope: &str,
    key: &str,
    token: i64,
    record: &[u8],
    now: i64,
) -> Res<bool> {
    let done = sqlx::query(COMPLETE)
        .bind(record)
        .bind(now)
        .bind(scope)
        .bind(key)
        .bind(token)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn release(
    conn: &mut MySqlConnection,
    scope: &str,
    key: &str,
    token: i64,
    now: i64,
) -> Res<bool> {
    let done = sqlx::query(RELEASE)
        .bind(now)
        .bind(scope)
        .bind(key)
        .bind(token)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub(super) async fn extend(
    conn: &mut MySqlConnection,
    scope: &str,
    key: &str,
    token: i64,
    now: i64,
    ttl_ms: i64,
) -> Res<Option<i64>> {
    let expires_at = now.saturating_add(ttl_ms);
    let done = sqlx::query(EXTEND)
        .bind(expires_at)
        .bind(now)
        .bind(scope)
        .bind(key)
        .bind(token)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    Ok((done.rows_affected() == 1).then_some(expires_at))
}
