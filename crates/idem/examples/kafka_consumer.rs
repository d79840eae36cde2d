//! End to end on the embedded store: deposits written to the outbox in the application's
//! transaction are published to a Kafka topic by the relay (key = the account, header
//! `idem-message-id` = the row's message id), then published a second time, as a relay does
//! after a lost acknowledgement, so every deposit is in the topic twice at two offsets. The
//! consumer `ledger_v1` credits each deposit exactly once: the inbox claim, the balance update
//! and the partition's offset commit in one transaction.
//!
//! Needs a Kafka-protocol broker on 127.0.0.1:19092 (`scripts/services` starts tansu there), or
//! `KAFKA_BROKERS` (comma-separated `host:port`). Run:
//! `cargo run -p idem --example kafka_consumer`. Exits non-zero unless every account's
//! balance is the sum of its deposits, each credited once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use idem::broker::{
    KafkaConsumer, KafkaMessage, KafkaProcessor, KafkaPublisher, Publisher, Relay, kafka_connect,
};
use idem::{Entity, HandlerError, Name, OutboxMessage, OutboxStatus, SqliteStore, handler, sqlx};
use tokio::sync::Notify;

const ACCOUNTS: usize = 5;
const DEPOSITS: usize = 40;
const PARTITIONS: i32 = 3;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        SqliteStore::connect(&format!("sqlite://{}", dir.path().join("app.db").display())).await?;
    store.migrate().await?;
    sqlx::query(
        "CREATE TABLE balances (account TEXT PRIMARY KEY, cents INTEGER NOT NULL, deposits INTEGER NOT NULL)",
    )
    .execute(store.pool())
    .await?;

    let brokers: Vec<String> = std::env::var("KAFKA_BROKERS")
        .unwrap_or_else(|_| "127.0.0.1:19092".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let client = Arc::new(
        kafka_connect(&brokers)
            .await
            .with_context(|| format!("a Kafka broker must run on {brokers:?}"))?,
    );
    let topic = format!("idem-example-deposits-{}", std::process::id());
    client
        .controller_client()?
        .create_topic(&topic, PARTITIONS, 1, 5_000)
        .await
        .with_context(|| format!("create topic {topic}"))?;

    // The application: each deposit is an outbox message in its own transaction.
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..DEPOSITS {
        let account = format!("acct-{}", i % ACCOUNTS);
        let cents = 100 + i64::try_from(i)?;
        *expected.entry(account.clone()).or_default() += cents;
        let mut tx = store.begin().await?;
        store
            .outbox()
            .enqueue(
                &mut *tx,
                &OutboxMessage::new(&topic, format!("{account} {cents}"))
                    .with_aggregate(Entity::new("account", account)?),
            )
            .await?;
        tx.commit().await?;
    }
    let publisher = KafkaPublisher::new(Arc::clone(&client));
    let rows = store.outbox().list(OutboxStatus::Pending, 1_000).await?;
    let relay = Relay::new(store.outbox(), publisher);
    let report = relay.drain().await?;
    ensure!(report.published == DEPOSITS as u64, "relay: {report:?}");
    // The same rows once more, with the same message ids, at new offsets.
    let again = relay.publisher().publish(&rows).await;
    ensure!(again.len() == DEPOSITS, "republished {} rows", again.len());
    println!("published {DEPOSITS} deposits to {topic}, each twice");

    // The consumer: credit the account, once per deposit.
    let consumer = Name::new("consumer", "ledger_v1")?;
    let processor = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "deposits")?,
        handler!(async move |tx, message: &KafkaMessage| {
            let text = std::str::from_utf8(message.payload()).map_err(HandlerError::permanent)?;
            // A deposit that does not parse never will: dead-lettered at once, not retried.
            let (account, cents) = text
                .split_once(' ')
                .and_then(|(a, c)| Some((a, c.parse::<i64>().ok()?)))
                .ok_or_else(|| HandlerError::permanent(format!("bad deposit {text:?}")))?;
            sqlx::query(
                "INSERT INTO balances (account, cents, deposits) VALUES ($1, $2, 1) \
                 ON CONFLICT (account) DO UPDATE SET cents = balances.cents + excluded.cents, \
                 deposits = balances.deposits + 1",
            )
            .bind(account)
            .bind(cents)
            .execute(&mut *tx)
            .await?;
            Ok(())
        }),
    );
    let stats = processor.stats();
    let kafka_consumer = KafkaConsumer::new(
        Arc::clone(&client),
        store.clone(),
        &consumer,
        &topic,
        processor,
    )?
    .fetch_max_wait(Duration::from_millis(100));
    let stop = Arc::new(Notify::new());
    let stopped = Arc::clone(&stop);
    let running = tokio::spawn(async move { kafka_consumer.run(stopped.notified_owned()).await });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let counts = stats.get();
        if counts.applied + counts.duplicate == 2 * DEPOSITS as u64 {
            break;
        }
        ensure!(Instant::now() < deadline, "timed out: {counts:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.notify_one();
    running.await??;

    let counts = stats.get();
    println!(
        "consumer {consumer}: {} applied, {} duplicates (repeat rate {:.2})",
        counts.applied,
        counts.duplicate,
        counts.repeat_rate()
    );
    let balances: Vec<(String, i64, i64)> =
        sqlx::query_as("SELECT account, cents, deposits FROM balances ORDER BY account")
            .fetch_all(store.pool())
            .await?;
    for (account, cents, deposits) in &balances {
        println!("{account}: {cents} cents from {deposits} deposits");
        ensure!(
            expected.get(account) == Some(cents),
            "{account} has {cents} cents, expected {:?}",
            expected.get(account)
        );
    }
    ensure!(balances.len() == ACCOUNTS, "{} accounts", balances.len());
    ensure!(
        counts.applied == DEPOSITS as u64 && counts.duplicate == DEPOSITS as u64,
        "every deposit once: {counts:?}"
    );
    for offset in store.kafka_offsets(&consumer).list(&topic).await? {
        println!(
            "partition {}: next offset {:?} (holder {})",
            offset.partition, offset.next_offset, offset.holder
        );
    }
    client
        .controller_client()?
        .delete_topic(&topic, 5_000)
        .await
        .ok();
    println!("ok: each deposit credited exactly once");
    Ok(())
}
