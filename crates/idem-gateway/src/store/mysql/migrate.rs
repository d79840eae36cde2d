//! Applying the gateway's MySQL migrations (`migrations/mysql`), with what MySQL's DDL needs.
//!
//! DDL is not transactional on MySQL or MariaDB: each statement commits on its own, so a
//! migration that fails half-way (a lost connection, a killed process, a full disk, a missing
//! privilege) leaves the statements before the failure applied and its row in
//! `idem_gateway_migrations` with `success = FALSE`, which sqlx would refuse ever after ("dirty"
//! migration). Every statement of the gateway's MySQL migrations can run again (`CREATE TABLE IF
//! NOT EXISTS` with the indexes inside), so an unfinished migration's row is deleted and the
//! migration run again from its first statement, under sqlx's migration lock (a `GET_LOCK` per
//! database), so that processes starting together take turns. A migration this build does not
//! know, or one whose checksum differs, is refused by sqlx before anything is changed.

use sqlx::migrate::Migrate;
use sqlx::{MySql, Pool};

use crate::store::MIGRATIONS_TABLE;

pub(super) async fn migrate(pool: &Pool<MySql>) -> Result<(), sqlx::migrate::MigrateError> {
    let mut migrator = sqlx::migrate!("migrations/mysql");
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    // The lock is taken here, around the clean-up below and the run.
    migrator.set_locking(false);
    let mut conn = pool.acquire().await?;
    conn.lock().await?;
    let result = async {
        conn.ensure_migrations_table(MIGRATIONS_TABLE).await?;
        if let Some(version) = conn.dirty_version(MIGRATIONS_TABLE).await? {
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
    conn.unlock().await.ok();
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
        let store: Store<sqlx::MySql> = Store::connect(&idem_testkit::mysql_database().await)
            .await
            .expect("connect");
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
}
