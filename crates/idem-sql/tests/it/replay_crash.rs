//! The replay kill test (issue 33; docs/design.md C6): 600 payments, the first 500 handled by
//! `billing_v1` in this process, each sending a receipt to a recording provider; then a child
//! process (`replay_child.rs`) replays all 600 from the application's JSONL log through
//! `billing_v2` succeeding `billing_v1`, with an effect worker running beside it, and is killed
//! with SIGKILL at 5 seeded points (after a seeded number of applied events) and started again
//! until it is done. The provider then has seen exactly the 600 keys of the lineage — a call
//! may repeat under its key (C6: the call in flight at a kill), never come under a new one — and
//! `billing_v2`'s projection equals `billing_v1`'s on the first 500.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use idem_core::{EffectKey, Name, RetentionPolicy, horizon};
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{JsonlLog, LoggedEvent, Replay, Runner, Store};
use idem_testkit::{AppDb, Value, exec, sqlite_url};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout};

use crate::provider::{Recorder, drain};
use crate::replay_child::{self, CALL_TIMEOUT, PROJECTION};
use crate::support::stripe_key;

const KILLS: usize = 5;
const HANDLED: usize = 500;
const EVENTS: usize = 600;
const SEED: u64 = 0x33_5eed;
/// How long one line of the child may take before the test fails.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_killed_sqlite() {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let url = sqlite_url(&dir);
    replay_killed::<Sqlite>(&url, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_killed_postgres() {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let url = idem_testkit::pg_database().await;
    replay_killed::<Postgres>(&url, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_killed_mysql() {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let url = idem_testkit::mysql_database().await;
    replay_killed::<MySql>(&url, dir.path()).await;
}

/// The log line of payment `n`: a Stripe event, its payment in the payload.
fn line(n: usize, occurred_at: i64) -> String {
    serde_json::json!({
        "source": "stripe",
        "event_id": format!("evt_{n}"),
        "occurred_at": occurred_at,
        "payload": {"id": format!("evt_{n}"), "account": format!("acct_{}", n % 7), "amount": 100 + n},
    })
    .to_string()
}

async fn replay_killed<DB: AppDb>(url: &str, dir: &Path) {
    let store = Store::<DB>::connect_with(url, 2).await.expect("connect");
    store.migrate().await.expect("migrate");
    exec(&store, PROJECTION, vec![]).await;
    let (provider, provider_url) = Recorder::start().await;
    let (v1, v2) = (name("billing_v1"), name("billing_v2"));
    let effect = Name::new("effect", "send_receipt").unwrap();
    let policy = RetentionPolicy::new(Duration::from_secs(30 * 86_400), horizon::STRIPE).unwrap();

    // The application's log: 600 payments of the last 10 minutes.
    let now = store.now().as_millis();
    let lines: Vec<String> = (0..EVENTS)
        .map(|n| line(n, now - 600_000 + n as i64))
        .collect();
    let log_path = dir.join("events.jsonl");
    std::fs::write(&log_path, lines.join("\n") + "\n").expect("write the log");

    // billing_v1 handled the first 500 as they came, each receipt sent once.
    let first = Runner::new(store.clone(), &v1);
    let ledger = store.effects();
    let handled = JsonlLog::from_text(lines[..HANDLED].join("\n"));
    let report = Replay::new(&first, &policy)
        .run(
            &handled,
            async |tx: &mut DB::Connection, logged: &LoggedEvent<serde_json::Value>| {
                replay_child::handle(&first, &ledger, &effect, tx, logged).await
            },
        )
        .await
        .expect("billing_v1 handles the first 500");
    assert_eq!(
        (report.applied, report.effects_created),
        (HANDLED as u64, HANDLED as u64)
    );
    drain(&store, &effect, &provider_url).await;
    assert_eq!(provider.calls().len(), HANDLED);

    // billing_v2 replays all 600 in a child, killed 5 times at seeded points.
    let mut rng = StdRng::seed_from_u64(SEED);
    let spawn = |run: usize| {
        // Each restart stands past the leases of the calls its predecessor was making.
        let offset = run as u64 * (CALL_TIMEOUT.as_millis() as u64 + 60_000);
        let args: Vec<OsString> = [
            ("--database-url", url.to_owned()),
            ("--log", log_path.display().to_string()),
            ("--v1", v1.to_string()),
            ("--v2", v2.to_string()),
            ("--effect", effect.to_string()),
            ("--provider", provider_url.clone()),
            ("--clock-offset-ms", offset.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [OsString::from(k), OsString::from(v)])
        .collect();
        Replayer::spawn(&args)
    };
    for run in 0..KILLS {
        let applied = crate::support::inbox_count(&store, &v2).await as usize;
        let remaining = EVENTS - applied;
        assert!(remaining > 2, "the log ran out before kill {run}");
        let budget = (2 * remaining / (KILLS - run + 1)).clamp(1, remaining - 2);
        let stop_after = rng.random_range(1..=budget);
        let mut child = spawn(run);
        let mut seen = 0;
        while seen < stop_after {
            match child
                .next_line()
                .await
                .split_whitespace()
                .collect::<Vec<_>>()[..]
            {
                ["event", _, "applied"] => seen += 1,
                ["event", _, "duplicate"] => {}
                ref other => {
                    child
                        .fail(format!("expected an event, got {other:?}"))
                        .await
                }
            }
        }
        // No await between reading the line and the kill: the child is mid-flight.
        child.kill().await;
        eprintln!(
            "replay kill test: kill {run} after {stop_after} events applied ({applied} before the run)"
        );
    }
    let mut child = spawn(KILLS);
    loop {
        let line = child.next_line().await;
        match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["event", ..] | ["replayed", ..] => {}
            ["done"] => break,
            ref other => child.fail(format!("expected done, got {other:?}")).await,
        }
    }
    child.finish().await;

    let expected: BTreeSet<String> = (0..EVENTS)
        .map(|n| {
            EffectKey::derive(&v1, &stripe_key(&format!("evt_{n}")), &effect)
                .as_str()
                .to_owned()
        })
        .collect();
    assert_eq!(
        provider.keys(),
        expected,
        "the 600 keys of the lineage, no other"
    );
    assert!(provider.calls().len() >= EVENTS);
    assert_eq!(
        projection(&store, &v2, HANDLED).await,
        projection(&store, &v1, HANDLED).await
    );
    assert_eq!(projection(&store, &v2, EVENTS).await.len(), EVENTS);
    eprintln!(
        "replay kill test: {} provider calls for {} keys",
        provider.calls().len(),
        expected.len()
    );
    store.pool().close().await;
}

fn name(s: &str) -> Name {
    Name::new("consumer", s).unwrap()
}

/// (event id, account, amount) of `consumer`'s projection for payments below `below`.
async fn projection<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    below: usize,
) -> Vec<(usize, String)> {
    let mut conn = store.pool().acquire().await.unwrap();
    let pairs = DB::fetch_text_pairs(
        &mut conn,
        "SELECT event_id, CONCAT(account, '/', amount) FROM replayed_payments WHERE consumer = $1",
        vec![Value::from(consumer.as_str())],
    )
    .await
    .unwrap();
    let mut rows: Vec<(usize, String)> = pairs
        .into_iter()
        .map(|(id, row)| (id.trim_start_matches("evt_").parse().unwrap(), row))
        .filter(|(n, _)| *n < below)
        .collect();
    rows.sort();
    rows
}

/// A running `replay-child`.
struct Replayer {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: ChildStderr,
}

impl Replayer {
    fn spawn(args: &[OsString]) -> Self {
        let mut command =
            idem_testkit::child::command(replay_child::TEST, replay_child::NAME, args);
        command.env("RUST_BACKTRACE", "0").stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn replay-child");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr = child.stderr.take().expect("piped stderr");
        Self {
            child,
            stdout,
            stderr,
        }
    }

    /// The next protocol line; fails the test when the child ends or stalls first.
    async fn next_line(&mut self) -> String {
        loop {
            match tokio::time::timeout(LINE_TIMEOUT, self.stdout.next_line()).await {
                Ok(Ok(Some(text))) => {
                    if let Some(line) = idem_testkit::child::protocol_line(&text) {
                        return line.to_owned();
                    }
                }
                Ok(Ok(None)) => self.fail("stdout ended".into()).await,
                Ok(Err(e)) => self.fail(format!("read stdout: {e}")).await,
                Err(_) => self.fail(format!("no line within {LINE_TIMEOUT:?}")).await,
            }
        }
    }

    /// SIGKILL, then reap; the child must die of it.
    async fn kill(mut self) {
        self.child.start_kill().expect("send SIGKILL");
        let status = self.child.wait().await.expect("reap replay-child");
        if status.signal() != Some(9) {
            self.fail(format!("ended with {status}, not by SIGKILL"))
                .await;
        }
    }

    /// Waits for the child to exit 0 on its own.
    async fn finish(mut self) {
        match tokio::time::timeout(LINE_TIMEOUT, self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            other => {
                self.fail(format!("did not exit 0 after done: {other:?}"))
                    .await
            }
        }
    }

    /// Fails the test with `why` and the child's stderr.
    async fn fail(&mut self, why: String) -> ! {
        self.child.start_kill().ok();
        let status = self.child.wait().await;
        let mut stderr = String::new();
        self.stderr.read_to_string(&mut stderr).await.ok();
        panic!("replay-child: {why} (status {status:?}); stderr:\n{stderr}");
    }
}
