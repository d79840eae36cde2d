//! The baselines measured in the same run as the gateway, each an axum server on a runtime of
//! its own (as a separate process would be): the ceiling (verify the Stripe signature, read
//! the event id, answer 200, no store) and the naive recipe a user would otherwise write (the
//! same, plus one transaction per webhook: `INSERT … ON CONFLICT DO NOTHING` into
//! `processed_events`, then the event into a ledger table if the insert took, commit).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use idem_core::{Clock, SystemClock};
use idem_http::verify::Verifier;
use idem_http::verify::stripe::StripeVerifier;
use idem_sql::sqlx::mysql::MySqlPoolOptions;
use idem_sql::sqlx::postgres::PgPoolOptions;
use idem_sql::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use idem_sql::sqlx::{self, Pool};

use crate::load::SECRET;
use crate::own_runtime::OwnRuntime;

/// The name of the baselines' server threads.
const THREADS: &str = "bench-baseline";

/// Where the naive recipe keeps its rows.
pub(crate) enum Recipe {
    /// No store: the ceiling.
    None,
    /// SQLite at this URL, WAL, `synchronous = FULL`, one connection.
    Sqlite(String),
    /// PostgreSQL at this URL, 32 connections.
    Postgres(String),
    /// MySQL or MariaDB at this URL, 32 connections, the server's default isolation.
    MySql(String),
}

enum Db {
    None,
    Sqlite(Pool<sqlx::Sqlite>),
    Postgres(Pool<sqlx::Postgres>),
    MySql(Pool<sqlx::MySql>),
}

struct App {
    verifier: StripeVerifier,
    db: Db,
}

const TABLES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS processed_events (event_id TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS ledger (event_id TEXT NOT NULL, body BYTEA NOT NULL)",
];
const CLAIM: &str = "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING";
const RECORD: &str = "INSERT INTO ledger (event_id, body) VALUES ($1, $2)";

/// The same tables and statements as a MySQL user writes them.
const MYSQL_TABLES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS processed_events (event_id VARBINARY(255) PRIMARY KEY) ENGINE=InnoDB",
    "CREATE TABLE IF NOT EXISTS ledger (event_id VARBINARY(255) NOT NULL, body LONGBLOB NOT NULL) \
     ENGINE=InnoDB",
];
const MYSQL_CLAIM: &str = "INSERT IGNORE INTO processed_events (event_id) VALUES (?)";
const MYSQL_RECORD: &str = "INSERT INTO ledger (event_id, body) VALUES (?, ?)";

/// Starts `recipe`'s server on its own runtime; its `url` takes the webhooks.
pub(crate) fn start(recipe: Recipe) -> OwnRuntime {
    OwnRuntime::serve(THREADS, "/webhooks/stripe", move || async move {
        let db = match recipe {
            Recipe::None => Db::None,
            Recipe::Sqlite(url) => {
                let options = url
                    .parse::<SqliteConnectOptions>()
                    .expect("SQLite URL")
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .synchronous(SqliteSynchronous::Full);
                let pool = SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(options)
                    .await
                    .expect("open SQLite");
                for table in TABLES {
                    sqlx::query(table).execute(&pool).await.expect("create");
                }
                Db::Sqlite(pool)
            }
            Recipe::Postgres(url) => {
                let pool = PgPoolOptions::new()
                    .max_connections(32)
                    .acquire_timeout(Duration::from_secs(30))
                    .connect(&url)
                    .await
                    .expect("connect to PostgreSQL");
                for table in TABLES {
                    sqlx::query(table).execute(&pool).await.expect("create");
                }
                Db::Postgres(pool)
            }
            Recipe::MySql(url) => {
                let pool = MySqlPoolOptions::new()
                    .max_connections(32)
                    .acquire_timeout(Duration::from_secs(30))
                    .connect(&url)
                    .await
                    .expect("connect to MySQL");
                for table in MYSQL_TABLES {
                    sqlx::query(table).execute(&pool).await.expect("create");
                }
                Db::MySql(pool)
            }
        };
        let app = Arc::new(App {
            verifier: StripeVerifier::new([SECRET]).expect("secret"),
            db,
        });
        axum::Router::new()
            .route("/webhooks/stripe", post(handle))
            .with_state(app)
    })
}

/// The event id of a webhook whose Stripe signature `verifier` accepts; `None` when the
/// signature or the body is not valid. The work every baseline does first.
pub(crate) fn verified_id(
    verifier: &StripeVerifier,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<String> {
    verifier.verify(headers, body, SystemClock.now()).ok()?;
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_owned))
}

async fn handle(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let Some(id) = verified_id(&app.verifier, &headers, &body) else {
        return StatusCode::BAD_REQUEST;
    };
    let stored = match &app.db {
        Db::None => Ok(()),
        Db::Sqlite(pool) => record_sqlite(pool, &id, &body).await,
        Db::Postgres(pool) => record_postgres(pool, &id, &body).await,
        Db::MySql(pool) => record_mysql(pool, &id, &body).await,
    };
    match stored {
        Ok(()) => StatusCode::OK,
        Err(_) => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// One transaction per webhook: claim the id, record the event if the claim took, commit.
macro_rules! record_fn {
    ($name:ident, $db:ty) => {
        record_fn!($name, $db, CLAIM, RECORD);
    };
    ($name:ident, $db:ty, $claim:expr, $record:expr) => {
        async fn $name(pool: &Pool<$db>, id: &str, body: &[u8]) -> Result<(), sqlx::Error> {
            let mut tx = pool.begin().await?;
            let claimed = sqlx::query($claim).bind(id).execute(&mut *tx).await?;
            if claimed.rows_affected() == 1 {
                sqlx::query($record)
                    .bind(id)
                    .bind(body)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        }
    };
}
record_fn!(record_sqlite, sqlx::Sqlite);
record_fn!(record_postgres, sqlx::Postgres);
record_fn!(record_mysql, sqlx::MySql, MYSQL_CLAIM, MYSQL_RECORD);
