//! `idem effects`, `idem outbox`, `idem dead-letters` work on idem's own tables in any database
//! (usually the application's), through idem's library APIs. They never create or migrate a
//! database: a missing table is an error naming the database. This module opens it.

use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use idem_gateway::DatabaseKind;
use idem_sql::Store;
use idem_sql::redact_url;
use idem_sql::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use idem_sql::sqlx::{self, Postgres, Sqlite};
use serde_json::{Value, json};

pub(super) enum Db {
    Sqlite(Store<Sqlite>),
    Postgres(Store<Postgres>),
}

/// Runs `$body` with `$store` bound to the opened store, whichever database it is on.
macro_rules! with_db {
    ($db:expr, $store:ident => $body:expr) => {
        match $db {
            Db::Sqlite($store) => $body,
            Db::Postgres($store) => $body,
        }
    };
}

/// How long opening a PostgreSQL database may take: a server that does not answer at all
/// (packets dropped) would otherwise hold the command for the operating system's TCP timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens `url` and checks that idem's `table` is there. Messages show the URL without its
/// user and password.
///
/// # Errors
/// A URL that is neither SQLite nor PostgreSQL, a database that cannot be opened (a SQLite file
/// that does not exist is not created; a PostgreSQL server that refuses, or rejects the login,
/// is reported at once with the driver's reason; one that does not answer, after 10 s), or a
/// missing `table`, each naming the database.
pub(super) async fn open(url: &str, table: &'static str) -> anyhow::Result<Db> {
    let check = format!("SELECT 1 FROM {table} LIMIT 1");
    let shown = redact_url(url);
    match DatabaseKind::of(url) {
        Some(DatabaseKind::Sqlite) => {
            let options = SqliteConnectOptions::from_str(url)
                .with_context(|| format!("{shown:?} is not a SQLite URL"))?
                .create_if_missing(false);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .map_err(|e| missing(url, table, e))?;
            sqlx::query(sqlx::AssertSqlSafe(check))
                .fetch_optional(&pool)
                .await
                .map_err(|e| missing(url, table, e))?;
            Ok(Db::Sqlite(Store::from_pool(pool)))
        }
        Some(DatabaseKind::Postgres) => {
            // idem's connect opens one connection before the pool: a refused connection or a
            // failed login is reported at once with its cause, where a bare pool retries for
            // 30 s and then says only "pool timed out".
            let store =
                tokio::time::timeout(CONNECT_TIMEOUT, Store::<Postgres>::connect_with(url, 1))
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!("no answer from the database at {shown} within 10s")
                    })?
                    // idem's error names the database, without the password.
                    .map_err(anyhow::Error::new)?;
            sqlx::query(sqlx::AssertSqlSafe(check))
                .fetch_optional(store.pool())
                .await
                .map_err(|e| missing(url, table, e))?;
            Ok(Db::Postgres(store))
        }
        _ => bail!("database {shown:?} is neither sqlite:// nor postgres://"),
    }
}

/// A missing table (or SQLite file) says idem's tables were never made there: name the table
/// and what to check. Other errors pass through with the database named (without credentials).
fn missing(url: &str, table: &str, error: sqlx::Error) -> anyhow::Error {
    let url = redact_url(url);
    if is_missing_table(&error) {
        anyhow::anyhow!(
            "no {table} table at {url}: check --database (the application creates idem's tables with Store::migrate)"
        )
    } else {
        anyhow::Error::new(error).context(format!("cannot read the database at {url}"))
    }
}

/// Whether `error` says the table (or, for SQLite, the database file) is not there: PostgreSQL
/// 42P01 `undefined_table`, SQLite "no such table" or SQLITE_CANTOPEN (14).
pub(super) fn is_missing_table(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(e) => {
            let message = e.message();
            message.contains("no such table")
                || message.contains("unable to open database file")
                || e.code().as_deref() == Some("42P01")
                || e.code().as_deref() == Some("14")
        }
        _ => false,
    }
}

/// Bytes as JSON: the JSON they hold, else their text, else `{"hex": …}`.
pub(super) fn bytes(data: &[u8]) -> Value {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        return value;
    }
    match std::str::from_utf8(data) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => json!({ "hex": hex::encode(data) }),
    }
}

/// One line of a table cell: at most `width` characters, line breaks as spaces.
pub(super) fn cell(text: &str, width: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > width {
        let cut: String = flat.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

pub(super) use with_db;
