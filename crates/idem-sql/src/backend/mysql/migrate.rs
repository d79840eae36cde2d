//! Applying idem's MySQL migrations (`migrations/mysql`), with what MySQL's DDL needs.
//!
//! DDL is not transactional on MySQL or MariaDB: every `CREATE TABLE` commits on its own, so a
//! migration that fails half-way (a lost connection, a full disk, a killed process) leaves the
//! statements before the failure applied and its row in `idem_migrations` marked unfinished
//! (`success = FALSE`). sqlx would refuse to go on from there ("dirty" migration); idem's
//! migrations are written to run again instead (every statement is `CREATE TABLE IF NOT EXISTS`
//! with its indexes inside), so the next `migrate()` runs an unfinished migration again from
//! its first statement, and then the ones after it.
//!
//! Before anything is written, the server's version is checked (as `connect` does; a pool of the
//! application's own met no check yet) and the recorded migrations are compared with this
//! build's: a
//! version this build does not know (the tables were made by a newer idem) or a recorded
//! checksum that differs from this build's file refuses the database with
//! [`Error::IncompatibleSchema`], so that tables made by another idem are never half-used.

use std::collections::HashMap;

use sqlx::migrate::{Migrate, Migrator};
use sqlx::mysql::MySqlConnection;
use sqlx::{ConnectOptions, MySql, Pool};

use crate::Error;
use crate::backend::MIGRATIONS_TABLE;

/// How long `migrate` waits for another process's migration of the same database.
const LOCK_WAIT_SECS: i64 = 60;

/// A lock per database (names are server-wide), held while migrating; MD5 keeps the name within
/// the 64 characters a lock name may have.
const LOCK: &str = "SELECT GET_LOCK(CONCAT('idem_migrate_', MD5(COALESCE(DATABASE(), ''))), ?)";
const UNLOCK: &str = "SELECT RELEASE_LOCK(CONCAT('idem_migrate_', MD5(COALESCE(DATABASE(), ''))))";

pub(super) async fn migrate(pool: &Pool<MySql>) -> Result<(), Error> {
    // A pool the application opened itself (`Store::from_pool`) met no version check yet.
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(pool)
        .await?;
    let url = pool.connect_options().to_url_lossy().to_string();
    super::connect::check_version(&url, &version)?;
    let mut migrator = sqlx::migrate!("migrations/mysql");
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    // idem's own lock, held across the check below and sqlx's run.
    migrator.set_locking(false);
    let mut conn = pool.acquire().await?;
    let locked: Option<i64> = sqlx::query_scalar(LOCK)
        .bind(LOCK_WAIT_SECS)
        .fetch_one(&mut *conn)
        .await?;
    if locked != Some(1) {
        return Err(Error::IncompatibleSchema {
            reason: format!(
                "another process has been migrating idem's tables in this database for \
                 {LOCK_WAIT_SECS} s; try again when it is done"
            ),
        });
    }
    let result = check_and_run(&migrator, &mut conn).await;
    // A lost connection releases the lock with its session.
    sqlx::query(UNLOCK).execute(&mut *conn).await.ok();
    result
}

async fn check_and_run(migrator: &Migrator, conn: &mut MySqlConnection) -> Result<(), Error> {
    conn.ensure_migrations_table(MIGRATIONS_TABLE).await?;
    let applied: Vec<(i64, bool, Vec<u8>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT version, success, checksum FROM {MIGRATIONS_TABLE} ORDER BY version"
    )))
    .fetch_all(&mut *conn)
    .await?;
    let known: HashMap<i64, &[u8]> = migrator
        .iter()
        .map(|m| (m.version, m.checksum.as_ref()))
        .collect();
    let newest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    for (version, _, checksum) in &applied {
        match known.get(version) {
            None => {
                return Err(Error::IncompatibleSchema {
                    reason: format!(
                        "{MIGRATIONS_TABLE} records migration {version}, and this idem knows \
                         migrations 1 to {newest} only: the tables were made by a newer idem; \
                         run that version (or a newer one) on this database"
                    ),
                });
            }
            Some(ours) if *ours != checksum.as_slice() => {
                return Err(Error::IncompatibleSchema {
                    reason: format!(
                        "migration {version} recorded in {MIGRATIONS_TABLE} is not this idem's \
                         migration {version} (its checksum differs): the tables were made by \
                         another idem build; run that build on this database"
                    ),
                });
            }
            Some(_) => {}
        }
    }
    for (version, success, _) in &applied {
        if !success {
            tracing::warn!(
                version,
                "idem migration {version} was left unfinished by an earlier run (MySQL commits \
                 each DDL statement on its own); running it again from its first statement"
            );
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {MIGRATIONS_TABLE} WHERE version = ? AND success = FALSE"
            )))
            .bind(version)
            .execute(&mut *conn)
            .await?;
        }
    }
    // `run` asks more of its connection type than a pooled MySQL connection gives.
    migrator.run_direct(None, &mut *conn, false).await?;
    Ok(())
}
