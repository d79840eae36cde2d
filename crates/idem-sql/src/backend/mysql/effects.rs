//! The effect ledger's statements on MySQL (`idem_effects`, migration 0002). A claim locks the
//! due rows with `FOR UPDATE SKIP LOCKED` and takes their leases in one short transaction, so
//! concurrent workers claim disjoint rows.

use sqlx::MySqlExecutor;
use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, inserted, placeholders, sub_transaction, text};
use crate::backend::effect_ops::{ClaimedRow, EffectOps, EffectRow, Finish, Resolve};

const INSERT: &str = "INSERT INTO idem_effects \
     (effect_key, effect, request, status, attempts, next_attempt_at, lease_token, \
      lease_expires_at, outcome, last_error, first_attempt_at, created_at, updated_at, consumer) \
     VALUES (?, ?, ?, 'pending', 0, ?, 0, 0, NULL, NULL, NULL, ?, ?, ?)";

/// Rows whose key starts with the second parameter, as long as the first (bytes: the column is
/// `VARBINARY`).
const COUNT_PREFIX: &str =
    "SELECT COUNT(*) FROM idem_effects WHERE SUBSTRING(effect_key, 1, ?) = ?";

/// The columns of an [`EffectRow`], in its field order.
const ROW_COLUMNS: &str = "effect_key, effect, request, status, attempts, next_attempt_at, \
     lease_token, outcome, last_error, first_attempt_at, created_at, updated_at";

type RowTuple = (
    Vec<u8>,
    Vec<u8>,
    Vec<u8>,
    String,
    i64,
    i64,
    i64,
    Option<Vec<u8>>,
    Option<String>,
    Option<i64>,
    i64,
    i64,
);

fn row(t: RowTuple) -> Res<EffectRow> {
    Ok(EffectRow {
        key: text(t.0)?,
        effect: text(t.1)?,
        request: t.2,
        status: t.3,
        attempts: t.4,
        next_attempt_at: t.5,
        lease_token: t.6,
        outcome: t.7,
        last_error: t.8,
        first_attempt_at: t.9,
        created_at: t.10,
        updated_at: t.11,
    })
}

/// Due (now, now, now, key retention): pending, or with an unknown result (status unknown, or
/// running under a lease that lapsed) while the provider still keeps the key; due by time; no
/// live lease. `due_at` is `next_attempt_at` for those three statuses only (migration 0002).
const CLAIM_WHERE: &str = "due_at <= ? AND lease_expires_at <= ? \
     AND (status = 'pending' OR first_attempt_at > ? - ?)";

/// Takes the leases of the rows locked by the claim's SELECT: the token grows by one, so every
/// earlier holder is fenced off.
const CLAIM_SET: &str = "UPDATE idem_effects SET status = 'running', \
     lease_token = lease_token + 1, lease_expires_at = ?, attempts = attempts + 1, \
     first_attempt_at = COALESCE(first_attempt_at, ?), updated_at = ? WHERE effect_key IN ";

const FINISH: &str = "UPDATE idem_effects SET status = ?, outcome = ?, last_error = ?, \
     next_attempt_at = ?, lease_expires_at = 0, updated_at = ? \
     WHERE effect_key = ? AND lease_token = ? AND status = 'running'";

/// Unknown (or vanished-worker) rows past the key retention (now, now, retention).
const EXPIRED_WHERE: &str = "status IN ('unknown', 'running') AND lease_expires_at <= ? \
     AND first_attempt_at <= ? - ?";

/// Parks one expired row by its key (now, key, then [`EXPIRED_WHERE`]'s values).
const PARK: &str = "UPDATE idem_effects SET status = 'parked', lease_expires_at = 0, \
     updated_at = ? WHERE effect_key = ? AND status IN ('unknown', 'running') \
     AND lease_expires_at <= ? AND first_attempt_at <= ? - ?";

const RESOLVABLE: &str = " WHERE effect_key = ? AND status IN ('parked', 'dead')";
const RESOLVE_SUCCEEDED: &str =
    "UPDATE idem_effects SET status = 'succeeded', outcome = ?, updated_at = ?";
const RESOLVE_FAILED: &str =
    "UPDATE idem_effects SET status = 'failed', last_error = ?, updated_at = ?";
/// A new run: attempts and the key-retention window start again.
const RESOLVE_RETRY: &str = "UPDATE idem_effects SET status = 'pending', attempts = 0, \
     first_attempt_at = NULL, next_attempt_at = ?, updated_at = ?";

/// Retention (C9): only finished rows; never pending, running, unknown, parked or dead.
const GC: &str = "DELETE FROM idem_effects WHERE status IN ('succeeded', 'failed') \
     AND updated_at < ? LIMIT ?";

/// ` AND effect IN (?, …)` for `n` effect names, or nothing when `n` is 0 (every effect).
fn effect_filter(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" AND effect IN ({})", placeholders(n))
    }
}

impl EffectOps for MySql {
    async fn effects_insert(
        conn: &mut MySqlConnection,
        key: &str,
        effect: &str,
        request: &[u8],
        now: i64,
        consumer: Option<&str>,
    ) -> Res<bool> {
        inserted(
            sqlx::query(INSERT)
                .bind(key)
                .bind(effect)
                .bind(request)
                .bind(now)
                .bind(now)
                .bind(now)
                .bind(consumer)
                .execute(&mut *conn)
                .await,
        )
    }

    async fn effects_load(conn: &mut MySqlConnection, key: &str) -> Res<Option<EffectRow>> {
        let sql = format!("SELECT {ROW_COLUMNS} FROM idem_effects WHERE effect_key = ?");
        let found: Option<RowTuple> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(key)
            .fetch_optional(&mut *conn)
            .await?;
        found.map(row).transpose()
    }

    async fn effects_list(
        conn: &mut MySqlConnection,
        status: &str,
        limit: i64,
    ) -> Res<Vec<EffectRow>> {
        let sql = format!(
            "SELECT {ROW_COLUMNS} FROM idem_effects WHERE status = ? \
             ORDER BY updated_at, effect_key LIMIT ?"
        );
        let rows: Vec<RowTuple> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(status)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        rows.into_iter().map(row).collect()
    }

    /// One short transaction: the due rows locked (`FOR UPDATE SKIP LOCKED`, rows other
    /// workers are claiming are passed over), then their leases taken. With effect names, one
    /// locking read per effect on `(effect, due_at)` (usually one), the rows merged in due
    /// order; the rows past `limit` stay locked until the commit, a moment later.
    async fn effects_claim(
        conn: &mut MySqlConnection,
        now: i64,
        lease_ms: i64,
        retention_ms: i64,
        limit: i64,
        effects: &[&str],
    ) -> Res<Vec<ClaimedRow>> {
        let mut tx = sub_transaction(conn).await?;
        let mut due = Vec::new();
        if effects.is_empty() {
            due = lock_due(&mut *tx, None, now, retention_ms, limit).await?;
        }
        for effect in effects {
            due.extend(lock_due(&mut *tx, Some(effect), now, retention_ms, limit).await?);
        }
        due.sort_by_key(|row| row.6);
        due.truncate(usize::try_from(limit).unwrap_or(0));
        if due.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        take_leases(&mut *tx, &due, now, lease_ms).await?;
        tx.commit().await?;
        due.into_iter()
            .map(|(key, effect, request, attempts, token, first, _)| {
                Ok(ClaimedRow {
                    key: text(key)?,
                    effect: text(effect)?,
                    request,
                    attempts: attempts + 1,
                    token: token + 1,
                    // Set by the claim itself when it was NULL.
                    first_attempt_at: first.unwrap_or(now),
                })
            })
            .collect()
    }

    async fn effects_finish(
        conn: &mut MySqlConnection,
        key: &str,
        token: i64,
        finish: &Finish<'_>,
    ) -> Res<bool> {
        let done = sqlx::query(FINISH)
            .bind(finish.status)
            .bind(finish.outcome)
            .bind(finish.last_error)
            .bind(finish.next_attempt_at)
            .bind(finish.now)
            .bind(key)
            .bind(token)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// The candidates are read without locks, then each parked by its key with the condition
    /// checked again: a locking read over the `(status, next_attempt_at)` index would lock
    /// index entries before rows, the other order from a worker storing its result (row, then
    /// index), and the two would deadlock. Parking is rare: usually the read finds nothing.
    async fn effects_park_expired(
        conn: &mut MySqlConnection,
        now: i64,
        retention_ms: i64,
        effects: &[&str],
    ) -> Res<Vec<(String, String)>> {
        let filter = effect_filter(effects.len());
        let sql =
            format!("SELECT effect_key, effect FROM idem_effects WHERE {EXPIRED_WHERE}{filter}");
        let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(now)
            .bind(retention_ms);
        for effect in effects {
            query = query.bind(*effect);
        }
        let candidates: Vec<(Vec<u8>, Vec<u8>)> = query.fetch_all(&mut *conn).await?;
        let mut parked = Vec::with_capacity(candidates.len());
        for (key, effect) in candidates {
            let done = sqlx::query(PARK)
                .bind(now)
                .bind(key.as_slice())
                .bind(now)
                .bind(now)
                .bind(retention_ms)
                .execute(&mut *conn)
                .await?;
            if done.rows_affected() == 1 {
                parked.push((text(key)?, text(effect)?));
            }
        }
        Ok(parked)
    }

    async fn effects_resolve(
        conn: &mut MySqlConnection,
        key: &str,
        resolve: &Resolve<'_>,
        now: i64,
    ) -> Res<bool> {
        let done = match resolve {
            Resolve::Succeeded(outcome) => {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "{RESOLVE_SUCCEEDED}{RESOLVABLE}"
                )))
                .bind(*outcome)
                .bind(now)
                .bind(key)
                .execute(&mut *conn)
                .await?
            }
            Resolve::Failed(reason) => {
                sqlx::query(sqlx::AssertSqlSafe(format!("{RESOLVE_FAILED}{RESOLVABLE}")))
                    .bind(*reason)
                    .bind(now)
                    .bind(key)
                    .execute(&mut *conn)
                    .await?
            }
            Resolve::Retry => {
                sqlx::query(sqlx::AssertSqlSafe(format!("{RESOLVE_RETRY}{RESOLVABLE}")))
                    .bind(now)
                    .bind(now)
                    .bind(key)
                    .execute(&mut *conn)
                    .await?
            }
        };
        Ok(done.rows_affected() == 1)
    }

    async fn effects_count_prefix(conn: &mut MySqlConnection, prefix: &str) -> Res<i64> {
        let length = i64::try_from(prefix.len()).unwrap_or(i64::MAX);
        sqlx::query_scalar(COUNT_PREFIX)
            .bind(length)
            .bind(prefix.as_bytes())
            .fetch_one(&mut *conn)
            .await
    }

    async fn effects_gc(conn: &mut MySqlConnection, cutoff: i64, limit: i64) -> Res<u64> {
        let done = sqlx::query(GC)
            .bind(cutoff)
            .bind(limit)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    }
}

/// A due row, locked: key, effect, request, attempts, lease token, first attempt, due time.
type DueRow = (Vec<u8>, Vec<u8>, Vec<u8>, i64, i64, Option<i64>, i64);

/// Locks up to `limit` due rows (of `effect`, or of any), in due order, passing over rows other
/// transactions hold.
async fn lock_due(
    conn: impl MySqlExecutor<'_>,
    effect: Option<&str>,
    now: i64,
    retention_ms: i64,
    limit: i64,
) -> Res<Vec<DueRow>> {
    // The index is forced: the optimizer, seeing few rows, may prefer the other one, and a
    // worker of one effect would then hold other effects' rows as it passes them.
    let (index, filter) = match effect {
        Some(_) => ("idem_effects_effect_due", "effect = ? AND "),
        None => ("idem_effects_due", ""),
    };
    let sql = format!(
        "SELECT effect_key, effect, request, attempts, lease_token, first_attempt_at, due_at \
         FROM idem_effects FORCE INDEX ({index}) WHERE {filter}{CLAIM_WHERE} \
         ORDER BY due_at LIMIT ? FOR UPDATE SKIP LOCKED"
    );
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql));
    if let Some(effect) = effect {
        query = query.bind(effect);
    }
    query
        .bind(now)
        .bind(now)
        .bind(now)
        .bind(retention_ms)
        .bind(limit)
        .fetch_all(conn)
        .await
}

/// Takes the leases of the `due` rows, which the caller's transaction holds locked.
async fn take_leases(
    conn: impl MySqlExecutor<'_>,
    due: &[DueRow],
    now: i64,
    lease_ms: i64,
) -> Res<()> {
    let sql = format!("{CLAIM_SET}({})", placeholders(due.len()));
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now.saturating_add(lease_ms))
        .bind(now)
        .bind(now);
    for (key, ..) in due {
        query = query.bind(key.as_slice());
    }
    query.execute(conn).await?;
    Ok(())
}
