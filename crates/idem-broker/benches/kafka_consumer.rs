//! Kafka consumer throughput on PostgreSQL: idem's consumer (the inbox claim, the output row and
//! the offset advance of each batch in one transaction) against two baselines that use the same
//! transport (same fetches, same batches, same leases) and write the same output row per
//! message, but keep the offset in memory and claim nothing:
//!
//! - **bare**: each batch's rows in one transaction (the ceiling at that batch size);
//! - **naive**: each message's row in its own transaction (the usual hand-written consumer).
//!
//! At batch sizes 1 and 100. Every variant reads the same topic under its own consumer name (its
//! own cursor), in rounds that alternate the order; the median of the rounds' ratios is printed.
//!
//! Needs the test broker (`IDEM_TEST_KAFKA`, default 127.0.0.1:19092) and PostgreSQL
//! (`IDEM_TEST_POSTGRES_URL`). Run: `cargo bench -p idem-broker --bench kafka_consumer`
//! (`IDEM_BENCH_MESSAGES` sets the messages of a batch-size-1 round, default 2000; rounds at
//! batch size 100 have ten times as many).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use idem_broker::{BatchOutcome, KafkaConsumer, KafkaProcessor, PartitionBatch, PartitionSink};
use idem_core::Name;
use idem_sql::sqlx::{self, Postgres, Transaction};
use idem_sql::{BoxFuture, PgStore};
use tokio::sync::Notify;

// The integration tests' Kafka support (topics, producing events); the bench uses a part of it.
#[allow(dead_code)]
#[path = "../tests/it/kafka_support.rs"]
mod kafka;

const ROUNDS: usize = 5;
const PARTITIONS: i32 = 4;
const INSERT: &str = "INSERT INTO bench_kafka_rows (event, body) VALUES ($1, $2)";

/// The baselines: the same output rows, no inbox, the offset in memory.
struct Plain {
    store: PgStore,
    per_message: bool,
    settled: Arc<AtomicU64>,
}

impl PartitionSink for Plain {
    async fn apply(&self, batch: &PartitionBatch) -> Result<BatchOutcome, idem_sql::Error> {
        if self.per_message {
            for message in &batch.messages {
                let mut tx = self.store.begin().await?;
                write(&mut tx, message.offset, message.payload()).await?;
                tx.commit().await?;
            }
        } else {
            let mut tx = self.store.begin().await?;
            for message in &batch.messages {
                write(&mut tx, message.offset, message.payload()).await?;
            }
            tx.commit().await?;
        }
        self.settled
            .fetch_add(batch.messages.len() as u64, Ordering::Relaxed);
        Ok(BatchOutcome::Settled)
    }
}

async fn write(
    tx: &mut Transaction<'static, Postgres>,
    offset: i64,
    body: &[u8],
) -> Result<(), idem_sql::Error> {
    sqlx::query(INSERT)
        .bind(offset.to_string())
        .bind(body.to_vec())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

fn handler<'t>(
    tx: &'t mut Transaction<'static, Postgres>,
    message: &'t idem_broker::KafkaMessage,
) -> BoxFuture<'t, Result<(), idem_sql::Error>> {
    Box::pin(async move { write(tx, message.offset, message.payload()).await })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Idem,
    Bare,
    Naive,
}

/// Consumes the whole topic with `variant` at `batch_size`; returns messages per second.
async fn consume(
    store: &PgStore,
    topic: &str,
    variant: Variant,
    batch_size: usize,
    total: u64,
    round: usize,
) -> anyhow::Result<f64> {
    let client = kafka::client().await;
    let consumer = Name::new(
        "consumer",
        format!(
            "bench_{variant:?}_{batch_size}_{round}_{}",
            std::process::id()
        )
        .to_lowercase(),
    )?;
    let settled = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(Notify::new());
    let stopped = Arc::clone(&stop);
    let started = Instant::now();
    let mut poller = None;
    let task = match variant {
        Variant::Idem => {
            let processor = KafkaProcessor::new(
                store.clone(),
                &consumer,
                Name::new("source", "bench")?,
                handler,
            );
            let stats = processor.stats();
            let counter = Arc::clone(&settled);
            poller = Some(tokio::spawn(async move {
                loop {
                    let c = stats.get();
                    counter.store(c.applied + c.duplicate, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }));
            let c = KafkaConsumer::new(client, store.clone(), &consumer, topic, processor)?
                .batch_size(batch_size)
                .fetch_max_wait(Duration::from_millis(20));
            tokio::spawn(async move { c.run(stopped.notified_owned()).await })
        }
        Variant::Bare | Variant::Naive => {
            let sink = Plain {
                store: store.clone(),
                per_message: variant == Variant::Naive,
                settled: Arc::clone(&settled),
            };
            let c = KafkaConsumer::new(client, store.clone(), &consumer, topic, sink)?
                .batch_size(batch_size)
                .fetch_max_wait(Duration::from_millis(20));
            tokio::spawn(async move { c.run(stopped.notified_owned()).await })
        }
    };
    let deadline = started + Duration::from_secs(600);
    while settled.load(Ordering::Relaxed) < total {
        anyhow::ensure!(Instant::now() < deadline, "{variant:?} did not finish");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed();
    stop.notify_one();
    task.await??;
    if let Some(poller) = poller {
        poller.abort();
    }
    Ok(total as f64 / elapsed.as_secs_f64())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let base: usize = std::env::var("IDEM_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let store = idem_testkit::pg_store().await;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_kafka_rows (event TEXT NOT NULL, body BYTEA NOT NULL)",
    )
    .execute(store.pool())
    .await?;
    let client = kafka::client().await;
    println!(
        "Kafka consumer throughput, PostgreSQL, {PARTITIONS} partitions, median of {ROUNDS} rounds"
    );
    for batch_size in [1usize, 100] {
        let messages = if batch_size == 1 { base } else { base * 10 };
        let (mut vs_bare, mut vs_naive) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            // A fresh topic per round, read by every variant (each its own cursor).
            let topic = kafka::create_topic(&client, "bench", PARTITIONS).await;
            let total =
                kafka::publish_events(&client, &topic, PARTITIONS, messages, 0.0, round as u64)
                    .await as u64;
            let mut order = vec![Variant::Idem, Variant::Bare, Variant::Naive];
            order.rotate_left(round % 3);
            let mut rates = [0.0; 3];
            for variant in order {
                let rate = consume(&store, &topic, variant, batch_size, total, round).await?;
                rates[variant as usize] = rate;
            }
            let [idem, bare, naive] = rates;
            println!(
                "  batch {batch_size:>3}, round {round}: idem {idem:>8.0} msg/s, bare {bare:>8.0} msg/s, naive {naive:>8.0} msg/s"
            );
            vs_bare.push(idem / bare);
            vs_naive.push(idem / naive);
            sqlx::query("TRUNCATE bench_kafka_rows")
                .execute(store.pool())
                .await?;
        }
        println!(
            "batch {batch_size:>3}: idem / bare = {:.2}x, idem / naive = {:.2}x ({messages} messages per round)",
            median(vs_bare),
            median(vs_naive)
        );
    }
    Ok(())
}
