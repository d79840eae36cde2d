//! The consumer of the crash test (`crash.rs`): a child process, this test binary run again
//! ([`idem_testkit::child`]), that applies the deterministic delivery stream of
//! [`idem_testkit::crash_stream`] through [`idem_sql::Runner`]; the test kills it with SIGKILL
//! again and again, then checks that every event took effect exactly once.
//!
//! ```text
//! crash-consumer --database-url URL --events N [--duplicates 0.3] --seed S
//!                [--pause-at K] [--cursor FILE]
//! ```
//!
//! It resumes at the position in the cursor file (the broker offset; 0 when the file is
//! missing). Per delivery, in one transaction, the runner claims the event, advances the entity's
//! version and the handler inserts the effect row (`crash_effects`, one per event id: a second
//! insert fails on the primary key) and increments the entity's counter (`crash_counters`).
//! After the commit it prints `committed <position> <outcome>` and only then writes the next
//! position to the cursor file (the ack): a kill between the two redelivers that delivery, as a
//! real broker does. With `--pause-at K` it stops inside the open transaction of delivery K,
//! after the claim and the writes, prints `paused <K>` and waits to be killed. At the end of the
//! stream it prints `done` and exits 0.
//!
//! Outcomes are checked against the stream: a redelivery must be a duplicate; a first delivery
//! must be applied, unless it is the first one after a restart (its commit may have happened
//! without its ack). Any other outcome is an error (exit 1).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use clap::Parser;
use idem_core::{DedupKey, Entity, EventId, Name, Version};
use idem_sql::{Event, Outcome, Runner, Store};
use idem_sql::{MySqlStore, PgStore, SqliteStore};
use idem_testkit::AppDb;
use idem_testkit::crash_stream::{self, Delivery, Stream};

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "Applies the crash test's delivery stream; meant to be killed")]
struct Args {
    /// `sqlite://path`, `postgres://…` or `mysql://…`.
    #[arg(long)]
    database_url: String,
    /// Number of distinct events.
    #[arg(long)]
    events: usize,
    /// Share of deliveries that are redeliveries of earlier events, in 0.0..1.0.
    #[arg(long, default_value_t = 0.3)]
    duplicates: f64,
    /// Seed of the delivery stream.
    #[arg(long)]
    seed: u64,
    /// Stop inside the open transaction of this delivery (0-based position) and wait.
    #[arg(long)]
    pause_at: Option<usize>,
    /// File holding the next position to process (the broker offset).
    #[arg(long)]
    cursor: Option<PathBuf>,
}

/// Key columns of a fixed length: MySQL indexes no `TEXT` column without a prefix length.
const CREATE_EFFECTS: &str = "CREATE TABLE IF NOT EXISTS crash_effects \
     (event_id VARCHAR(255) PRIMARY KEY, entity VARCHAR(255) NOT NULL)";
const CREATE_COUNTERS: &str = "CREATE TABLE IF NOT EXISTS crash_counters (entity VARCHAR(255) PRIMARY KEY, n BIGINT NOT NULL)";
const INSERT_EFFECT: &str = "INSERT INTO crash_effects (event_id, entity) VALUES ($1, $2)";
const INCREMENT_COUNTER: &str = "INSERT INTO crash_counters (entity, n) VALUES ($1, 1) \
     ON CONFLICT (entity) DO UPDATE SET n = crash_counters.n + 1";
const INCREMENT_COUNTER_MYSQL: &str = "INSERT INTO crash_counters (entity, n) VALUES ($1, 1) \
     ON DUPLICATE KEY UPDATE n = n + 1";

/// The name [`crate::crash`] starts this child under.
pub(crate) const NAME: &str = "crash-consumer";
/// The test that is this child's `main`.
pub(crate) const TEST: &str = "crash_consumer::crash_consumer";

/// The child's `main`: does nothing unless the crash test started this process
/// ([`idem_testkit::child::args`]); then exits 0 at the end of the stream, 1 on an error.
#[test]
#[ignore = "a child process of the crash test, which starts it"]
fn crash_consumer() {
    let Some(args) = idem_testkit::child::args(NAME) else {
        return;
    };
    let args = Args::parse_from(args);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("crash-consumer: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    ensure!(
        (0.0..1.0).contains(&args.duplicates),
        "--duplicates must be in 0.0..1.0, got {}",
        args.duplicates
    );
    let url = args.database_url.as_str();
    if url.starts_with("sqlite:") {
        let store = SqliteStore::connect_with(url, 1)
            .await
            .with_context(|| format!("connect to {url}"))?;
        consume(store, &args).await
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        let store = PgStore::connect_with(url, 1)
            .await
            .with_context(|| format!("connect to {url}"))?;
        consume(store, &args).await
    } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        let store = MySqlStore::connect_with(url, 1)
            .await
            .with_context(|| format!("connect to {url}"))?;
        consume(store, &args).await
    } else {
        bail!("--database-url must start with sqlite:, postgres: or mysql:, got {url}")
    }
}

async fn consume<DB: AppDb>(store: Store<DB>, args: &Args) -> anyhow::Result<()> {
    store.migrate().await.context("migrate idem's tables")?;
    {
        let mut conn = store
            .pool()
            .acquire()
            .await
            .context("acquire a connection")?;
        for sql in [CREATE_EFFECTS, CREATE_COUNTERS] {
            DB::execute(&mut conn, sql, vec![])
                .await
                .with_context(|| format!("create the application's tables: {sql}"))?;
        }
    }
    let stream = Stream::generate(args.events, args.duplicates, args.seed);
    let start = match &args.cursor {
        Some(path) => read_cursor(path)?,
        None => 0,
    };
    if let Some(k) = args.pause_at {
        // Otherwise the run never pauses and the caller waits for a line that never comes.
        ensure!(
            (start..stream.deliveries().len()).contains(&k),
            "--pause-at {k} is outside the deliveries left: {start}..{}",
            stream.deliveries().len()
        );
    }
    let consumer = Name::new("consumer", crash_stream::CONSUMER)?;
    let source = Name::new("source", crash_stream::SOURCE)?;
    let runner = Runner::new(store.clone(), &consumer);
    for (position, delivery) in stream.deliveries().iter().enumerate().skip(start) {
        let pause = args.pause_at == Some(position);
        let outcome = apply(&runner, &source, (position, delivery), pause)
            .await
            .with_context(|| {
                format!(
                    "apply delivery {position} ({})",
                    crash_stream::event_id(delivery.event)
                )
            })?;
        check_outcome(delivery, position == start, &outcome)
            .with_context(|| format!("delivery {position}"))?;
        if pause {
            // The handler waits inside the transaction; reaching here means it never ran.
            bail!("delivery {position} was a duplicate: no transaction to pause in");
        }
        say(format_args!("committed {position} {}", outcome.name()))?;
        if let Some(path) = &args.cursor {
            write_cursor(path, position + 1)?;
        }
    }
    say(format_args!("done"))?;
    store.pool().close().await;
    Ok(())
}

/// Runs delivery `position` through the runner; with `pause`, prints `paused <position>` and
/// waits forever inside the transaction, after the claim and the handler's writes.
async fn apply<DB: AppDb>(
    runner: &Runner<DB>,
    source: &Name,
    (position, delivery): (usize, &Delivery),
    pause: bool,
) -> anyhow::Result<Outcome<()>> {
    let event_id = crash_stream::event_id(delivery.event);
    let entity_id = crash_stream::entity_id(delivery.entity);
    let event = Event::new(DedupKey::from_event(source, &EventId::new(&event_id)?)).with_entity(
        Entity::new(crash_stream::AGGREGATE_TYPE, &entity_id)?,
        Version::sequence(delivery.sequence),
    );
    let outcome = runner
        .run_boxed(&event, |tx| {
            let (event_id, entity_id) = (event_id.clone(), entity_id.clone());
            Box::pin(async move {
                DB::execute(
                    &mut **tx,
                    INSERT_EFFECT,
                    vec![event_id.into(), entity_id.clone().into()],
                )
                .await?;
                let increment = DB::dialect(INCREMENT_COUNTER, INCREMENT_COUNTER_MYSQL);
                DB::execute(&mut **tx, increment, vec![entity_id.into()]).await?;
                if pause {
                    say(format_args!("paused {position}")).map_err(idem_sql::Error::handler)?;
                    std::future::pending::<()>().await;
                }
                Ok(())
            })
        })
        .await?;
    Ok(outcome)
}

/// Whether `outcome` is what the stream allows at this point.
fn check_outcome(
    delivery: &Delivery,
    first_after_start: bool,
    outcome: &Outcome<()>,
) -> anyhow::Result<()> {
    let ok = match (delivery.first, outcome) {
        (false, Outcome::Duplicate) | (true, Outcome::Applied(())) => true,
        // The previous run may have committed this delivery and died before its ack.
        (true, Outcome::Duplicate) => first_after_start,
        _ => false,
    };
    ensure!(
        ok,
        "{} of {} (sequence {}, {}) came out {}",
        crash_stream::event_id(delivery.event),
        crash_stream::entity_id(delivery.entity),
        delivery.sequence,
        if delivery.first {
            "first delivery"
        } else {
            "redelivery"
        },
        outcome.name()
    );
    Ok(())
}

/// Reports one line to the test, flushed at once: the test acts on each line as it arrives.
fn say(line: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    idem_testkit::child::report(line);
    Ok(())
}

/// The next position to process, from the cursor file; 0 when there is none yet.
fn read_cursor(path: &Path) -> anyhow::Result<usize> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .trim()
            .parse()
            .with_context(|| format!("parse cursor file {}: {text:?}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("read cursor file {}", path.display())),
    }
}

/// Writes `position` to the cursor file through a rename, so that a kill never leaves a torn
/// file (the write itself is the ack, deliberately not atomic with the commit).
fn write_cursor(path: &Path, position: usize) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, position.to_string())
        .with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    Ok(())
}
