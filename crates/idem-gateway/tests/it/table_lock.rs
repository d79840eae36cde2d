//! A table locked by another session, for the tests of what the gateway does while it waits:
//! the statements that take and release the lock on each store, run on a connection of their
//! own by [`hold`] and [`release`].

use std::future::Future;

use idem_gateway::GatewayDb;
use idem_sql::sqlx::pool::PoolConnection;
use idem_sql::sqlx::{MySql, Pool, Postgres, Sqlite};
use idem_testkit::AppDb;

/// A store on which another session can lock a table.
pub(crate) trait TableLock: GatewayDb + AppDb {
    /// Locks the events table against every read and write (SQLite: its one writer only).
    const LOCK_EVENTS: &'static str;
    /// Locks the deliveries table against claims and writes; reads go through.
    const LOCK_DELIVERIES: &'static str;
    /// Releases either.
    const UNLOCK: &'static str;

    /// Runs `sql` (several statements allowed) on `conn`.
    fn run(conn: &mut PoolConnection<Self>, sql: &'static str) -> impl Future<Output = ()> + Send;
}

macro_rules! run_raw {
    () => {
        async fn run(conn: &mut PoolConnection<Self>, sql: &'static str) {
            idem_sql::sqlx::raw_sql(sql)
                .execute(&mut **conn)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    };
}

/// A write transaction holds SQLite's one write lock.
impl TableLock for Sqlite {
    const LOCK_EVENTS: &'static str = "BEGIN IMMEDIATE";
    const LOCK_DELIVERIES: &'static str = "BEGIN IMMEDIATE";
    const UNLOCK: &'static str = "ROLLBACK";
    run_raw!();
}

impl TableLock for Postgres {
    const LOCK_EVENTS: &'static str =
        "BEGIN; LOCK TABLE idem_gateway_events IN ACCESS EXCLUSIVE MODE";
    const LOCK_DELIVERIES: &'static str =
        "BEGIN; LOCK TABLE idem_gateway_deliveries IN EXCLUSIVE MODE";
    const UNLOCK: &'static str = "ROLLBACK";
    run_raw!();
}

/// `LOCK TABLES` belongs to the session, not a transaction: other sessions wait on its metadata
/// lock (`WRITE`: for reads and writes; `READ`: for writes and `FOR UPDATE`). A transaction's
/// row locks would not do for the deliveries: claims skip locked rows.
impl TableLock for MySql {
    const LOCK_EVENTS: &'static str = "LOCK TABLES idem_gateway_events WRITE";
    const LOCK_DELIVERIES: &'static str = "LOCK TABLES idem_gateway_deliveries READ";
    const UNLOCK: &'static str = "UNLOCK TABLES";
    run_raw!();
}

/// A connection of `pool` that ran `lock` (one of [`TableLock`]'s).
pub(crate) async fn hold<DB: TableLock>(pool: &Pool<DB>, lock: &'static str) -> PoolConnection<DB> {
    let mut conn = pool.acquire().await.unwrap();
    DB::run(&mut conn, lock).await;
    conn
}

/// Releases what [`hold`] took.
pub(crate) async fn release<DB: TableLock>(mut conn: PoolConnection<DB>) {
    DB::run(&mut conn, DB::UNLOCK).await;
}
