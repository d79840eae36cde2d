//! The store: a connection pool, a clock, and the way into every part.

use std::fmt;
use std::sync::Arc;

use idem_core::{Clock, SystemClock, Timestamp};
use sqlx::{Pool, SqlSafeStr, Transaction};
use tracing::Instrument;

use crate::backend::Backend;
use crate::consumers::tally::Tally;
use crate::pool_options::PoolOptions;
use crate::{DEFAULT_MAX_CONNECTIONS, Error};

/// idem's tables in one database: SQLite (`Store<sqlx::Sqlite>`), PostgreSQL
/// (`Store<sqlx::Postgres>`) or MySQL/MariaDB (`Store<sqlx::MySql>`, feature `mysql`). Cheap to
/// clone (the pool and the clock are shared).
pub struct Store<DB: Backend> {
    pool: Pool<DB>,
    clock: Arc<dyn Clock>,
    /// This process's consumer counts and registrations, shared by clones (issue 34).
    tally: Arc<Tally>,
}

/// A store on SQLite.
#[cfg(feature = "sqlite")]
pub type SqliteStore = Store<sqlx::Sqlite>;
/// A store on PostgreSQL.
#[cfg(feature = "postgres")]
pub type PgStore = Store<sqlx::Postgres>;
/// A store on MySQL or MariaDB.
#[cfg(feature = "mysql")]
pub type MySqlStore = Store<sqlx::MySql>;

impl<DB: Backend> Clone for Store<DB> {
    fn clone(&self) -> Self {
        Self {
            pool: self.pool.clone(),
            clock: Arc::clone(&self.clock),
            tally: Arc::clone(&self.tally),
        }
    }
}

impl<DB: Backend> fmt::Debug for Store<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("pool", &self.pool)
            .field("clock", &self.clock)
            .finish()
    }
}

impl<DB: Backend> Store<DB> {
    /// Opens a pool of up to [`DEFAULT_MAX_CONNECTIONS`] connections to `url`
    /// (`sqlite://path/idem.db`, `postgres://user@host/db`, `mysql://user@host/db`), with the
    /// system clock.
    ///
    /// SQLite: the file is created if missing; every connection runs in WAL mode with
    /// `synchronous = FULL` and a 5 s busy timeout. PostgreSQL: the server's defaults; idem's
    /// transactions set READ COMMITTED themselves. MySQL and MariaDB: the server's version is
    /// read first (`SELECT VERSION()`) and one older than MySQL 8.0 or MariaDB 10.6 is refused;
    /// every connection adds `STRICT_ALL_TABLES` to its `sql_mode` (a value too long for its
    /// column is an error, never cut short); idem's transactions set READ COMMITTED themselves.
    ///
    /// Does not create tables: call [`migrate`](Self::migrate).
    ///
    /// # Errors
    /// [`Error::InvalidUrl`] when the URL is not for this database (`sqlite:` for SQLite,
    /// `postgres://` or `postgresql://` for PostgreSQL, `mysql://` or `mariadb://` for MySQL), is
    /// malformed, names no MySQL database, names an in-memory SQLite database (each pooled
    /// connection would get its own) or a file in a directory that does not exist;
    /// [`Error::Connect`] when the first connection fails (with the driver's reason);
    /// [`Error::UnsupportedServer`] for a MySQL or MariaDB server older than idem supports (the
    /// error names the version found and the ones supported).
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// As [`connect`](Self::connect), with a pool of up to `max_connections` connections.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    pub async fn connect_with(url: &str, max_connections: u32) -> Result<Self, Error> {
        Self::connect_with_options(url, PoolOptions::default().max_connections(max_connections))
            .await
    }

    /// As [`connect`](Self::connect), with the pool's size and acquire timeout from `options`.
    ///
    /// # Errors
    /// As [`connect`](Self::connect); [`Error::Connect`] too when the first connection does not
    /// answer within `options.acquire_timeout`.
    pub async fn connect_with_options(url: &str, options: PoolOptions) -> Result<Self, Error> {
        DB::connect(url, &options).await.map(Self::from_pool)
    }

    /// Uses an existing pool, such as the application's own. For SQLite the pool should be in WAL
    /// mode with `synchronous = FULL` (as [`connect`](Self::connect) sets) for durable claims.
    pub fn from_pool(pool: Pool<DB>) -> Self {
        Self {
            pool,
            clock: Arc::new(SystemClock),
            tally: Arc::new(Tally::new()),
        }
    }

    /// The same store reading time from `clock` (a [`ManualClock`](idem_core::ManualClock) in
    /// tests). Every time idem writes or compares is taken from this clock and passed to SQL as
    /// a parameter.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self { clock, ..self }
    }

    /// Creates or updates idem's tables (`idem_inbox`, `idem_versions`, `idem_leases`,
    /// `idem_parked`, `idem_effects`, `idem_outbox`, `idem_dead_letters`, `idem_kafka_offsets`,
    /// `idem_consumer_lineage`, and the consumer registry's `idem_consumers` and
    /// `idem_consumer_counts`, back-filled from the rows of the others when they are first
    /// made).
    /// Runs only when called; safe to call at every start, and from several processes at once.
    /// idem records its migrations in its own table, `idem_migrations`, so the application's
    /// sqlx migrations are not disturbed.
    ///
    /// MySQL and MariaDB commit each DDL statement on its own, so a migration that fails
    /// half-way (a lost connection, a full disk) leaves the statements before the failure
    /// applied and its `idem_migrations` row marked unfinished; the next `migrate` runs that
    /// migration again from its first statement (each is written to run again), then the rest.
    /// Before writing anything it compares the recorded migrations with its own.
    ///
    /// # Errors
    /// [`Error::Migrate`] when a migration fails or (SQLite, PostgreSQL) the recorded ones differ
    /// from idem's; on MySQL [`Error::IncompatibleSchema`], with nothing changed, when the tables
    /// were made by a newer idem (a migration this one does not know) or by another build (a
    /// migration's checksum differs), or another process kept migrating past 60 s;
    /// [`Error::UnsupportedServer`] for a server older than MySQL 8.0 or MariaDB 10.6 (checked
    /// here too, for a pool given to [`from_pool`](Self::from_pool)).
    pub async fn migrate(&self) -> Result<(), Error> {
        DB::migrate(&self.pool).await?;
        Ok(())
    }

    /// Begins a write transaction for claims, version guard updates and the application's own
    /// writes: `BEGIN IMMEDIATE` on SQLite (the write lock is taken at once, so two writers
    /// wait on the busy timeout rather than fail mid-transaction), `BEGIN ISOLATION LEVEL READ
    /// COMMITTED` on PostgreSQL, `SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START
    /// TRANSACTION` on MySQL (one round trip; the session's own default is left as it is)
    /// (docs/design.md C1). Dropping it without commit rolls back.
    ///
    /// Safe to give up on (a timeout, a dropped future): taking a connection is given up
    /// as sqlx does, but once one is taken the begin runs to its end on a task of its own, and a
    /// transaction begun for nobody is rolled back there. On PostgreSQL and MySQL sqlx counts a
    /// transaction only once `BEGIN`'s answer is read (SQLite's worker thread counts it when it
    /// runs `BEGIN`); given up between sending `BEGIN` and reading the answer, the connection
    /// went back to the pool inside a transaction nobody would end: a statement run on it outside
    /// a transaction was not committed (on PostgreSQL until a later transaction on that
    /// connection committed; lost if the connection closed first), and on MySQL every later begin
    /// of idem's on it failed ("Transaction characteristics can't be changed while a transaction
    /// is in progress").
    ///
    /// # Errors
    /// [`Error::Database`]: [`ErrorKind::Conflict`](crate::ErrorKind::Conflict) when SQLite
    /// stayed busy past the busy timeout, [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)
    /// when no connection could be had or the runtime is shutting down.
    ///
    /// # Panics
    /// Outside a Tokio runtime.
    pub async fn begin(&self) -> Result<Transaction<'static, DB>, Error> {
        let conn = self.pool.acquire().await?;
        // `Transaction::begin` is what `Pool::begin_with` runs once it has a connection
        // (hidden in sqlx's docs, public): here it runs with one taken already.
        let begin = Transaction::begin(conn, Some(DB::BEGIN.into_sql_str()));
        match tokio::spawn(begin.in_current_span()).await {
            Ok(tx) => Ok(tx?),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only when the runtime shuts down.
            Err(_) => Err(sqlx::Error::PoolClosed.into()),
        }
    }

    /// The pool, for the application's own queries.
    pub fn pool(&self) -> &Pool<DB> {
        &self.pool
    }

    /// This process's consumer counts and registrations.
    pub(crate) fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The current time from the store's clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }
}
