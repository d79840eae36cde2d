//! `idem serve` as a child process the test starts, kills (`kill -9` or SIGTERM) and starts
//! again on the same port and database.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::IDEM;

/// The secrets the fault suite's configurations read.
pub(crate) const STRIPE_SECRET: &str = "whsec_faults";
const APP_SECRET: &str = "whsec_aGVsbG8=";

/// A free local port (bound, then released for the gateway to bind).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free local port")
        .port()
}

/// Writes `idem.toml` in `dir`: source `stripe`, destination `app` at `app`, a drop-stale
/// route, retries every 500 ms for 15 s, SQLite in `dir/data` unless `top` sets `database_url`; `top` holds more top-level keys.
pub(crate) fn write_config(dir: &Path, port: u16, app: std::net::SocketAddr, top: &str) -> PathBuf {
    let path = dir.join("idem.toml");
    let database = if top.contains("database_url") {
        String::new()
    } else {
        format!("database_url = \"sqlite://{}/data/idem.db\"", dir.display())
    };
    // 30 retries 500 ms apart: an application refusing for a few seconds is no dead letter.
    let schedule = vec!["\"500ms\""; 30].join(", ");
    let text = format!(
        r#"listen = "127.0.0.1:{port}"
{database}
{top}

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["FAULTS_STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://{app}/events"
retry_schedule = [{schedule}]
signing_secret_env = "FAULTS_APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
"#
    );
    std::fs::write(&path, text).expect("write the configuration");
    path
}

/// A running `idem serve`.
pub(crate) struct ServeProcess {
    child: Child,
    /// `http://127.0.0.1:{port}`.
    pub(crate) base: String,
}

impl ServeProcess {
    /// Starts `idem --config {config} serve` listening on `port`, without waiting.
    pub(crate) fn spawn(config: &Path, port: u16) -> Self {
        Self::spawn_with(config, port, "error", Stdio::null())
    }

    /// As [`spawn`](Self::spawn), logging at `filter` (`RUST_LOG`) to `log`.
    fn spawn_with(config: &Path, port: u16, filter: &str, log: Stdio) -> Self {
        let child = Command::new(IDEM)
            .args(["--config", config.to_str().expect("a UTF-8 path"), "serve"])
            .env("FAULTS_STRIPE_SECRET", STRIPE_SECRET)
            .env("FAULTS_APP_SECRET", APP_SECRET)
            .env("RUST_LOG", filter)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start idem serve");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Starts it and waits until `/healthz` answers (at most 30 s).
    pub(crate) async fn start(config: &Path, port: u16) -> Self {
        Self::wait_healthy(Self::spawn(config, port)).await
    }

    /// As [`start`](Self::start), its log (at `filter`) written to the file `log`.
    pub(crate) async fn start_logged(config: &Path, port: u16, filter: &str, log: &Path) -> Self {
        let file = std::fs::File::create(log).expect("create the log file");
        Self::wait_healthy(Self::spawn_with(config, port, filter, Stdio::from(file))).await
    }

    /// The process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    async fn wait_healthy(mut process: Self) -> Self {
        let client = idem_testkit::http_client();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(answer) = client.get(format!("{}/healthz", process.base)).send().await
                && answer.status() == 200
            {
                return process;
            }
            if let Some(status) = process.child.try_wait().expect("poll the child") {
                panic!("idem serve exited at start with {status}");
            }
            assert!(
                Instant::now() < deadline,
                "idem serve did not start in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// `kill -9`, then waits for the exit.
    pub(crate) fn kill9(mut self) {
        self.child.kill().expect("kill -9 idem serve");
        self.child.wait().expect("wait for idem serve");
    }

    /// Sends SIGTERM.
    pub(crate) fn sigterm(&self) {
        let sent = Command::new("kill")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(sent.success(), "SIGTERM not sent");
    }

    /// Waits for the exit at most `limit`; the status, or None (and the process killed) when
    /// it did not exit.
    pub(crate) async fn wait_exit(mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("poll the child") {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
