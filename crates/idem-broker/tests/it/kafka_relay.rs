//! The outbox relay target `kafka` against the test broker (tansu, `IDEM_TEST_KAFKA`), on SQLite
//! and PostgreSQL: record key = the row's aggregate, `idem-message-id` = the row's message id,
//! Kafka's partition for the key, per-aggregate order, rows marked only after the broker's
//! acknowledgement, and a republished batch applied once by the Kafka consumer.
//!
//! The PostgreSQL tests of this binary share one database and a relay claims any due row, so
//! every test holds [`OUTBOX_LOCK`] and starts from an empty `idem_outbox`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::kafka_support::{self as kafka, Output};
use idem_broker::rskafka::client::partition::UnknownTopicHandling;
use idem_broker::{
    KafkaConsumer, KafkaProcessor, KafkaPublisher, MESSAGE_ID_HEADER, Publisher, Relay,
    partition_for_key,
};
use idem_core::{Entity, Name};
use idem_sql::{MessageId, OutboxMessage, OutboxStatus, Store};
use idem_testkit::{AppDb, all_stores, exec};
use tokio::sync::Notify;

static OUTBOX_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PARTITIONS: i32 = 3;

/// Enqueues, in one transaction, 5 rows for each of `order:0..4` (payload `order:i:seq`) and 3
/// rows without an aggregate; returns their message ids in order.
async fn enqueue_rows<DB: AppDb>(store: &Store<DB>, topic: &str) -> Vec<MessageId> {
    let outbox = store.outbox();
    let mut tx = store.begin().await.unwrap();
    let mut ids = Vec::new();
    for seq in 0..5 {
        for order in 0..5 {
            let message = OutboxMessage::new(topic, format!("order:{order}:{seq}"))
                .with_aggregate(Entity::new("order", order.to_string()).unwrap())
                .with_header("x-note", format!("seq {seq}"));
            ids.push(outbox.enqueue(&mut tx, &message).await.unwrap());
        }
    }
    for n in 0..3 {
        let message = OutboxMessage::new(topic, format!("loose:{n}"));
        ids.push(outbox.enqueue(&mut tx, &message).await.unwrap());
    }
    tx.commit().await.unwrap();
    ids
}

/// Each record carries its row's message id, the aggregate as key (in Kafka's partition for
/// it), the row's headers; one aggregate's records are in row order; every row is published.
async fn relay_publishes_keyed_records_with_the_message_id<DB: AppDb>(store: Store<DB>) {
    let _one = OUTBOX_LOCK.lock().await;
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "relay", PARTITIONS).await;
    let ids = enqueue_rows(&store, &topic).await;
    let relay = Relay::new(store.outbox(), KafkaPublisher::new(Arc::clone(&client))).batch_size(10);
    let report = relay.drain().await.unwrap();
    assert_eq!((report.published, report.failed), (28, 0), "{report:?}");
    for id in &ids {
        let row = store.outbox().get(id).await.unwrap().unwrap();
        assert_eq!(row.status, OutboxStatus::Published);
    }

    let mut by_message_id = BTreeMap::new();
    let mut per_order: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in 0..PARTITIONS {
        let partition = client
            .partition_client(&topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        let (records, _) = partition.fetch_records(0, 1..1_000_000, 100).await.unwrap();
        for r in records {
            let value = String::from_utf8(r.record.value.clone().unwrap()).unwrap();
            let id = String::from_utf8(r.record.headers[MESSAGE_ID_HEADER].clone()).unwrap();
            by_message_id.insert(id, value.clone());
            if let Some(key) = &r.record.key {
                let key = String::from_utf8(key.clone()).unwrap();
                assert_eq!(
                    partition_for_key(key.as_bytes(), 3),
                    p,
                    "{key} in Kafka's partition"
                );
                assert!(value.starts_with(&format!("{key}:")), "{value} keyed {key}");
                assert!(r.record.headers.contains_key("x-note"));
                per_order.entry(key).or_default().push(value);
            }
        }
    }
    assert_eq!(by_message_id.len(), 28, "one record per row");
    for id in &ids {
        let row = store.outbox().get(id).await.unwrap().unwrap();
        let payload = String::from_utf8(row.payload).unwrap();
        assert_eq!(by_message_id.get(id.as_str()), Some(&payload));
    }
    for (order, values) in per_order {
        let expected: Vec<String> = (0..5).map(|seq| format!("{order}:{seq}")).collect();
        assert_eq!(values, expected, "{order} in row order");
    }
}

/// A row for a topic the cluster does not have, or a destination that is no topic name, fails
/// (an attempt counted, not marked published).
async fn rows_for_missing_or_bad_topics_fail<DB: AppDb>(store: Store<DB>) {
    let _one = OUTBOX_LOCK.lock().await;
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    let client = kafka::client().await;
    let outbox = store.outbox();
    let mut tx = store.begin().await.unwrap();
    let missing = kafka::unique_topic("missing");
    let mut ids = Vec::new();
    for destination in [missing.as_str(), "not a topic"] {
        let message = OutboxMessage::new(destination, "x");
        ids.push(outbox.enqueue(&mut tx, &message).await.unwrap());
    }
    tx.commit().await.unwrap();
    let relay = Relay::new(store.outbox(), KafkaPublisher::new(client));
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.failed), (0, 2), "{report:?}");
    for id in &ids {
        let row = outbox.get(id).await.unwrap().unwrap();
        assert_eq!((row.status, row.attempts), (OutboxStatus::Pending, 1));
    }
}

/// A batch published twice (a lost acknowledgement: the relay sends the rows again with the
/// same message ids) is two copies in the topic and one effect per row in the Kafka consumer.
async fn a_republished_batch_is_applied_once<DB: AppDb>(store: Store<DB>) {
    let _one = OUTBOX_LOCK.lock().await;
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    let client = kafka::client().await;
    let topic = kafka::create_topic(&client, "relayed", PARTITIONS).await;
    enqueue_rows(&store, &topic).await;
    // Every row at once (a claim hands out one row per aggregate at a time).
    let rows = store
        .outbox()
        .list(OutboxStatus::Pending, 100)
        .await
        .unwrap();
    assert_eq!(rows.len(), 28);
    let publisher = KafkaPublisher::new(Arc::clone(&client));
    for _ in 0..2 {
        let outcomes = publisher.publish(&rows).await;
        assert!(
            outcomes
                .iter()
                .all(|o| *o == idem_broker::PublishOutcome::Published)
        );
    }
    let ends = kafka::high_watermarks(&client, &topic, PARTITIONS).await;
    assert_eq!(ends.values().sum::<i64>(), 56);

    kafka::create_app_tables(&store).await;
    let consumer = Name::new(
        "consumer",
        format!("{}_v1", kafka::unique_topic("relayed")).replace('-', "_"),
    )
    .unwrap();
    let processor = KafkaProcessor::new(
        store.clone(),
        &consumer,
        Name::new("source", "outbox").unwrap(),
        kafka::effect_handler::<DB>(&consumer, "m"),
    );
    let counts = processor.stats();
    let kafka_consumer = KafkaConsumer::new(client, store.clone(), &consumer, &topic, processor)
        .unwrap()
        .fetch_max_wait(Duration::from_millis(50));
    let stop = Arc::new(Notify::new());
    let stopped = Arc::clone(&stop);
    let task = tokio::spawn(async move { kafka_consumer.run(stopped.notified_owned()).await });
    kafka::wait_settled(&store, &consumer, &topic, &ends, Duration::from_secs(60)).await;
    stop.notify_one();
    task.await.unwrap().unwrap();
    let counts = counts.get();
    assert_eq!((counts.applied, counts.duplicate), (28, 28));
    let output = kafka::output(&store, &consumer).await;
    assert_eq!(
        output,
        Output {
            rows: 28,
            events: 28,
            order_violations: 0
        }
    );
}

all_stores!(
    relay_publishes_keyed_records_with_the_message_id,
    rows_for_missing_or_bad_topics_fail,
    a_republished_batch_is_applied_once,
);
