//! Kafka test support: the broker the tests use (a real Kafka-protocol broker, `tansu`, started
//! by `scripts/test`), topics made fresh per test, records produced with idem's message-id header,
//! and the application's tables and handler that the Kafka consumer tests and the
//! `kafka-crash-consumer` child share.
//!
//! The broker address is `IDEM_TEST_KAFKA` (default [`DEFAULT_KAFKA_ADDR`]). Tests fail, and do
//! not skip, when no broker answers there.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idem_broker::rskafka::chrono::{TimeZone, Utc};
use idem_broker::rskafka::client::Client;
use idem_broker::rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};
use idem_broker::rskafka::record::Record;
use idem_broker::{KafkaMessage, MESSAGE_ID_HEADER, kafka_connect};
use idem_core::Name;
use idem_sql::sqlx::Transaction;
use idem_sql::{BoxFuture, Store};

use idem_testkit::{AppDb, Value};

/// The broker the tests use unless `IDEM_TEST_KAFKA` names another (`host:port`).
pub(crate) const DEFAULT_KAFKA_ADDR: &str = "127.0.0.1:19092";

/// The broker address: `IDEM_TEST_KAFKA` or [`DEFAULT_KAFKA_ADDR`].
pub(crate) fn kafka_addr() -> String {
    std::env::var("IDEM_TEST_KAFKA").unwrap_or_else(|_| DEFAULT_KAFKA_ADDR.to_owned())
}

/// A client of the test broker.
///
/// # Panics
/// When no broker answers at [`kafka_addr`]: the Kafka tests run against a real broker and do
/// not skip.
pub(crate) async fn client() -> Arc<Client> {
    let addr = kafka_addr();
    match kafka_connect(std::slice::from_ref(&addr)).await {
        Ok(client) => Arc::new(client),
        Err(e) => panic!(
            "no Kafka broker at {addr} (set IDEM_TEST_KAFKA, or run scripts/test, which starts tansu): {e}"
        ),
    }
}

/// A topic name unique to this run: `{prefix}-{pid}-{nanos}-{counter}`.
pub(crate) fn unique_topic(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a fresh topic with `partitions` partitions (replication 1) and waits until every
/// partition answers; returns its name.
///
/// # Panics
/// When the topic cannot be created.
pub(crate) async fn create_topic(client: &Client, prefix: &str, partitions: i32) -> String {
    let topic = unique_topic(prefix);
    client
        .controller_client()
        .expect("controller client")
        .create_topic(&topic, partitions, 1, 5_000)
        .await
        .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    for p in 0..partitions {
        let partition = client
            .partition_client(&topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap_or_else(|e| panic!("partition {topic}/{p}: {e}"));
        partition
            .get_offset(OffsetAt::Latest)
            .await
            .unwrap_or_else(|e| panic!("offset of {topic}/{p}: {e}"));
    }
    topic
}

/// A record with `key`, `value` and, when given, the event id in [`MESSAGE_ID_HEADER`].
pub(crate) fn record(key: Option<&str>, value: &[u8], message_id: Option<&str>) -> Record {
    let mut headers = BTreeMap::new();
    if let Some(id) = message_id {
        headers.insert(MESSAGE_ID_HEADER.to_owned(), id.as_bytes().to_vec());
    }
    Record {
        key: key.map(|k| k.as_bytes().to_vec()),
        value: Some(value.to_vec()),
        headers,
        timestamp: Utc
            .timestamp_millis_opt(1_700_000_000_000)
            .single()
            .unwrap_or_default(),
    }
}

/// Produces `records` to one partition, in chunks of 500; returns their offsets.
///
/// # Panics
/// When the broker does not acknowledge them.
pub(crate) async fn produce(
    client: &Client,
    topic: &str,
    partition: i32,
    records: Vec<Record>,
) -> Vec<i64> {
    let target = client
        .partition_client(topic, partition, UnknownTopicHandling::Retry)
        .await
        .unwrap_or_else(|e| panic!("partition {topic}/{partition}: {e}"));
    let mut offsets = Vec::with_capacity(records.len());
    let mut records = records.into_iter().peekable();
    while records.peek().is_some() {
        let chunk: Vec<Record> = records.by_ref().take(500).collect();
        let done = target
            .produce(chunk, Compression::NoCompression)
            .await
            .unwrap_or_else(|e| panic!("produce to {topic}/{partition}: {e}"));
        offsets.extend(done);
    }
    offsets
}

/// The high watermark (the offset after the last record) of each partition `0..partitions`.
///
/// # Panics
/// When the broker does not answer.
pub(crate) async fn high_watermarks(
    client: &Client,
    topic: &str,
    partitions: i32,
) -> BTreeMap<i32, i64> {
    let mut marks = BTreeMap::new();
    for p in 0..partitions {
        let partition = client
            .partition_client(topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap_or_else(|e| panic!("partition {topic}/{p}: {e}"));
        // From a fetch's answer: tansu 0.6 answers ListOffsets(latest) with the last record
        // batch's base offset + 1, not the high watermark.
        let (_, end) = partition
            .fetch_records(0, 1..1_000_000, 10)
            .await
            .unwrap_or_else(|e| panic!("high watermark of {topic}/{p}: {e}"));
        marks.insert(p, end);
    }
    marks
}

/// The event ids of a run: `evt-{i}` for `i < events`.
pub(crate) fn event_id(i: usize) -> String {
    format!("evt-{i}")
}

/// Publishes `events` events over `partitions` partitions (event `i` to partition
/// `i % partitions`, key `key-{i % 50}`), and republishes a seeded `republish` share of them at
/// new offsets (later, same partition, same [`MESSAGE_ID_HEADER`]). Returns how many records
/// were written.
///
/// # Panics
/// When producing fails.
pub(crate) async fn publish_events(
    client: &Client,
    topic: &str,
    partitions: i32,
    events: usize,
    republish: f64,
    seed: u64,
) -> usize {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let width = usize::try_from(partitions).unwrap_or(1).max(1);
    let mut by_partition: Vec<Vec<Record>> = vec![Vec::new(); width];
    let mut copies = Vec::new();
    for i in 0..events {
        let id = event_id(i);
        let key = format!("key-{}", i % 50);
        let rec = record(Some(&key), id.as_bytes(), Some(&id));
        by_partition[i % width].push(rec.clone());
        if rng.random_bool(republish) {
            copies.push((i % width, rec));
        }
        // Copies go out later, interleaved with newer events.
        if !copies.is_empty() && rng.random_bool(0.3) {
            let (p, copy) = copies.swap_remove(rng.random_range(0..copies.len()));
            by_partition[p].push(copy);
        }
    }
    for (p, copy) in copies {
        by_partition[p].push(copy);
    }
    let mut written = 0;
    for (p, records) in by_partition.into_iter().enumerate() {
        written += records.len();
        let p = i32::try_from(p).unwrap_or(0);
        produce(client, topic, p, records).await;
    }
    written
}

const CREATE_EFFECTS: &str = "CREATE TABLE IF NOT EXISTS kafka_effects (\
     consumer TEXT NOT NULL, event TEXT NOT NULL, kafka_partition BIGINT NOT NULL, \
     kafka_offset BIGINT NOT NULL, delivered BIGINT NOT NULL, writer TEXT NOT NULL)";
const CREATE_ORDER: &str = "CREATE TABLE IF NOT EXISTS kafka_order (\
     consumer VARCHAR(255) NOT NULL, kafka_partition BIGINT NOT NULL, last_offset BIGINT NOT NULL, \
     violations BIGINT NOT NULL, PRIMARY KEY (consumer, kafka_partition))";
const INSERT_EFFECT: &str = "INSERT INTO kafka_effects \
     (consumer, event, kafka_partition, kafka_offset, delivered, writer) \
     VALUES ($1, $2, $3, $4, $5, $6)";
/// Counts, in the handler's transaction, every applied message whose offset is not above the
/// last applied one of its partition: per-partition order violations.
const CHECK_ORDER: &str = "INSERT INTO kafka_order (consumer, kafka_partition, last_offset, violations) \
     VALUES ($1, $2, $3, 0) ON CONFLICT (consumer, kafka_partition) DO UPDATE SET \
     violations = kafka_order.violations + \
         CASE WHEN excluded.last_offset > kafka_order.last_offset THEN 0 ELSE 1 END, \
     last_offset = excluded.last_offset";
/// [`CHECK_ORDER`] on MySQL, which assigns left to right: `violations` reads the old offset.
const CHECK_ORDER_MYSQL: &str = "INSERT INTO kafka_order \
     (consumer, kafka_partition, last_offset, violations) VALUES ($1, $2, $3, 0) \
     ON DUPLICATE KEY UPDATE \
     violations = violations + CASE WHEN $3 > last_offset THEN 0 ELSE 1 END, last_offset = $3";

/// Creates the application's tables of the Kafka tests (`kafka_effects`: one row per applied
/// message; `kafka_order`: per-partition order check). Tests of one process share a PostgreSQL
/// database, so a concurrent CREATE may fail once: tried again.
///
/// # Panics
/// When the tables cannot be created.
pub(crate) async fn create_app_tables<DB: AppDb>(store: &Store<DB>) {
    for sql in [CREATE_EFFECTS, CREATE_ORDER] {
        for attempt in 0..5 {
            let mut conn = store.pool().acquire().await.expect("acquire a connection");
            match DB::execute(&mut conn, sql, vec![]).await {
                Ok(_) => break,
                Err(e) if attempt < 4 => {
                    drop(conn);
                    eprintln!("{sql}: {e}; retrying");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("{sql}: {e}"),
            }
        }
    }
}

/// Writes the application's output for `message` in the batch's transaction: its effect row
/// (event = the value, written by `writer`) and the order check of its partition.
///
/// # Errors
/// The database's.
pub(crate) async fn write_effect<DB: AppDb>(
    tx: &mut Transaction<'static, DB>,
    consumer: &str,
    writer: &str,
    message: &KafkaMessage,
) -> Result<(), idem_sql::Error> {
    write_effect_on::<DB>(tx, consumer, writer, message).await
}

/// [`write_effect`] on the transaction's connection, as a handler of `idem_sql::handler!` has it.
pub(crate) async fn write_effect_on<DB: AppDb>(
    tx: &mut DB::Connection,
    consumer: &str,
    writer: &str,
    message: &KafkaMessage,
) -> Result<(), idem_sql::Error> {
    let event = String::from_utf8_lossy(message.payload()).into_owned();
    let partition = i64::from(message.partition);
    DB::execute(
        &mut *tx,
        INSERT_EFFECT,
        vec![
            Value::from(consumer),
            Value::from(event),
            Value::Int(partition),
            Value::Int(message.offset),
            Value::Int(i64::from(message.delivered)),
            Value::from(writer),
        ],
    )
    .await?;
    DB::execute(
        &mut *tx,
        DB::dialect(CHECK_ORDER, CHECK_ORDER_MYSQL),
        vec![
            Value::from(consumer),
            Value::Int(partition),
            Value::Int(message.offset),
        ],
    )
    .await?;
    Ok(())
}

/// The handler most Kafka tests use: [`write_effect`] for each applied message.
pub(crate) fn effect_handler<DB: AppDb>(
    consumer: &Name,
    writer: &str,
) -> impl for<'t> Fn(
    &'t mut Transaction<'static, DB>,
    &'t KafkaMessage,
) -> BoxFuture<'t, Result<(), idem_sql::Error>>
+ Send
+ Sync
+ Clone
+ 'static {
    let (consumer, writer) = (consumer.to_string(), writer.to_owned());
    move |tx, message| {
        let (consumer, writer) = (consumer.clone(), writer.clone());
        Box::pin(async move { write_effect(tx, &consumer, &writer, message).await })
    }
}

/// What the application's tables hold for `consumer`: effect rows, distinct events, order
/// violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Output {
    /// Effect rows.
    pub rows: i64,
    /// Distinct events among them.
    pub events: i64,
    /// Applied messages not after the last applied one of their partition.
    pub order_violations: i64,
}

/// Reads [`Output`] for `consumer`.
pub(crate) async fn output<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> Output {
    let c = || vec![Value::from(consumer.as_str())];
    let rows = idem_testkit::query_i64(
        store,
        "SELECT COUNT(*) FROM kafka_effects WHERE consumer = $1",
        c(),
    )
    .await[0];
    let events = idem_testkit::query_i64(
        store,
        "SELECT COUNT(DISTINCT event) FROM kafka_effects WHERE consumer = $1",
        c(),
    )
    .await[0];
    let order_violations = idem_testkit::query_i64(
        store,
        DB::dialect(
            "SELECT CAST(COALESCE(SUM(violations), 0) AS BIGINT) FROM kafka_order WHERE consumer = $1",
            "SELECT CAST(COALESCE(SUM(violations), 0) AS SIGNED) FROM kafka_order WHERE consumer = $1",
        ),
        c(),
    )
    .await[0];
    Output {
        rows,
        events,
        order_violations,
    }
}

/// Waits until every partition's stored offset of `consumer` equals `ends` (the high
/// watermarks), up to `limit`; returns how long it took.
///
/// # Panics
/// When it does not happen in time, with the stored offsets.
pub(crate) async fn wait_settled<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    topic: &str,
    ends: &BTreeMap<i32, i64>,
    limit: Duration,
) -> Duration {
    let offsets = store.kafka_offsets(consumer);
    let started = Instant::now();
    loop {
        let stored: BTreeMap<i32, i64> = offsets
            .list(topic)
            .await
            .expect("read the stored offsets")
            .into_iter()
            .filter_map(|o| o.next_offset.map(|n| (o.partition, n)))
            .collect();
        if &stored == ends {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "offsets of {consumer} not at the partitions' ends within {limit:?}: stored {stored:?}, ends {ends:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
