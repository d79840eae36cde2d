//! A store on whichever database a URL names, opened only if it exists: the one way the `idem`
//! command and the gateway's relays open a database that another program made and migrated.

#[cfg(feature = "mysql")]
use crate::MySqlStore;
#[cfg(feature = "postgres")]
use crate::PgStore;
#[cfg(feature = "sqlite")]
use crate::SqliteStore;
use crate::redact::redact_url;
use crate::{DatabaseKind, Error, PoolOptions};

/// A [`Store`](crate::Store) on the database a URL names, one variant per database this build
/// has a driver for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyStore {
    /// A store on SQLite.
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteStore),
    /// A store on PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(PgStore),
    /// A store on MySQL or MariaDB.
    #[cfg(feature = "mysql")]
    MySql(MySqlStore),
}

impl AnyStore {
    /// Opens the database at `url` with `options` (pool size, and the wait for the first
    /// connection) and checks that `table` is there; never creates or migrates anything.
    ///
    /// SQLite: a missing file is not created; connections run in WAL mode with
    /// `synchronous = FULL` and a 5 s busy timeout, as [`Store::connect`](crate::Store::connect)
    /// sets them, so a write is on disk before it returns and waits for the application's
    /// writers instead of failing. PostgreSQL and MySQL: as
    /// [`Store::connect_with_options`](crate::Store::connect_with_options).
    ///
    /// `table` is a table name written in the program (such as `idem_outbox`), never input.
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] for a URL of no database this build has a driver for, or one that
    /// driver cannot parse; [`Error::MissingTable`] when `table` (or, for SQLite, the file) is
    /// not there; [`Error::Connect`] when the first connection fails or does not answer within
    /// `options.acquire_timeout`; [`Error::UnsupportedServer`] for a MySQL or MariaDB server older
    /// than idem supports; [`Error::Database`] when reading `table` fails otherwise.
    pub async fn open_existing(
        url: &str,
        table: &'static str,
        options: PoolOptions,
    ) -> Result<Self, Error> {
        debug_assert!(
            table
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
            "{table} is not a plain table name"
        );
        let store = match DatabaseKind::of(url) {
            #[cfg(feature = "sqlite")]
            Some(DatabaseKind::Sqlite) => {
                let pool = crate::backend::sqlite_open_existing(url, &options)
                    .await
                    .map_err(|e| missing_file(e, table))?;
                Self::Sqlite(crate::Store::from_pool(pool))
            }
            #[cfg(feature = "postgres")]
            Some(DatabaseKind::Postgres) => {
                Self::Postgres(crate::Store::connect_with_options(url, options).await?)
            }
            #[cfg(feature = "mysql")]
            Some(DatabaseKind::MySql) => {
                Self::MySql(crate::Store::connect_with_options(url, options).await?)
            }
            _ => {
                return Err(Error::InvalidUrl {
                    url: redact_url(url),
                    expected: format!("a URL of a database this build can open ({})", SCHEMES),
                });
            }
        };
        store.check_table(url, table).await?;
        Ok(store)
    }

    /// Which database the store is on.
    pub fn kind(&self) -> DatabaseKind {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => DatabaseKind::Sqlite,
            #[cfg(feature = "postgres")]
            Self::Postgres(_) => DatabaseKind::Postgres,
            #[cfg(feature = "mysql")]
            Self::MySql(_) => DatabaseKind::MySql,
        }
    }

    /// Reads one row of `table`: an error that says it is missing becomes
    /// [`Error::MissingTable`].
    async fn check_table(&self, url: &str, table: &'static str) -> Result<(), Error> {
        let check = format!("SELECT 1 FROM {table} LIMIT 1");
        // One statement per arm: a query's type names its database.
        macro_rules! query {
            () => {
                sqlx::query(sqlx::AssertSqlSafe(check.clone()))
            };
        }
        let read = match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(store) => query!().fetch_optional(store.pool()).await.map(drop),
            #[cfg(feature = "postgres")]
            Self::Postgres(store) => query!().fetch_optional(store.pool()).await.map(drop),
            #[cfg(feature = "mysql")]
            Self::MySql(store) => query!().fetch_optional(store.pool()).await.map(drop),
        };
        read.map_err(|e| {
            if is_missing_table(&e) {
                Error::MissingTable {
                    url: redact_url(url),
                    table,
                }
            } else {
                Error::Database(e)
            }
        })
    }
}

/// The schemes of the databases this build has a driver for.
const SCHEMES: &str = {
    #[cfg(all(feature = "sqlite", feature = "postgres", feature = "mysql"))]
    {
        "sqlite://, postgres:// or mysql://"
    }
    #[cfg(all(feature = "sqlite", feature = "postgres", not(feature = "mysql")))]
    {
        "sqlite:// or postgres://"
    }
    #[cfg(not(all(feature = "sqlite", feature = "postgres")))]
    {
        "see idem-sql's features sqlite, postgres and mysql"
    }
};

/// A SQLite file that cannot be opened (it does not exist: it is never created here) says, as a
/// missing table does, that idem's tables were never made there.
#[cfg(feature = "sqlite")]
fn missing_file(error: Error, table: &'static str) -> Error {
    match error {
        Error::Connect { url, source, .. } if is_missing_table(&source) => {
            Error::MissingTable { url, table }
        }
        other => other,
    }
}

/// Whether `error` says the table (or, for SQLite, the database file) is not there: PostgreSQL
/// 42P01 `undefined_table`, MySQL 1146 `ER_NO_SUCH_TABLE` (SQLSTATE 42S02), SQLite "no such
/// table" or SQLITE_CANTOPEN (14).
fn is_missing_table(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(e) => {
            let message = e.message();
            message.contains("no such table")
                || message.contains("unable to open database file")
                || matches!(e.code().as_deref(), Some("42P01" | "42S02" | "14"))
        }
        _ => false,
    }
}
