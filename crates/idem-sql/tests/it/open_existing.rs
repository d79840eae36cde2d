//! `AnyStore::open_existing`, the one opener of a database another program made (the `idem`
//! command's and the gateway's relays'): it opens what is there, names a missing table, and
//! never creates a database.

use idem_sql::{AnyStore, DatabaseKind, Error, MySqlStore, PgStore, PoolOptions, SqliteStore};
use idem_testkit::{mysql_database, pg_database};

fn one_connection() -> PoolOptions {
    PoolOptions::default().max_connections(1)
}

/// `Err(MissingTable)` naming `table` at the URL shown without its password.
fn assert_missing(result: Result<AnyStore, Error>, table: &str) {
    match result {
        Err(Error::MissingTable { table: t, url }) => {
            assert_eq!(t, table);
            assert!(!url.contains("password"), "{url}");
        }
        other => panic!("expected MissingTable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_sqlite_file_is_a_missing_table_and_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.db");
    let url = format!("sqlite://{}", path.display());
    assert_missing(
        AnyStore::open_existing(&url, "idem_outbox", one_connection()).await,
        "idem_outbox",
    );
    assert!(!path.exists(), "open_existing created the file");
}

#[tokio::test]
async fn sqlite_opens_once_the_table_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    let store = SqliteStore::connect(&url).await.unwrap();
    assert_missing(
        AnyStore::open_existing(&url, "idem_outbox", one_connection()).await,
        "idem_outbox",
    );
    store.migrate().await.unwrap();
    let opened = AnyStore::open_existing(&url, "idem_outbox", one_connection())
        .await
        .unwrap();
    assert_eq!(opened.kind(), DatabaseKind::Sqlite);
    assert!(matches!(opened, AnyStore::Sqlite(_)));
}

#[tokio::test]
async fn postgres_opens_once_the_table_is_there() {
    let url = pg_database().await;
    let migrate = async {
        PgStore::connect(&url)
            .await
            .unwrap()
            .migrate()
            .await
            .unwrap()
    };
    opens_once_migrated(&url, migrate, DatabaseKind::Postgres).await;
}

#[tokio::test]
async fn mysql_opens_once_the_table_is_there() {
    let url = mysql_database().await;
    let migrate = async {
        MySqlStore::connect(&url)
            .await
            .unwrap()
            .migrate()
            .await
            .unwrap()
    };
    opens_once_migrated(&url, migrate, DatabaseKind::MySql).await;
}

/// The database at `url` is refused for want of `idem_outbox`, then opened as `kind` once
/// `migrate` (not yet run) has made it.
async fn opens_once_migrated(url: &str, migrate: impl Future<Output = ()>, kind: DatabaseKind) {
    assert_missing(
        AnyStore::open_existing(url, "idem_outbox", one_connection()).await,
        "idem_outbox",
    );
    migrate.await;
    let opened = AnyStore::open_existing(url, "idem_outbox", one_connection())
        .await
        .unwrap();
    assert_eq!(opened.kind(), kind);
}

#[tokio::test]
async fn a_url_of_no_database_is_invalid() {
    let result =
        AnyStore::open_existing("redis://127.0.0.1/0", "idem_outbox", one_connection()).await;
    assert!(
        matches!(result, Err(Error::InvalidUrl { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_connect_error_at_once() {
    let started = std::time::Instant::now();
    // Nothing listens on port 1.
    let result = AnyStore::open_existing(
        "postgres://app:hunter2@127.0.0.1:1/app",
        "idem_outbox",
        one_connection(),
    )
    .await;
    let Err(error @ Error::Connect { .. }) = result else {
        panic!("expected Connect, got {result:?}");
    };
    assert!(!error.to_string().contains("hunter2"), "{error}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}
