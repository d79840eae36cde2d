//! `idem demo`: the whole pipeline on real payloads, with no set-up. A gateway on SQLite in a
//! temporary directory, a built-in application behind it, and a sender that delivers every
//! event of `testdata/` three times (two copies at once), one Stripe object's events in reverse
//! order, and one delivery with a bad signature; the application fails the first attempt of
//! some events. Then it checks that every unique, non-stale event was applied exactly once.

mod downstream;
mod sender;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use idem_sql::SqliteStore;

use crate::{Config, Error, Gateway, Server};
use downstream::{Downstream, fails_first_attempt};
use sender::{Plan, Tally};

const STRIPE_SECRET: &str = "whsec_demo_stripe_secret";
const GITHUB_SECRET: &str = "demo-github-secret";
/// `whsec_` and the base64 of "idem demo application secret".
const APP_SECRET: &str = "whsec_aWRlbSBkZW1vIGFwcGxpY2F0aW9uIHNlY3JldA==";
/// The newest event of every Stripe object in the corpus, whatever the delivery order.
const EXPECTED_FINAL_STATE: &str =
    include_str!("../../../../testdata/stripe-events/expected_final_state.json");
/// How long the demo waits for the last deliveries.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);

/// What the demo counted, and what it found wrong.
#[derive(Debug, Clone, Default)]
pub struct DemoReport {
    /// Requests sent to the gateway.
    pub received: u64,
    /// Answered 200 `accepted`.
    pub accepted: u64,
    /// Answered 200 `duplicate`.
    pub duplicates: u64,
    /// Answered 4xx.
    pub rejected: u64,
    /// Deliveries judged stale at ingest (never sent).
    pub stale: u64,
    /// Deliveries the application answered 2xx.
    pub delivered: u64,
    /// Attempts that failed and were retried.
    pub retried: u64,
    /// Dead-lettered deliveries.
    pub dead: u64,
    /// Unique events sent (Stripe and GitHub).
    pub unique_events: u64,
    /// How long the run took.
    pub elapsed: Duration,
    /// Every check that failed; empty when the demo passed.
    pub problems: Vec<String>,
}

impl DemoReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }

    /// The counts as a table, one row per count.
    pub fn table(&self) -> String {
        let rows = [
            (
                "received",
                self.received,
                "requests sent to POST /webhooks/{source}",
            ),
            (
                "accepted",
                self.accepted,
                "new events, stored durably before the 200",
            ),
            (
                "duplicates",
                self.duplicates,
                "redeliveries answered 200 duplicate",
            ),
            (
                "rejected",
                self.rejected,
                "bad signature: 400, nothing stored",
            ),
            (
                "stale",
                self.stale,
                "older than their object's newest: acknowledged, not sent",
            ),
            ("delivered", self.delivered, "forwarded and answered 2xx"),
            (
                "retried",
                self.retried,
                "attempts the application failed, tried again",
            ),
            ("dead", self.dead, "dead letters"),
        ];
        let mut out = String::new();
        let _ = writeln!(out, "{:<12} {:>7}  meaning", "", "count");
        for (name, count, meaning) in rows {
            let _ = writeln!(out, "{name:<12} {count:>7}  {meaning}");
        }
        out
    }
}

/// Runs the demo; see the module documentation.
///
/// # Errors
/// [`Error`] when the temporary database, the gateway or the application cannot be set up.
/// Failed checks are not errors: they are listed in [`DemoReport::problems`].
pub async fn run() -> Result<DemoReport, Error> {
    let demo = Demo::run(None).await?;
    let report = demo.report().await?;
    demo.stop().await?;
    Ok(report)
}

/// A new admin token for a demo's console: 16 random bytes, hex. Made for one run, it is
/// valid only while that run's gateway serves.
pub fn new_admin_token() -> String {
    use rand::Rng;
    hex::encode(rand::rng().random::<[u8; 16]>())
}

/// A demo whose gateway and application keep running after the events were sent and
/// delivered, until [`stop`](Self::stop): what `idem demo --console` leaves for a newcomer to
/// look at in the console.
#[derive(Debug)]
pub struct Demo {
    started: Instant,
    /// The temporary directory of the database, deleted when the demo is dropped.
    _dir: tempfile::TempDir,
    app: Downstream,
    gateway: Gateway<idem_sql::sqlx::Sqlite>,
    server: Server,
    plan: Plan,
    tally: Tally,
    settled: bool,
}

impl Demo {
    /// Starts the gateway (on 127.0.0.1, a free port) and the application, sends the plan and
    /// waits for the deliveries to settle. With `admin_token`, the gateway serves `/admin` and
    /// the console with that token.
    ///
    /// # Errors
    /// [`Error`] when the temporary database, the gateway or the application cannot be set up.
    pub async fn run(admin_token: Option<&str>) -> Result<Self, Error> {
        let started = Instant::now();
        let dir = tempfile::tempdir().map_err(|source| Error::Io {
            what: "creating a temporary directory".into(),
            source,
        })?;
        let app = Downstream::start(APP_SECRET).await?;
        let mut text = config_text(app.addr);
        if admin_token.is_some() {
            text = format!("admin_token_env = \"ADMIN_TOKEN\"\n{text}");
        }
        let config = Config::from_toml(&text, &|var| {
            Some(
                match var {
                    "STRIPE_SECRET" => STRIPE_SECRET,
                    "GITHUB_SECRET" => GITHUB_SECRET,
                    "APP_SECRET" => APP_SECRET,
                    "ADMIN_TOKEN" => admin_token?,
                    _ => return None,
                }
                .to_owned(),
            )
        })?;
        let url = format!("sqlite://{}", dir.path().join("idem.db").display());
        let store = SqliteStore::connect(&url).await?;
        let gateway = Gateway::new(config, store);
        gateway.migrate().await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|source| Error::Io {
                what: "binding the gateway".into(),
                source,
            })?;
        let server = Server::start(gateway.clone(), listener).await?;

        let plan = Plan::from_testdata(STRIPE_SECRET, GITHUB_SECRET);
        let tally = sender::send(&format!("http://{}", server.local_addr()), &plan).await;
        let settled = settle(&gateway).await?;
        Ok(Self {
            started,
            _dir: dir,
            app,
            gateway,
            server,
            plan,
            tally,
            settled,
        })
    }

    /// The gateway's base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://{}", self.server.local_addr())
    }

    /// The demo's gateway.
    pub fn gateway(&self) -> &Gateway<idem_sql::sqlx::Sqlite> {
        &self.gateway
    }

    /// What the run counted, checked against what must have happened.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read.
    pub async fn report(&self) -> Result<DemoReport, Error> {
        let stats = self.gateway.stats().await?;
        let counts = stats.destinations.get("app").copied().unwrap_or_default();
        let tally = &self.tally;
        let mut report = DemoReport {
            received: tally.sent,
            accepted: tally.accepted,
            duplicates: tally.duplicates,
            rejected: tally.rejected,
            stale: counts.stale,
            delivered: counts.delivered,
            retried: stats.failed_attempts,
            dead: counts.dead,
            unique_events: self.plan.unique_events(),
            elapsed: self.started.elapsed(),
            problems: Vec::new(),
        };
        if !self.settled {
            report
                .problems
                .push(format!("deliveries still pending after {SETTLE_TIMEOUT:?}"));
        }
        let seen = self.app.seen.lock().unwrap_or_else(|e| e.into_inner());
        check(&mut report, &self.plan, tally, &seen);
        Ok(report)
    }

    /// Stops the gateway (draining it) and the application.
    ///
    /// # Errors
    /// As [`Server::shutdown`].
    pub async fn stop(self) -> Result<(), Error> {
        let stopped = self.server.shutdown().await;
        self.app.stop();
        stopped
    }
}

fn config_text(app: std::net::SocketAddr) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "50ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[source]]
name = "github"
kind = "github"
secrets_env = ["GITHUB_SECRET"]

[[destination]]
name = "app"
url = "http://{app}/events"
timeout = "5s"
retry_schedule = ["50ms", "100ms", "200ms", "400ms"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
ordering = "drop-stale"

[[route]]
source = "github"
destination = "app"
ordering = "none"
"#
    )
}

/// Waits until nothing is pending or in flight; `false` after [`SETTLE_TIMEOUT`].
async fn settle(gateway: &Gateway<idem_sql::sqlx::Sqlite>) -> Result<bool, Error> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while Instant::now() < deadline {
        let stats = gateway.stats().await?;
        if stats
            .destinations
            .values()
            .all(|c| c.pending + c.in_flight == 0)
        {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(false)
}

/// Compares what happened with what must have happened.
fn check(report: &mut DemoReport, plan: &Plan, tally: &Tally, seen: &downstream::Seen) {
    let mut problems = Vec::new();
    let unique = plan.unique_events();
    let mut expect = |what: &str, got: u64, want: u64| {
        if got != want {
            problems.push(format!("{what}: got {got}, expected {want}"));
        }
    };
    expect("accepted", report.accepted, unique);
    expect("duplicates", report.duplicates, 2 * unique);
    expect("rejected", report.rejected, 1);
    expect("unexpected answers", tally.other, 0);
    expect("stale", report.stale, plan.expected_stale.len() as u64);
    expect("dead", report.dead, 0);
    expect(
        "bad idem signatures at the application",
        u64::from(seen.bad_signatures),
        0,
    );

    let must_arrive: HashSet<&String> = plan
        .keys
        .iter()
        .filter(|k| !plan.expected_stale.contains(*k))
        .collect();
    expect("delivered", report.delivered, must_arrive.len() as u64);
    let failed_on_purpose = must_arrive
        .iter()
        .filter(|k| fails_first_attempt(k))
        .count() as u64;
    expect("retried", report.retried, failed_on_purpose);
    for key in &plan.keys {
        let times = seen.delivered.get(key).copied().unwrap_or(0);
        let want = u32::from(must_arrive.contains(key));
        if times != want {
            problems.push(format!("{key} was applied {times} times, expected {want}"));
        }
    }

    let expected: serde_json::Value =
        serde_json::from_str(EXPECTED_FINAL_STATE).unwrap_or_default();
    let objects: BTreeMap<String, serde_json::Value> = expected["objects"]
        .as_object()
        .map(|m| m.clone().into_iter().collect())
        .unwrap_or_default();
    let wrong: Vec<String> = objects
        .iter()
        .filter_map(|(object, state)| {
            let want = state["event"].as_str().unwrap_or_default();
            let got = seen.objects.get(object).map(String::as_str);
            (got != Some(want)).then(|| format!("{object}: {got:?} instead of {want}"))
        })
        .collect();
    if objects.is_empty() || !wrong.is_empty() {
        problems.push(format!(
            "final state differs from expected_final_state.json for {} objects: {}",
            wrong.len(),
            wrong.join(", ")
        ));
    }
    let extra: HashMap<_, _> = seen
        .delivered
        .iter()
        .filter(|(k, _)| !plan.keys.contains(*k))
        .collect();
    if !extra.is_empty() {
        problems.push(format!("unknown keys delivered: {extra:?}"));
    }
    report.problems.extend(problems);
}
