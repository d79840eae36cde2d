//! The effect ledger's statements (`idem_effects`, migration 0002). All but the claim are the
//! same SQL on both databases; the claim locks rows with `FOR UPDATE SKIP LOCKED` on PostgreSQL,
//! while on SQLite the one UPDATE statement already runs alone (a single writer).

// The SQL text and the macro below are SQLite's and PostgreSQL's; MySQL's are in `mysql/`, so a
// build with the `mysql` feature alone has no use for them.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;
#[cfg(feature = "postgres")]
use sqlx::{PgConnection, Postgres};
#[cfg(feature = "sqlite")]
use sqlx::{Sqlite, SqliteConnection};

type Res<T> = Result<T, sqlx::Error>;

/// One row of `idem_effects`, as stored.
#[derive(Debug)]
pub struct EffectRow {
    pub key: String,
    pub effect: String,
    pub request: Vec<u8>,
    pub status: String,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub lease_token: i64,
    pub outcome: Option<Vec<u8>>,
    pub last_error: Option<String>,
    pub first_attempt_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// The columns of a row as [`EffectRow`], in its field order (without `lease_expires_at`).
const ROW_COLUMNS: &str = "effect_key, effect, request, status, attempts, next_attempt_at, \
     lease_token, outcome, last_error, first_attempt_at, created_at, updated_at";

type RowTuple = (
    String,
    String,
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

fn row(t: RowTuple) -> EffectRow {
    EffectRow {
        key: t.0,
        effect: t.1,
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
    }
}

/// A row a worker has just claimed: it now holds the lease with `token`.
#[derive(Debug)]
pub struct ClaimedRow {
    pub key: String,
    pub effect: String,
    pub request: Vec<u8>,
    pub attempts: i64,
    pub token: i64,
    pub first_attempt_at: i64,
}

/// A fenced write of an attempt's result: the row's new status and columns.
#[derive(Debug)]
pub struct Finish<'a> {
    pub status: &'static str,
    pub outcome: Option<&'a [u8]>,
    pub last_error: Option<&'a str>,
    pub next_attempt_at: i64,
    pub now: i64,
}

/// How an operator resolves a parked or dead effect.
#[derive(Debug)]
pub enum Resolve<'a> {
    Succeeded(&'a [u8]),
    Failed(&'a str),
    Retry,
}

pub trait EffectOps: Database + Sized {
    /// Inserts a pending intent; false when the key exists (nothing changed).
    fn effects_insert(
        conn: &mut Self::Connection,
        key: &str,
        effect: &str,
        request: &[u8],
        now: i64,
        consumer: Option<&str>,
    ) -> impl Future<Output = Res<bool>> + Send;
    fn effects_load(
        conn: &mut Self::Connection,
        key: &str,
    ) -> impl Future<Output = Res<Option<EffectRow>>> + Send;
    fn effects_list(
        conn: &mut Self::Connection,
        status: &str,
        limit: i64,
    ) -> impl Future<Output = Res<Vec<EffectRow>>> + Send;
    /// Claims up to `limit` due rows (see `CLAIM_WHERE`) of the `effects` named (all when
    /// empty), leasing each until `now + lease_ms`.
    fn effects_claim(
        conn: &mut Self::Connection,
        now: i64,
        lease_ms: i64,
        retention_ms: i64,
        limit: i64,
        effects: &[&str],
    ) -> impl Future<Output = Res<Vec<ClaimedRow>>> + Send;
    /// Writes an attempt's result if `token` still holds the running row's lease; false if not.
    fn effects_finish(
        conn: &mut Self::Connection,
        key: &str,
        token: i64,
        finish: &Finish<'_>,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Parks rows whose result is unknown (or whose worker vanished) and whose key retention has
    /// passed, of the `effects` named (all when empty); returns their (key, effect).
    fn effects_park_expired(
        conn: &mut Self::Connection,
        now: i64,
        retention_ms: i64,
        effects: &[&str],
    ) -> impl Future<Output = Res<Vec<(String, String)>>> + Send;
    /// Resolves a parked or dead row; false when the key is absent or in another status.
    fn effects_resolve(
        conn: &mut Self::Connection,
        key: &str,
        resolve: &Resolve<'_>,
        now: i64,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Deletes up to `limit` finished rows (succeeded, failed) last changed before `cutoff`.
    /// How many rows have a key that starts with `prefix` (a derived key's `{scope}/`).
    fn effects_count_prefix(
        conn: &mut Self::Connection,
        prefix: &str,
    ) -> impl Future<Output = Res<i64>> + Send;
    fn effects_gc(
        conn: &mut Self::Connection,
        cutoff: i64,
        limit: i64,
    ) -> impl Future<Output = Res<u64>> + Send;
}

const INSERT: &str = "INSERT INTO idem_effects \
     (effect_key, effect, request, status, attempts, next_attempt_at, lease_token, \
      lease_expires_at, outcome, last_error, first_attempt_at, created_at, updated_at, consumer) \
     VALUES ($1, $2, $3, 'pending', 0, $4, 0, 0, NULL, NULL, NULL, $4, $4, $5) \
     ON CONFLICT (effect_key) DO NOTHING";

/// Due ($1 = now, $3 = key retention in ms): pending, or with an unknown result (status unknown,
/// or running under a lease that lapsed) while the provider still keeps the key; due by time; no
/// live lease.
const CLAIM_WHERE: &str = "status IN ('pending', 'running', 'unknown') \
     AND next_attempt_at <= $1 AND lease_expires_at <= $1 \
     AND (status = 'pending' OR first_attempt_at > $1 - $3)";

/// Takes the lease: the token grows by one, so every earlier holder is fenced off.
const CLAIM_SET: &str = "UPDATE idem_effects SET status = 'running', \
     lease_token = lease_token + 1, lease_expires_at = $1 + $2, attempts = attempts + 1, \
     first_attempt_at = COALESCE(first_attempt_at, $1), updated_at = $1 \
     WHERE effect_key IN ";

const CLAIM_RETURNING: &str =
    " RETURNING effect_key, effect, request, attempts, lease_token, first_attempt_at";

const FINISH: &str = "UPDATE idem_effects SET status = $3, outcome = $4, last_error = $5, \
     next_attempt_at = $6, lease_expires_at = 0, updated_at = $7 \
     WHERE effect_key = $1 AND lease_token = $2 AND status = 'running'";

const PARK_EXPIRED: &str = "UPDATE idem_effects SET status = 'parked', lease_expires_at = 0, \
     updated_at = $1 \
     WHERE status IN ('unknown', 'running') AND lease_expires_at <= $1 \
     AND first_attempt_at <= $1 - $2";

/// ` AND effect IN ($first, …)` for `n` effect names, or nothing when `n` is 0 (every effect).
fn effect_filter(first: usize, n: usize) -> String {
    if n == 0 {
        return String::new();
    }
    let params: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
    format!(" AND effect IN ({})", params.join(", "))
}

const RESOLVABLE: &str = " WHERE effect_key = $1 AND status IN ('parked', 'dead')";

const RESOLVE_SUCCEEDED: &str =
    "UPDATE idem_effects SET status = 'succeeded', outcome = $2, updated_at = $3";
const RESOLVE_FAILED: &str =
    "UPDATE idem_effects SET status = 'failed', last_error = $2, updated_at = $3";
/// A new run: attempts and the key-retention window start again.
const RESOLVE_RETRY: &str = "UPDATE idem_effects SET status = 'pending', attempts = 0, \
     first_attempt_at = NULL, next_attempt_at = $2, updated_at = $2";

/// Retention (C9): only finished rows; never pending, running, unknown, parked or dead.
/// Rows whose key starts with `$2`, `$1` characters long (keys are ASCII, so characters are
/// bytes): a comparison of the prefix, as `LIKE` would read `_` in a name as a wildcard.
const COUNT_PREFIX: &str = "SELECT COUNT(*) FROM idem_effects WHERE substr(effect_key, 1, $1) = $2";

const GC: &str = "DELETE FROM idem_effects WHERE effect_key IN \
     (SELECT effect_key FROM idem_effects WHERE status IN ('succeeded', 'failed') \
      AND updated_at < $1 LIMIT $2)";

macro_rules! effect_ops {
    ($db:ty, $conn:ty, $lock:literal) => {
        impl EffectOps for $db {
            async fn effects_insert(
                conn: &mut $conn,
                key: &str,
                effect: &str,
                request: &[u8],
                now: i64,
                consumer: Option<&str>,
            ) -> Res<bool> {
                let done = sqlx::query(INSERT)
                    .bind(key)
                    .bind(effect)
                    .bind(request)
                    .bind(now)
                    .bind(consumer)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn effects_load(conn: &mut $conn, key: &str) -> Res<Option<EffectRow>> {
                let sql = format!("SELECT {ROW_COLUMNS} FROM idem_effects WHERE effect_key = $1");
                let found: Option<RowTuple> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(key)
                    .fetch_optional(&mut *conn)
                    .await?;
                Ok(found.map(row))
            }

            async fn effects_list(
                conn: &mut $conn,
                status: &str,
                limit: i64,
            ) -> Res<Vec<EffectRow>> {
                let sql = format!(
                    "SELECT {ROW_COLUMNS} FROM idem_effects WHERE status = $1 \
                     ORDER BY updated_at, effect_key LIMIT $2"
                );
                let rows: Vec<RowTuple> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(status)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await?;
                Ok(rows.into_iter().map(row).collect())
            }

            async fn effects_claim(
                conn: &mut $conn,
                now: i64,
                lease_ms: i64,
                retention_ms: i64,
                limit: i64,
                effects: &[&str],
            ) -> Res<Vec<ClaimedRow>> {
                let sql = format!(
                    "{CLAIM_SET}(SELECT effect_key FROM idem_effects WHERE {CLAIM_WHERE}{} \
                     ORDER BY next_attempt_at LIMIT $4{}){CLAIM_RETURNING}",
                    effect_filter(5, effects.len()),
                    $lock
                );
                let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(now)
                    .bind(lease_ms)
                    .bind(retention_ms)
                    .bind(limit);
                for effect in effects {
                    query = query.bind(*effect);
                }
                let rows: Vec<(String, String, Vec<u8>, i64, i64, Option<i64>)> =
                    query.fetch_all(&mut *conn).await?;
                Ok(rows
                    .into_iter()
                    .map(
                        |(key, effect, request, attempts, token, first)| ClaimedRow {
                            key,
                            effect,
                            request,
                            attempts,
                            token,
                            // Set by the claim itself when it was NULL.
                            first_attempt_at: first.unwrap_or(now),
                        },
                    )
                    .collect())
            }

            async fn effects_finish(
                conn: &mut $conn,
                key: &str,
                token: i64,
                finish: &Finish<'_>,
            ) -> Res<bool> {
                let done = sqlx::query(FINISH)
                    .bind(key)
                    .bind(token)
                    .bind(finish.status)
                    .bind(finish.outcome)
                    .bind(finish.last_error)
                    .bind(finish.next_attempt_at)
                    .bind(finish.now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn effects_park_expired(
                conn: &mut $conn,
                now: i64,
                retention_ms: i64,
                effects: &[&str],
            ) -> Res<Vec<(String, String)>> {
                let sql = format!(
                    "{PARK_EXPIRED}{} RETURNING effect_key, effect",
                    effect_filter(3, effects.len())
                );
                let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql))
                    .bind(now)
                    .bind(retention_ms);
                for effect in effects {
                    query = query.bind(*effect);
                }
                query.fetch_all(&mut *conn).await
            }

            async fn effects_resolve(
                conn: &mut $conn,
                key: &str,
                resolve: &Resolve<'_>,
                now: i64,
            ) -> Res<bool> {
                let done = match resolve {
                    Resolve::Succeeded(outcome) => {
                        let sql = format!("{RESOLVE_SUCCEEDED}{RESOLVABLE}");
                        sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(key)
                            .bind(*outcome)
                            .bind(now)
                            .execute(&mut *conn)
                            .await?
                    }
                    Resolve::Failed(reason) => {
                        let sql = format!("{RESOLVE_FAILED}{RESOLVABLE}");
                        sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(key)
                            .bind(*reason)
                            .bind(now)
                            .execute(&mut *conn)
                            .await?
                    }
                    Resolve::Retry => {
                        let sql = format!("{RESOLVE_RETRY}{RESOLVABLE}");
                        sqlx::query(sqlx::AssertSqlSafe(sql))
                            .bind(key)
                            .bind(now)
                            .execute(&mut *conn)
                            .await?
                    }
                };
                Ok(done.rows_affected() == 1)
            }

            async fn effects_count_prefix(conn: &mut $conn, prefix: &str) -> Res<i64> {
                let length = i32::try_from(prefix.len()).unwrap_or(i32::MAX);
                sqlx::query_scalar(COUNT_PREFIX)
                    .bind(length)
                    .bind(prefix)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn effects_gc(conn: &mut $conn, cutoff: i64, limit: i64) -> Res<u64> {
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
effect_ops!(Sqlite, SqliteConnection, "");
// Rows another worker is claiming are skipped rather than waited for, so concurrent workers
// claim disjoint batches; the row locks hold until the UPDATE's own commit.
#[cfg(feature = "postgres")]
effect_ops!(Postgres, PgConnection, " FOR UPDATE SKIP LOCKED");
