//! Test support for idem's integration tests, which run one suite unchanged against SQLite,
//! PostgreSQL and MySQL (MariaDB):
//!
//! - [`sqlite_store`]: a migrated store in a fresh temporary file;
//! - [`pg_store`]: a migrated store in a PostgreSQL database created fresh for this test process
//!   (`idem_test_{unix seconds}_{pid}`) on `IDEM_TEST_POSTGRES_URL` (default
//!   `postgres://postgres@127.0.0.1:5432/postgres`); databases left by runs older than 15 min
//!   are dropped;
//! - [`mysql_store`]: the same on MySQL or MariaDB (`IDEM_TEST_MYSQL_URL`, default
//!   `mysql://root@127.0.0.1:3306/`; see [`mod@mysql`]);
//! - [`AppDb`]: the application's own statements (`$N` parameters, the same SQL on SQLite and
//!   PostgreSQL, rewritten to `?` for MySQL), so that a test written once over `DB: AppDb` runs
//!   on every store;
//! - [`kafka`]: the Kafka tests' broker (`IDEM_TEST_KAFKA`, default `127.0.0.1:19092`), fresh
//!   topics, produced records and the application's tables;
//! - [`private_postgres`]: a PostgreSQL server of the test's own, which it stops and starts;
//! - [`private_mariadb`]: a MariaDB server of the test's own, which it kills and starts again;
//! - [`silent_server`]: a server that accepts TCP and never answers;
//! - [`tcp_proxy`]: a TCP relay to a server whose connections a test drops, cuts, holds or stalls;
//! - [`redirecting`]: a server that answers 302 and counts the redirects followed;
//! - [`http_client`]: an HTTP client with its own rustls configuration (reqwest has no
//!   crypto provider to fall back on);
//! - [`all_stores!`]: turns `async fn name<DB: AppDb>(store: Store<DB>)` into three tests,
//!   `name::sqlite`, `name::postgres` and `name::mysql`: the conformance suite of the three
//!   backends; [`both_stores!`] into the first two only.

mod app_db;
pub mod child;
pub mod crash_stream;
pub mod downstream;
mod http_client;
pub mod mysql;
pub mod nats;
pub mod outbox;
mod placeholders;
pub mod private_mariadb;
pub mod private_postgres;
pub mod redirecting;
pub mod silent_server;
pub mod stale;
pub mod tcp_proxy;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use idem_sql::sqlx::{self, Connection, PgConnection};
use idem_sql::{PgStore, SqliteStore, Store};
use tempfile::TempDir;
use tokio::sync::OnceCell;

pub use app_db::{AppDb, Value};
pub use http_client::{http_client, http_client_builder};
pub use mysql::{DEFAULT_MYSQL_URL, mysql_database, mysql_store, mysql_url};
pub use placeholders::to_question_marks;

/// The PostgreSQL server tests use, unless `IDEM_TEST_POSTGRES_URL` names another (a URL of an
/// existing database on it, used only to create and drop test databases).
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A migrated SQLite store in a fresh temporary directory; keep the [`TempDir`] alive as long as
/// the store.
///
/// # Panics
/// When the file cannot be created or migrated: a test cannot go on without its database.
pub async fn sqlite_store() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let store = SqliteStore::connect(&sqlite_url(&dir))
        .await
        .expect("open SQLite");
    store.migrate().await.expect("migrate SQLite");
    (dir, store)
}

/// The URL of the database file `idem.db` in `dir`.
pub fn sqlite_url(dir: &TempDir) -> String {
    format!("sqlite://{}", dir.path().join("idem.db").display())
}

/// A migrated store in this process's fresh PostgreSQL database (see the crate docs).
///
/// # Panics
/// When PostgreSQL cannot be reached or the database cannot be created: the suite runs against
/// the real server and does not skip.
pub async fn pg_store() -> PgStore {
    let store = PgStore::connect(&pg_url().await)
        .await
        .expect("connect to the test database");
    store.migrate().await.expect("migrate PostgreSQL");
    store
}

/// The URL of this process's fresh PostgreSQL test database, created on first use.
///
/// # Panics
/// As [`pg_store`].
pub async fn pg_url() -> String {
    static URL: OnceCell<String> = OnceCell::const_new();
    URL.get_or_init(create_pg_database).await.clone()
}

/// A fresh PostgreSQL database for one test, created beside this process's test database
/// ([`pg_url`], and dropped with it when stale), and its URL.
///
/// # Panics
/// As [`pg_store`].
pub async fn pg_database() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let base = pg_url().await;
    let (server, own) = base.rsplit_once('/').expect("a database URL");
    let name = format!("{own}_g{}", N.fetch_add(1, Ordering::SeqCst));
    let mut admin = PgConnection::connect(&base)
        .await
        .unwrap_or_else(|e| panic!("connect to PostgreSQL at {base}: {e}"));
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    admin.close().await.ok();
    format!("{server}/{name}")
}

async fn create_pg_database() -> String {
    let admin_url =
        std::env::var("IDEM_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.into());
    // One connection, closed before returning: pools must not outlive the runtime of the test
    // that made them, and each #[tokio::test] has its own.
    let mut admin = PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("connect to PostgreSQL at {admin_url}: {e}"));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let old: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'idem\\_test\\_%'")
            .fetch_all(&mut admin)
            .await
            .expect("list test databases");
    for name in old {
        if stale::is_stale(&name, now) {
            let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
            let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
                .execute(&mut admin)
                .await;
        }
    }
    let name = format!("idem_test_{now}_{}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    admin.close().await.ok();
    let base = admin_url
        .rsplit_once('/')
        .map_or(admin_url.as_str(), |(b, _)| b);
    format!("{base}/{name}")
}

/// `{prefix}_{pid}_{nanoseconds}`: a name (stream, queue, consumer) no other test or earlier run
/// uses.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// Runs `sql` on a pooled connection of `store`; returns the rows affected.
///
/// # Panics
/// When the statement fails.
pub async fn exec<DB: AppDb>(store: &Store<DB>, sql: &'static str, binds: Vec<Value>) -> u64 {
    let mut conn = store.pool().acquire().await.expect("acquire a connection");
    DB::execute(&mut conn, sql, binds)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Runs a one-BIGINT-column query on a pooled connection of `store`.
///
/// # Panics
/// When the query fails.
pub async fn query_i64<DB: AppDb>(
    store: &Store<DB>,
    sql: &'static str,
    binds: Vec<Value>,
) -> Vec<i64> {
    let mut conn = store.pool().acquire().await.expect("acquire a connection");
    DB::fetch_i64(&mut conn, sql, binds)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// Turns `async fn name<DB: AppDb>(store: Store<DB>)` into the tests `name::sqlite`,
/// `name::postgres` and `name::mysql`, each on a multi-threaded runtime with 4 workers: one
/// definition, the three backends.
#[macro_export]
macro_rules! all_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let (_dir, store) = $crate::sqlite_store().await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let store = $crate::pg_store().await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn mysql() {
                let store = $crate::mysql_store().await;
                super::$name(store).await;
            }
        }
    )+};
}

/// Turns `async fn name<DB: AppDb>(store: Store<DB>)` into the tests `name::sqlite` and
/// `name::postgres`, each on a multi-threaded runtime with 4 workers (suites not yet on MySQL:
/// see [`all_stores!`]).
#[macro_export]
macro_rules! both_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                let (_dir, store) = $crate::sqlite_store().await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                let store = $crate::pg_store().await;
                super::$name(store).await;
            }
        }
    )+};
}
