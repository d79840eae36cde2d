//! Kafka on a real Kafka-protocol broker (tansu, started by `scripts/test`; address
//! `IDEM_TEST_KAFKA`, default 127.0.0.1:19092): a `kind = "kafka"` source forwards each record's
//! event once, a copy republished at a new offset with the same `idem-message-id` once in all,
//! and a gateway started again resumes from the offsets stored with the events; a
//! `target = "kafka"` relay publishes outbox rows with their aggregate as key and their message
//! id as header. Tests fail, and do not skip, when no broker answers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_broker::rskafka::chrono::{TimeZone, Utc};
use idem_broker::rskafka::client::Client;
use idem_broker::rskafka::client::partition::{Compression, OffsetAt, UnknownTopicHandling};
use idem_broker::rskafka::record::Record;
use idem_broker::{MESSAGE_ID_HEADER, kafka_connect};
use idem_core::{Entity, Name};
use idem_gateway::{Config, GatewayDb, INBOX_CONSUMER};
use idem_sql::sqlx::Sqlite;
use idem_sql::{MessageId, OutboxMessage, Store};
use idem_testkit::outbox::{app_store, wait_published};
use idem_testkit::unique;

use crate::support::{Downstream, Running, env, sqlite, system_clock};

/// The broker address: `IDEM_TEST_KAFKA`, else tansu's port in `scripts/services`.
fn kafka_addr() -> String {
    std::env::var("IDEM_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:19092".to_owned())
}

async fn client() -> Arc<Client> {
    let addr = kafka_addr();
    match kafka_connect(std::slice::from_ref(&addr)).await {
        Ok(client) => Arc::new(client),
        Err(e) => {
            panic!("no Kafka broker at {addr} (set IDEM_TEST_KAFKA, or run scripts/test): {e}")
        }
    }
}

/// A fresh topic of `partitions` partitions, each answering.
async fn create_topic(client: &Client, partitions: i32) -> String {
    let topic = unique("idem-gw");
    client
        .controller_client()
        .expect("controller client")
        .create_topic(&topic, partitions, 1, 5_000)
        .await
        .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    for p in 0..partitions {
        client
            .partition_client(&topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap()
            .get_offset(OffsetAt::Latest)
            .await
            .unwrap();
    }
    topic
}

/// Produces one record per `(message id, body)` to `partition`; `None` sends no id header.
async fn produce(client: &Client, topic: &str, partition: i32, records: &[(Option<&str>, String)]) {
    let records: Vec<Record> = records
        .iter()
        .map(|(id, body)| {
            let mut headers = BTreeMap::new();
            if let Some(id) = id {
                headers.insert(MESSAGE_ID_HEADER.to_owned(), id.as_bytes().to_vec());
            }
            Record {
                key: None,
                value: Some(body.clone().into_bytes()),
                headers,
                timestamp: Utc.timestamp_millis_opt(1_700_000_000_000).unwrap(),
            }
        })
        .collect();
    client
        .partition_client(topic, partition, UnknownTopicHandling::Retry)
        .await
        .unwrap()
        .produce(records, Compression::NoCompression)
        .await
        .expect("produced");
}

/// A gateway with one Kafka source `orders` (consumer `consumer`) routed to `app`; bodies over
/// 1024 bytes are not events.
fn config(topic: &str, consumer: &str, app: &Downstream) -> Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"
max_body_bytes = 1024

[[source]]
name = "orders"
kind = "kafka"
brokers = ["{}"]
topic = "{topic}"
consumer = "{consumer}"

[[destination]]
name = "app"
url = "http://{}/events"
retry_schedule = ["10ms"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "orders"
destination = "app"
ordering = "none"
"#,
        kafka_addr(),
        app.addr
    );
    Config::from_toml(&text, &env).expect("valid configuration")
}

/// Waits (up to 15 s) until the stored next offsets of `consumer` on `topic` are `ends`
/// (partition by partition): every record before them is committed, its event stored.
async fn wait_offsets<DB: GatewayDb>(store: &Store<DB>, consumer: &str, topic: &str, ends: &[i64]) {
    let offsets = store.kafka_offsets(&Name::new("consumer", consumer).unwrap());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let stored: Vec<Option<i64>> = offsets
            .list(topic)
            .await
            .unwrap()
            .iter()
            .map(|o| o.next_offset)
            .collect();
        if stored == ends.iter().map(|e| Some(*e)).collect::<Vec<_>>() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "offsets {stored:?}, expected {ends:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn dead_letters<DB: GatewayDb>(store: &Store<DB>) -> Vec<idem_sql::DeadLetter> {
    store
        .dead_letters()
        .list(&Name::new("consumer", INBOX_CONSUMER).unwrap(), 10)
        .await
        .unwrap()
}

fn body(n: usize) -> String {
    format!(r#"{{"n":{n}}}"#)
}

/// The requests `app` received for event `id` of source `orders`.
fn copies(app: &Downstream, id: &str) -> usize {
    app.with_key(&format!("orders:{id}")).len()
}

async fn kafka_source_forwards_once_and_resumes_from_stored_offsets<DB: GatewayDb>(
    store: Store<DB>,
) {
    let kafka = client().await;
    let topic = create_topic(&kafka, 2).await;
    let consumer = "orders_v1";
    let app = Downstream::ok().await;
    let id = |n: usize| format!("k-{n}");

    // Partition 0: k-0..k-9, a record without an id (keyed by its position, offset 10) and an
    // oversize one without an id either (a dead letter, offset 11: one row per reading, so a
    // second row would show a record read again). Partition 1: k-10..k-19, then k-0..k-4 again at
    // new offsets with the same ids (a producer's retry, a republish).
    let ids: Vec<String> = (0..20).map(id).collect();
    let mut p0: Vec<(Option<&str>, String)> =
        (0..10).map(|n| (Some(ids[n].as_str()), body(n))).collect();
    p0.push((None, body(100)));
    p0.push((None, "x".repeat(1500)));
    let mut p1: Vec<(Option<&str>, String)> =
        (10..20).map(|n| (Some(ids[n].as_str()), body(n))).collect();
    p1.extend((0..5).map(|n| (Some(ids[n].as_str()), body(n))));
    produce(&kafka, &topic, 0, &p0).await;
    produce(&kafka, &topic, 1, &p1).await;

    let running = Running::start(config(&topic, consumer, &app), store.clone()).await;
    wait_offsets(&store, consumer, &topic, &[12, 15]).await;
    running.settle().await;
    assert_eq!(
        app.received().len(),
        21,
        "20 ids and the record without one"
    );
    for n in 0..20 {
        assert_eq!(copies(&app, &id(n)), 1, "{}", id(n));
        assert_eq!(
            app.with_key(&format!("orders:{}", id(n)))[0].body,
            body(n).as_bytes()
        );
    }
    assert_eq!(copies(&app, &format!("{topic}/0@10")), 1);
    let dead = dead_letters(&store).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].destination, format!("{topic}/0@11"));
    assert_eq!(dead[0].event_id, None);
    assert!(
        dead[0].error.starts_with("body-too-large"),
        "{}",
        dead[0].error
    );
    running.server.shutdown().await.unwrap();

    // While no gateway runs: k-20..k-24 on partition 0, and k-3 once more on partition 1.
    let more: Vec<String> = (20..25).map(id).collect();
    let later: Vec<(Option<&str>, String)> = (20..25)
        .map(|n| (Some(more[n - 20].as_str()), body(n)))
        .collect();
    produce(&kafka, &topic, 0, &later).await;
    produce(&kafka, &topic, 1, &[(Some(ids[3].as_str()), body(3))]).await;

    let restarted = Running::start(config(&topic, consumer, &app), store.clone()).await;
    wait_offsets(&store, consumer, &topic, &[17, 16]).await;
    restarted.settle().await;
    assert_eq!(
        app.received().len(),
        26,
        "the 5 new events once each; nothing before the stored offsets again"
    );
    for n in 0..25 {
        assert_eq!(copies(&app, &id(n)), 1, "{}", id(n));
    }
    // The inbox would hide a record read again; this one it cannot.
    assert_eq!(
        dead_letters(&store).await.len(),
        1,
        "read from the stored offsets, not from the start"
    );
    restarted.server.shutdown().await.unwrap();
}

both_stores!(kafka_source_forwards_once_and_resumes_from_stored_offsets);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_relay_publishes_rows_with_their_aggregate_key_and_message_id() {
    let kafka = client().await;
    let topic = create_topic(&kafka, 2).await;
    let dir = tempfile::tempdir().unwrap();
    let app_url = format!("sqlite://{}", dir.path().join("app.db").display());
    let app = app_store::<Sqlite>(&app_url).await;
    // Six rows of three orders: each order's rows in one partition, in commit order.
    let rows: Vec<(String, String)> = (0..6)
        .map(|n| (format!("row-{n}"), format!("o-{}", n % 3)))
        .collect();
    let mut tx = app.begin().await.unwrap();
    for (id, order) in &rows {
        let message = OutboxMessage::new(topic.clone(), format!(r#"{{"id":"{id}"}}"#))
            .with_message_id(MessageId::new(id.clone()).unwrap())
            .with_aggregate(Entity::new("order", order.clone()).unwrap());
        app.outbox().enqueue(&mut tx, &message).await.unwrap();
    }
    tx.commit().await.unwrap();

    let (_dir, gateway_store) = sqlite(system_clock()).await;
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n[[relay]]\nname = \"out\"\npoll_interval = \"20ms\"\ndatabase_url = \"{app_url}\"\ntarget = \"kafka\"\nbrokers = [\"{}\"]\n",
        kafka_addr()
    );
    let running = Running::start(
        Config::from_toml(&text, &env).expect("valid configuration"),
        gateway_store,
    )
    .await;
    wait_published(&app, 6).await;
    running.server.shutdown().await.unwrap();

    // (message id, key, body) per partition, in offset order.
    let mut got = Vec::new();
    for p in 0..2 {
        let partition = kafka
            .partition_client(&topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        let (records, _) = partition.fetch_records(0, 1..1_000_000, 500).await.unwrap();
        let read: Vec<(String, String, Vec<u8>)> = records
            .into_iter()
            .map(|r| {
                let header = r.record.headers.get(MESSAGE_ID_HEADER).cloned();
                (
                    String::from_utf8(header.expect("idem-message-id")).unwrap(),
                    String::from_utf8(r.record.key.expect("a key")).unwrap(),
                    r.record.value.unwrap_or_default(),
                )
            })
            .collect();
        got.push(read);
    }
    let all: usize = got.iter().map(Vec::len).sum();
    assert_eq!(all, 6, "each row once: {got:?}");
    for (id, order) in &rows {
        let (p, at) = got
            .iter()
            .enumerate()
            .find_map(|(p, read)| read.iter().position(|r| r.0 == *id).map(|at| (p, at)))
            .unwrap_or_else(|| panic!("{id} not published"));
        let (_, key, value) = &got[p][at];
        assert_eq!(key, &format!("order:{order}"), "{id}");
        assert_eq!(value, format!(r#"{{"id":"{id}"}}"#).as_bytes());
    }
    for order in ["o-0", "o-1", "o-2"] {
        let key = format!("order:{order}");
        let placed: Vec<(usize, Vec<&str>)> = got
            .iter()
            .enumerate()
            .map(|(p, read)| {
                let ids = read
                    .iter()
                    .filter(|r| r.1 == key)
                    .map(|r| r.0.as_str())
                    .collect();
                (p, ids)
            })
            .filter(|(_, ids): &(usize, Vec<&str>)| !ids.is_empty())
            .collect();
        assert_eq!(placed.len(), 1, "{key} in one partition: {placed:?}");
        let expected: Vec<String> = rows
            .iter()
            .filter(|(_, o)| o == order)
            .map(|(id, _)| id.clone())
            .collect();
        assert_eq!(placed[0].1, expected, "{key} in commit order");
    }
}

#[test]
fn kafka_source_retention_is_checked_against_its_redelivery_horizon() {
    let source = |extra: &str| {
        format!(
            "retention = \"3days\"\n[[source]]\nname = \"orders\"\nkind = \"kafka\"\nbrokers = [\"k:9092\"]\ntopic = \"orders\"\nconsumer = \"orders_v1\"\n{extra}\n"
        )
    };
    // Kafka's default retention, 7 days, is longer than 3 days of dedup keys.
    let refused = Config::from_toml(&source(""), &env)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("\"orders\" (kafka)"), "{refused}");
    let shorter = Config::from_toml(&source("redelivery_horizon = \"2days\""), &env)
        .expect("a topic kept 2 days fits 3 days of keys");
    let Some(idem_gateway::Broker::Kafka(kafka)) = shorter.sources[0].broker() else {
        panic!("a Kafka source");
    };
    assert_eq!(kafka.redelivery_horizon, Duration::from_secs(2 * 24 * 3600));
    assert_eq!(kafka.consumer.as_str(), "orders_v1");
    assert_eq!(kafka.partitions, None);
    for (extra, key) in [
        ("redelivery_horizon = \"0s\"", "redelivery_horizon"),
        (
            "redelivery_horizon = \"1day\"\npartitions = []",
            "partitions",
        ),
        (
            "redelivery_horizon = \"1day\"\npartitions = [1, 1]",
            "partitions",
        ),
        ("redelivery_horizon = \"1day\"\nurl = \"nats://x\"", "url"),
    ] {
        let error = Config::from_toml(&source(extra), &env)
            .unwrap_err()
            .to_string();
        assert!(error.contains(key), "{extra}: {error}");
    }
    let nats = "[[source]]\nname = \"n\"\nkind = \"nats\"\nstream = \"S\"\ntopic = \"t\"\n";
    let error = Config::from_toml(nats, &env).unwrap_err().to_string();
    assert!(error.contains("topic"), "{error}");
}

/// A source `{name}` on `topic` read by consumer `consumer`, with each record's entity
/// (`$.entity`, type `order`) and integer version (`$.v`), routed (drop-stale) to `{dest}` at
/// `app` with concurrency 4.
fn ordered_source(name: &str, topic: &str, consumer: &str, dest: &str, app: &Downstream) -> String {
    format!(
        r#"
[[source]]
name = "{name}"
kind = "kafka"
brokers = ["{}"]
topic = "{topic}"
consumer = "{consumer}"
entity = {{ json = "$.entity" }}
entity_type = "order"
version = {{ json = "$.v", type = "integer" }}

[[destination]]
name = "{dest}"
url = "http://{}/events"
concurrency = 4
retry_schedule = ["10ms"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "{name}"
destination = "{dest}"
"#,
        kafka_addr(),
        app.addr
    )
}

/// Each entity's versions in the order `app` received them.
fn entity_order(app: &Downstream) -> BTreeMap<String, Vec<i64>> {
    let mut per_entity = BTreeMap::<String, Vec<i64>>::new();
    for request in app.received() {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        per_entity
            .entry(body["entity"].as_str().unwrap().to_owned())
            .or_default()
            .push(body["v"].as_i64().unwrap());
    }
    per_entity
}

/// Issue 33: a new `consumer` name reads the topic from the earliest retained record. On the
/// same source its records are the events already accepted (duplicates in the inbox: nothing is
/// forwarded again); a new source (its own dedup scope) with a new consumer name forwards every
/// record again, and at a destination with concurrency 4 each entity's events arrive in version
/// order (the drop-stale route's entity order), not merely partition by partition.
async fn kafka_new_consumer_reads_from_the_earliest_in_entity_order<DB: GatewayDb>(
    store: Store<DB>,
) {
    let kafka = client().await;
    let topic = create_topic(&kafka, 3).await;
    // Six entities, four versions each; entity e lands in partition e % 3, in version order.
    let ids: Vec<Vec<String>> = (0..6)
        .map(|e| (1..=4).map(|v| format!("o{e}-v{v}")).collect())
        .collect();
    for p in 0..3_usize {
        let records: Vec<(Option<&str>, String)> = (1..=4)
            .flat_map(|v| (p..6).step_by(3).map(move |e| (e, v)).collect::<Vec<_>>())
            .map(|(e, v)| {
                let body = format!(r#"{{"entity":"o{e}","v":{v}}}"#);
                (Some(ids[e][v - 1].as_str()), body)
            })
            .collect();
        produce(&kafka, &topic, p as i32, &records).await;
    }
    let head = "listen = \"127.0.0.1:0\"\npoll_interval = \"20ms\"\n";
    let app = Downstream::ok().await;
    let first = format!(
        "{head}{}",
        ordered_source("orders", &topic, "gw_v1", "app", &app)
    );
    let config = |text: &str| Config::from_toml(text, &env).expect("valid configuration");
    let running = Running::start(config(&first), store.clone()).await;
    wait_offsets(&store, "gw_v1", &topic, &[8, 8, 8]).await;
    running.settle().await;
    assert_eq!(app.received().len(), 24);
    running.server.shutdown().await.unwrap();

    let app_v2 = Downstream::ok().await;
    let second = format!(
        "{head}{}{}",
        ordered_source("orders", &topic, "gw_v1b", "app", &app),
        ordered_source("orders-v2", &topic, "gw_v2", "app-v2", &app_v2)
    );
    let running = Running::start(config(&second), store.clone()).await;
    wait_offsets(&store, "gw_v1b", &topic, &[8, 8, 8]).await;
    wait_offsets(&store, "gw_v2", &topic, &[8, 8, 8]).await;
    running.settle().await;
    assert_eq!(
        app.received().len(),
        24,
        "the same source's events are duplicates"
    );
    assert_eq!(app_v2.received().len(), 24, "every record forwarded again");
    let expected: BTreeMap<String, Vec<i64>> = (0..6)
        .map(|e| (format!("o{e}"), vec![1, 2, 3, 4]))
        .collect();
    assert_eq!(entity_order(&app), expected);
    assert_eq!(entity_order(&app_v2), expected);
    running.server.shutdown().await.unwrap();
}

both_stores!(kafka_new_consumer_reads_from_the_earliest_in_entity_order);
