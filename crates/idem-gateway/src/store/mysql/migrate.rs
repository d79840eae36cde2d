//! Applying the gateway's MySQL migrations (`migrations/mysql`), with what MySQL's DDL needs.
//!
//! DDL is not transactional on MySQL or MariaDB: each statement commits on its own, so a
//! migration that fails half-way (a lost connection, a killed process, a full disk, a missing
//! privilege) leaves the statements before the failure applied and its row in
//! `idem_gateway_migrations` with `success = FALSE`, which sqlx would refuse ever after ("dirty"
//! migration). Every statement of the gateway's MySQL migrations can run again (`CREATE TABLE IF
//! NOT EXISTS` with the indexes inside), so an unfinished migration's row is deleted and the
//! migration run again from its first statement, under a lock per database (`GET_LOCK`), so
//! that processes starting together take turns. A migration this build does not know (recorded
//! as finished or not: a newer idem's), or one whose checksum differs, is refused before
//! anything is changed.

use sqlx::migrate::{Migrate, MigrateError};
use sqlx::{MySql, Pool};

use crate::store::MIGRATIONS_TABLE;

/// How long a start waits for another process's migration of the same database, in seconds.
const LOCK_WAIT_SECS: i64 = 60;

/// A lock per database (lock names are server-wide), held while migrating; MD5 keeps the name
/// within the 64 characters a lock name may have. Not sqlx's own lock: it ignores
/// `GET_LOCK`'s answer and asks MariaDB for a negative timeout, which MariaDB does not take as
/// "wait", so two processes starting together both ran the migration (one failed with 1062).
const LOCK: &str =
    "SELECT GET_LOCK(CONCAT('idem_gateway_migrate_', MD5(COALESCE(DATABASE(), ''))), ?)";
const UNLOCK: &str =
    "SELECT RELEASE_LOCK(CONCAT('idem_gateway_migrate_', MD5(COALESCE(DATABASE(), ''))))";

pub(super) async fn migrate(pool: &Pool<MySql>) -> Result<(), MigrateError> {
    let mut migrator = sqlx::migrate!("migrations/mysql");
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    // The lock is taken here, around the clean-up below and the run.
    migrator.set_locking(false);
    let mut conn = pool.acquire().await?;
    let locked: Option<i64> = sqlx::query_scalar(LOCK)
        .bind(LOCK_WAIT_SECS)
        .fetch_one(&mut *conn)
        .await?;
    if locked != Some(1) {
        return Err(MigrateError::Source(
            format!(
                "another process has been migrating the gateway's tables in this database for \
                 {LOCK_WAIT_SECS} s; try again when it is done"
            )
            .into(),
        ));
    }
    let result = async {
        conn.ensure_migrations_table(MIGRATIONS_TABLE).await?;
        if let Some(version) = conn.dirty_version(MIGRATIONS_TABLE).await? {
            // Only a migration of this build can be run again; a newer idem's is refused,
            // and its row kept for that idem.
            if !migrator.iter().any(|m| m.version == version) {
                return Err(MigrateError::VersionMissing(version));
            }
            tracing::warn!(
                version,
                "gateway migration {version} was left unfinished by an earlier run (MySQL commits \
                 each DDL statement on its own); running it again from its first statement"
            );
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {MIGRATIONS_TABLE} WHERE version = ? AND success = FALSE"
            )))
            .bind(version)
            .execute(&mut *conn)
            .await?;
        }
        migrator.run_direct(None, &mut *conn, false).await
    }
    .await;
    // A lost connection releases the lock with its session.
    sqlx::query(UNLOCK).execute(&mut *conn).await.ok();
    result
}

#[cfg(test)]
mod tests {
    use idem_sql::Store;

    use crate::store::ops::Ops;

    /// A migration an earlier run left unfinished (`success = FALSE`: a statement failed after
    /// others had committed) runs again from its first statement, and the rows of the tables it
    /// had made are kept.
    #[tokio::test]
    async fn an_unfinished_migration_runs_again() {
        let store = fresh().await;
        let pool = store.pool();
        sqlx::MySql::migrate_gateway(pool).await.expect("migrate");
        sqlx::query("INSERT INTO idem_gateway_health (id, checked_at) VALUES (1, 42)")
            .execute(pool)
            .await
            .expect("a row");
        // As a run that failed half-way leaves it; and a table it had not made yet.
        sqlx::query("UPDATE idem_gateway_migrations SET success = FALSE WHERE version = 1")
            .execute(pool)
            .await
            .expect("mark unfinished");
        sqlx::query("DROP TABLE idem_gateway_destination_resumes")
            .execute(pool)
            .await
            .expect("drop");
        sqlx::MySql::migrate_gateway(pool)
            .await
            .expect("migrate again");
        let finished: Vec<(i64, bool)> =
            sqlx::query_as("SELECT version, success FROM idem_gateway_migrations")
                .fetch_all(pool)
                .await
                .expect("history");
        assert_eq!(finished, [(1, true)]);
        let kept: i64 = sqlx::query_scalar("SELECT checked_at FROM idem_gateway_health")
            .fetch_one(pool)
            .await
            .expect("kept");
        assert_eq!(kept, 42);
        let resumes: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM idem_gateway_destination_resumes")
                .fetch_one(pool)
                .await
                .expect("made again");
        assert_eq!(resumes, 0);
    }

    /// A fresh database's store, its pool migrated by idem's own migrations only.
    async fn fresh() -> Store<sqlx::MySql> {
        Store::connect(&idem_testkit::mysql_database().await)
            .await
            .expect("connect")
    }

    /// An unfinished migration this build does not know (a newer idem's, failed half-way) is
    /// refused, not deleted and run over: its row stays for that idem.
    #[tokio::test]
    async fn an_unfinished_migration_of_a_newer_idem_is_refused() {
        let store = fresh().await;
        let pool = store.pool();
        sqlx::MySql::migrate_gateway(pool).await.expect("migrate");
        sqlx::query(
            "INSERT INTO idem_gateway_migrations \
             (version, description, success, checksum, execution_time) \
             SELECT 9999, 'from a newer idem', FALSE, checksum, execution_time \
             FROM idem_gateway_migrations WHERE version = 1",
        )
        .execute(pool)
        .await
        .expect("a newer idem's unfinished migration");
        for _ in 0..2 {
            let refused = sqlx::MySql::migrate_gateway(pool).await;
            assert!(
                matches!(
                    refused,
                    Err(sqlx::migrate::MigrateError::VersionMissing(9999))
                ),
                "{refused:?}"
            );
        }
        let rows: Vec<(i64, bool)> =
            sqlx::query_as("SELECT version, success FROM idem_gateway_migrations ORDER BY version")
                .fetch_all(pool)
                .await
                .expect("history");
        assert_eq!(rows, [(1, true), (9999, false)]);
    }

    /// Processes starting together on a fresh database take turns: eight concurrent migrations,
    /// each on a pool of its own (a session of its own), all succeed, and the migration is
    /// recorded once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_starts_take_turns() {
        let url = idem_testkit::mysql_database().await;
        let mut stores = Vec::new();
        for _ in 0..8 {
            stores.push(Store::<sqlx::MySql>::connect(&url).await.expect("connect"));
        }
        let runs = stores
            .iter()
            .map(|store| sqlx::MySql::migrate_gateway(store.pool()));
        for result in futures_util::future::join_all(runs).await {
            result.expect("each start migrates or finds it done");
        }
        let rows: Vec<(i64, bool)> =
            sqlx::query_as("SELECT version, success FROM idem_gateway_migrations")
                .fetch_all(stores[0].pool())
                .await
                .expect("history");
        assert_eq!(rows, [(1, true)]);
    }
}
