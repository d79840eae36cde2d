//! The consumer of the Kafka crash tests (`kafka_crash.rs`), a child process (this test binary
//! run again, [`idem_testkit::child`]): an idem-broker
//! [`KafkaConsumer`] with the [`KafkaProcessor`] sink writing one `kafka_effects` row per applied
//! message ([`crate::kafka_support::write_effect`]), which the tests kill with SIGKILL, pause with
//! SIGSTOP, and run side by side.
//!
//! ```text
//! kafka-crash-consumer --database-url URL --topic T --consumer NAME [--kafka HOST:PORT]
//!                      --member ID [--lease-ttl-ms 1000] [--batch-size 100]
//!                      [--pause-after N] [--stall-before-batch N | --stall-in-handler N]
//!                      [--stall-ms 500]
//! ```
//!
//! It prints `started <member>` once consuming, and `stats held=.. fenced=.. applied=..
//! duplicate=.. dead=..` whenever a count changed. With `--pause-after N` the handler's N-th call
//! prints `paused <partition> <offset>` after writing its effect row and waits for ever inside
//! the open transaction (to be killed there). With `--stall-before-batch N` the N-th batch
//! prints `stalled <partition> <from>` and waits `--stall-ms` before it is applied (the test
//! stops the process meanwhile: a batch in hand while its lease runs out); `--stall-in-handler N`
//! does the same inside the open transaction of the handler's N-th call. SIGTERM shuts it
//! down cleanly (`done`, exit 0).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::kafka_support::{self as kafka, write_effect};
use anyhow::{Context, bail};
use clap::Parser;
use idem_broker::{
    BatchOutcome, KafkaConsumer, KafkaProcessor, PartitionBatch, PartitionSink, RetryPolicy,
};
use idem_core::Name;
use idem_sql::{MySqlStore, PgStore, SqliteStore, Store};
use idem_testkit::AppDb;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(about = "Consumes a Kafka topic through idem; meant to be killed")]
struct Args {
    /// `sqlite://path`, `postgres://…` or `mysql://…`.
    #[arg(long)]
    database_url: String,
    /// The broker, `host:port` (default: IDEM_TEST_KAFKA or 127.0.0.1:19092).
    #[arg(long)]
    kafka: Option<String>,
    /// The topic.
    #[arg(long)]
    topic: String,
    /// The consumer name.
    #[arg(long)]
    consumer: String,
    /// The member id (also the `writer` of its effect rows).
    #[arg(long)]
    member: String,
    /// The lease ttl in ms.
    #[arg(long, default_value_t = 1000)]
    lease_ttl_ms: u64,
    /// The most messages per batch.
    #[arg(long, default_value_t = 100)]
    batch_size: usize,
    /// Pause for ever inside the transaction of the handler's N-th call (1-based).
    #[arg(long)]
    pause_after: Option<u64>,
    /// Stall before applying the N-th batch (1-based).
    #[arg(long)]
    stall_before_batch: Option<u64>,
    /// Stall inside the transaction of the handler's N-th call (1-based), after its writes.
    #[arg(long)]
    stall_in_handler: Option<u64>,
    /// How long a stall lasts, in ms.
    #[arg(long, default_value_t = 500)]
    stall_ms: u64,
}

/// The name [`crate::kafka_crash`] starts this child under.
pub(crate) const NAME: &str = "kafka-crash-consumer";
/// The test that is this child's `main`.
pub(crate) const TEST: &str = "kafka_crash_consumer::kafka_crash_consumer";

/// The child's `main`: does nothing unless a Kafka crash test started this process; then exits
/// 0 after a clean shutdown, 1 on an error.
#[test]
#[ignore = "a child process of the Kafka crash tests, which start it"]
fn kafka_crash_consumer() {
    let Some(args) = idem_testkit::child::args(NAME) else {
        return;
    };
    let args = Args::parse_from(args);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("kafka-crash-consumer: {e:#}");
            std::process::exit(1);
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let url = args.database_url.as_str();
    if url.starts_with("sqlite:") {
        let store = SqliteStore::connect_with(url, 4)
            .await
            .with_context(|| format!("connect to {url}"))?;
        consume(store, &args).await
    } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        let store = PgStore::connect_with(url, 8)
            .await
            .with_context(|| format!("connect to {url}"))?;
        consume(store, &args).await
    } else if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        let store = MySqlStore::connect_with(url, 8)
            .await
            .with_context(|| format!("connect to {url}"))?;
        consume(store, &args).await
    } else {
        bail!("--database-url must start with sqlite:, postgres: or mysql:, got {url}")
    }
}

/// Reports one line to the test, flushed at once (it reads lines as they come).
fn say(line: std::fmt::Arguments<'_>) {
    idem_testkit::child::report(line);
}

/// The processor, with a stall before one batch.
struct Stalling<DB: idem_sql::Backend> {
    inner: KafkaProcessor<DB>,
    batches: AtomicU64,
    stall_before: Option<u64>,
    stall: Duration,
}

impl<DB: idem_sql::Backend> PartitionSink for Stalling<DB> {
    async fn apply(&self, batch: &PartitionBatch) -> Result<BatchOutcome, idem_sql::Error> {
        let n = self.batches.fetch_add(1, Ordering::SeqCst) + 1;
        if self.stall_before == Some(n) {
            say(format_args!("stalled {} {}", batch.partition(), batch.from));
            tokio::time::sleep(self.stall).await;
        }
        self.inner.apply(batch).await
    }
}

async fn consume<DB: AppDb>(store: Store<DB>, args: &Args) -> anyhow::Result<()> {
    store.migrate().await.context("migrate idem's tables")?;
    kafka::create_app_tables(&store).await;
    let consumer = Name::new("consumer", args.consumer.clone())?;
    let source = Name::new("source", "kafka-crash")?;
    let addr = args.kafka.clone().unwrap_or_else(kafka::kafka_addr);
    let client = Arc::new(
        idem_broker::kafka_connect(&[addr])
            .await
            .context("connect to Kafka")?,
    );
    let calls = Arc::new(AtomicU64::new(0));
    let (pause_after, stall_in_handler) = (args.pause_after, args.stall_in_handler);
    let stall = Duration::from_millis(args.stall_ms);
    let writer = args.member.clone();
    let (handler_consumer, handler_calls) = (consumer.to_string(), Arc::clone(&calls));
    let processor = KafkaProcessor::new(store.clone(), &consumer, source, move |tx, message| {
        let (consumer, writer, calls) = (
            handler_consumer.clone(),
            writer.clone(),
            Arc::clone(&handler_calls),
        );
        Box::pin(async move {
            write_effect(tx, &consumer, &writer, message).await?;
            let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
            if pause_after == Some(n) {
                say(format_args!(
                    "paused {} {}",
                    message.partition, message.offset
                ));
                std::future::pending::<()>().await;
            }
            if stall_in_handler == Some(n) {
                say(format_args!(
                    "stalled {} {}",
                    message.partition, message.offset
                ));
                tokio::time::sleep(stall).await;
            }
            Ok(())
        })
    })
    .retry(RetryPolicy::new(
        3,
        vec![Duration::from_millis(20), Duration::from_millis(50)],
    )?);
    let messages = processor.stats();
    let sink = Stalling {
        inner: processor,
        batches: AtomicU64::new(0),
        stall_before: args.stall_before_batch,
        stall: Duration::from_millis(args.stall_ms),
    };
    let kafka_consumer = KafkaConsumer::new(client, store.clone(), &consumer, &args.topic, sink)?
        .lease_ttl(Duration::from_millis(args.lease_ttl_ms))?
        .batch_size(args.batch_size)
        .fetch_max_wait(Duration::from_millis(100))
        .member_id(args.member.clone())?;
    let partitions = kafka_consumer.stats();
    let member = kafka_consumer.member().to_owned();
    let reporter = tokio::spawn(async move {
        let mut last = String::new();
        loop {
            let (p, m) = (partitions.get(), messages.get());
            let line = format!(
                "stats held={} fenced={} applied={} duplicate={} dead={}",
                p.held, p.fenced, m.applied, m.duplicate, m.dead_lettered
            );
            if line != last {
                say(format_args!("{line}"));
                last = line;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listen for SIGTERM")?;
    say(format_args!("started {member}"));
    kafka_consumer
        .run(async move {
            terminate.recv().await;
        })
        .await?;
    reporter.abort();
    say(format_args!("done"));
    store.pool().close().await;
    Ok(())
}
