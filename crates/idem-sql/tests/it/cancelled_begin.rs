//! A `begin` its caller gave up on while BEGIN was in flight (a timeout, a client that left)
//! leaves no transaction open on the connection the pool hands out next. sqlx counts a
//! PostgreSQL or MySQL transaction only once BEGIN's answer is read: given up before that, the
//! server was inside a transaction that nobody would end, so a later statement outside a
//! transaction on that connection was not committed (on PostgreSQL until a later transaction
//! there committed), and on MySQL every later begin of idem's on it failed with 1568
//! ("Transaction characteristics can't be changed while a transaction is in progress"; the
//! gateway answered 503 to every webhook that got that connection). The same through the
//! operations that begin a transaction of their own on MySQL (an outbox claim here).

use std::time::Duration;

use idem_sql::{PoolOptions, Store};
use idem_testkit::tcp_proxy::TcpProxy;
use idem_testkit::{AppDb, exec, query_i64};

/// Turns `async fn name<DB: AppDb>(url: String)` into `name::postgres` and `name::mysql`, each
/// on a fresh database: SQLite's worker thread counts a transaction when it runs `BEGIN`.
macro_rules! on_servers {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name::<idem_sql::sqlx::Postgres>(idem_testkit::pg_database().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                super::$name::<idem_sql::sqlx::MySql>(idem_testkit::mysql_database().await).await;
            }
        }
    )+};
}

on_servers!(
    a_begin_given_up_in_flight_leaves_no_transaction_open,
    an_outbox_claim_given_up_in_flight_leaves_no_transaction_open,
);

async fn a_begin_given_up_in_flight_leaves_no_transaction_open<DB: AppDb>(url: String) {
    let (direct, proxy, store) = through_a_proxy::<DB>(&url).await;
    proxy.hold();
    let given_up = tokio::time::timeout(Duration::from_millis(300), store.begin()).await;
    assert!(
        given_up.is_err(),
        "BEGIN's answer was held: the begin cannot have ended"
    );
    proxy.release();
    a_statement_commits_on_its_own(&direct, &store).await;

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

/// MySQL's outbox claim locks the due rows in a transaction of its own, begun on a pooled
/// connection outside `Store::begin`: given up while that BEGIN is in flight, the connection is
/// closed rather than handed out again.
async fn an_outbox_claim_given_up_in_flight_leaves_no_transaction_open<DB: AppDb>(url: String) {
    let (direct, proxy, store) = through_a_proxy::<DB>(&url).await;
    proxy.hold();
    let outbox = store.outbox();
    let claim = outbox.claim(10, Duration::from_secs(30));
    let given_up = tokio::time::timeout(Duration::from_millis(300), claim).await;
    assert!(
        given_up.is_err(),
        "the claim's answer was held: it cannot have ended"
    );
    proxy.release();
    a_statement_commits_on_its_own(&direct, &store).await;

    let tx = store
        .begin()
        .await
        .expect("a begin after the claim given up");
    tx.commit().await.expect("commit");
}

/// A migrated store on `url` with the table `given_up`, a proxy in front of its server, and a
/// store of one connection through that proxy: whatever its pool hands out next is the
/// connection of the operation given up.
async fn through_a_proxy<DB: AppDb>(url: &str) -> (Store<DB>, TcpProxy, Store<DB>) {
    let direct = Store::<DB>::connect(url).await.expect("connect");
    direct.migrate().await.expect("migrate");
    exec(&direct, "CREATE TABLE given_up (n INT NOT NULL)", vec![]).await;
    let (proxy, through) = TcpProxy::in_front_of(url).await;
    let store =
        Store::<DB>::connect_with_options(&through, PoolOptions::default().max_connections(1))
            .await
            .expect("connect through the proxy");
    (direct, proxy, store)
}

/// An insert outside any transaction through `store` is seen by another session (`direct`).
async fn a_statement_commits_on_its_own<DB: AppDb>(direct: &Store<DB>, store: &Store<DB>) {
    exec(store, "INSERT INTO given_up (n) VALUES (1)", vec![]).await;
    assert_eq!(
        query_i64(direct, "SELECT COUNT(*) FROM given_up", vec![]).await,
        vec![1],
        "the insert outside a transaction is seen by another session"
    );
}
