//! The store matrix, a store that counts its calls, the test application and its server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use bytes::Bytes;
use http::request::Parts;
use idem_core::{Clock, FencingToken, ManualClock, RetentionPolicy, SystemClock, Timestamp, Ttl};
use idem_idempotency::store::BoxFuture;
use idem_idempotency::{
    Claim, Fingerprint, IdempotencyStore, Principal, RedisStore, Scope, SqlStore, StoreError,
    StoredResponse,
};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::Notify;

pub(crate) const REDIS_URL: &str = "redis://127.0.0.1:6379";

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
    MySql,
    Redis,
}

/// One test's store, behind a wrapper that counts calls, with a manual clock standing at the
/// real time.
pub(crate) struct Env {
    /// Put before every principal, as PostgreSQL's and MySQL's test databases are shared by the
    /// process.
    pub ns: String,
    pub clock: ManualClock,
    pub store: Arc<Counting>,
    _dir: Option<TempDir>,
}

impl Env {
    pub(crate) async fn new(kind: Kind) -> Self {
        let clock = ManualClock::new(SystemClock.now());
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let (inner, dir): (Arc<dyn IdempotencyStore>, _) = match kind {
            Kind::Sqlite => {
                let (dir, store) = idem_testkit::sqlite_store().await;
                (Arc::new(SqlStore::new(store.with_clock(shared))), Some(dir))
            }
            Kind::Postgres => {
                let store = idem_testkit::pg_store().await.with_clock(shared);
                (Arc::new(SqlStore::new(store)), None)
            }
            Kind::MySql => {
                let store = idem_testkit::mysql_store().await.with_clock(shared);
                (Arc::new(SqlStore::new(store)), None)
            }
            Kind::Redis => {
                // Test keys go away after ten minutes; the tests never flush the server.
                let ten_minutes =
                    RetentionPolicy::new(Duration::from_secs(600), Duration::ZERO).unwrap();
                let store = RedisStore::connect(REDIS_URL, unique_prefix())
                    .await
                    .expect("connect to Redis on 127.0.0.1:6379")
                    .retention(&ten_minutes)
                    .with_clock(shared);
                (Arc::new(store), None)
            }
        };
        Self {
            ns: unique_prefix(),
            clock,
            store: Arc::new(Counting {
                inner,
                calls: AtomicUsize::new(0),
            }),
            _dir: dir,
        }
    }

    /// The principal `name` of this test.
    pub(crate) fn principal(&self, name: &str) -> Principal {
        Principal::new(format!("{}/{name}", self.ns)).unwrap()
    }

    /// [`by_principal`], within this test's namespace.
    pub(crate) fn scope_fn(&self) -> impl Fn(&Parts) -> Option<Principal> + Send + Sync + 'static {
        let ns = self.ns.clone();
        move |parts| Principal::new(format!("{ns}/{}", by_principal(parts)?)).ok()
    }

    /// How many times the store was called (claim, complete, release).
    pub(crate) fn calls(&self) -> usize {
        self.store.calls.load(Ordering::SeqCst)
    }
}

/// A key prefix no other test run uses: process id, time and a counter.
pub(crate) fn unique_prefix() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "idem-test:{}:{nanos}:{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Turns `async fn name(env: Env)` into the tests `name::sqlite`, `name::postgres`,
/// `name::mysql` and `name::redis`.
macro_rules! all_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            use crate::support::{Env, Kind};

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(Env::new(Kind::Sqlite).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(Env::new(Kind::Postgres).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                super::$name(Env::new(Kind::MySql).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$name(Env::new(Kind::Redis).await).await;
            }
        }
    )+};
}
pub(crate) use all_stores;

/// A store that counts every call before passing it on.
#[derive(Debug)]
pub(crate) struct Counting {
    pub inner: Arc<dyn IdempotencyStore>,
    pub calls: AtomicUsize,
}

impl IdempotencyStore for Counting {
    fn claim<'a>(
        &'a self,
        scope: &'a Scope,
        fingerprint: &'a Fingerprint,
        lease: Ttl,
    ) -> BoxFuture<'a, Result<Claim, StoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.claim(scope, fingerprint, lease)
    }

    fn complete<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
        response: &'a StoredResponse,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.complete(scope, token, response)
    }

    fn release<'a>(
        &'a self,
        scope: &'a Scope,
        token: FencingToken,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.release(scope, token)
    }

    fn now(&self) -> Timestamp {
        self.inner.now()
    }
}

/// The principal: `Authorization: Bearer <name>` (the test's stand-in for authentication).
pub(crate) fn by_principal(parts: &Parts) -> Option<Principal> {
    let value = parts
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    Principal::new(value.strip_prefix("Bearer ")?).ok()
}

/// How many times each handler of the test app ran, and what it should do.
#[derive(Default)]
pub(crate) struct Handlers {
    runs: Mutex<HashMap<&'static str, usize>>,
    /// How long `POST /payments` sleeps.
    pub payment_delay: Mutex<Duration>,
    /// Notified when `POST /hang` starts its first run, which then never ends.
    pub hang_started: Notify,
}

impl Handlers {
    pub(crate) fn runs(&self, handler: &str) -> usize {
        self.runs.lock().unwrap().get(handler).copied().unwrap_or(0)
    }

    /// Counts a run of `handler`; returns its number, from 1.
    pub(crate) fn run(&self, handler: &'static str) -> usize {
        let mut runs = self.runs.lock().unwrap();
        let n = runs.entry(handler).or_default();
        *n += 1;
        *n
    }
}

fn amount(body: &Bytes) -> Value {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("amt").or_else(|| v.get("amount")).cloned())
        .unwrap_or(Value::Null)
}

/// The test application, without the layer:
/// - `POST /payments`: sleeps `payment_delay`, answers 201 `{"id":"pay_N","amount":…}`;
/// - `POST /refunds`: 201 `{"id":"re_N"}`;
/// - `POST /transfers`: 201 `{"id":"tN"}`;
/// - `POST /flaky`: 500 on its first run, then 201 `{"id":"f2"}`…;
/// - `POST /panics`: panics on its first run, then 201;
/// - `POST /hang`: on its first run notifies `hang_started` and never ends; then 201;
/// - `POST /status/{code}`: answers `code` with `{"run":N}`.
pub(crate) fn app(handlers: Arc<Handlers>) -> Router {
    Router::new()
        .route(
            "/payments",
            post(|State(h): State<Arc<Handlers>>, body: Bytes| async move {
                let n = h.run("payments");
                let delay = *h.payment_delay.lock().unwrap();
                tokio::time::sleep(delay).await;
                (
                    StatusCode::CREATED,
                    [("location", format!("/payments/pay_{n}"))],
                    axum::Json(json!({"id": format!("pay_{n}"), "amount": amount(&body)})),
                )
            }),
        )
        .route(
            "/refunds",
            post(|State(h): State<Arc<Handlers>>| async move {
                let n = h.run("refunds");
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"id": format!("re_{n}")})),
                )
            }),
        )
        .route(
            "/transfers",
            post(|State(h): State<Arc<Handlers>>| async move {
                let n = h.run("transfers");
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"id": format!("t{n}")})),
                )
            }),
        )
        .route(
            "/flaky",
            post(|State(h): State<Arc<Handlers>>| async move {
                match h.run("flaky") {
                    1 => (StatusCode::INTERNAL_SERVER_ERROR, "database down").into_response(),
                    n => (
                        StatusCode::CREATED,
                        axum::Json(json!({"id": format!("f{n}")})),
                    )
                        .into_response(),
                }
            }),
        )
        .route(
            "/panics",
            post(|State(h): State<Arc<Handlers>>| async move {
                let n = h.run("panics");
                assert!(n > 1, "the handler panics on its first run");
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"id": format!("x{n}")})),
                )
            }),
        )
        .route(
            "/hang",
            post(|State(h): State<Arc<Handlers>>| async move {
                let n = h.run("hang");
                if n == 1 {
                    h.hang_started.notify_one();
                    std::future::pending::<()>().await;
                }
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"id": format!("h{n}")})),
                )
            }),
        )
        .route(
            "/status/{code}",
            post(
                |State(h): State<Arc<Handlers>>, Path(code): Path<u16>| async move {
                    let n = h.run("status");
                    (
                        StatusCode::from_u16(code).unwrap(),
                        axum::Json(json!({"run": n})),
                    )
                },
            ),
        )
        .with_state(handlers)
}

/// Serves `router` on 127.0.0.1 (a free port); returns its base URL. The server ends with the
/// test's runtime.
pub(crate) async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

/// A response as the tests compare them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Answer {
    pub(crate) fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The problem `type`'s last segment.
    pub(crate) fn problem(&self) -> Option<&str> {
        self.body["type"].as_str()?.rsplit('/').next()
    }
}

/// Sends `POST {base}{path}` as `user` (None: no Authorization) with `key` (None: no header) and
/// `body`.
pub(crate) async fn send_as(
    base: &str,
    path: &str,
    user: Option<&str>,
    key: Option<&str>,
    body: &str,
) -> Answer {
    let mut request = idem_testkit::http_client()
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(user) = user {
        request = request.header("authorization", format!("Bearer {user}"));
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.expect("send the request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("read the body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer {
        status,
        headers,
        body,
    }
}

/// As [`send_as`], as user `alice`.
pub(crate) async fn send(base: &str, path: &str, key: Option<&str>, body: &str) -> Answer {
    send_as(base, path, Some("alice"), key, body).await
}
