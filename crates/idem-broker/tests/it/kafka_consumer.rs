//! The Kafka consumer against the test broker (tansu, started by `scripts/test`; address
//! `IDEM_TEST_KAFKA`, default 127.0.0.1:19092), on SQLite and PostgreSQL: republished messages,
//! a restarted consumer, poison messages dead-lettered or halting their partition, members
//! sharing partitions, and the metrics. The process-level scenarios (SIGKILL, takeover, zombies)
//! are in idem-testkit's `kafka_crash` tests.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::kafka_support::{self as kafka, Output};
use idem_broker::{
    KAFKA_DEAD_LETTERS_TOTAL, KAFKA_LAG, KAFKA_MESSAGES_TOTAL, KafkaConsumer, KafkaConsumerStats,
    KafkaMessage, KafkaProcessor, PoisonPolicy, RetryPolicy,
};
use idem_core::Name;
use idem_sql::sqlx::Transaction;
use idem_sql::{BoxFuture, Store};
use idem_testkit::{AppDb, all_stores};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(60);

/// A recorder that keeps every counter and gauge of this test binary, never reset (tests tell
/// their series apart by their unique consumer names).
#[derive(Debug, Default)]
struct Kept(Mutex<HashMap<metrics::Key, Arc<AtomicU64>>>);

impl Kept {
    fn cell(&self, key: &metrics::Key) -> Arc<AtomicU64> {
        let mut cells = self.0.lock().expect("metrics lock");
        Arc::clone(cells.entry(key.clone()).or_default())
    }
}

impl metrics::Recorder for Kept {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

fn kept() -> &'static Kept {
    static KEPT: OnceLock<&'static Kept> = OnceLock::new();
    KEPT.get_or_init(|| {
        let kept: &'static Kept = Box::leak(Box::default());
        metrics::set_global_recorder(kept).expect("install the metrics recorder");
        kept
    })
}

/// The value of counter (`gauge: false`) or gauge `name` whose labels include every pair of
/// `labels`, summed over the matching series; `None` when there is none.
fn metric(name: &str, labels: &[(&str, &str)], gauge: bool) -> Option<f64> {
    let cells = kept().0.lock().expect("metrics lock");
    let values: Vec<f64> = cells
        .iter()
        .filter(|(key, _)| {
            key.name() == name
                && labels
                    .iter()
                    .all(|(k, v)| key.labels().any(|l| l.key() == *k && l.value() == *v))
        })
        .map(|(_, cell)| {
            let raw = cell.load(Ordering::SeqCst);
            if gauge {
                f64::from_bits(raw)
            } else {
                raw as f64
            }
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

fn consumer_name(prefix: &str) -> Name {
    Name::new(
        "consumer",
        format!("{}_v2", kafka::unique_topic(prefix)).replace('-', "_"),
    )
    .expect("a consumer name")
}

/// A running consumer and the way to stop it.
struct Running {
    stop: Arc<Notify>,
    task: JoinHandle<Result<(), idem_broker::KafkaError>>,
    stats: KafkaConsumerStats,
}

impl Running {
    async fn stop(self) {
        self.stop.notify_one();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the consumer stops")
            .expect("the consumer task")
            .expect("run ends without error");
    }
}

fn start<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    topic: &str,
    processor: KafkaProcessor<DB>,
    member: &str,
) -> impl Future<Output = Running> {
    let (store, consumer, topic, member) = (
        store.clone(),
        consumer.clone(),
        topic.to_owned(),
        member.to_owned(),
    );
    async move {
        let client = kafka::client().await;
        let kafka_consumer = KafkaConsumer::new(client, store, &consumer, &topic, processor)
            .expect("a consumer")
            .member_id(member)
            .expect("a member id")
            .lease_ttl(Duration::from_millis(900))
            .expect("a lease ttl")
            .batch_size(25)
            .fetch_max_wait(Duration::from_millis(50));
        let stats = kafka_consumer.stats();
        let stop = Arc::new(Notify::new());
        let stopped = Arc::clone(&stop);
        let task = tokio::spawn(async move { kafka_consumer.run(stopped.notified_owned()).await });
        Running { stop, task, stats }
    }
}

/// Gives a handler closure stored in a variable its higher-ranked signature.
fn handler_fn<DB, F>(f: F) -> F
where
    DB: idem_sql::Backend,
    F: for<'t> Fn(
            &'t mut Transaction<'static, DB>,
            &'t KafkaMessage,
        ) -> BoxFuture<'t, Result<(), idem_sql::Error>>
        + Send
        + Sync
        + Clone
        + 'static,
{
    f
}

/// A handler that writes the effect row, except for messages whose value is `poison`
/// (while `poison_fails` says so): those fail, counted in `poison_calls`.
fn poisoned_handler<DB: AppDb>(
    consumer: &Name,
    poison_calls: Arc<AtomicU64>,
    poison_fails: bool,
) -> impl for<'t> Fn(
    &'t mut Transaction<'static, DB>,
    &'t KafkaMessage,
) -> BoxFuture<'t, Result<(), idem_sql::Error>>
+ Send
+ Sync
+ Clone
+ 'static {
    let effect = kafka::effect_handler::<DB>(consumer, "m");
    handler_fn::<DB, _>(move |tx, message| {
        let (effect, calls) = (effect.clone(), Arc::clone(&poison_calls));
        Box::pin(async move {
            if message.payload() == b"poison" {
                calls.fetch_add(1, Ordering::SeqCst);
                if poison_fails {
                    return Err(idem_sql::Error::handler("cannot handle poison"));
                }
            }
            effect(tx, message).await
        })
    })
}

/// A topic with partition 0 holding `p0-0..9` (`p0-3`'s value is `poison`) and partition 1
/// holding `p1-0..4`.
async fn poisoned_topic() -> (String, BTreeMap<i32, i64>) {
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "poison", 2).await;
    let records = |p: i32, n: usize| -> Vec<_> {
        (0..n)
            .map(|i| {
                let id = format!("p{p}-{i}");
                let value = if (p, i) == (0, 3) {
                    "poison".to_owned()
                } else {
                    id.clone()
                };
                kafka::record(Some("k"), value.as_bytes(), Some(&id))
            })
            .collect()
    };
    kafka::produce(&client, &topic, 0, records(0, 10)).await;
    kafka::produce(&client, &topic, 1, records(1, 5)).await;
    let ends = kafka::high_watermarks(&client, &topic, 2).await;
    assert_eq!(ends, BTreeMap::from([(0, 10), (1, 5)]));
    (topic, ends)
}

fn retry_three_times() -> RetryPolicy {
    RetryPolicy::new(
        3,
        vec![Duration::from_millis(10), Duration::from_millis(30)],
    )
    .expect("a retry policy")
}

/// 300 events over 3 partitions, 30 % republished at new offsets with the same
/// `idem-message-id`: each applied once, the copies counted as duplicates (the repeat rate).
/// A second consumer of the same name starts from the stored offsets: no handler runs again.
async fn republished_messages_are_applied_once<DB: AppDb>(store: Store<DB>) {
    kept();
    const EVENTS: usize = 300;
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "republish", 3).await;
    let records = kafka::publish_events(&client, &topic, 3, EVENTS, 0.3, 7).await;
    let copies = records - EVENTS;
    assert!(copies > 50, "the run republishes about 30 %: {copies}");
    let ends = kafka::high_watermarks(&client, &topic, 3).await;
    kafka::create_app_tables(&store).await;
    let consumer = consumer_name("republish");
    let processor = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "orders").unwrap(),
        kafka::effect_handler::<DB>(&consumer, "m"),
    );
    let messages = processor.stats();
    let running = start(&store, &consumer, &topic, processor, "first").await;
    kafka::wait_settled(&store, &consumer, &topic, &ends, WAIT).await;
    running.stop().await;
    let counts = messages.get();
    assert_eq!(
        (counts.applied, counts.duplicate, counts.dead_lettered),
        (EVENTS as u64, copies as u64, 0)
    );
    let rate = counts.repeat_rate();
    assert!(
        (rate - copies as f64 / records as f64).abs() < 1e-9,
        "{rate}"
    );
    // The consumer registry, flushed when the consumer stopped: the same counts, and the lag
    // summed over the partitions (all caught up).
    let report = store
        .consumers()
        .show(consumer.as_str(), &idem_sql::ListOptions::at(store.now()))
        .await
        .unwrap();
    assert_eq!(report.kind, idem_sql::ConsumerKind::Kafka);
    let hour = &report.windows[0];
    assert_eq!(
        (hour.claimed, hour.duplicates),
        (EVENTS as u64, copies as u64)
    );
    assert_eq!(report.lag.map(|lag| lag.value), Some(0));
    assert_eq!(report.holds.kafka_offsets, 3);
    let labels = [("consumer", consumer.as_str()), ("outcome", "duplicate")];
    assert_eq!(
        metric(KAFKA_MESSAGES_TOTAL, &labels, false),
        Some(copies as f64)
    );
    for p in ["0", "1", "2"] {
        let lag = metric(
            KAFKA_LAG,
            &[("consumer", consumer.as_str()), ("partition", p)],
            true,
        );
        assert_eq!(lag, Some(0.0), "partition {p} caught up");
    }
    let all = EVENTS as i64;
    let expected = Output {
        rows: all,
        events: all,
        order_violations: 0,
    };
    assert_eq!(kafka::output(&store, &consumer).await, expected);

    let calls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    let again = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "orders").unwrap(),
        handler_fn::<DB, _>(move |_tx, _message| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        }),
    );
    let restarted = start(&store, &consumer, &topic, again, "second").await;
    wait_until(|| restarted.stats.get().held == 3).await;
    // A few fetch rounds from the stored offsets, which are the partitions' ends.
    tokio::time::sleep(Duration::from_millis(300)).await;
    restarted.stop().await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no applied offset ran again"
    );
    assert_eq!(kafka::output(&store, &consumer).await, expected);
}

async fn wait_until(done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < WAIT,
            "condition not met within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A message whose handler fails on each of the retry policy's 3 deliveries is dead-lettered
/// with its topic, partition and offset, headers and payload; the later messages of its
/// partition, and the other partition, are applied.
async fn poison_message_is_dead_lettered_and_its_partition_goes_on<DB: AppDb>(store: Store<DB>) {
    kept();
    let (topic, ends) = poisoned_topic().await;
    kafka::create_app_tables(&store).await;
    let consumer = consumer_name("poison");
    let calls = Arc::new(AtomicU64::new(0));
    let processor = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "orders").unwrap(),
        poisoned_handler::<DB>(&consumer, Arc::clone(&calls), true),
    )
    .retry(retry_three_times());
    let messages = processor.stats();
    let running = start(&store, &consumer, &topic, processor, "m").await;
    kafka::wait_settled(&store, &consumer, &topic, &ends, WAIT).await;
    running.stop().await;

    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "three deliveries of the poison message"
    );
    let letters = store.dead_letters().list(&consumer, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.destination, format!("{topic}/0@3"));
    assert_eq!(letter.event_id.as_deref(), Some("p0-3"));
    assert_eq!(letter.dedup_key.as_deref(), Some("orders:p0-3"));
    assert_eq!(
        letter.headers,
        [("idem-message-id".to_owned(), "p0-3".to_owned())]
    );
    assert_eq!(letter.payload, b"poison");
    assert_eq!(letter.delivery_count, 3);
    assert!(
        letter.error.contains("cannot handle poison"),
        "{}",
        letter.error
    );
    let counts = messages.get();
    assert_eq!(
        (counts.applied, counts.dead_lettered, counts.retried),
        (14, 1, 2)
    );
    let dead = metric(
        KAFKA_DEAD_LETTERS_TOTAL,
        &[("consumer", consumer.as_str()), ("reason", "failed")],
        false,
    );
    assert_eq!(dead, Some(1.0));
    let output = kafka::output(&store, &consumer).await;
    assert_eq!(
        (output.rows, output.events, output.order_violations),
        (14, 14, 0)
    );
    let row = store
        .kafka_offsets(&consumer)
        .get(&topic, 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.next_offset, row.attempts), (Some(10), 0));
}

/// A handler written as an async closure (`handler!`) that marks its error for the poison
/// message permanent: dead-lettered on its first delivery (not after the retry policy's three),
/// the partition goes on.
async fn permanent_error_is_dead_lettered_at_once<DB: AppDb>(store: Store<DB>) {
    kept();
    let (topic, ends) = poisoned_topic().await;
    kafka::create_app_tables(&store).await;
    let consumer = consumer_name("permanent");
    let calls = Arc::new(AtomicU64::new(0));
    let (owner, counted) = (consumer.to_string(), Arc::clone(&calls));
    let processor = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "orders").unwrap(),
        idem_sql::handler!(async move |tx, message: &KafkaMessage| {
            if message.payload() == b"poison" {
                counted.fetch_add(1, Ordering::SeqCst);
                return Err(idem_sql::HandlerError::permanent("poison never parses"));
            }
            kafka::write_effect_on::<DB>(&mut *tx, &owner, "m", message).await?;
            Ok(())
        }),
    )
    .retry(retry_three_times());
    let messages = processor.stats();
    let running = start(&store, &consumer, &topic, processor, "m").await;
    kafka::wait_settled(&store, &consumer, &topic, &ends, WAIT).await;
    running.stop().await;

    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "one delivery of the poison"
    );
    let letters = store.dead_letters().list(&consumer, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].delivery_count, 1);
    assert!(
        letters[0].error.contains("poison never parses"),
        "{}",
        letters[0].error
    );
    let counts = messages.get();
    assert_eq!(
        (counts.applied, counts.dead_lettered, counts.retried),
        (14, 1, 0)
    );
    assert_eq!(kafka::output(&store, &consumer).await.rows, 14);
}

/// Under [`PoisonPolicy::Halt`] the partition stops at the poison message (offset, failure
/// count and error stored; its lag reported) while the other partition is applied; a restart
/// with a fixed handler applies it and the rest.
async fn poison_message_halts_its_partition_when_told_to<DB: AppDb>(store: Store<DB>) {
    kept();
    let (topic, ends) = poisoned_topic().await;
    kafka::create_app_tables(&store).await;
    let consumer = consumer_name("halt");
    let calls = Arc::new(AtomicU64::new(0));
    let processor = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "orders").unwrap(),
        poisoned_handler::<DB>(&consumer, Arc::clone(&calls), true),
    )
    .retry(retry_three_times())
    .poison(PoisonPolicy::Halt);
    let running = start(&store, &consumer, &topic, processor, "m").await;
    let halted = BTreeMap::from([(0, 3), (1, 5)]);
    kafka::wait_settled(&store, &consumer, &topic, &halted, WAIT).await;
    wait_until(|| running.stats.get().halted == 1).await;
    // Halted, not retried: no further delivery while it runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let lag = metric(
        KAFKA_LAG,
        &[("consumer", consumer.as_str()), ("partition", "0")],
        true,
    );
    assert_eq!(lag, Some(7.0), "10 records, 3 settled");
    running.stop().await;
    let row = store
        .kafka_offsets(&consumer)
        .get(&topic, 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.next_offset, row.attempts), (Some(3), 3));
    assert!(
        row.last_error
            .is_some_and(|e| e.contains("cannot handle poison"))
    );
    assert!(
        store
            .dead_letters()
            .list(&consumer, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(kafka::output(&store, &consumer).await.rows, 8);

    let fixed = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "orders").unwrap(),
        poisoned_handler::<DB>(&consumer, Arc::clone(&calls), false),
    )
    .retry(retry_three_times())
    .poison(PoisonPolicy::Halt);
    let restarted = start(&store, &consumer, &topic, fixed, "m2").await;
    kafka::wait_settled(&store, &consumer, &topic, &ends, WAIT).await;
    restarted.stop().await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "delivered once more, applied"
    );
    let output = kafka::output(&store, &consumer).await;
    assert_eq!(
        (output.rows, output.events, output.order_violations),
        (15, 15, 0)
    );
}

/// Two members share 4 partitions two and two; when one shuts down, it gives its partitions
/// up and the other takes them at its next renewal; every event once.
async fn members_share_partitions_and_hand_them_over<DB: AppDb>(store: Store<DB>) {
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "share", 4).await;
    kafka::create_app_tables(&store).await;
    let consumer = consumer_name("share");
    let processor = || {
        KafkaProcessor::new(
            store.clone(),
            &consumer,
            Name::new("source", "orders").unwrap(),
            kafka::effect_handler::<DB>(&consumer, "m"),
        )
    };
    let a = start(&store, &consumer, &topic, processor(), "a").await;
    wait_until(|| a.stats.get().held == 4).await;
    let b = start(&store, &consumer, &topic, processor(), "b").await;
    wait_until(|| a.stats.get().held == 2 && b.stats.get().held == 2).await;
    kafka::publish_events(&client, &topic, 4, 400, 0.3, 11).await;
    let ends = kafka::high_watermarks(&client, &topic, 4).await;
    kafka::wait_settled(&store, &consumer, &topic, &ends, WAIT).await;
    let holders: Vec<String> = store
        .kafka_offsets(&consumer)
        .list(&topic)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.holder)
        .collect();
    assert_eq!(
        holders.iter().filter(|h| *h == "a").count(),
        2,
        "{holders:?}"
    );
    let released_by_b = b.stats.clone();
    b.stop().await;
    assert_eq!(released_by_b.get().released, 2);
    wait_until(|| a.stats.get().held == 4).await;
    a.stop().await;
    let expected = Output {
        rows: 400,
        events: 400,
        order_violations: 0,
    };
    assert_eq!(kafka::output(&store, &consumer).await, expected);
}

/// A record on the test topic with `value` and the `headers` given.
fn record_with(value: &str, headers: &[(&str, &str)]) -> idem_broker::rskafka::record::Record {
    let mut record = kafka::record(Some("k"), value.as_bytes(), None);
    for (name, v) in headers {
        record
            .headers
            .insert((*name).to_owned(), v.as_bytes().to_vec());
    }
    record
}

/// Event ids come from the configured header, else from the record's position; two consumer
/// names are two cursors. One partition holds, in order: `a1` and `a2`, both with `x-event-id:
/// A` (a republish); `b` twice with no header (the same bytes written twice: two positions, so
/// two events, the case where a position id is not safe); `c` with only `idem-message-id: A`.
/// - `ids_a` reads `x-event-id`: `a1`, `b`, `b`, `c` applied (4 rows, 3 distinct values), `a2`
///   a duplicate.
/// - `ids_b` (default header `idem-message-id`) on the same topic and database: every record
///   applied once more under its own cursor and inbox (`c` is `A` there, the others are
///   positions), 5 rows, and `ids_a`'s rows and offsets untouched.
async fn event_ids_come_from_the_header_else_the_position<DB: AppDb>(store: Store<DB>) {
    kept();
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "ids", 1).await;
    let records = vec![
        record_with("a1", &[("x-event-id", "A")]),
        record_with("a2", &[("x-event-id", "A")]),
        record_with("b", &[]),
        record_with("b", &[]),
        record_with("c", &[("idem-message-id", "A")]),
    ];
    kafka::produce(&client, &topic, 0, records).await;
    let ends = kafka::high_watermarks(&client, &topic, 1).await;
    assert_eq!(ends, BTreeMap::from([(0, 5)]));
    kafka::create_app_tables(&store).await;
    let source = Name::new("source", "orders").unwrap();

    let custom = consumer_name("ids_a");
    let processor = KafkaProcessor::new(
        store.clone(),
        &custom,
        source.clone(),
        kafka::effect_handler::<DB>(&custom, "m"),
    )
    .message_id_header("x-event-id");
    let counts = processor.stats();
    let running = start(&store, &custom, &topic, processor, "one").await;
    kafka::wait_settled(&store, &custom, &topic, &ends, WAIT).await;
    running.stop().await;
    let got = counts.get();
    assert_eq!((got.applied, got.duplicate), (4, 1));
    let custom_output = Output {
        rows: 4,
        events: 3,
        order_violations: 0,
    };
    assert_eq!(kafka::output(&store, &custom).await, custom_output);

    let default = consumer_name("ids_b");
    let processor = KafkaProcessor::new(
        store.clone(),
        &default,
        source,
        kafka::effect_handler::<DB>(&default, "m"),
    );
    let counts = processor.stats();
    let running = start(&store, &default, &topic, processor, "one").await;
    kafka::wait_settled(&store, &default, &topic, &ends, WAIT).await;
    running.stop().await;
    let got = counts.get();
    assert_eq!((got.applied, got.duplicate), (5, 0));
    let default_output = Output {
        rows: 5,
        events: 4,
        order_violations: 0,
    };
    assert_eq!(kafka::output(&store, &default).await, default_output);
    assert_eq!(kafka::output(&store, &custom).await, custom_output);
    for consumer in [&custom, &default] {
        let rows = store.kafka_offsets(consumer).list(&topic).await.unwrap();
        let offsets: Vec<(i32, Option<i64>)> =
            rows.iter().map(|o| (o.partition, o.next_offset)).collect();
        assert_eq!(offsets, vec![(0, Some(5))], "{consumer}'s own cursor");
    }
}

all_stores!(
    event_ids_come_from_the_header_else_the_position,
    republished_messages_are_applied_once,
    poison_message_is_dead_lettered_and_its_partition_goes_on,
    poison_message_halts_its_partition_when_told_to,
    permanent_error_is_dead_lettered_at_once,
    members_share_partitions_and_hand_them_over,
);
