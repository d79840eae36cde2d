//! Outbox relay throughput against publishing the same messages directly with the client: a
//! benchmark that prints numbers, not a timed test; nothing here is gated.
//!
//! For NATS JetStream (127.0.0.1:4222) and RabbitMQ with publisher confirms (127.0.0.1:5672),
//! on a PostgreSQL store (a fresh database from `idem_testkit::pg_url`) and a SQLite store:
//!
//! - **relay**: `Relay::drain` until the outbox is empty, with 1 relay and with
//!   `IDEM_BENCH_RELAYS` (default 4) relays on the same store, batches of [`BATCH`] rows:
//!   claim, publish (pipelined, then all acks or confirms awaited), mark published; on
//!   PostgreSQL two batches are held by row locks at once, on SQLite the next batch is claimed
//!   while one is published. The rows were enqueued before the clock starts: writing them is
//!   the application's transaction, not the relay's work.
//! - **direct**: the same number of messages, same payload size and headers (`Nats-Msg-Id`; AMQP
//!   `message_id`, persistent, mandatory), published by the client in batches of [`BATCH`]
//!   with the same pipelining and the same wait for every ack or confirm. No database.
//!
//! Rounds alternate relay and direct on fresh message ids so that drift hits both alike; the
//! best round of each is reported. Ratio = relay throughput / direct throughput; target ≥ 0.5×.
//!
//! ```text
//! cargo bench -p idem-broker --bench relay_throughput             # 10,000 messages a round
//! cargo bench -p idem-broker --bench relay_throughput -- --quick  # 1,000
//! IDEM_BENCH_MESSAGES=50000 cargo bench -p idem-broker --bench relay_throughput
//! ```

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use async_nats::jetstream::{self, message::PublishMessage, stream};
use bytes::Bytes;
use idem_broker::{JetStreamPublisher, Publisher, RabbitMqPublisher, Relay};
use idem_sql::{Backend, OutboxMessage, Store};
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
    QueuePurgeOptions,
};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, Confirmation};

/// Rows per relay cycle and messages per direct batch.
const BATCH: usize = 500;
/// Payload bytes per message.
const PAYLOAD: usize = 256;
/// Rounds of each (relay and direct alternate).
const ROUNDS: usize = 3;
const NATS_URL: &str = "127.0.0.1:4222";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{}_{nanos}", std::process::id())
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64()
}

/// Writes `n` outbox rows to `destination` in transactions of 1,000 (not timed).
async fn fill<DB: Backend>(store: &Store<DB>, destination: &str, n: usize) -> anyhow::Result<()> {
    let outbox = store.outbox();
    let payload = vec![b'x'; PAYLOAD];
    let mut written = 0;
    while written < n {
        let mut tx = store.begin().await?;
        for _ in 0..(n - written).min(1000) {
            outbox
                .enqueue(&mut tx, &OutboxMessage::new(destination, payload.clone()))
                .await?;
            written += 1;
        }
        tx.commit().await?;
    }
    Ok(())
}

/// Runs `relays` until each finds nothing due; returns the time and the rows published. Several
/// relays on one store is the deployment the claim is built for: each cycle's database work
/// (claim, mark) overlaps the others' publishing.
async fn drain<DB: Backend, P: Publisher>(
    relays: &[Relay<DB, P>],
) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    let runs = relays.iter().map(|relay| async move {
        let report = relay.drain().await?;
        ensure!(
            report.failed == 0 && report.parked == 0,
            "publishes failed: {report:?}"
        );
        anyhow::Ok(report.published + report.duplicates)
    });
    let published = futures_util::future::try_join_all(runs)
        .await?
        .into_iter()
        .sum();
    Ok((started.elapsed(), published))
}

async fn direct_jetstream(
    js: &jetstream::Context,
    subject: &str,
    n: usize,
    round: &str,
) -> anyhow::Result<Duration> {
    let payload = Bytes::from(vec![b'x'; PAYLOAD]);
    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        let mut acks = Vec::with_capacity(BATCH);
        for _ in 0..(n - sent).min(BATCH) {
            let message = PublishMessage::build()
                .payload(payload.clone())
                .message_id(format!("direct-{round}-{sent}"));
            acks.push(js.send_publish(subject.to_owned(), message).await?);
            sent += 1;
        }
        for ack in acks {
            ensure!(!ack.await?.duplicate, "fresh ids are never duplicates");
        }
    }
    Ok(started.elapsed())
}

async fn direct_rabbitmq(
    channel: &lapin::Channel,
    queue: &str,
    n: usize,
    round: &str,
) -> anyhow::Result<Duration> {
    let payload = vec![b'x'; PAYLOAD];
    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        let mut confirms = Vec::with_capacity(BATCH);
        for _ in 0..(n - sent).min(BATCH) {
            let properties = BasicProperties::default()
                .with_message_id(ShortString::from(format!("direct-{round}-{sent}")))
                .with_delivery_mode(2)
                .with_headers(FieldTable::default());
            confirms.push(
                channel
                    .basic_publish(
                        "".into(),
                        queue.into(),
                        BasicPublishOptions {
                            mandatory: true,
                            immediate: false,
                        },
                        &payload,
                        properties,
                    )
                    .await?,
            );
            sent += 1;
        }
        for confirm in confirms {
            ensure!(confirm.await? == Confirmation::Ack(None), "not confirmed");
        }
    }
    Ok(started.elapsed())
}

struct Line {
    broker: &'static str,
    store: &'static str,
    /// Best msg/s with one relay, and with [`relay_count`] relays.
    relay: [f64; 2],
    direct: f64,
}

/// How many relays the "many relays" rows run (`IDEM_BENCH_RELAYS`, default 4).
fn relay_count() -> usize {
    std::env::var("IDEM_BENCH_RELAYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4)
}

/// Alternates relay (one, then many) and direct rounds; returns the best rates.
async fn rounds<DB, P, F, Fut>(
    store: &Store<DB>,
    destination: &str,
    n: usize,
    relays: &[Relay<DB, P>],
    mut direct: F,
) -> anyhow::Result<([f64; 2], f64)>
where
    DB: Backend,
    P: Publisher,
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<Duration>>,
{
    let (mut relay, mut best_direct) = ([0f64; 2], 0f64);
    for round in 0..ROUNDS {
        for (slot, count) in [(0, 1), (1, relays.len())] {
            fill(store, destination, n).await?;
            let (elapsed, published) = drain(&relays[..count]).await?;
            ensure!(published == n as u64, "published {published} of {n}");
            relay[slot] = relay[slot].max(rate(n, elapsed));
        }
        best_direct = best_direct.max(rate(n, direct(round).await?));
    }
    Ok((relay, best_direct))
}

async fn bench_store<DB: Backend>(
    store: Store<DB>,
    store_name: &'static str,
    n: usize,
    lines: &mut Vec<Line>,
) -> anyhow::Result<()> {
    let id = run_id();

    // NATS JetStream.
    let js = jetstream::new(
        async_nats::connect(NATS_URL)
            .await
            .context("connect to NATS")?,
    );
    let stream_name = format!("idem_bench_{id}");
    js.create_stream(stream::Config {
        name: stream_name.clone(),
        subjects: vec![format!("{stream_name}.>")],
        max_age: Duration::from_secs(600),
        ..Default::default()
    })
    .await?;
    let subject = format!("{stream_name}.events");
    let relays: Vec<_> = (0..relay_count())
        .map(|_| {
            Relay::new(store.outbox(), JetStreamPublisher::new(js.clone())).batch_size(BATCH as u32)
        })
        .collect();
    let (relay, direct) = rounds(&store, &subject, n, &relays, |round| {
        let (js, subject, tag) = (js.clone(), subject.clone(), format!("{id}-{round}"));
        async move { direct_jetstream(&js, &subject, n, &tag).await }
    })
    .await?;
    js.delete_stream(&stream_name).await?;
    lines.push(Line {
        broker: "NATS JetStream",
        store: store_name,
        relay,
        direct,
    });

    // RabbitMQ with publisher confirms, to a durable queue through the default exchange.
    let connection = lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default())
        .await
        .context("connect to RabbitMQ")?;
    let channel = connection.create_channel().await?;
    channel
        .confirm_select(ConfirmSelectOptions::default())
        .await?;
    let queue = format!("idem_bench_{id}");
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await?;
    let mut relays = Vec::new();
    for _ in 0..relay_count() {
        relays.push(
            Relay::new(store.outbox(), RabbitMqPublisher::connect(AMQP_URL).await?)
                .batch_size(BATCH as u32),
        );
    }
    let (relay, direct) = rounds(&store, &queue, n, &relays, |round| {
        let (channel, queue, tag) = (channel.clone(), queue.clone(), format!("{id}-{round}"));
        async move {
            let elapsed = direct_rabbitmq(&channel, &queue, n, &tag).await?;
            channel
                .queue_purge(queue.as_str().into(), QueuePurgeOptions::default())
                .await?;
            Ok(elapsed)
        }
    })
    .await?;
    channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await?;
    lines.push(Line {
        broker: "RabbitMQ (confirms)",
        store: store_name,
        relay,
        direct,
    });
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let n: usize = match std::env::var("IDEM_BENCH_MESSAGES") {
        Ok(v) => v.parse().context("IDEM_BENCH_MESSAGES")?,
        Err(_) if quick => 1_000,
        Err(_) => 10_000,
    };
    let many = relay_count();
    println!(
        "relay throughput: {n} messages of {PAYLOAD} bytes per round, batches of {BATCH}, best of {ROUNDS} rounds; 1 relay and {many} relays on one store"
    );
    let mut lines = Vec::new();
    bench_store(idem_testkit::pg_store().await, "PostgreSQL", n, &mut lines).await?;
    let (_dir, sqlite) = idem_testkit::sqlite_store().await;
    bench_store(sqlite, "SQLite", n, &mut lines).await?;
    println!();
    println!(
        "{:<20} {:<11} {:>9} {:>12} {:>7}  target relay/direct ≥ 0.5×",
        "broker", "store", "relays", "msg/s", "ratio"
    );
    for line in &lines {
        println!(
            "{:<20} {:<11} {:>9} {:>12.0}",
            line.broker, line.store, "direct", line.direct
        );
        for (count, relay) in [(1, line.relay[0]), (many, line.relay[1])] {
            let ratio = relay / line.direct;
            println!(
                "{:<20} {:<11} {:>9} {:>12.0} {:>6.2}×  {}",
                line.broker,
                line.store,
                count,
                relay,
                ratio,
                if ratio >= 0.5 { "PASS" } else { "BELOW" }
            );
        }
    }
    Ok(())
}
