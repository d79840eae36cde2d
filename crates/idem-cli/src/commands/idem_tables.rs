//! `idem effects`, `idem outbox`, `idem dead-letters` work on idem's own tables in any database
//! (usually the application's), through idem's library APIs. They never create or migrate a
//! database: a missing table is an error naming the database. This module opens it.

use std::time::Duration;

use anyhow::bail;
use idem_sql::redact_url;
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{AnyStore, DatabaseKind, PoolOptions, Store};
use serde_json::{Value, json};

pub(super) enum Db {
    Sqlite(Store<Sqlite>),
    Postgres(Store<Postgres>),
    MySql(Store<MySql>),
}

/// Runs `$body` with `$store` bound to the opened store, whichever database it is on.
macro_rules! with_db {
    ($db:expr, $store:ident => $body:expr) => {
        match $db {
            Db::Sqlite($store) => $body,
            Db::Postgres($store) => $body,
            Db::MySql($store) => $body,
        }
    };
}

/// How long opening a PostgreSQL or MySQL database may take: a server that does not answer at all
/// (packets dropped) would otherwise hold the command for the operating system's TCP timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens `url` and checks that idem's `table` is there. Messages show the URL without its
/// user and password.
///
/// # Errors
/// A URL that is not SQLite, PostgreSQL or MySQL, a database that cannot be opened (a SQLite
/// file that does not exist is not created; a server that refuses, or rejects the login, is
/// reported at once with the driver's reason; one that does not answer, after 10 s), or a
/// missing `table`, each naming the database.
pub(super) async fn open(url: &str, table: &'static str) -> anyhow::Result<Db> {
    let shown = redact_url(url);
    if DatabaseKind::of(url).is_none() {
        bail!("database {shown:?} is not sqlite://, postgres:// or mysql://");
    }
    let options = PoolOptions::default()
        .max_connections(1)
        .acquire_timeout(CONNECT_TIMEOUT);
    // idem's errors name the database, without the password.
    match AnyStore::open_existing(url, table, options).await {
        Ok(AnyStore::Sqlite(store)) => Ok(Db::Sqlite(store)),
        Ok(AnyStore::Postgres(store)) => Ok(Db::Postgres(store)),
        Ok(AnyStore::MySql(store)) => Ok(Db::MySql(store)),
        Ok(_) => bail!("database {shown:?} is not sqlite://, postgres:// or mysql://"),
        // The registry came with migration 0007: a database of an older idem lacks only it.
        Err(idem_sql::Error::MissingTable {
            url,
            table: "idem_consumers",
        }) => bail!(
            "no idem_consumers table at {url}: the database is not idem's, or predates the consumer registry (migration 0007); `idem serve` migrates a gateway's database at start, Store::migrate an application's"
        ),
        Err(idem_sql::Error::MissingTable { url, table }) => bail!(
            "no {table} table at {url}: check --database (the application creates idem's tables with Store::migrate)"
        ),
        Err(e) => Err(anyhow::Error::new(e)),
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

/// The database at `url` when it holds the gateway's tables; `None` when it has no
/// `idem_gateway_events` table (or, for SQLite, no file: [`open`] then says so).
pub(super) async fn open_gateway(url: &str) -> anyhow::Result<Option<AnyStore>> {
    let options = PoolOptions::default().max_connections(1);
    match AnyStore::open_existing(url, "idem_gateway_events", options).await {
        Ok(store) => Ok(Some(store)),
        Err(idem_sql::Error::MissingTable { .. } | idem_sql::Error::InvalidUrl { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
