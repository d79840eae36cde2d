//! Test support: a gateway on a fresh store with a real local downstream, signed senders, and a
//! capture of log lines.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idem_core::{Clock, SystemClock};
use idem_gateway::{Config, Gateway, GatewayDb, Server, Stats};
use idem_http::verify::stripe;
use idem_sql::{MySqlStore, PgStore, SqliteStore, Store};
use idem_testkit::AppDb;
use tempfile::TempDir;

/// The Stripe endpoint secret of the test source `stripe`.
pub(crate) const STRIPE_SECRET: &str = "whsec_test_stripe";
/// The GitHub secret of the test source `github`.
pub(crate) const GITHUB_SECRET: &str = "gh-secret";
/// The Standard Webhooks secrets of the test source `sw` (old and new, rotating).
pub(crate) const SW_OLD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The new Standard Webhooks secret.
pub(crate) const SW_NEW: &str = "whsec_QWxsIHlvdXIgYmFzZSBhcmUgYmVsb25nIHRvIHVz";
/// The secret idem signs forwarded requests with.
pub(crate) const APP_SECRET: &str = "whsec_c2VjcmV0LWZvci10aGUtYXBw";

/// The configuration every scenario starts from: sources `stripe`, `github`, `sw` (standard
/// webhooks, old secret) and `sw-new` (new secret only), destination `app` at `{downstream}`
/// with a millisecond retry schedule; routes stripe→app (drop-stale), github→app, sw→app.
pub(crate) fn config_text(downstream: SocketAddr, schedule: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[source]]
name = "github"
kind = "github"
secrets_env = ["GITHUB_SECRET"]

[[source]]
name = "sw"
kind = "standard-webhooks"
secrets_env = ["SW_OLD"]

[[source]]
name = "sw-new"
kind = "standard-webhooks"
secrets_env = ["SW_NEW"]

[[destination]]
name = "app"
url = "http://{downstream}/events"
timeout = "2s"
retry_schedule = {schedule}
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "app"

[[route]]
source = "github"
destination = "app"
ordering = "none"

[[route]]
source = "sw"
destination = "app"
"#
    )
}

/// The environment the test configurations read their secrets from.
pub(crate) fn env(var: &str) -> Option<String> {
    let secrets = HashMap::from([
        ("STRIPE_SECRET", STRIPE_SECRET),
        ("GITHUB_SECRET", GITHUB_SECRET),
        ("SW_OLD", SW_OLD),
        ("SW_NEW", SW_NEW),
        ("APP_SECRET", APP_SECRET),
        ("ADMIN_TOKEN", "admin-token"),
    ]);
    secrets.get(var).map(|s| (*s).to_owned())
}

pub(crate) use idem_testkit::downstream::Downstream;
pub(crate) use idem_testkit::pg_database;

/// A gateway serving on a free port, and what it runs on.
pub(crate) struct Running<DB: GatewayDb> {
    pub gateway: Gateway<DB>,
    pub server: Server,
    pub url: String,
    pub client: reqwest::Client,
}

impl<DB: GatewayDb> Running<DB> {
    /// Starts `config` over `store`, migrated.
    pub(crate) async fn start(config: Config, store: Store<DB>) -> Self {
        let gateway = Gateway::new(config, store);
        gateway.migrate().await.expect("migrate");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = Server::start(gateway.clone(), listener)
            .await
            .expect("start");
        let url = format!("http://{}", server.local_addr());
        Self {
            gateway,
            server,
            url,
            client: idem_testkit::http_client(),
        }
    }

    /// POSTs `body` to `/webhooks/{source}` with `headers`.
    pub(crate) async fn post(
        &self,
        source: &str,
        headers: &[(&str, String)],
        body: &[u8],
    ) -> Answer {
        post(&self.client, &self.url, source, headers, body).await
    }

    /// POSTs a Stripe event signed now with the test secret.
    pub(crate) async fn post_stripe(&self, body: &[u8]) -> Answer {
        let signature = stripe::sign(STRIPE_SECRET, unix_now(), body);
        self.post("stripe", &[("stripe-signature", signature)], body)
            .await
    }

    /// POSTs a Stripe event signed at `at`: a gateway on a manual clock checks the signature's
    /// time against its own.
    pub(crate) async fn post_stripe_at(&self, at: idem_core::Timestamp, body: &[u8]) -> Answer {
        let signature = stripe::sign(STRIPE_SECRET, at.as_millis() / 1000, body);
        self.post("stripe", &[("stripe-signature", signature)], body)
            .await
    }

    /// POSTs `copies` copies of a Stripe event at once, each on its own task.
    pub(crate) async fn post_stripe_concurrently(&self, body: &[u8], copies: usize) -> Vec<Answer> {
        let signature = stripe::sign(STRIPE_SECRET, unix_now(), body);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..copies {
            let (client, url, body) = (self.client.clone(), self.url.clone(), body.to_vec());
            let headers = [("stripe-signature", signature.clone())];
            tasks.spawn(async move { post(&client, &url, "stripe", &headers, &body).await });
        }
        tasks.join_all().await
    }

    /// Waits (up to 10 s) until no delivery is pending or in flight.
    pub(crate) async fn settle(&self) -> Stats {
        settle(&self.gateway).await
    }
}

/// Waits (up to 10 s) until no delivery of `gateway` is pending or in flight.
pub(crate) async fn settle<DB: GatewayDb>(gateway: &Gateway<DB>) -> Stats {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = gateway.stats().await.expect("stats");
        let busy: u64 = stats
            .destinations
            .values()
            .map(|c| c.pending + c.in_flight)
            .sum();
        if busy == 0 {
            return stats;
        }
        assert!(
            Instant::now() < deadline,
            "deliveries did not settle: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The single number `sql` (a `SELECT COUNT(*) …`) returns on `gateway`'s database.
pub(crate) async fn count<DB: GatewayDb + AppDb>(gateway: &Gateway<DB>, sql: &'static str) -> i64 {
    idem_testkit::query_i64(gateway.store(), sql, vec![]).await[0]
}

/// What the gateway answered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub json: serde_json::Value,
}

impl Answer {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// POSTs to a gateway at `url`.
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    source: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> Answer {
    let mut request = client
        .post(format!("{url}/webhooks/{source}"))
        .body(body.to_vec());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.expect("gateway answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.unwrap();
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    Answer {
        status,
        headers,
        json,
    }
}

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A Stripe event body of `type` for `object` `id`, created at `created`.
pub(crate) fn stripe_event(
    event_id: &str,
    ty: &str,
    object: &str,
    id: &str,
    created: i64,
) -> Vec<u8> {
    format!(
        r#"{{"id":"{event_id}","object":"event","type":"{ty}","created":{created},"data":{{"object":{{"id":"{id}","object":"{object}"}}}}}}"#
    )
    .into_bytes()
}

/// A migrated-on-start SQLite store in a fresh temporary directory, with `clock`.
pub(crate) async fn sqlite(clock: Arc<dyn Clock>) -> (Option<TempDir>, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("idem.db").display());
    let store = SqliteStore::connect(&url).await.unwrap().with_clock(clock);
    (Some(dir), store)
}

/// A store on a fresh PostgreSQL database, with `clock`.
pub(crate) async fn postgres(clock: Arc<dyn Clock>) -> (Option<TempDir>, PgStore) {
    let store = PgStore::connect(&pg_database().await)
        .await
        .unwrap()
        .with_clock(clock);
    (None, store)
}

/// A store on a fresh MySQL (MariaDB) database of this test process
/// (`idem_testkit::mysql_database`, `IDEM_TEST_MYSQL_URL`), with `clock`.
pub(crate) async fn mysql(clock: Arc<dyn Clock>) -> (Option<TempDir>, MySqlStore) {
    let store = MySqlStore::connect(&idem_testkit::mysql_database().await)
        .await
        .unwrap()
        .with_clock(clock);
    (None, store)
}

/// The system clock, shared.
pub(crate) fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// Turns `async fn name<DB: GatewayDb>(store: Store<DB>)` into `name::sqlite`,
/// `name::postgres` and `name::mysql`, each on a fresh database with the system clock.
macro_rules! both_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                $crate::support::capture_logs();
                let (_dir, store) = $crate::support::sqlite($crate::support::system_clock()).await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                $crate::support::capture_logs();
                let (_dir, store) = $crate::support::postgres($crate::support::system_clock()).await;
                super::$name(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn mysql() {
                $crate::support::capture_logs();
                let (_dir, store) = $crate::support::mysql($crate::support::system_clock()).await;
                super::$name(store).await;
            }
        }
    )+};
}

/// Turns `async fn name<DB: GatewayDb>(url: String)` into `name::postgres` and `name::mysql`,
/// each on a fresh database that the test's gateway processes share (the stores several
/// processes can use: not SQLite's).
macro_rules! shared_stores {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                super::$name::<idem_sql::sqlx::Postgres>(crate::support::pg_database().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn mysql() {
                super::$name::<idem_sql::sqlx::MySql>(idem_testkit::mysql_database().await).await;
            }
        }
    )+};
}

static LOGS: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs (once per process) a subscriber that keeps every log line of level INFO and above.
pub(crate) fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // As `idem serve` does, the trace spans are left out: with traces off no subscriber
        // takes them.
        let filter = format!("info,{}=off", idem_gateway::traces::TARGET);
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(|| Capture)
            .try_init();
    });
}

/// The captured log lines of level ERROR that contain `needle`.
pub(crate) fn error_lines_with(needle: &str) -> Vec<String> {
    lines_with("ERROR", needle)
}

/// The captured log lines of `level` (`ERROR`, `WARN`, `INFO`) that contain `needle`.
pub(crate) fn lines_with(level: &str, needle: &str) -> Vec<String> {
    let logs = LOGS.lock().unwrap();
    String::from_utf8_lossy(&logs)
        .lines()
        .filter(|l| l.contains(level) && l.contains(needle))
        .map(str::to_owned)
        .collect()
}

/// Each entity's versions in arrival order at `downstream`, for Stripe events made by
/// [`stripe_event`]: the entity is `data.object.id`, the version `created` − `base`.
pub(crate) fn versions_by_created(
    downstream: &Downstream,
    base: i64,
) -> std::collections::BTreeMap<String, Vec<i64>> {
    let mut per_entity = std::collections::BTreeMap::<String, Vec<i64>>::new();
    for request in downstream.received() {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        per_entity
            .entry(body["data"]["object"]["id"].as_str().unwrap().to_owned())
            .or_default()
            .push(body["created"].as_i64().unwrap() - base);
    }
    per_entity
}

/// Each entity's versions in arrival order at `downstream`, read from event ids of the form
/// `evt_{entity}_{version}`.
pub(crate) fn versions_by_event_id(
    downstream: &Downstream,
) -> std::collections::BTreeMap<String, Vec<i64>> {
    let mut per_entity = std::collections::BTreeMap::<String, Vec<i64>>::new();
    for request in downstream.received() {
        let id = request.header("idem-event-id").unwrap();
        let (entity, version) = id.strip_prefix("evt_").unwrap().rsplit_once('_').unwrap();
        per_entity
            .entry(entity.to_owned())
            .or_default()
            .push(version.parse().unwrap());
    }
    per_entity
}
