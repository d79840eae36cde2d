//! Consumer throughput: the JetStream consumer with idem's inbox on PostgreSQL (claim + handler
//! write in one transaction, then ack) against the same pull-and-ack loop with no inbox (the
//! handler's write in its own transaction, then ack), on the same stream, in the same run.
//!
//! Both pull batches of as many messages as they have free slots and process up to 1 or 8
//! messages at once, each in its own transaction. Each round runs the two back to back on fresh
//! messages (alternating which goes first), so that drift in the machine (other builds on a
//! shared host) affects both alike; the ratio of each round is printed, and the median of the
//! rounds' ratios is the result.
//!
//! Needs NATS JetStream on 127.0.0.1:4222 and PostgreSQL (`IDEM_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/postgres`). Run: `cargo bench -p idem-broker --bench
//! consumer_throughput` (`IDEM_BENCH_MESSAGES` sets the messages per round, default 3000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::consumer::pull::Config as PullConfig;
use async_nats::jetstream::{self, stream};
use futures_util::StreamExt;
use idem_broker::{JetStreamConsumer, Processor};
use idem_core::Name;
use idem_sql::sqlx::{self, Postgres, Transaction};
use idem_sql::{BoxFuture, PgStore, Runner};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

const NATS: &str = "127.0.0.1:4222";
const ROUNDS: usize = 5;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let messages: usize = std::env::var("IDEM_BENCH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000);
    let store = idem_testkit::pg_store().await;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS bench_consumer_rows (id TEXT NOT NULL, body BYTEA NOT NULL)",
    )
    .execute(store.pool())
    .await?;
    let client = async_nats::connect(NATS).await?;
    let js = jetstream::new(client.clone());
    let stream_name = format!("IDEM_BENCH_CONSUMER_{}", std::process::id());
    let subject = format!("idem.bench.consumer.{}", std::process::id());
    js.create_stream(stream::Config {
        name: stream_name.clone(),
        subjects: vec![subject.clone()],
        ..Default::default()
    })
    .await?;

    println!("consumer throughput, {messages} messages per round, PostgreSQL, NATS JetStream");
    for concurrency in [1usize, 8] {
        let mut ratios = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            // One batch of messages per round, read by one fresh durable consumer per variant.
            let first_seq = publish(&js, &subject, round, concurrency, messages).await?;
            let plain = durable(
                &js,
                &stream_name,
                &format!("plain_{concurrency}_{round}"),
                first_seq,
            )
            .await?;
            let idem = durable(
                &js,
                &stream_name,
                &format!("idem_{concurrency}_{round}"),
                first_seq,
            )
            .await?;
            // Alternate which runs first, so that neither always meets the fresher stream.
            let (rate_plain, rate_idem) = if round % 2 == 0 {
                let plain = run_plain(&store, plain, concurrency, messages).await?;
                (
                    plain,
                    run_idem(&store, idem, concurrency, messages, round).await?,
                )
            } else {
                let idem = run_idem(&store, idem, concurrency, messages, round).await?;
                (run_plain(&store, plain, concurrency, messages).await?, idem)
            };
            let ratio = rate_idem / rate_plain;
            println!(
                "  concurrency {concurrency}, round {round}: no inbox {rate_plain:>8.0} msg/s, idem inbox {rate_idem:>8.0} msg/s, ratio {ratio:.2}"
            );
            ratios.push(ratio);
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "concurrency {concurrency}: median ratio idem inbox / no inbox = {:.2} (min {:.2}, max {:.2})",
            ratios[ROUNDS / 2],
            ratios[0],
            ratios[ROUNDS - 1]
        );
    }
    js.delete_stream(&stream_name).await?;
    sqlx::query("DROP TABLE bench_consumer_rows")
        .execute(store.pool())
        .await?;
    Ok(())
}

/// Publishes `n` messages with distinct message ids; returns the stream sequence of the first.
async fn publish(
    js: &jetstream::Context,
    subject: &str,
    round: usize,
    concurrency: usize,
    n: usize,
) -> anyhow::Result<u64> {
    let mut first = None;
    let mut acks = Vec::with_capacity(n);
    for i in 0..n {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(
            async_nats::header::NATS_MESSAGE_ID,
            format!("c{concurrency}-r{round}-m{i}").as_str(),
        );
        acks.push(
            js.publish_with_headers(subject.to_owned(), headers, format!("{{\"n\":{i}}}").into())
                .await?,
        );
    }
    for ack in acks {
        let ack = ack.await?;
        first.get_or_insert(ack.sequence);
    }
    first.ok_or_else(|| anyhow::anyhow!("no messages published"))
}

async fn durable(
    js: &jetstream::Context,
    stream: &str,
    name: &str,
    first_seq: u64,
) -> anyhow::Result<PullConsumer> {
    Ok(js
        .get_stream(stream)
        .await?
        .create_consumer(PullConfig {
            durable_name: Some(name.to_owned()),
            deliver_policy: jetstream::consumer::DeliverPolicy::ByStartSequence {
                start_sequence: first_seq,
            },
            ..Default::default()
        })
        .await?)
}

/// The baseline: the same pull-and-ack loop, the handler's write in its own transaction, no
/// inbox. Returns messages per second.
async fn run_plain(
    store: &PgStore,
    pull: PullConsumer,
    concurrency: usize,
    n: usize,
) -> anyhow::Result<f64> {
    let slots = Arc::new(Semaphore::new(concurrency));
    let mut tasks = JoinSet::new();
    let start = Instant::now();
    let mut received = 0;
    while received < n {
        let mut permits = vec![Arc::clone(&slots).acquire_owned().await?];
        while let Ok(p) = Arc::clone(&slots).try_acquire_owned() {
            permits.push(p);
        }
        let mut batch = pull
            .batch()
            .max_messages(permits.len().min(n - received))
            .expires(Duration::from_secs(5))
            .messages()
            .await?;
        while let Some(message) = batch.next().await {
            let message = message.map_err(|e| anyhow::anyhow!(e))?;
            let Some(permit) = permits.pop() else { break };
            received += 1;
            let store = store.clone();
            tasks.spawn(async move {
                let id = message
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
                    .map(|v| v.as_str().to_owned())
                    .unwrap_or_default();
                let mut tx = store.begin().await.expect("begin");
                sqlx::query("INSERT INTO bench_consumer_rows (id, body) VALUES ($1, $2)")
                    .bind(&id)
                    .bind(message.payload.to_vec())
                    .execute(&mut *tx)
                    .await
                    .expect("insert");
                tx.commit().await.expect("commit");
                message.ack().await.expect("ack");
                drop(permit);
            });
            while tasks.try_join_next().is_some() {}
        }
    }
    while tasks.join_next().await.is_some() {}
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

fn handler<'t>(
    tx: &'t mut Transaction<'static, Postgres>,
    delivery: &'t idem_broker::Delivery,
) -> BoxFuture<'t, Result<(), idem_sql::Error>> {
    Box::pin(async move {
        sqlx::query("INSERT INTO bench_consumer_rows (id, body) VALUES ($1, $2)")
            .bind(delivery.message_id.as_deref().unwrap_or_default())
            .bind(delivery.payload.to_vec())
            .execute(&mut **tx)
            .await?;
        Ok(())
    })
}

/// idem's consumer: claim + the same write in one transaction, then ack.
async fn run_idem(
    store: &PgStore,
    pull: PullConsumer,
    concurrency: usize,
    n: usize,
    round: usize,
) -> anyhow::Result<f64> {
    let consumer = Name::new("consumer", format!("bench_{concurrency}_{round}_v1"))?;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "bench")?,
        handler,
    );
    let stats = processor.stats();
    let stop = Arc::new(Notify::new());
    let waiter = Arc::clone(&stop);
    let start = Instant::now();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)?
            .concurrency(concurrency)
            .run(async move { waiter.notified().await }),
    );
    while stats.get().applied < n as u64 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = start.elapsed();
    stop.notify_one();
    run.await??;
    Ok(n as f64 / elapsed.as_secs_f64())
}
