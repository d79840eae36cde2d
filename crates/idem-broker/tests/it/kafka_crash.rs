//! Kafka crash tests: real `kafka-crash-consumer` processes against the test broker (tansu,
//! started by `scripts/test`; address `IDEM_TEST_KAFKA`), killed with SIGKILL and paused with
//! SIGSTOP, on SQLite and PostgreSQL. Each checks the application's output: one effect row per
//! event (no more, no fewer), per-partition order, and who wrote what.
//!
//! `IDEM_KAFKA_CRASH_SEED` sets the seed (the records and the kill points follow from it).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::kafka_support::{self as kafka, Output};
use idem_core::Name;
use idem_sql::Store;
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_testkit::{AppDb, Value, mysql_url, pg_url, query_i64, sqlite_url};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

use crate::kafka_crash_consumer;

const DEFAULT_SEED: u64 = 0x6b61_666b;
/// How long one expected line of a child may take: a hang is a failure, not a stuck CI job.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a run may take to reach the partitions' ends.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);
/// The children's lease ttl: a killed child's partitions are free this long after its last
/// renewal.
const LEASE_TTL_MS: u64 = 1000;

fn seed() -> u64 {
    std::env::var("IDEM_KAFKA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED)
}

/// A `kafka-crash-consumer` child and its output lines.
struct Consumer {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    member: String,
}

impl Consumer {
    fn spawn(url: &str, topic: &str, consumer: &Name, member: &str, extra: &[&str]) -> Self {
        let lease_ttl = LEASE_TTL_MS.to_string();
        let kafka = kafka::kafka_addr();
        let args: Vec<OsString> = [
            "--database-url",
            url,
            "--topic",
            topic,
            "--member",
            member,
            "--consumer",
            consumer.as_str(),
            "--lease-ttl-ms",
            &lease_ttl,
            "--kafka",
            &kafka,
        ]
        .iter()
        .chain(extra)
        .map(OsString::from)
        .collect();
        let mut child = idem_testkit::child::command(
            kafka_crash_consumer::TEST,
            kafka_crash_consumer::NAME,
            &args,
        )
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kafka-crash-consumer");
        let stdout = child.stdout.take().expect("child stdout");
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
            member: member.to_owned(),
        }
    }

    /// Reads lines until one starts with `prefix`; returns it.
    async fn expect(&mut self, prefix: &str) -> String {
        let started = Instant::now();
        loop {
            let left = LINE_TIMEOUT.saturating_sub(started.elapsed());
            let line = tokio::time::timeout(left, self.lines.next_line()).await;
            match line {
                Ok(Ok(Some(line))) => {
                    if let Some(line) = idem_testkit::child::protocol_line(&line)
                        && line.starts_with(prefix)
                    {
                        return line.to_owned();
                    }
                }
                Ok(Ok(None)) => panic!("{} ended before a {prefix:?} line", self.member),
                Ok(Err(e)) => panic!("read {}'s output: {e}", self.member),
                Err(_) => panic!(
                    "no {prefix:?} line from {} within {LINE_TIMEOUT:?}",
                    self.member
                ),
            }
        }
    }

    fn pid(&self) -> i32 {
        self.child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .expect("child pid")
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {}", self.member);
    }

    /// Reads lines until one contains `part`; returns it.
    async fn expect_containing(&mut self, part: &str) -> String {
        let started = Instant::now();
        loop {
            let left = LINE_TIMEOUT.saturating_sub(started.elapsed());
            let line = tokio::time::timeout(left, self.lines.next_line()).await;
            match line {
                Ok(Ok(Some(line))) => {
                    if let Some(line) = idem_testkit::child::protocol_line(&line)
                        && line.contains(part)
                    {
                        return line.to_owned();
                    }
                }
                Ok(Ok(None)) => panic!("{} ended before a line with {part:?}", self.member),
                Ok(Err(e)) => panic!("read {}'s output: {e}", self.member),
                Err(_) => panic!(
                    "no line with {part:?} from {} within {LINE_TIMEOUT:?}",
                    self.member
                ),
            }
        }
    }

    /// SIGKILL, then reap it.
    async fn kill(mut self) {
        self.signal("-KILL");
        self.child.wait().await.expect("reap the child");
    }

    /// SIGTERM, then wait for its clean exit.
    async fn stop(mut self) {
        self.signal("-TERM");
        let status = tokio::time::timeout(LINE_TIMEOUT, self.child.wait())
            .await
            .expect("the child exits after SIGTERM")
            .expect("reap the child");
        assert!(status.success(), "{} exited with {status}", self.member);
    }
}

/// A fresh topic with `events` events, a 30 % share republished at new offsets; its ends.
async fn seeded_topic(partitions: i32, events: usize, seed: u64) -> (String, BTreeMap<i32, i64>) {
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "crash", partitions).await;
    let written = kafka::publish_events(&client, &topic, partitions, events, 0.3, seed).await;
    let ends = kafka::high_watermarks(&client, &topic, partitions).await;
    assert_eq!(
        ends.values().sum::<i64>(),
        i64::try_from(written).expect("a record count"),
        "the broker kept every record"
    );
    (topic, ends)
}

fn consumer_name(prefix: &str) -> Name {
    Name::new(
        "consumer",
        format!("{}_v1", kafka::unique_topic(prefix)).replace('-', "_"),
    )
    .expect("a consumer name")
}

/// Every event's effect exactly once, in order, no dead letter.
async fn assert_exactly_once<DB: AppDb>(store: &Store<DB>, consumer: &Name, events: usize) {
    let events = i64::try_from(events).expect("an event count");
    assert_eq!(
        kafka::output(store, consumer).await,
        Output {
            rows: events,
            events,
            order_violations: 0
        },
        "one effect row per event, in partition order"
    );
    let claimed = query_i64(
        store,
        "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1",
        vec![Value::from(consumer.as_str())],
    )
    .await[0];
    assert_eq!(claimed, events, "one inbox key per event");
    let dead = query_i64(
        store,
        "SELECT COUNT(*) FROM idem_dead_letters WHERE consumer = $1",
        vec![Value::from(consumer.as_str())],
    )
    .await[0];
    assert_eq!(dead, 0, "no dead letter");
}

/// Rows written by `writer` at or after `offset` of `partition`.
async fn rows_by<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    writer: &str,
    partition: i64,
    offset: i64,
) -> i64 {
    query_i64(
        store,
        "SELECT COUNT(*) FROM kafka_effects WHERE consumer = $1 AND writer = $2 \
         AND kafka_partition = $3 AND kafka_offset >= $4",
        vec![
            Value::from(consumer.as_str()),
            Value::from(writer),
            Value::Int(partition),
            Value::Int(offset),
        ],
    )
    .await[0]
}

/// Waits until `holder` holds partition 0 (its offsets row carries its member id).
async fn wait_holder<DB: AppDb>(store: &Store<DB>, consumer: &Name, topic: &str, holder: &str) {
    let started = Instant::now();
    loop {
        let row = store
            .kafka_offsets(consumer)
            .get(topic, 0)
            .await
            .expect("read the offset");
        if row.as_ref().is_some_and(|r| r.holder == holder) {
            return;
        }
        assert!(
            started.elapsed() < LINE_TIMEOUT,
            "{holder} did not take partition 0 over within {LINE_TIMEOUT:?}: {row:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Parses `paused <partition> <offset>` / `stalled <partition> <offset>`.
fn position(line: &str) -> (i64, i64) {
    let mut parts = line.split_whitespace().skip(1).map(|p| p.parse::<i64>());
    match (parts.next(), parts.next()) {
        (Some(Ok(p)), Some(Ok(o))) => (p, o),
        _ => panic!("malformed line {line:?}"),
    }
}

/// 10,000 events over 4 partitions, 3,000 of them republished at new offsets with the same
/// `idem-message-id`; the consumer is killed with SIGKILL at 10 seeded points, each inside an
/// open transaction (paused in the handler after its write), and started again. After each kill
/// nothing is doubled; at the end every event took effect exactly once, in partition order.
async fn sigkill_at_ten_points<DB: AppDb>(url: &str, store: Store<DB>) {
    const EVENTS: usize = 10_000;
    const KILLS: usize = 10;
    let seed = seed();
    let (topic, ends) = seeded_topic(4, EVENTS, seed).await;
    let consumer = consumer_name("kill");
    kafka::create_app_tables(&store).await;
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    for round in 0..KILLS {
        let done = usize::try_from(kafka::output(&store, &consumer).await.events).unwrap_or(0);
        let remaining = EVENTS - done;
        assert!(remaining > 1, "the run ran out before kill {round}");
        // Spread the kills over what is left; the child pauses at its n-th handler call, which
        // comes before the run's end (every remaining event calls the handler at least once).
        let budget = (2 * remaining / (KILLS - round + 1)).clamp(1, remaining - 1);
        let pause_after = rng.random_range(1..=budget);
        let member = format!("kill{round}");
        let mut child = Consumer::spawn(
            url,
            &topic,
            &consumer,
            &member,
            &["--pause-after", &pause_after.to_string()],
        );
        let paused = child.expect("paused").await;
        child.kill().await;
        let (partition, offset) = position(&paused);
        assert_eq!(
            rows_by(&store, &consumer, &member, partition, offset).await,
            0,
            "the killed transaction's write at {partition}@{offset} is gone"
        );
        let out = kafka::output(&store, &consumer).await;
        assert_eq!(out.rows, out.events, "no event doubled after kill {round}");
        assert_eq!(out.order_violations, 0, "order kept after kill {round}");
    }
    let last = Consumer::spawn(url, &topic, &consumer, "last", &[]);
    kafka::wait_settled(&store, &consumer, &topic, &ends, SETTLE_TIMEOUT).await;
    last.stop().await;
    assert_exactly_once(&store, &consumer, EVENTS).await;
    eprintln!(
        "kafka sigkill run: {EVENTS} events, {} records, {KILLS} kills, {:?}",
        ends.values().sum::<i64>(),
        started.elapsed()
    );
}

/// Two consumers share 4 partitions; one is killed with SIGKILL inside a batch's transaction;
/// the other takes its partitions over after the lease ttl and finishes: every event exactly
/// once, per-partition order kept, and the survivor holds every partition.
async fn survivor_takes_over_a_killed_member<DB: AppDb>(url: &str, store: Store<DB>) {
    const EVENTS: usize = 4_000;
    let (topic, ends) = seeded_topic(4, EVENTS, seed() ^ 1).await;
    let consumer = consumer_name("takeover");
    kafka::create_app_tables(&store).await;
    let mut a = Consumer::spawn(url, &topic, &consumer, "a", &["--pause-after", "1500"]);
    a.expect("started").await;
    let b = Consumer::spawn(url, &topic, &consumer, "b", &[]);
    let paused = a.expect("paused").await;
    a.kill().await;
    let (partition, offset) = position(&paused);
    kafka::wait_settled(&store, &consumer, &topic, &ends, SETTLE_TIMEOUT).await;
    let holders: Vec<String> = store
        .kafka_offsets(&consumer)
        .list(&topic)
        .await
        .expect("read the offsets")
        .into_iter()
        .map(|o| o.holder)
        .collect();
    assert_eq!(holders, ["b", "b", "b", "b"], "b took every partition over");
    b.stop().await;
    assert_eq!(
        rows_by(&store, &consumer, "a", partition, offset).await,
        0,
        "a's uncommitted batch at {partition}@{offset} left nothing"
    );
    assert!(
        rows_by(&store, &consumer, "b", partition, offset).await > 0,
        "b applied the killed member's partition from where a stopped"
    );
    assert_exactly_once(&store, &consumer, EVENTS).await;
}

/// A zombie: consumer `z` (its id sorts after `b`, so that once `b` is a live member its fair
/// share of the one partition is nothing and it does not take the partition back) is stopped
/// (SIGSTOP) with a fetched batch in hand (`stall`: before the
/// batch's transaction, or inside it after the handler's write), past its lease; `b` takes the
/// partition over and finishes; `z` is resumed (SIGCONT) and applies its stale batch: the
/// advance is refused (fenced), so nothing of it commits.
async fn zombie_cannot_commit<DB: AppDb>(url: &str, store: Store<DB>, stall: &str) {
    const EVENTS: usize = 600;
    let (topic, ends) = seeded_topic(1, EVENTS, seed() ^ 2).await;
    let consumer = consumer_name("zombie");
    kafka::create_app_tables(&store).await;
    let mut a = Consumer::spawn(
        url,
        &topic,
        &consumer,
        "z",
        &["--batch-size", "20", stall, "4", "--stall-ms", "300"],
    );
    let stalled = a.expect("stalled").await;
    a.signal("-STOP");
    let (partition, at) = position(&stalled);
    // Stalled in the handler, the zombie's whole first batch is in its open transaction.
    let in_transaction = stall == "--stall-in-handler";
    let from = if in_transaction { 0 } else { at };
    let b = Consumer::spawn(url, &topic, &consumer, "b", &[]);
    wait_holder(&store, &consumer, &topic, "b").await;
    if in_transaction {
        // b's claims of the zombie's events wait for its open transaction: resume it first.
        a.signal("-CONT");
        a.expect_containing("fenced=1").await;
        kafka::wait_settled(&store, &consumer, &topic, &ends, SETTLE_TIMEOUT).await;
    } else {
        // b finishes the partition while the zombie sleeps, then the zombie wakes up.
        kafka::wait_settled(&store, &consumer, &topic, &ends, SETTLE_TIMEOUT).await;
        a.signal("-CONT");
        a.expect_containing("fenced=1").await;
    }
    a.stop().await;
    b.stop().await;
    assert_eq!(
        rows_by(&store, &consumer, "z", partition, from).await,
        0,
        "the zombie wrote nothing from its stale batch at {partition}@{from} on"
    );
    assert_exactly_once(&store, &consumer, EVENTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_ten_points_sqlite() {
    let (dir, store) = idem_testkit::sqlite_store().await;
    sigkill_at_ten_points::<Sqlite>(&sqlite_url(&dir), store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_ten_points_postgres() {
    sigkill_at_ten_points::<Postgres>(&pg_url().await, idem_testkit::pg_store().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_at_ten_points_mysql() {
    sigkill_at_ten_points::<MySql>(&mysql_url().await, idem_testkit::mysql_store().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivor_takes_over_a_killed_member_sqlite() {
    let (dir, store) = idem_testkit::sqlite_store().await;
    survivor_takes_over_a_killed_member::<Sqlite>(&sqlite_url(&dir), store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivor_takes_over_a_killed_member_postgres() {
    survivor_takes_over_a_killed_member::<Postgres>(
        &pg_url().await,
        idem_testkit::pg_store().await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn survivor_takes_over_a_killed_member_mysql() {
    survivor_takes_over_a_killed_member::<MySql>(
        &mysql_url().await,
        idem_testkit::mysql_store().await,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_with_a_batch_in_hand_cannot_commit_sqlite() {
    let (dir, store) = idem_testkit::sqlite_store().await;
    zombie_cannot_commit::<Sqlite>(&sqlite_url(&dir), store, "--stall-before-batch").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_with_a_batch_in_hand_cannot_commit_postgres() {
    zombie_cannot_commit::<Postgres>(
        &pg_url().await,
        idem_testkit::pg_store().await,
        "--stall-before-batch",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_with_a_batch_in_hand_cannot_commit_mysql() {
    zombie_cannot_commit::<MySql>(
        &mysql_url().await,
        idem_testkit::mysql_store().await,
        "--stall-before-batch",
    )
    .await;
}

/// On PostgreSQL and MySQL the zombie can also be stopped inside its open transaction (SQLite's
/// single writer would hold every other member back until it resumes): the new holder's claims
/// of the same events wait for the zombie's transaction, which is refused at its advance and
/// rolls back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_inside_its_transaction_cannot_commit_postgres() {
    zombie_cannot_commit::<Postgres>(
        &pg_url().await,
        idem_testkit::pg_store().await,
        "--stall-in-handler",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zombie_inside_its_transaction_cannot_commit_mysql() {
    zombie_cannot_commit::<MySql>(
        &mysql_url().await,
        idem_testkit::mysql_store().await,
        "--stall-in-handler",
    )
    .await;
}
