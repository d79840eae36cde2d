//! A `begin` its caller gave up on while BEGIN was in flight (a timeout, a client that left)
//! leaves no transaction open on the connection the pool hands out next. sqlx counts a
//! transaction only once BEGIN's answer is read: given up before that, the server was inside a
//! transaction that nobody would end, so a later statement outside a transaction on that
//! connection was never committed, and on MySQL every later begin on it failed with 1568
//! ("Transaction characteristics can't be changed while a transaction is in progress"; the
//! gateway answered 503 to every webhook that got that connection).

use std::time::Duration;

use idem_sql::{PoolOptions, Store};
use idem_testkit::holding_proxy::HoldingProxy;
use idem_testkit::{AppDb, exec, query_i64};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    a_begin_given_up_in_flight_leaves_no_transaction_open::<idem_sql::sqlx::Postgres>(
        idem_testkit::pg_database().await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    a_begin_given_up_in_flight_leaves_no_transaction_open::<idem_sql::sqlx::MySql>(
        idem_testkit::mysql_database().await,
    )
    .await;
}

async fn a_begin_given_up_in_flight_leaves_no_transaction_open<DB: AppDb>(url: String) {
    let direct = Store::<DB>::connect(&url).await.expect("connect");
    exec(&direct, "CREATE TABLE given_up (n INT NOT NULL)", vec![]).await;
    let (proxy, through) = HoldingProxy::in_front_of(&url).await;
    // One connection: whatever the pool hands out next is the one whose BEGIN was given up.
    let store =
        Store::<DB>::connect_with_options(&through, PoolOptions::default().max_connections(1))
            .await
            .expect("connect through the proxy");

    proxy.hold();
    let given_up = tokio::time::timeout(Duration::from_millis(300), store.begin()).await;
    assert!(
        given_up.is_err(),
        "BEGIN's answer was held: the begin cannot have ended"
    );
    proxy.release();

    // A statement outside any transaction commits on its own.
    exec(&store, "INSERT INTO given_up (n) VALUES (1)", vec![]).await;
    assert_eq!(
        query_i64(&direct, "SELECT COUNT(*) FROM given_up", vec![]).await,
        vec![1],
        "the insert outside a transaction is seen by another session"
    );
    // And the connection begins and commits transactions again.
    let mut tx = store.begin().await.expect("a begin after the one given up");
    DB::execute(&mut tx, "INSERT INTO given_up (n) VALUES (2)", vec![])
        .await
        .expect("insert in the transaction");
    tx.commit().await.expect("commit");
    assert_eq!(
        query_i64(&direct, "SELECT COUNT(*) FROM given_up", vec![]).await,
        vec![2]
    );
}
