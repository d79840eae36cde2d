//! `idem serve` as a child process (the release binary this bench was built with), and the
//! local application it forwards to: a server on a runtime of its own that answers 200 at once
//! and notes when each event arrived.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;

use crate::load::SECRET;
use crate::own_runtime::OwnRuntime;

/// The secret the application's requests are signed with (`signing_secret_env`).
pub(crate) const APP_SECRET: &str = "whsec_YmVuY2ggYXBwIHNlY3JldA==";
/// The name of the application's server threads.
pub(crate) const APP_THREADS: &str = "bench-app";
/// The destination's name in the gateway's configuration: part of each `webhook-id`.
pub(crate) const DESTINATION: &str = "app";

/// A running `idem serve`; SIGTERM on drop.
pub(crate) struct Serve {
    child: Child,
    /// Its webhook URL for source `stripe`.
    pub(crate) url: String,
    /// The name of its PostgreSQL database; `None` on SQLite.
    database: Option<String>,
}

impl Serve {
    /// Starts the binary under test (see [`idem_binary`]) on `database_url`, with a route to
    /// `app` when given (with `filter` when given), and waits until it answers.
    pub(crate) async fn start(
        database_url: &str,
        app: Option<&App>,
        filter: Option<&str>,
        dir: &std::path::Path,
    ) -> Self {
        Self::start_binary(&idem_binary(), database_url, app, filter, dir).await
    }

    /// As [`Serve::start`], running the `idem` binary at `binary`.
    pub(crate) async fn start_binary(
        binary: &std::ffi::OsStr,
        database_url: &str,
        app: Option<&App>,
        filter: Option<&str>,
        dir: &std::path::Path,
    ) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut config = format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase_url = \"{database_url}\"\n\
             [[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecrets_env = [\"BENCH_SECRET\"]\n"
        );
        if let Some(app) = app {
            config.push_str(&format!(
                "[[destination]]\nname = \"{DESTINATION}\"\nurl = \"{}\"\n\
                 signing_secret_env = \"APP_SECRET\"\nconcurrency = 64\n\
                 [[route]]\nsource = \"stripe\"\ndestination = \"{DESTINATION}\"\n",
                app.url()
            ));
            if let Some(filter) = filter {
                config.push_str(&format!("filter = {filter:?}\n"));
            }
        }
        let path = dir.join(format!("bench-{port}.toml"));
        std::fs::write(&path, config).expect("write the configuration");
        let child = Command::new(binary)
            .args(["--config", path.to_str().expect("UTF-8 path"), "serve"])
            .env("BENCH_SECRET", SECRET)
            .env("APP_SECRET", APP_SECRET)
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn idem serve");
        let serve = Self {
            child,
            url: format!("http://127.0.0.1:{port}/webhooks/stripe"),
            database: (!database_url.starts_with("sqlite:")).then(|| {
                database_url
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            }),
        };
        let client = idem_testkit::http_client();
        let health = format!("http://127.0.0.1:{port}/healthz");
        for _ in 0..600 {
            if client.get(&health).send().await.is_ok() {
                return serve;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("idem serve did not start");
    }

    /// What its `/metrics` says of how deliveries were claimed (`idem_dispatch_claims_total` by
    /// path, cumulative over the process's life) and of the group commits (requests per commit): where forwarding's work went.
    pub(crate) async fn dispatch_summary(&self) -> String {
        let url = self.url.replace("/webhooks/stripe", "/metrics");
        let Ok(answer) = idem_testkit::http_client().get(&url).send().await else {
            return "metrics unavailable".into();
        };
        let text = answer.text().await.unwrap_or_default();
        let value = |prefix: &str| -> f64 {
            text.lines()
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                // Not `sum`: an empty f64 sum is -0, printed "-0".
                .fold(0.0, |total, v| total + v)
        };
        let handoff = value("idem_dispatch_claims_total{destination=\"app\",path=\"handoff\"}");
        let successor = value("idem_dispatch_claims_total{destination=\"app\",path=\"successor\"}");
        let due = value("idem_dispatch_claims_total{destination=\"app\",path=\"due\"}");
        let commits = value("idem_ingest_batch_size_count");
        let requests = value("idem_ingest_batch_size_sum");
        format!(
            "claims: {handoff:.0} handed off by ingest, {successor:.0} by the end of their entity's previous attempt, {due:.0} by due queries; {commits:.0} group commits of {:.1} requests on average",
            requests / commits.max(1.0)
        )
    }

    /// Its PostgreSQL database's name; `None` on SQLite.
    pub(crate) fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts its peak resident set (VmHWM) again from its current size (Linux's
    /// `/proc/{pid}/clear_refs`, value 5), so that a step's peak is its own.
    pub(crate) fn reset_peak_rss(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5");
    }

    /// Its peak resident set so far (VmHWM), in KiB.
    pub(crate) fn peak_rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// The application: `POST /events` answered 200 at once, on a runtime of its own.
pub(crate) struct App {
    server: OwnRuntime,
    arrived: Arc<Mutex<HashMap<String, Instant>>>,
}

impl App {
    /// Starts it.
    pub(crate) fn start() -> Self {
        let arrived: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let record = Arc::clone(&arrived);
        let server = OwnRuntime::serve(APP_THREADS, "/events", move || async move {
            axum::Router::new().route(
                "/events",
                axum::routing::post(move |headers: HeaderMap| {
                    let now = Instant::now();
                    if let Some(id) = headers.get("idem-event-id").and_then(|v| v.to_str().ok()) {
                        record
                            .lock()
                            .expect("not poisoned")
                            .entry(id.to_owned())
                            .or_insert(now);
                    }
                    async { "ok" }
                }),
            )
        });
        Self { server, arrived }
    }

    /// Its URL.
    pub(crate) fn url(&self) -> &str {
        &self.server.url
    }

    /// When each event arrived first, by event id.
    pub(crate) fn arrived(&self) -> HashMap<String, Instant> {
        self.arrived.lock().expect("not poisoned").clone()
    }
}

/// The `idem` binary under test: `IDEM_BENCH_IDEM` when set (to compare another build's binary
/// with this one in back-to-back runs of the same harness), else the one cargo built with the
/// bench.
pub(crate) fn idem_binary() -> std::ffi::OsString {
    std::env::var_os("IDEM_BENCH_IDEM").unwrap_or_else(|| env!("CARGO_BIN_EXE_idem").into())
}
