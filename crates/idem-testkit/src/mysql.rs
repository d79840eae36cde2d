//! The MySQL (MariaDB) side of the suites: a database of this test process's own, stores on it,
//! and the application's statements ([`AppDb`]) with `$N` parameters rewritten for MySQL.
//!
//! `IDEM_TEST_MYSQL_URL` names the server (default [`DEFAULT_MYSQL_URL`]); its database part, if
//! any, is only used to connect. Each test process creates `idem_test_{unix seconds}_{pid}`
//! there, with the server's default character set and collation (a case-insensitive one on a
//! stock MariaDB, as in most applications' databases: idem's tables must not lean on it), and
//! drops the databases of runs older than 15 minutes.

use std::time::{SystemTime, UNIX_EPOCH};

use idem_sql::MySqlStore;
use idem_sql::sqlx::mysql::{MySqlArguments, MySqlConnectOptions};
use idem_sql::sqlx::query::{Query, QueryAs, QueryScalar};
use idem_sql::sqlx::{self, ConnectOptions, Connection, MySql, MySqlConnection};
use tokio::sync::OnceCell;

use crate::app_db::{AppDb, Value};
use crate::placeholders::to_question_marks;
use crate::stale::is_stale;

/// The MariaDB (or MySQL) server tests use, unless `IDEM_TEST_MYSQL_URL` names another.
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/";

/// A migrated store in this process's fresh MySQL database.
///
/// # Panics
/// When the server cannot be reached or the database cannot be created: the suite runs against
/// the real server and does not skip.
pub async fn mysql_store() -> MySqlStore {
    let store = MySqlStore::connect(&mysql_url().await)
        .await
        .expect("connect to the MySQL test database");
    store.migrate().await.expect("migrate MySQL");
    store
}

/// The URL of this process's fresh MySQL test database, created on first use.
///
/// # Panics
/// As [`mysql_store`].
pub async fn mysql_url() -> String {
    static URL: OnceCell<String> = OnceCell::const_new();
    URL.get_or_init(|| create_database(None)).await.clone()
}

/// A fresh MySQL database for one test (`{this process's database}_g{n}`), dropped with the
/// process's own when stale, and its URL.
///
/// # Panics
/// As [`mysql_store`].
pub async fn mysql_database() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let base = mysql_url().await;
    let own = base.rsplit_once('/').map_or("", |(_, name)| name);
    let name = format!("{own}_g{}", N.fetch_add(1, Ordering::SeqCst));
    create_database(Some(name)).await
}

/// The server's URL without a database: `IDEM_TEST_MYSQL_URL` or the default.
pub fn server_url() -> String {
    let url = std::env::var("IDEM_TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_MYSQL_URL.into());
    let (base, _) = url.rsplit_once('/').unwrap_or((url.as_str(), ""));
    // `mysql://host:3306` has no path: its last `/` is the scheme's.
    if base.ends_with('/') {
        url.trim_end_matches('/').to_owned()
    } else {
        base.to_owned()
    }
}

/// An admin connection to the server, outside any database.
async fn admin() -> MySqlConnection {
    let url = server_url();
    let options: MySqlConnectOptions = url
        .parse()
        .unwrap_or_else(|e| panic!("IDEM_TEST_MYSQL_URL {url:?}: {e}"));
    let mut conn = options
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to MySQL at {url}: {e}"));
    // A stale database still in use must not hang this run's DROP.
    sqlx::query("SET SESSION lock_wait_timeout = 5")
        .execute(&mut conn)
        .await
        .expect("set lock_wait_timeout");
    conn
}

/// Creates database `name` (this process's own when `None`, after dropping stale ones); returns
/// its URL.
async fn create_database(name: Option<String>) -> String {
    let mut admin = admin().await;
    let name = match name {
        Some(name) => name,
        None => {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("clock after 1970")
                .as_secs();
            drop_stale(&mut admin, now).await;
            format!("idem_test_{now}_{}", std::process::id())
        }
    };
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    admin.close().await.ok();
    format!("{}/{name}", server_url())
}

async fn drop_stale(admin: &mut MySqlConnection, now: u64) {
    let old: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT CAST(SCHEMA_NAME AS BINARY) FROM information_schema.SCHEMATA \
         WHERE SCHEMA_NAME LIKE 'idem\\_test\\_%'",
    )
    .fetch_all(&mut *admin)
    .await
    .expect("list test databases");
    for name in old.into_iter().filter_map(|n| String::from_utf8(n).ok()) {
        if is_stale(&name, now) {
            let drop = format!("DROP DATABASE IF EXISTS `{name}`");
            let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
                .execute(&mut *admin)
                .await;
        }
    }
}

/// `sql` for MySQL and the bind values in its order.
fn rewritten(sql: &str, binds: Vec<Value>) -> (String, Vec<Value>) {
    let (text, order) = to_question_marks(sql);
    let values = order
        .into_iter()
        .map(|n| {
            binds
                .get(n - 1)
                .unwrap_or_else(|| panic!("${n} has no bind value in {sql:?}"))
                .clone()
        })
        .collect();
    (text, values)
}

fn bind(query: Query<'_, MySql, MySqlArguments>, value: Value) -> Query<'_, MySql, MySqlArguments> {
    match value {
        Value::Text(s) => query.bind(s),
        Value::Int(n) => query.bind(n),
    }
}

/// The application's statements on MySQL: `$N` become `?` (binds reordered), and text columns
/// are read as bytes, so that idem's `VARBINARY` key columns read as text too.
impl AppDb for MySql {
    fn dialect(_standard: &'static str, mysql: &'static str) -> &'static str {
        mysql
    }

    async fn execute(
        conn: &mut MySqlConnection,
        sql: &'static str,
        binds: Vec<Value>,
    ) -> Result<u64, sqlx::Error> {
        if binds.is_empty() {
            // Sent as text, not prepared: MySQL prepares no CREATE TRIGGER, BEGIN or KILL.
            let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut *conn)
                .await?;
            return Ok(done.rows_affected());
        }
        let (sql, binds) = rewritten(sql, binds);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for value in binds {
            query = bind(query, value);
        }
        Ok(query.execute(&mut *conn).await?.rows_affected())
    }

    async fn fetch_i64(
        conn: &mut MySqlConnection,
        sql: &'static str,
        binds: Vec<Value>,
    ) -> Result<Vec<i64>, sqlx::Error> {
        let (sql, binds) = rewritten(sql, binds);
        let mut query: QueryScalar<'_, MySql, i64, MySqlArguments> =
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql));
        for value in binds {
            query = match value {
                Value::Text(s) => query.bind(s),
                Value::Int(n) => query.bind(n),
            };
        }
        query.fetch_all(&mut *conn).await
    }

    async fn fetch_text_pairs(
        conn: &mut MySqlConnection,
        sql: &'static str,
        binds: Vec<Value>,
    ) -> Result<Vec<(String, String)>, sqlx::Error> {
        let (sql, binds) = rewritten(sql, binds);
        let mut query: QueryAs<'_, MySql, (Vec<u8>, Vec<u8>), MySqlArguments> =
            sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for value in binds {
            query = match value {
                Value::Text(s) => query.bind(s),
                Value::Int(n) => query.bind(n),
            };
        }
        let rows = query.fetch_all(&mut *conn).await?;
        rows.into_iter()
            .map(|(a, b)| {
                let text = |bytes: Vec<u8>| {
                    String::from_utf8(bytes).map_err(|e| sqlx::Error::Decode(Box::new(e)))
                };
                Ok((text(a)?, text(b)?))
            })
            .collect()
    }
}
