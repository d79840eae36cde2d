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

const APP_SECRET: &str = "whsec_YmVuY2ggYXBwIHNlY3JldA==";

/// A running `idem serve`; SIGTERM on drop.
pub(crate) struct Serve {
    child: Child,
    /// Its webhook URL for source `stripe`.
    pub(crate) url: String,
}

impl Serve {
    /// Starts it on `database_url`, with a route to `app` when given, and waits until it answers.
    pub(crate) async fn start(
        database_url: &str,
        app: Option<&App>,
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
                "[[destination]]\nname = \"app\"\nurl = \"{}\"\n\
                 signing_secret_env = \"APP_SECRET\"\nconcurrency = 64\n\
                 [[route]]\nsource = \"stripe\"\ndestination = \"app\"\n",
                app.url()
            ));
        }
        let path = dir.join(format!("bench-{port}.toml"));
        std::fs::write(&path, config).expect("write the configuration");
        let child = Command::new(env!("CARGO_BIN_EXE_idem"))
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
        };
        let client = reqwest::Client::new();
        let health = format!("http://127.0.0.1:{port}/healthz");
        for _ in 0..600 {
            if client.get(&health).send().await.is_ok() {
                return serve;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("idem serve did not start");
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
        let server = OwnRuntime::serve("/events", move || async move {
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
