//! MySQL 8.0 and MariaDB 10.6 or later: the statements of every part, written to the SQL both
//! servers share and tested on MariaDB 10.11.
//!
//! What differs from PostgreSQL, and why (docs/design.md C1):
//!
//! - **Claims are plain INSERTs**, and error 1062 (duplicate key) is the answer "already there".
//!   `INSERT IGNORE` would also swallow other errors, and sqlx's connections report found rows,
//!   so `ON DUPLICATE KEY UPDATE k = k` reports one row for a fresh key and for a duplicate
//!   alike. InnoDB rolls back only the failed statement, so the transaction goes on.
//! - **Transactions run at READ COMMITTED**, set before each `START TRANSACTION` (`BEGIN`
//!   below): under the server's default REPEATABLE READ a read after a conflicting insert misses
//!   the row that caused it, and gap locks make concurrent claims deadlock.
//! - **No `RETURNING`** on UPDATE or DELETE (MariaDB has it on INSERT only, MySQL 8.0 nowhere):
//!   a statement that must return rows is a locking `SELECT … FOR UPDATE` followed by the write,
//!   in one (sub)transaction; `UPDATE … SET` assignments run left to right, so a column that
//!   depends on another's old value is assigned first.
//! - **Claims of work** (effects, outbox rows) lock their rows with `FOR UPDATE SKIP LOCKED`,
//!   so concurrent workers and relays take disjoint rows.
//! - **Keys compare byte for byte**: key columns are `VARBINARY` (see the migrations), read back
//!   as bytes and checked to be UTF-8 here.
//! - Deadlocks (1213) and lock-wait timeouts (1205) are retryable conflicts (`error.rs`).

mod connect;
mod consumer_reset;
mod consumers;
mod dead_letters;
mod effects;
mod inbox;
mod kafka_offsets;
mod leases;
mod lineage;
mod migrate;
mod outbox;
pub(crate) mod server_version;
mod versions;

use sqlx::mysql::{MySqlConnection, MySqlDatabaseError};
use sqlx::{Connection, MySql, Pool, Transaction};

use super::ops::{Acquired, GcTable, LeaseRow, Ops, VersionRow, VersionWrite};
use crate::{Error, PoolOptions};

type Res<T> = Result<T, sqlx::Error>;

/// MySQL's and MariaDB's error number for a duplicate key (`ER_DUP_ENTRY`).
const DUPLICATE_KEY: u16 = 1062;

/// Whether `result` failed on a duplicate key: `Ok(true)` when it succeeded, `Ok(false)` on
/// error 1062, any other error as it is.
fn inserted<T>(result: Res<T>) -> Res<bool> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if is_duplicate_key(&e) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether `e` is error 1062, a duplicate key.
fn is_duplicate_key(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|my| my.number() == DUPLICATE_KEY),
        _ => false,
    }
}

/// A key column (`VARBINARY`) read back as text: idem writes only UTF-8 there.
fn text(bytes: Vec<u8>) -> Res<String> {
    String::from_utf8(bytes).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// An optional key column read back as text.
fn opt_text(bytes: Option<Vec<u8>>) -> Res<Option<String>> {
    bytes.map(text).transpose()
}

/// `?, ?, …` with `n` placeholders.
fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// A transaction for statements that must see each other's rows (a locking read, then its
/// write): a new one at READ COMMITTED, or a savepoint inside the caller's.
async fn sub_transaction(conn: &mut MySqlConnection) -> Res<Transaction<'_, MySql>> {
    if conn.is_in_transaction() {
        conn.begin().await
    } else {
        conn.begin_with(<MySql as Ops>::BEGIN).await
    }
}

impl Ops for MySql {
    /// Two statements in one round trip: the isolation level of the next transaction only (the
    /// session's default stays the application's), then the transaction.
    const BEGIN: &'static str = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION";

    async fn connect(url: &str, options: &PoolOptions) -> Result<Pool<Self>, Error> {
        connect::connect(url, options).await
    }

    async fn migrate(pool: &Pool<Self>) -> Result<(), Error> {
        migrate::migrate(pool).await
    }

    async fn claim(conn: &mut MySqlConnection, consumer: &str, key: &str, now: i64) -> Res<bool> {
        inbox::claim(conn, consumer, key, now).await
    }

    async fn is_claimed(conn: &mut MySqlConnection, consumer: &str, key: &str) -> Res<bool> {
        inbox::is_claimed(conn, consumer, key).await
    }

    async fn claim_many(
        conn: &mut MySqlConnection,
        consumer: &str,
        keys: &[&str],
        now: i64,
    ) -> Res<Vec<String>> {
        inbox::claim_many(conn, consumer, keys, now).await
    }

    /// The row lock holds other transactions of this entity until this one ends.
    const LOAD_VERSION: &'static str = "SELECT version_kind, version, version_secondary, dedup_key \
         FROM idem_versions WHERE consumer = ? AND aggregate_type = ? AND aggregate_id = ? \
         FOR UPDATE";

    const LOCK_ROWS: &'static str = " FOR UPDATE";

    async fn load_version(
        conn: &mut MySqlConnection,
        consumer: &str,
        aggregate_type: &str,
        aggregate_id: &str,
    ) -> Res<Option<VersionRow>> {
        versions::load_version(conn, consumer, aggregate_type, aggregate_id).await
    }

    async fn insert_version(conn: &mut MySqlConnection, row: &VersionWrite<'_>) -> Res<bool> {
        versions::insert_version(conn, row).await
    }

    async fn update_version(conn: &mut MySqlConnection, row: &VersionWrite<'_>) -> Res<()> {
        versions::update_version(conn, row).await
    }

    async fn load_versions(
        conn: &mut MySqlConnection,
        consumer: &str,
        entities: &[(&str, &str)],
    ) -> Res<Vec<(String, String, VersionRow)>> {
        versions::load_versions(conn, consumer, entities).await
    }

    async fn insert_versions(
        conn: &mut MySqlConnection,
        rows: &[VersionWrite<'_>],
    ) -> Res<Vec<(String, String)>> {
        versions::insert_versions(conn, rows).await
    }

    async fn update_versions(conn: &mut MySqlConnection, rows: &[VersionWrite<'_>]) -> Res<()> {
        versions::update_versions(conn, rows).await
    }

    async fn acquire_lease(
        conn: &mut MySqlConnection,
        scope: &str,
        key: &str,
        fingerprint: &[u8],
        now: i64,
        ttl_ms: i64,
    ) -> Res<Option<Acquired>> {
        leases::acquire(conn, scope, key, fingerprint, now, ttl_ms).await
    }

    async fn load_lease(
        conn: &mut MySqlConnection,
        scope: &str,
        key: &str,
    ) -> Res<Option<LeaseRow>> {
        leases::load(conn, scope, key).await
    }

    async fn complete_lease(
        conn: &mut MySqlConnection,
        scope: &str,
        key: &str,
        token: i64,
        record: &[u8],
        now: i64,
    ) -> Res<bool> {
        leases::complete(conn, scope, key, token, record, now).await
    }

    async fn release_lease(
        conn: &mut MySqlConnection,
        scope: &str,
        key: &str,
        token: i64,
        now: i64,
    ) -> Res<bool> {
        leases::release(conn, scope, key, token, now).await
    }

    async fn extend_lease(
        conn: &mut MySqlConnection,
        scope: &str,
        key: &str,
        token: i64,
        now: i64,
        ttl_ms: i64,
    ) -> Res<Option<i64>> {
        leases::extend(conn, scope, key, token, now, ttl_ms).await
    }

    async fn parked_since(
        conn: &mut MySqlConnection,
        consumer: &str,
        key: &str,
    ) -> Res<Option<i64>> {
        inbox::parked_since(conn, consumer, key).await
    }

    async fn park(conn: &mut MySqlConnection, consumer: &str, key: &str, now: i64) -> Res<()> {
        inbox::park(conn, consumer, key, now).await
    }

    async fn gc_batch(
        conn: &mut MySqlConnection,
        table: GcTable,
        cutoff: i64,
        limit: i64,
    ) -> Res<u64> {
        inbox::gc_batch(conn, table, cutoff, limit).await
    }
}
