//! Running a set of sqlx migrations so that a refused run leaves no lock behind.

use sqlx::migrate::{Migrate, MigrateError, Migrator};
use sqlx::{Database, Pool};

/// Runs `migrator` on one connection of `pool` under the database's migration lock
/// (PostgreSQL: a session advisory lock; SQLite: none, its write lock serialises), and releases
/// the lock whether the run succeeded or not. For SQLite and PostgreSQL: sqlx's MySQL lock
/// ignores `GET_LOCK`'s answer, which on MariaDB does not wait, so idem's MySQL migrations take
/// a lock of their own.
///
/// sqlx's `Migrator::run` returns early when it refuses the recorded migrations (one it does
/// not know, a checksum that differs, an unfinished one) with the lock still held by the
/// pooled connection it took, so the next run on that pool waited for the lock forever; this
/// one unlocks before returning.
///
/// # Errors
/// The run's [`MigrateError`]: a connection or statement failed, or the recorded migrations
/// are refused (`VersionMissing`: made by a newer build; `VersionMismatch`: by another build;
/// `Dirty`: a migration did not finish). An error of the unlock itself is returned only when
/// the run succeeded (a lost connection releases its session's lock anyway).
pub async fn run_migrations<DB>(mut migrator: Migrator, pool: &Pool<DB>) -> Result<(), MigrateError>
where
    DB: Database,
    DB::Connection: Migrate,
{
    migrator.set_locking(false);
    let mut conn = pool.acquire().await?;
    conn.lock().await?;
    let result = migrator.run_direct(None, &mut *conn, false).await;
    let unlocked = conn.unlock().await;
    result.and(unlocked)
}
