//! Crash test (docs/design.md C1, C2): the `crash-consumer` child applies a delivery stream with 30 %
//! duplicates and is killed with SIGKILL at least 20 times, alternately (a) right after a seeded
//! number of `committed` lines (mid-flight, possibly between the commit and the ack) and (b)
//! paused inside the open transaction of a seeded delivery, after its claim and writes. After
//! every kill the database must hold exactly the effects of the acknowledged deliveries (plus at
//! most the one committed but not yet acknowledged); after the last, clean run every event's
//! effect row exists exactly once and each entity's counter equals its number of distinct events.
//!
//! `IDEM_CRASH_EVENTS` sets the number of events (default 3,000; a long run: 20000) and
//! `IDEM_CRASH_SEED` the seed (the stream and the kill points follow from it).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use idem_core::{DedupKey, EventId, Name};
use idem_sql::Store;
use idem_sql::sqlx::{self, Connection, MySql, PgConnection, Postgres, Sqlite};
use idem_testkit::crash_stream::{self, Stream};
use idem_testkit::{AppDb, Value, pg_url, query_i64, sqlite_url};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout};

use crate::crash_consumer;

/// Kills per store: at least 20, half of them inside an open transaction.
const KILLS: usize = 24;
const DEFAULT_EVENTS: usize = 3_000;
const DEFAULT_SEED: u64 = 0x1de3_c4a5;
const DUPLICATES: f64 = 0.3;
/// How long one line of the child may take (a 20,000-event run restarts often, each line is
/// one commit): a hang is a failure, not a stuck CI job.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_sqlite() {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let url = sqlite_url(&dir);
    crash_and_recover::<Sqlite>(&url, &dir.path().join("cursor"), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mysql() {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    // A database of its own (dropped with this process's when stale): the child's tables and
    // the inbox of its consumer must start empty.
    let url = idem_testkit::mysql_database().await;
    crash_and_recover::<MySql>(&url, &dir.path().join("cursor"), "mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_postgres() {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let db = FreshPgDatabase::create().await;
    crash_and_recover::<Postgres>(&db.url, &dir.path().join("cursor"), "postgres").await;
    db.drop().await;
}

async fn crash_and_recover<DB: AppDb>(url: &str, cursor_path: &Path, store_name: &str) {
    let started = Instant::now();
    let events = env_or("IDEM_CRASH_EVENTS", DEFAULT_EVENTS);
    let seed = env_or("IDEM_CRASH_SEED", DEFAULT_SEED);
    eprintln!("crash test on {store_name}: {events} events, seed {seed}");
    let stream = Stream::generate(events, DUPLICATES, seed);
    let total = stream.deliveries().len();
    let store = Store::<DB>::connect_with(url, 1)
        .await
        .expect("connect the checking store");
    // The kill points are seeded apart from the stream so that both can be varied alone.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let spawn = |pause_at: Option<usize>| Consumer::spawn(url, events, seed, cursor_path, pause_at);

    let (mut commit_kills, mut pause_kills, mut unacked_commits) = (0, 0, 0);
    let mut paused_events = Vec::new();
    for round in 0..KILLS {
        let cursor = read_cursor(cursor_path);
        let remaining = total - cursor;
        // Spread the kills over the stream: on average a run covers its share of what is
        // left, and never reaches the end (the child must still be running when killed).
        assert!(remaining > 2, "the stream ran out before kill {round}");
        let budget = (2 * remaining / (KILLS - round + 1)).clamp(1, remaining - 2);
        if round % 2 == 0 {
            let mut child = spawn(None);
            let stop_after = rng.random_range(1..=budget);
            let mut seen = 0;
            while seen < stop_after {
                let line = child.next_line().await;
                unacked_commits += usize::from(line.is_unacked_commit(&stream, cursor));
                match line {
                    Line::Committed { .. } => seen += 1,
                    other => {
                        child
                            .fail(format!("expected a commit, got {other:?}"))
                            .await
                    }
                }
            }
            // No await between reading the line and the kill: the child is mid-flight.
            child.kill().await;
            commit_kills += 1;
        } else {
            // A first delivery after the cursor: not committed yet, so the handler runs and
            // the child pauses inside its transaction.
            let from = cursor + 1 + rng.random_range(0..budget);
            let pause_at = (from..total)
                .find(|&p| stream.deliveries()[p].first)
                .expect("a first delivery after the cursor");
            let mut child = spawn(Some(pause_at));
            loop {
                let line = child.next_line().await;
                unacked_commits += usize::from(line.is_unacked_commit(&stream, cursor));
                match line {
                    Line::Committed { .. } => {}
                    Line::Paused(p) if p == pause_at => break,
                    other => {
                        child
                            .fail(format!("expected paused {pause_at}, got {other:?}"))
                            .await
                    }
                }
            }
            child.kill().await;
            pause_kills += 1;
            assert_left_nothing(&store, &stream, pause_at).await;
            paused_events.push(stream.deliveries()[pause_at].event);
        }
        check_consistent(&store, &stream, read_cursor(cursor_path)).await;
    }

    let start = read_cursor(cursor_path);
    let mut child = spawn(None);
    loop {
        let line = child.next_line().await;
        unacked_commits += usize::from(line.is_unacked_commit(&stream, start));
        match line {
            Line::Committed { .. } => {}
            Line::Done => break,
            other => child.fail(format!("expected done, got {other:?}")).await,
        }
    }
    let status = child.finish().await;
    assert!(status.success(), "the last run ended with {status}");

    let kills = commit_kills + pause_kills;
    assert!(kills >= 20, "only {kills} kills");
    assert!(pause_kills >= 1, "no kill inside an open transaction");
    assert_every_event_once(&store, &stream).await;
    for event in paused_events {
        let id = crash_stream::event_id(event);
        let n = query_i64(
            &store,
            "SELECT COUNT(*) FROM crash_effects WHERE event_id = $1",
            vec![id.clone().into()],
        )
        .await;
        assert_eq!(n, [1], "{id}, paused and killed, then redelivered");
    }
    store.pool().close().await;
    eprintln!(
        "crash test on {store_name}: {kills} kills ({commit_kills} after a commit, {pause_kills} \
         inside a transaction), {unacked_commits} deliveries committed but not acked before a \
         kill, {} deliveries, {:.1} s",
        total,
        started.elapsed().as_secs_f64()
    );
}

/// After the whole stream: every event's effect row exactly once (the primary key already
/// refuses a second), with its entity; each entity's counter equals its distinct events; one
/// inbox key per event.
async fn assert_every_event_once<DB: AppDb>(store: &Store<DB>, stream: &Stream) {
    let expected: Vec<(String, String)> = stream
        .deliveries()
        .iter()
        .filter(|d| d.first)
        .map(|d| {
            (
                crash_stream::event_id(d.event),
                crash_stream::entity_id(d.entity),
            )
        })
        .collect();
    let effects = text_pairs(
        store,
        "SELECT event_id, entity FROM crash_effects ORDER BY event_id",
    )
    .await;
    // Sets: a 20,000-event run makes linear lookups slow.
    let (expected_set, effects_set): (BTreeSet<_>, BTreeSet<_>) =
        (expected.iter().collect(), effects.iter().collect());
    let missing: Vec<_> = expected
        .iter()
        .filter(|e| !effects_set.contains(e))
        .take(10)
        .collect();
    let extra: Vec<_> = effects
        .iter()
        .filter(|e| !expected_set.contains(e))
        .take(10)
        .collect();
    assert!(
        effects.len() == stream.events() && missing.is_empty() && extra.is_empty(),
        "{} effect rows for {} events; missing (first 10): {missing:?}; unexpected: {extra:?}",
        effects.len(),
        stream.events()
    );

    let expected: Vec<(String, String)> = stream
        .per_entity()
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(entity, n)| (crash_stream::entity_id(entity), n.to_string()))
        .collect();
    let counters = text_pairs(
        store,
        "SELECT entity, CONCAT(n) FROM crash_counters ORDER BY entity",
    )
    .await;
    assert_eq!(counters, expected, "per-entity counters (entity, n)");

    let keys = query_i64(
        store,
        "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1",
        vec![crash_stream::CONSUMER.into()],
    )
    .await;
    assert_eq!(keys, [stream.events() as i64], "inbox keys");
}

/// After any kill: the claim, the effect and the counter moved together, and the effects are
/// those of the acknowledged deliveries (`0..cursor`), plus at most the delivery at `cursor`
/// (committed, killed before its ack).
async fn check_consistent<DB: AppDb>(store: &Store<DB>, stream: &Stream, cursor: usize) {
    // One statement, so one snapshot: on PostgreSQL the killed child's last COMMIT may still be
    // landing (sent, its answer never read), and separate queries could straddle it.
    let counts = query_i64(
        store,
        "SELECT n FROM ( \
           SELECT 1 AS k, (SELECT COUNT(*) FROM crash_effects) AS n \
           UNION ALL SELECT 2, (SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1) \
           UNION ALL SELECT 3, (SELECT COUNT(*) FROM crash_counters c \
             WHERE c.n <> (SELECT COUNT(*) FROM crash_effects e WHERE e.entity = c.entity)) \
           UNION ALL SELECT 4, (SELECT COUNT(*) FROM crash_effects e \
             WHERE NOT EXISTS (SELECT 1 FROM crash_counters c WHERE c.entity = e.entity)) \
         ) AS checks ORDER BY k",
        vec![crash_stream::CONSUMER.into()],
    )
    .await;
    let [effects, keys, off_counters, uncounted] = counts[..] else {
        panic!("four counts, got {counts:?}");
    };
    assert_eq!(
        effects, keys,
        "effect rows vs inbox keys at cursor {cursor}"
    );
    assert_eq!(
        (off_counters, uncounted),
        (0, 0),
        "counters that differ from their effect rows, effects without a counter"
    );
    let acked = stream.distinct_before(cursor) as i64;
    let at_most = stream.distinct_before(cursor + 1) as i64;
    assert!(
        (acked..=at_most).contains(&effects),
        "{effects} effect rows at cursor {cursor}: expected {acked}..={at_most}"
    );
}

/// The transaction killed at `position` left no claim, no effect and no version behind.
async fn assert_left_nothing<DB: AppDb>(store: &Store<DB>, stream: &Stream, position: usize) {
    let delivery = stream.deliveries()[position];
    let id = crash_stream::event_id(delivery.event);
    let key = DedupKey::from_event(
        &Name::new("source", crash_stream::SOURCE).unwrap(),
        &EventId::new(&id).unwrap(),
    );
    let effects = query_i64(
        store,
        "SELECT COUNT(*) FROM crash_effects WHERE event_id = $1",
        vec![id.clone().into()],
    )
    .await;
    let claims = query_i64(
        store,
        "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1 AND dedup_key = $2",
        vec![crash_stream::CONSUMER.into(), key.as_str().into()],
    )
    .await;
    let versions = query_i64(
        store,
        "SELECT version FROM idem_versions \
         WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3",
        vec![
            crash_stream::CONSUMER.into(),
            crash_stream::AGGREGATE_TYPE.into(),
            crash_stream::entity_id(delivery.entity).into(),
        ],
    )
    .await;
    assert_eq!(
        (effects, claims),
        (vec![0], vec![0]),
        "{id}: effect rows and claims left by the transaction killed at delivery {position}"
    );
    assert!(
        versions.iter().all(|v| *v < delivery.sequence),
        "{id}: entity version {versions:?} kept from the killed transaction (sequence {})",
        delivery.sequence
    );
}

async fn text_pairs<DB: AppDb>(store: &Store<DB>, sql: &'static str) -> Vec<(String, String)> {
    let mut conn = store.pool().acquire().await.expect("acquire a connection");
    DB::fetch_text_pairs(&mut conn, sql, Vec::<Value>::new())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// One line of the child's stdout.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Committed { position: usize, duplicate: bool },
    Paused(usize),
    Done,
    Other(String),
}

impl Line {
    fn parse(text: &str) -> Self {
        let words: Vec<&str> = text.split_whitespace().collect();
        let number = |word: &str| word.parse::<usize>().ok();
        match words[..] {
            ["committed", position, outcome] => number(position).map(|position| Self::Committed {
                position,
                duplicate: outcome == "duplicate",
            }),
            ["paused", position] => number(position).map(Self::Paused),
            ["done"] => Some(Self::Done),
            _ => None,
        }
        .unwrap_or_else(|| Self::Other(text.to_owned()))
    }

    /// Whether this is the run's first delivery (at `start`), a first delivery of its event
    /// that came out duplicate: the previous run committed it and was killed before the ack.
    fn is_unacked_commit(&self, stream: &Stream, start: usize) -> bool {
        matches!(self, Self::Committed { position, duplicate: true }
            if *position == start && stream.deliveries()[start].first)
    }
}

/// A running `crash-consumer`.
struct Consumer {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: ChildStderr,
}

impl Consumer {
    fn spawn(url: &str, events: usize, seed: u64, cursor: &Path, pause_at: Option<usize>) -> Self {
        let mut args: Vec<OsString> = vec![
            "--database-url".into(),
            url.into(),
            "--events".into(),
            events.to_string().into(),
            "--duplicates".into(),
            DUPLICATES.to_string().into(),
            "--seed".into(),
            seed.to_string().into(),
            "--cursor".into(),
            cursor.into(),
        ];
        if let Some(k) = pause_at {
            args.extend(["--pause-at".into(), k.to_string().into()]);
        }
        let mut command =
            idem_testkit::child::command(crash_consumer::TEST, crash_consumer::NAME, &args);
        command
            // Errors as one context chain, without a backtrace, in the failure message.
            .env("RUST_BACKTRACE", "0")
            .env("RUST_LIB_BACKTRACE", "0")
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn crash-consumer");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr = child.stderr.take().expect("piped stderr");
        Self {
            child,
            stdout,
            stderr,
        }
    }

    /// The next line the child reports (the test harness's own output is passed over); fails
    /// the test when the child ends or stalls first.
    async fn next_line(&mut self) -> Line {
        loop {
            match tokio::time::timeout(LINE_TIMEOUT, self.stdout.next_line()).await {
                Ok(Ok(Some(text))) => {
                    if let Some(line) = idem_testkit::child::protocol_line(&text) {
                        return Line::parse(line);
                    }
                }
                Ok(Ok(None)) => self.fail("stdout ended".into()).await,
                Ok(Err(e)) => self.fail(format!("read stdout: {e}")).await,
                Err(_) => self.fail(format!("no line within {LINE_TIMEOUT:?}")).await,
            }
        }
    }

    /// SIGKILL (what `start_kill` sends on Unix), then reap; the child must die of it, not
    /// have exited on its own.
    async fn kill(mut self) {
        self.child.start_kill().expect("send SIGKILL");
        let status = self.child.wait().await.expect("reap crash-consumer");
        if status.signal() != Some(9) {
            self.fail(format!("ended with {status}, not by SIGKILL"))
                .await;
        }
    }

    /// Waits for the child to exit on its own.
    async fn finish(mut self) -> ExitStatus {
        match tokio::time::timeout(LINE_TIMEOUT, self.child.wait()).await {
            Ok(status) => status.expect("reap crash-consumer"),
            Err(_) => self.fail("did not exit after done".into()).await,
        }
    }

    /// Fails the test with `why`, the child's exit status and its stderr.
    async fn fail(&mut self, why: String) -> ! {
        self.child.start_kill().ok();
        let status = self.child.wait().await;
        let mut stderr = String::new();
        self.stderr.read_to_string(&mut stderr).await.ok();
        panic!("crash-consumer: {why} (status {status:?}); stderr:\n{stderr}");
    }
}

/// A PostgreSQL database of its own for the crash test (named after this process's test
/// database, so that the harness drops it when stale), as the child's tables and the inbox of
/// its consumer must start empty.
struct FreshPgDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl FreshPgDatabase {
    async fn create() -> Self {
        let admin_url = pg_url().await;
        let (base, process_db) = admin_url.rsplit_once('/').expect("a database URL");
        let name = format!("{process_db}_crash");
        let url = format!("{base}/{name}");
        let db = Self {
            admin_url: admin_url.clone(),
            name,
            url,
        };
        db.admin(&format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            db.name
        ))
        .await;
        db.admin(&format!("CREATE DATABASE \"{}\"", db.name)).await;
        db
    }

    async fn drop(self) {
        self.admin(&format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        ))
        .await;
    }

    async fn admin(&self, sql: &str) {
        let mut conn = PgConnection::connect(&self.admin_url)
            .await
            .expect("connect to the test database");
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.close().await.ok();
    }
}

/// The next position the child will process, from its cursor file (0 before the first ack).
fn read_cursor(path: &Path) -> usize {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse()
            .expect("a cursor file holding a position"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name}={value:?} is not a valid number")),
        Err(_) => default,
    }
}
