//! SQLite: WAL, `synchronous = FULL` (a commit is on disk before it returns), write transactions
//! opened with `BEGIN IMMEDIATE` so that two writers wait on the busy timeout instead of failing
//! at their first write.

use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Connection, Pool, QueryBuilder, Sqlite, SqliteConnection};

use super::ops::{Acquired, GcTable, LeaseRow, Ops, VersionRow, VersionWrite};
use super::{VERSION_ROWS_PER_STATEMENT, bind_version, push_version, shared_ops, sql};
use crate::redact::redact_url as redact;
use crate::{Error, PoolOptions};

/// How long a statement waits for another connection's write lock before SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// SQLite allows 32,766 parameters per statement; a claim row takes one, plus two shared ones.
const CLAIM_CHUNK: usize = 1000;

/// Opens the SQLite database at `url` if its file exists (it is never created), with the
/// settings of [`Ops::connect`]: WAL, `synchronous = FULL`, the busy timeout.
pub(crate) async fn open_existing(url: &str, pool: &PoolOptions) -> Result<Pool<Sqlite>, Error> {
    open_pool(url, connect_options(url, false)?, pool).await
}

/// The options of every SQLite connection idem opens: WAL, `synchronous = FULL`, the busy
/// timeout; the file is created when missing only if `create`.
fn connect_options(url: &str, create: bool) -> Result<SqliteConnectOptions, Error> {
    Ok(SqliteConnectOptions::from_str(url)
        .map_err(|e| Error::InvalidUrl {
            url: redact(url),
            expected: format!("a valid SQLite URL ({e})"),
        })?
        .create_if_missing(create)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(BUSY_TIMEOUT))
}

/// A pool of `options` at `url`, whose connections are handed out only outside a transaction.
async fn open_pool(
    url: &str,
    options: SqliteConnectOptions,
    pool: &PoolOptions,
) -> Result<Pool<Sqlite>, Error> {
    SqlitePoolOptions::new()
        .max_connections(pool.max_connections)
        .acquire_timeout(pool.acquire_timeout)
        // No ping before each checkout: a connection to a file has no peer to lose, and sqlx's
        // ping is one more round trip to the connection's worker thread per transaction.
        .test_before_acquire(false)
        .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
        .connect_with(options)
        .await
        .map_err(|source| Error::Connect {
            url: redact(url),
            source,
            hint: String::new(),
        })
}

impl Ops for Sqlite {
    const BEGIN: &'static str = "BEGIN IMMEDIATE";

    async fn connect(url: &str, pool: &PoolOptions) -> Result<Pool<Self>, Error> {
        let invalid = |expected: String| Error::InvalidUrl {
            url: redact(url),
            expected,
        };
        let Some(rest) = url.strip_prefix("sqlite:") else {
            return Err(invalid("a SQLite URL, sqlite://path/to/idem.db".into()));
        };
        let path = rest
            .trim_start_matches("//")
            .split('?')
            .next()
            .unwrap_or("");
        if path.is_empty() || path == ":memory:" || url.contains("mode=memory") {
            // Each pooled connection would open its own private in-memory database.
            return Err(invalid(
                "a database file path, sqlite://path/to/idem.db (not in-memory)".into(),
            ));
        }
        let options = connect_options(url, true)?;
        if let Some(dir) = options.get_filename().parent()
            && !dir.as_os_str().is_empty()
            && !dir.is_dir()
        {
            return Err(invalid(format!(
                "the directory {} to exist (create it first)",
                dir.display()
            )));
        }
        open_pool(url, options, pool).await
    }

    async fn migrate(pool: &Pool<Self>) -> Result<(), Error> {
        let mut migrator = sqlx::migrate!("migrations/sqlite");
        migrator.dangerous_set_table_name(super::MIGRATIONS_TABLE);
        Ok(crate::run_migrations(migrator, pool).await?)
    }

    /// SQLite's write transaction (`BEGIN IMMEDIATE`) already excludes other writers.
    const LOAD_VERSION: &'static str = "SELECT version_kind, version, version_secondary, dedup_key \
         FROM idem_versions WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3";

    const LOCK_ROWS: &'static str = "";

    shared_ops!();

    async fn claim_many(
        conn: &mut SqliteConnection,
        consumer: &str,
        keys: &[&str],
        now: i64,
    ) -> Result<Vec<String>, sqlx::Error> {
        let mut fresh = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(CLAIM_CHUNK) {
            let mut query =
                QueryBuilder::new("INSERT INTO idem_inbox (consumer, dedup_key, processed_at) ");
            query.push_values(chunk, |mut row, key| {
                row.push_bind(consumer).push_bind(*key).push_bind(now);
            });
            query.push(" ON CONFLICT (consumer, dedup_key) DO NOTHING RETURNING dedup_key");
            let rows: Vec<String> = query.build_query_scalar().fetch_all(&mut *conn).await?;
            fresh.extend(rows);
        }
        Ok(fresh)
    }
}
