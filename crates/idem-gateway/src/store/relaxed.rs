//! Dispatch's write transactions on SQLite (claims and attempt outcomes) commit without waiting
//! for the disk: they run on a connection of their own with `synchronous = NORMAL`, while ingest's
//! commits keep `synchronous = FULL`.
//!
//! Why that keeps every contract: in WAL mode a NORMAL commit survives a crash of the process
//! (SQLite, "PRAGMA synchronous": "WAL mode is always consistent with synchronous=NORMAL" and
//! durable across application crashes) and may be lost only with the machine (an OS crash or a
//! power cut), and then only until the next FULL commit, whose sync of the WAL file carries every
//! frame before it. A SQLite database is one machine's (WAL needs shared memory, so no network
//! file system), so a power cut that loses a claim or an outcome has stopped every gateway that
//! could send the delivery too. What is lost is an attempt's record: its delivery is in flight
//! or pending again after the restart and is sent again with the same keys, at least once, as
//! after a crash between an attempt and its outcome's commit. An event acknowledged with 200 is
//! never lost: ingest commits synchronously. PostgreSQL relaxes per transaction instead
//! (`Ops::relax_commit`), and only outcome commits that claim nothing, because there another
//! machine's gateway may hold the next claim.

use sqlx::{Connection as _, Pool};

pub(crate) mod ops {
    use super::*;

    pub trait RelaxedOps: sqlx::Database + Sized {
        /// A pool of one connection to `pool`'s database whose commits do not wait for the
        /// disk, for dispatch's write transactions; `None` where the database has no such
        /// setting per connection (PostgreSQL). Opened on first use.
        fn relaxed_pool(pool: &Pool<Self>) -> Option<Pool<Self>>;
    }
}

impl ops::RelaxedOps for sqlx::Sqlite {
    fn relaxed_pool(pool: &Pool<Self>) -> Option<Pool<Self>> {
        let options = (*pool.connect_options())
            .clone()
            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            // Dispatch writes one transaction at a time (the writer gate): one connection.
            .max_connections(1)
            .acquire_timeout(pool.options().get_acquire_timeout())
            // No ping before each checkout, as on the store's pool (idem-sql's SQLite backend).
            .test_before_acquire(false)
            .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_lazy_with(options);
        Some(pool)
    }
}

impl ops::RelaxedOps for sqlx::Postgres {
    fn relaxed_pool(_: &Pool<Self>) -> Option<Pool<Self>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use crate::{Config, Gateway};

    /// `PRAGMA synchronous` of the connection `tx` runs on: 1 = NORMAL, 2 = FULL.
    async fn synchronous(tx: &mut sqlx::Transaction<'static, sqlx::Sqlite>) -> i64 {
        sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut **tx)
            .await
            .expect("read synchronous")
    }

    /// Ingest's transactions (the store's) wait for the disk; dispatch's do not, on SQLite.
    #[tokio::test]
    async fn only_dispatch_commits_without_a_sync_on_sqlite() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        let gateway = Gateway::new(Config::defaults(), store.clone());
        let mut ingest = store.begin().await.expect("begin");
        assert_eq!(synchronous(&mut ingest).await, 2, "ingest: FULL");
        ingest.rollback().await.expect("rollback");
        let mut dispatch = gateway.begin_dispatch().await.expect("begin dispatch");
        assert_eq!(synchronous(&mut dispatch).await, 1, "dispatch: NORMAL");
        dispatch.rollback().await.expect("rollback");
    }
}
