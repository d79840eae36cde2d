//! The gateway's tables on MySQL 8.0 and MariaDB 10.6 or later: one file per concern, as the
//! SQLite and PostgreSQL statements are split in `store`, with the MySQL dialect's rules
//! (docs/mysql.md): `?` parameters bound in order, key columns `VARBINARY` (compared byte for
//! byte, read back with `CONVERT(… USING utf8mb4)`), a duplicate key (error 1062) as "already
//! there" where PostgreSQL says `ON CONFLICT DO NOTHING`, no `RETURNING`, `condition` quoted.
//! Transactions run at READ COMMITTED (idem-sql's `Store::begin`).

mod console;
mod consumer_counts;
mod counts;
mod migrate;
mod monitor;
mod ops;
mod pauses;
mod rebuild;
mod relaxed;
mod renames;
mod sql;
mod writes;

use sqlx::mysql::MySqlDatabaseError;

/// MySQL's and MariaDB's error number for a duplicate key (`ER_DUP_ENTRY`).
const DUPLICATE_KEY: u16 = 1062;

/// Whether `e` is error 1062, a duplicate key.
fn is_duplicate_key(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|my| my.number() == DUPLICATE_KEY),
        _ => false,
    }
}

/// Whether `result` wrote its row: `Ok(true)` when it succeeded, `Ok(false)` on error 1062 (the
/// statement alone was rolled back), any other error as it is.
fn inserted<T>(result: Result<T, sqlx::Error>) -> Result<bool, sqlx::Error> {
    match result {
        Ok(_) => Ok(true),
        Err(e) if is_duplicate_key(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
