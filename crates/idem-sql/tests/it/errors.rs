//! Errors a service author meets: bad database URLs name the problem, and a handler's
//! statement that fails for good is not mistaken for a retryable conflict.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_sql::{Error, ErrorKind, Event, MySqlStore, PgStore, Runner, SqliteStore, Store};
use idem_testkit::{AppDb, all_stores};

use crate::support::{consumer, stripe_key};

/// `convert_from('\xff', 'UTF8')` fails on PostgreSQL with SQLSTATE 22021 (whose digits, read as
/// a SQLite code, would look like SQLITE_BUSY), on SQLite with "no such function" and on MySQL
/// with 1305 (no such function): each a permanent error, returned at once, the handler run once.
async fn failing_statement_is_not_retried<DB: AppDb>(store: Store<DB>) {
    let runner = Runner::new(store.clone(), &consumer("permanent_error"));
    let runs = Arc::new(AtomicUsize::new(0));
    let result = runner
        .run_boxed(&Event::new(stripe_key("evt_22021")), |tx| {
            runs.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                DB::execute(&mut **tx, "SELECT convert_from('\\xff', 'UTF8')", vec![]).await?;
                Ok(())
            })
        })
        .await;
    let err = result.expect_err("the statement fails");
    assert_eq!(err.kind(), ErrorKind::Database, "{err}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "a permanent error is not retried"
    );
}

all_stores!(failing_statement_is_not_retried);

fn invalid_url(result: Result<impl std::fmt::Debug, Error>, needle: &str) {
    match result {
        Err(e @ Error::InvalidUrl { .. }) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            assert!(e.to_string().contains(needle), "{needle:?} not in: {e}");
        }
        other => panic!("expected Error::InvalidUrl naming {needle:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_database_urls_name_the_problem() {
    invalid_url(SqliteStore::connect("not a url").await, "sqlite://");
    invalid_url(SqliteStore::connect("postgres://x/y").await, "sqlite://");
    invalid_url(SqliteStore::connect("sqlite://").await, "not in-memory");
    invalid_url(
        SqliteStore::connect("sqlite::memory:").await,
        "not in-memory",
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("idem.db");
    invalid_url(
        SqliteStore::connect(&format!("sqlite://{}", missing.display())).await,
        "no-such-dir",
    );
    invalid_url(PgStore::connect("sqlite://app.db").await, "postgres://");
    invalid_url(MySqlStore::connect("postgres://x/y").await, "mysql://");
    invalid_url(
        MySqlStore::connect("mysql://root@127.0.0.1:3306").await,
        "names the database",
    );
}

#[tokio::test]
async fn refused_postgres_connection_is_reported_with_its_cause() {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    match PgStore::connect("postgres://postgres:pw@127.0.0.1:1/x").await {
        Err(e @ Error::Connect { .. }) => {
            let text = e.to_string();
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            assert!(text.contains("127.0.0.1:1"), "names the server: {text}");
            assert!(!text.contains("pw"), "never the password: {text}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
}

#[tokio::test]
async fn refused_mysql_connection_is_reported_with_its_cause() {
    match MySqlStore::connect("mysql://root:pw@127.0.0.1:1/x").await {
        Err(e @ Error::Connect { .. }) => {
            let text = e.to_string();
            assert_eq!(e.kind(), ErrorKind::Unavailable);
            assert!(text.contains("127.0.0.1:1"), "names the server: {text}");
            assert!(!text.contains("pw"), "never the password: {text}");
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
}

/// A database that does not exist on a reachable PostgreSQL server: the message names the
/// statement that makes it; a port where no PostgreSQL answers says to check host and port.
#[tokio::test]
async fn a_missing_postgres_database_says_how_to_make_it() {
    let server = idem_testkit::pg_database().await;
    let base = server.rsplit_once('/').unwrap().0;
    let missing = format!("{base}/idem_no_such_database_{}", std::process::id());
    match PgStore::connect(&missing).await {
        Err(e @ Error::Connect { .. }) => {
            let text = e.to_string();
            let name = missing.rsplit('/').next().unwrap();
            assert!(
                text.contains(&format!("create it first (`CREATE DATABASE {name};`)")),
                "{text}"
            );
        }
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    match PgStore::connect("postgres://postgres@127.0.0.1:1/x").await {
        Err(e) => assert!(
            e.to_string()
                .contains("is a database server listening at that host and port?"),
            "{e}"
        ),
        Ok(_) => panic!("port 1 answered"),
    }
}
