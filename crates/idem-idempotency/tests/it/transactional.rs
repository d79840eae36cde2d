//! Transactional mode (SQL stores): the handler's writes and the stored response commit together.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::{Method, Request};
use idem_core::Ttl;
use idem_idempotency::store::sql::SqlBackend;
use idem_idempotency::{IdempotencyLayer, SqlStore, Tx};
use idem_sql::Store;
use idem_sql::sqlx::{self, MySql, Postgres};
use idem_testkit::{AppDb, Value, exec, query_i64};
use serde_json::json;
use tokio::sync::Notify;
use tower::ServiceExt;

use crate::support::{Handlers, send, serve, unique_prefix};

macro_rules! sql_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let (_dir, store) = idem_testkit::sqlite_store().await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(idem_testkit::pg_store().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                super::$name(idem_testkit::mysql_store().await).await;
            }
        }
    )+};
}

sql_stores!(
    the_handlers_write_and_the_response_commit_together,
    a_5xx_rolls_the_handlers_write_back,
    a_request_cut_off_mid_handler_leaves_no_effect_and_no_record,
    the_claim_commits_with_the_handlers_write_in_one_transaction,
);

/// The same key while the first request's transaction is open: SQLite waits, PostgreSQL and
/// MySQL 409.
mod a_second_request_while_the_first_runs {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_waits_then_replays() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        super::sqlite_waits_then_replays(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_answers_503_past_the_write_wait() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        super::sqlite_answers_503_past_the_write_wait(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_is_409_with_retry_after() {
        super::postgres_is_409_with_retry_after(idem_testkit::pg_store().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql_is_409_with_retry_after_a_one_second_lock_wait() {
        super::mysql_is_409_with_retry_after_a_one_second_lock_wait(
            idem_testkit::mysql_store().await,
        )
        .await;
    }
}

mod mysql_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_handler_and_the_pool_keep_the_sessions_own_lock_wait() {
        super::the_handler_and_the_pool_keep_the_sessions_own_lock_wait().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_process_holds_the_key_until_its_session_ends() {
        super::a_dead_process_holds_the_key_until_its_session_ends().await;
    }
}

mod postgres_only {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_handler_runs_with_its_own_lock_timeout_and_an_idle_limit_of_the_lease() {
        super::the_handler_runs_with_its_own_lock_timeout_and_an_idle_limit_of_the_lease(
            idem_testkit::pg_store().await,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_process_blocks_the_key_until_its_idle_transaction_is_ended() {
        super::a_dead_process_blocks_the_key_until_its_idle_transaction_is_ended(
            idem_testkit::pg_store().await,
        )
        .await;
    }
}

struct TxApp {
    ns: String,
    handlers: Handlers,
    proceed: Notify,
}

const CREATE: &str = "CREATE TABLE IF NOT EXISTS tx_effects \
     (ns VARCHAR(255) NOT NULL, id VARCHAR(255) NOT NULL, PRIMARY KEY (ns, id))";
const INSERT: &str = "INSERT INTO tx_effects (ns, id) VALUES ($1, $2)";
const COUNT: &str = "SELECT COUNT(*) FROM tx_effects WHERE ns = $1";

type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Writes row `id` in the request's transaction. Boxed with `Send`, as the compiler cannot prove
/// a generic `DB`'s future `Send` for every lifetime inside an axum handler.
fn write<DB: AppDb>(
    app: Arc<TxApp>,
    tx: Tx<DB>,
    id: String,
) -> Pin<Box<dyn Future<Output = Result<(), Response>> + Send>> {
    Box::pin(async move {
        let fail = |e: String| (StatusCode::INTERNAL_SERVER_ERROR, e).into_response();
        let mut tx = tx.lock().await.map_err(|e| fail(e.to_string()))?;
        DB::execute(
            &mut *tx,
            INSERT,
            vec![Value::from(app.ns.as_str()), Value::from(id)],
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        Ok(())
    })
}

fn created(id: String) -> Response {
    (StatusCode::CREATED, axum::Json(json!({ "id": id }))).into_response()
}

/// Writes a row, 201 `{"id":"pay_N"}`.
fn pay<DB: AppDb>(State(app): State<Arc<TxApp>>, tx: Tx<DB>) -> Answer {
    Box::pin(async move {
        let n = app.handlers.run("pay");
        match write(Arc::clone(&app), tx, format!("pay_{n}")).await {
            Ok(()) => created(format!("pay_{n}")),
            Err(e) => e,
        }
    })
}

/// Writes a row, then 500.
fn fail<DB: AppDb>(State(app): State<Arc<TxApp>>, tx: Tx<DB>) -> Answer {
    Box::pin(async move {
        let n = app.handlers.run("fail");
        match write(Arc::clone(&app), tx, format!("fail_{n}")).await {
            Ok(()) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            Err(e) => e,
        }
    })
}

/// Writes a row; on its first run notifies `hang_started` and never ends.
fn hang<DB: AppDb>(State(app): State<Arc<TxApp>>, tx: Tx<DB>) -> Answer {
    Box::pin(async move {
        let n = app.handlers.run("hang");
        if let Err(e) = write(Arc::clone(&app), tx, format!("hang_{n}")).await {
            return e;
        }
        if n == 1 {
            app.handlers.hang_started.notify_one();
            std::future::pending::<()>().await;
        }
        created(format!("hang_{n}"))
    })
}

/// Writes a row; on its first run notifies `hang_started` and waits for `proceed`.
fn slow<DB: AppDb>(State(app): State<Arc<TxApp>>, tx: Tx<DB>) -> Answer {
    Box::pin(async move {
        let n = app.handlers.run("slow");
        if let Err(e) = write(Arc::clone(&app), tx, format!("slow_{n}")).await {
            return e;
        }
        if n == 1 {
            app.handlers.hang_started.notify_one();
            app.proceed.notified().await;
        }
        created(format!("slow_{n}"))
    })
}

/// The routes: `POST /pay` and `PUT /pay`, `POST /fail`, `POST /hang`, `POST /slow`.
fn tx_app<DB: AppDb>(app: Arc<TxApp>) -> Router {
    Router::new()
        .route("/pay", post(pay::<DB>).put(pay::<DB>))
        .route("/fail", post(fail::<DB>))
        .route("/hang", post(hang::<DB>))
        .route("/slow", post(slow::<DB>))
        .with_state(app)
}

struct Setup<DB: AppDb> {
    app: Arc<TxApp>,
    store: Store<DB>,
    router: Router,
    base: String,
}

async fn setup<DB: AppDb + SqlBackend>(store: Store<DB>, lease: Duration) -> Setup<DB> {
    exec(&store, CREATE, vec![]).await;
    let app = Arc::new(TxApp {
        ns: unique_prefix(),
        handlers: Handlers::default(),
        proceed: Notify::new(),
    });
    let ns = app.ns.clone();
    let layer = IdempotencyLayer::transactional(SqlStore::new(store.clone()))
        .lease(Ttl::new(lease).unwrap())
        .required_for([Method::POST])
        .methods([Method::PUT])
        .scope(move |parts| {
            let user = crate::support::by_principal(parts)?;
            idem_idempotency::Principal::new(format!("{ns}/{user}")).ok()
        });
    let router = tx_app::<DB>(Arc::clone(&app)).layer(layer);
    let base = serve(router.clone()).await;
    Setup {
        app,
        store,
        router,
        base,
    }
}

async fn rows<DB: AppDb>(s: &Setup<DB>) -> i64 {
    query_i64(&s.store, COUNT, vec![Value::from(s.app.ns.as_str())]).await[0]
}

async fn the_handlers_write_and_the_response_commit_together<DB: AppDb + SqlBackend>(
    store: Store<DB>,
) {
    let s = setup(store, Duration::from_secs(30)).await;
    let first = send(&s.base, "/pay", Some("K"), "{}").await;
    assert_eq!((first.status, &first.body), (201, &json!({"id": "pay_1"})));
    assert_eq!(rows(&s).await, 1);
    let replay = send(&s.base, "/pay", Some("K"), "{}").await;
    assert!(replay.replayed());
    assert_eq!(replay.body, first.body);
    assert_eq!(rows(&s).await, 1);
    assert_eq!(s.app.handlers.runs("pay"), 1);

    // A keyless PUT (the key is optional there) still gets its transaction, committed on success.
    let response = idem_testkit::http_client()
        .put(format!("{}/pay", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(rows(&s).await, 2);
}

async fn a_5xx_rolls_the_handlers_write_back<DB: AppDb + SqlBackend>(store: Store<DB>) {
    let s = setup(store, Duration::from_secs(30)).await;
    assert_eq!(send(&s.base, "/fail", Some("K"), "{}").await.status, 500);
    assert_eq!(
        rows(&s).await,
        0,
        "the write of a failed handler was committed"
    );
    assert_eq!(send(&s.base, "/fail", Some("K"), "{}").await.status, 500);
    assert_eq!(s.app.handlers.runs("fail"), 2, "the claim was not released");
    assert_eq!(rows(&s).await, 0);
}

/// The request is cut off after the handler wrote (its future dropped, as when the client goes
/// away or the server shuts down): the write is rolled back with the claim, so the key is free
/// at once, without waiting for the lease; the retry runs once.
async fn a_request_cut_off_mid_handler_leaves_no_effect_and_no_record<DB: AppDb + SqlBackend>(
    store: Store<DB>,
) {
    let s = setup(store, Duration::from_secs(30)).await;
    let request = Request::post("/hang")
        .header("authorization", "Bearer alice")
        .header("idempotency-key", "K")
        .body(axum::body::Body::from("{}"))
        .unwrap();
    let mut cut = Box::pin(s.router.clone().oneshot(request));
    tokio::select! {
        _ = &mut cut => panic!("the first run of /hang never ends"),
        () = s.app.handlers.hang_started.notified() => {}
    }
    drop(cut);
    // The rollback reaches the database when the dropped connection goes back to its pool.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let retry = send(&s.base, "/hang", Some("K"), "{}").await;
    assert_eq!((retry.status, &retry.body), (201, &json!({"id": "hang_2"})));
    assert_eq!(rows(&s).await, 1, "only the retry's write is committed");
}

/// The lease row of a completed request, as `(token, state, updated_at)`, and the handler's row:
/// written by one transaction, they carry the same commit.
async fn the_claim_commits_with_the_handlers_write_in_one_transaction<DB: AppDb + SqlBackend>(
    store: Store<DB>,
) {
    let s = setup(store, Duration::from_secs(30)).await;
    let principal = format!("idempotency/{}/alice", s.app.ns);
    let lease_rows = |state: &'static str| {
        let (store, principal) = (s.store.clone(), principal.clone());
        async move {
            query_i64(
                &store,
                "SELECT COUNT(*) FROM idem_leases WHERE scope = $1 AND state = $2",
                vec![Value::from(principal), Value::from(state)],
            )
            .await[0]
        }
    };
    // A 5xx: neither the claim nor the write is left behind, not even a released lease.
    assert_eq!(send(&s.base, "/fail", Some("F"), "{}").await.status, 500);
    let all = query_i64(
        &s.store,
        "SELECT COUNT(*) FROM idem_leases WHERE scope = $1",
        vec![Value::from(principal.as_str())],
    )
    .await[0];
    assert_eq!(all, 0, "a rolled-back claim leaves no lease row");

    let first = send(&s.base, "/pay", Some("K"), "{}").await;
    assert_eq!(first.status, 201);
    assert_eq!((rows(&s).await, lease_rows("completed").await), (1, 1));
    assert_eq!(
        lease_rows("running").await,
        0,
        "no claim was committed alone"
    );
}

/// SQLite: the second request with the key waits for the write lock that the first request's
/// transaction holds, then finds the committed record and replays it; the handler ran once.
async fn sqlite_waits_then_replays<DB: AppDb + SqlBackend>(store: Store<DB>) {
    let s = setup(store, Duration::from_secs(30)).await;
    let first = tokio::spawn({
        let base = s.base.clone();
        async move { send(&base, "/slow", Some("K"), "{}").await }
    });
    s.app.handlers.hang_started.notified().await;
    let second = tokio::spawn({
        let base = s.base.clone();
        async move { send(&base, "/slow", Some("K"), "{}").await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "the second request waits for the first one's transaction"
    );
    s.app.proceed.notify_one();
    let first = first.await.unwrap();
    assert_eq!((first.status, &first.body), (201, &json!({"id": "slow_1"})));
    assert!(!first.replayed());
    let second = second.await.unwrap();
    assert_eq!(
        (second.status, &second.body),
        (201, &json!({"id": "slow_1"}))
    );
    assert!(second.replayed(), "{second:?}");
    assert_eq!(s.app.handlers.runs("slow"), 1);
    assert_eq!(rows(&s).await, 1);
}

/// SQLite: a request that waits for its turn longer than
/// [`SQLITE_WRITE_WAIT`](idem_idempotency::store::sql::SQLITE_WRITE_WAIT) (5 s) is answered 503
/// with `Retry-After` and changes nothing; the first request still completes, and the refused
/// one runs when retried.
async fn sqlite_answers_503_past_the_write_wait<DB: AppDb + SqlBackend>(store: Store<DB>) {
    let s = setup(store, Duration::from_secs(30)).await;
    let first = tokio::spawn({
        let base = s.base.clone();
        async move { send(&base, "/slow", Some("K"), "{}").await }
    });
    s.app.handlers.hang_started.notified().await;
    let started = std::time::Instant::now();
    let waited = send(&s.base, "/pay", Some("K2"), "{}").await;
    assert_eq!(waited.status, 503, "{waited:?}");
    assert!(started.elapsed() >= Duration::from_secs(5));
    assert_eq!(waited.problem(), Some("idempotency-store-unavailable"));
    assert_eq!(waited.header("retry-after"), Some("1"));
    assert_eq!(s.app.handlers.runs("pay"), 0);

    s.app.proceed.notify_one();
    assert_eq!(first.await.unwrap().status, 201);
    let retry = send(&s.base, "/pay", Some("K2"), "{}").await;
    assert_eq!((retry.status, retry.replayed()), (201, false));
    assert_eq!(rows(&s).await, 2);
}

/// PostgreSQL: the second request with the key finds the key's row locked by the first
/// request's open transaction and answers 409 with `Retry-After` after a short lock wait
/// ([`CLAIM_LOCK_TIMEOUT`](idem_idempotency::store::sql::CLAIM_LOCK_TIMEOUT)), without
/// touching it; another key is not held up. After the first commits, a retry replays.
async fn postgres_is_409_with_retry_after<DB: AppDb + SqlBackend>(store: Store<DB>) {
    let s = setup(store, Duration::from_secs(30)).await;
    let first = tokio::spawn({
        let base = s.base.clone();
        async move { send(&base, "/slow", Some("K"), "{}").await }
    });
    s.app.handlers.hang_started.notified().await;

    let started = std::time::Instant::now();
    let second = send(&s.base, "/slow", Some("K"), "{}").await;
    assert_eq!(second.status, 409, "{second:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "it did not wait"
    );
    assert_eq!(second.problem(), Some("idempotency-key-in-use"));
    assert_eq!(
        second.header("content-type"),
        Some("application/problem+json")
    );
    let retry_after: u64 = second.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=5).contains(&retry_after), "{second:?}");
    let other = send(&s.base, "/pay", Some("K2"), "{}").await;
    assert_eq!(other.status, 201, "another key runs meanwhile: {other:?}");

    s.app.proceed.notify_one();
    let first = first.await.unwrap();
    assert_eq!((first.status, &first.body), (201, &json!({"id": "slow_1"})));
    let replay = send(&s.base, "/slow", Some("K"), "{}").await;
    assert_eq!(
        (replay.status, &replay.body),
        (201, &json!({"id": "slow_1"}))
    );
    assert!(replay.replayed());
    assert_eq!(s.app.handlers.runs("slow"), 1);
    assert_eq!(rows(&s).await, 2, "slow_1 and K2's payment");
}

/// PostgreSQL: the claim's `lock_timeout` does not reach the handler, whose statements run with
/// the session's own (0, no limit, on the test server); the transaction may stay idle for at
/// most the lease.
async fn the_handler_runs_with_its_own_lock_timeout_and_an_idle_limit_of_the_lease(
    store: Store<Postgres>,
) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = {
        let seen = Arc::clone(&seen);
        move |tx: Tx<Postgres>| {
            let seen = Arc::clone(&seen);
            async move {
                let mut tx = tx.lock().await.unwrap();
                let settings: (String, String) = sqlx::query_as(
                    "SELECT current_setting('lock_timeout'), \
                     current_setting('idle_in_transaction_session_timeout')",
                )
                .fetch_one(&mut *tx)
                .await
                .unwrap();
                seen.lock().unwrap().push(settings);
                StatusCode::CREATED
            }
        }
    };
    let ns = unique_prefix();
    let router = Router::new().route("/settings", post(handler)).layer(
        IdempotencyLayer::transactional(SqlStore::new(store))
            .lease(Ttl::new(Duration::from_secs(30)).unwrap())
            .scope(move |_| idem_idempotency::Principal::new(ns.as_str()).ok()),
    );
    let base = serve(router).await;
    assert_eq!(send(&base, "/settings", Some("K"), "{}").await.status, 201);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![("0".to_owned(), "30s".to_owned())],
        "(lock_timeout, idle_in_transaction_session_timeout) in the handler"
    );
}

/// PostgreSQL: the process dies mid-request without closing its connection (a crashed host, a
/// network partition; here the request's future is forgotten with `mem::forget`, so nothing
/// rolls back): a retry gets 409 while the transaction stays open; once it has been idle for the
/// lease (1 s, on PostgreSQL's own clock), PostgreSQL ends the session, rolls it back, and a
/// retry runs.
async fn a_dead_process_blocks_the_key_until_its_idle_transaction_is_ended(store: Store<Postgres>) {
    let s = setup(store, Duration::from_secs(1)).await;
    let request = Request::post("/hang")
        .header("authorization", "Bearer alice")
        .header("idempotency-key", "K")
        .body(axum::body::Body::from("{}"))
        .unwrap();
    let mut dying = Box::pin(s.router.clone().oneshot(request));
    tokio::select! {
        _ = &mut dying => panic!("the first run of /hang never ends"),
        () = s.app.handlers.hang_started.notified() => {}
    }
    std::mem::forget(dying);

    let before = send(&s.base, "/hang", Some("K"), "{}").await;
    assert_eq!(before.status, 409, "{before:?}");
    assert_eq!(before.problem(), Some("idempotency-key-in-use"));

    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = send(&s.base, "/hang", Some("K"), "{}").await;
    assert_eq!((after.status, &after.body), (201, &json!({"id": "hang_2"})));
    assert_eq!(rows(&s).await, 1, "only the retry's write is committed");
}

/// MySQL and MariaDB count lock waits in whole seconds: the second request with the key waits
/// [`MYSQL_CLAIM_LOCK_WAIT`](idem_idempotency::store::sql::MYSQL_CLAIM_LOCK_WAIT) (1 s) for the
/// row the first request's open transaction holds, then answers 409 with `Retry-After`, without
/// touching it; another key is not held up. After the first commits, a retry replays.
async fn mysql_is_409_with_retry_after_a_one_second_lock_wait<DB: AppDb + SqlBackend>(
    store: Store<DB>,
) {
    let s = setup(store, Duration::from_secs(30)).await;
    let first = tokio::spawn({
        let base = s.base.clone();
        async move { send(&base, "/slow", Some("K"), "{}").await }
    });
    s.app.handlers.hang_started.notified().await;

    let started = std::time::Instant::now();
    let second = send(&s.base, "/slow", Some("K"), "{}").await;
    let waited = started.elapsed();
    assert_eq!(second.status, 409, "{second:?}");
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(4)).contains(&waited),
        "it waited the one-second lock wait, not more: {waited:?}"
    );
    assert_eq!(second.problem(), Some("idempotency-key-in-use"));
    let retry_after: u64 = second.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=5).contains(&retry_after), "{second:?}");
    let other = send(&s.base, "/pay", Some("K2"), "{}").await;
    assert_eq!(other.status, 201, "another key runs meanwhile: {other:?}");

    s.app.proceed.notify_one();
    let first = first.await.unwrap();
    assert_eq!((first.status, &first.body), (201, &json!({"id": "slow_1"})));
    let replay = send(&s.base, "/slow", Some("K"), "{}").await;
    assert_eq!(
        (replay.status, &replay.body),
        (201, &json!({"id": "slow_1"}))
    );
    assert!(replay.replayed());
    assert_eq!(s.app.handlers.runs("slow"), 1);
    assert_eq!(rows(&s).await, 2, "slow_1 and K2's payment");
}

/// MySQL: the claim's one-second lock wait is set for its statements only: the handler runs
/// with the session's own (7 s here, as the application's pool set it), and so does the pooled
/// connection afterwards, after a claim that succeeded and after one that found the key taken.
async fn the_handler_and_the_pool_keep_the_sessions_own_lock_wait() {
    use idem_sql::sqlx::mysql::MySqlPoolOptions;
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .after_connect(|conn, _| {
            Box::pin(async move {
                sqlx::query("SET SESSION innodb_lock_wait_timeout = 7")
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect(&idem_testkit::mysql_url().await)
        .await
        .unwrap();
    let store = idem_sql::MySqlStore::from_pool(pool);
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler = {
        let seen = Arc::clone(&seen);
        move |tx: Tx<MySql>| {
            let seen = Arc::clone(&seen);
            async move {
                let mut tx = tx.lock().await.unwrap();
                let wait: i64 =
                    sqlx::query_scalar("SELECT CAST(@@SESSION.innodb_lock_wait_timeout AS SIGNED)")
                        .fetch_one(&mut *tx)
                        .await
                        .unwrap();
                seen.lock().unwrap().push(wait);
                StatusCode::CREATED
            }
        }
    };
    let ns = unique_prefix();
    let router = Router::new().route("/settings", post(handler)).layer(
        IdempotencyLayer::transactional(SqlStore::new(store.clone()))
            .scope(move |_| idem_idempotency::Principal::new(ns.as_str()).ok()),
    );
    let base = serve(router).await;
    assert_eq!(send(&base, "/settings", Some("K"), "{}").await.status, 201);
    assert_eq!(*seen.lock().unwrap(), [7], "the handler's lock wait");
    let replay = send(&base, "/settings", Some("K"), "{}").await;
    assert!(replay.replayed(), "{replay:?}");
    let after: i64 =
        sqlx::query_scalar("SELECT CAST(@@SESSION.innodb_lock_wait_timeout AS SIGNED)")
            .fetch_one(store.pool())
            .await
            .unwrap();
    assert_eq!(
        after, 7,
        "the pooled connection's lock wait after a claim and a replay"
    );
}

/// MySQL has no idle-in-transaction timeout: a process that dies mid-request without closing
/// its connection (a crashed host, a network partition; here the request's future is forgotten
/// with `mem::forget`, so nothing rolls back) holds the key: every retry gets 409, also past the
/// lease, until the server ends its session (here `KILL CONNECTION`, as `wait_timeout` or an
/// operator would), which rolls it back; then a retry runs. On a database of its own, so that
/// the only open transaction in it is the dead one's.
async fn a_dead_process_holds_the_key_until_its_session_ends() {
    let store =
        idem_testkit::outbox::app_store::<MySql>(&idem_testkit::mysql_database().await).await;
    let s = setup(store, Duration::from_secs(1)).await;
    let request = Request::post("/hang")
        .header("authorization", "Bearer alice")
        .header("idempotency-key", "K")
        .body(axum::body::Body::from("{}"))
        .unwrap();
    let mut dying = Box::pin(s.router.clone().oneshot(request));
    tokio::select! {
        _ = &mut dying => panic!("the first run of /hang never ends"),
        () = s.app.handlers.hang_started.notified() => {}
    }
    std::mem::forget(dying);

    let before = send(&s.base, "/hang", Some("K"), "{}").await;
    assert_eq!(before.status, 409, "{before:?}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let past_the_lease = send(&s.base, "/hang", Some("K"), "{}").await;
    assert_eq!(past_the_lease.status, 409, "{past_the_lease:?}");

    let held: Vec<u64> = sqlx::query_scalar(
        "SELECT t.trx_mysql_thread_id FROM information_schema.INNODB_TRX t \
         JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
         WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id <> CONNECTION_ID()",
    )
    .fetch_all(s.store.pool())
    .await
    .unwrap();
    assert_eq!(held.len(), 1, "the dead request's transaction: {held:?}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("KILL CONNECTION {}", held[0])))
        .execute(s.store.pool())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after = loop {
        let answer = send(&s.base, "/hang", Some("K"), "{}").await;
        if answer.status != 409 || std::time::Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!((after.status, &after.body), (201, &json!({"id": "hang_2"})));
    assert_eq!(rows(&s).await, 1, "only the retry's write is committed");
}
