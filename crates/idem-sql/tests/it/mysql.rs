//! MySQL's and MariaDB's own rules (docs/design.md C1): idem's transactions at READ COMMITTED
//! whatever the session's default, deadlocks and lock waits as retryable conflicts, and
//! migrations that a failure leaves resumable and that refuse tables made by another idem.

use std::sync::Arc;
use std::time::Duration;

use idem_sql::sqlx::mysql::MySqlPoolOptions;
use idem_sql::sqlx::{self, Connection, MySqlConnection};
use idem_sql::{Error, ErrorKind, Event, MySqlStore, Runner};
use tokio::sync::Barrier;

use crate::support::{consumer, stripe_key};

/// The time of rows these tests write into idem's tables: now, so that no test's retention run
/// (whose clocks stand in 1970 or 2023) counts them as old.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A store whose connections default to `level` (as an application's pool may), migrated.
async fn store_defaulting_to(level: &'static str) -> MySqlStore {
    let pool = MySqlPoolOptions::new()
        .max_connections(16)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                let set = format!("SET SESSION TRANSACTION ISOLATION LEVEL {level}");
                sqlx::query(sqlx::AssertSqlSafe(set)).execute(conn).await?;
                Ok(())
            })
        })
        .connect(&idem_testkit::mysql_url().await)
        .await
        .unwrap();
    let store = MySqlStore::from_pool(pool);
    store.migrate().await.unwrap();
    store
}

/// C1 on MySQL: idem's transaction reads what others committed after its first read (READ
/// COMMITTED) even when the session's default is REPEATABLE READ, where its first read would
/// fix a snapshot that hides the row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transactions_read_committed_over_a_repeatable_read_default() {
    let store = store_defaulting_to("REPEATABLE READ").await;
    let key = consumer("mysql_rc").to_string();
    let count = "SELECT COUNT(*) FROM idem_inbox WHERE consumer = ?";
    let mut tx = store.begin().await.unwrap();
    let before: i64 = sqlx::query_scalar(count)
        .bind(&key)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    sqlx::query("INSERT INTO idem_inbox (consumer, dedup_key, processed_at) VALUES (?, 'k', ?)")
        .bind(&key)
        .bind(now_ms())
        .execute(store.pool())
        .await
        .unwrap();
    let after: i64 = sqlx::query_scalar(count)
        .bind(&key)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(
        (before, after),
        (0, 1),
        "the row committed meanwhile is seen"
    );

    // The pool's own default is untouched outside idem's transactions.
    let mut raw = store.pool().begin().await.unwrap();
    let first: i64 = sqlx::query_scalar(count)
        .bind(&key)
        .fetch_one(&mut *raw)
        .await
        .unwrap();
    sqlx::query("DELETE FROM idem_inbox WHERE consumer = ?")
        .bind(&key)
        .execute(store.pool())
        .await
        .unwrap();
    let second: i64 = sqlx::query_scalar(count)
        .bind(&key)
        .fetch_one(&mut *raw)
        .await
        .unwrap();
    raw.rollback().await.unwrap();
    assert_eq!((first, second), (1, 1), "REPEATABLE READ, outside idem");
}

/// 32 concurrent deliveries of one event on a SERIALIZABLE default (where plain reads take
/// shared locks) with no conflict retries: one applied, 31 duplicates, no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_over_a_serializable_default_apply_once() {
    let store = store_defaulting_to("SERIALIZABLE").await;
    let runner = Runner::new(store, &consumer("mysql_serializable")).max_attempts(1);
    let barrier = Arc::new(Barrier::new(32));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (runner, barrier) = (runner.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            runner
                .run(&Event::new(stripe_key("evt_A")), async move |_tx| Ok(()))
                .await
                .map(|o| o.name())
                .map_err(|e| e.to_string())
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    let applied = outcomes.iter().filter(|o| **o == Ok("applied")).count();
    let duplicates = outcomes.iter().filter(|o| **o == Ok("duplicate")).count();
    assert_eq!((applied, duplicates), (1, 31), "{outcomes:?}");
}

/// Two transactions that each hold a row the other wants: MariaDB rolls one back with 1213,
/// which idem reports as a retryable conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deadlock_is_a_retryable_conflict() {
    let store = idem_testkit::mysql_store().await;
    let c = consumer("mysql_deadlock").to_string();
    for key in ["a", "b"] {
        sqlx::query("INSERT INTO idem_inbox (consumer, dedup_key, processed_at) VALUES (?, ?, ?)")
            .bind(&c)
            .bind(key)
            .bind(now_ms())
            .execute(store.pool())
            .await
            .unwrap();
    }
    let lock =
        "SELECT processed_at FROM idem_inbox WHERE consumer = ? AND dedup_key = ? FOR UPDATE";
    let (mut one, mut two) = (store.begin().await.unwrap(), store.begin().await.unwrap());
    sqlx::query(lock)
        .bind(&c)
        .bind("a")
        .execute(&mut *one)
        .await
        .unwrap();
    sqlx::query(lock)
        .bind(&c)
        .bind("b")
        .execute(&mut *two)
        .await
        .unwrap();
    let first = {
        let c = c.clone();
        tokio::spawn(async move {
            let result = sqlx::query(lock)
                .bind(&c)
                .bind("b")
                .execute(&mut *one)
                .await;
            (one, result)
        })
    };
    // The other waits, so the server sees the cycle at once: no sleep decides the outcome.
    let second = sqlx::query(lock)
        .bind(&c)
        .bind("a")
        .execute(&mut *two)
        .await;
    let (one, first) = first.await.unwrap();
    let failed: Vec<Error> = [first, second]
        .into_iter()
        .filter_map(Result::err)
        .map(Error::from)
        .collect();
    assert_eq!(failed.len(), 1, "one of the two is rolled back: {failed:?}");
    assert_eq!(failed[0].kind(), ErrorKind::Conflict, "{}", failed[0]);
    assert!(failed[0].is_retryable());
    drop((one, two));
}

/// A lock wait past `innodb_lock_wait_timeout` (1205) is a retryable conflict too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lock_wait_timeout_is_a_retryable_conflict() {
    let store = idem_testkit::mysql_store().await;
    let c = consumer("mysql_lock_wait").to_string();
    let claim = "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) VALUES (?, 'k', 0)";
    let mut holder = store.begin().await.unwrap();
    sqlx::query(claim)
        .bind(&c)
        .execute(&mut *holder)
        .await
        .unwrap();
    let mut waiter = MySqlConnection::connect(&idem_testkit::mysql_url().await)
        .await
        .unwrap();
    sqlx::query("SET SESSION innodb_lock_wait_timeout = 1")
        .execute(&mut waiter)
        .await
        .unwrap();
    let err = sqlx::query(claim)
        .bind(&c)
        .execute(&mut waiter)
        .await
        .unwrap_err();
    let err = Error::from(err);
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    holder.rollback().await.unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(5), waiter.close()).await;
}
