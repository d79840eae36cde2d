//! The RabbitMQ consumer against the real RabbitMQ 3.10 (127.0.0.1:5672, guest/guest) on both
//! stores: a channel closed after commit and before the ack, duplicates past the delivery limit,
//! retries through the TTL'd retry queues into dead letters, and concurrent in-flight messages on
//! PostgreSQL.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::consumer_common::*;
use idem_broker::{Disposition, Processor, RabbitMqConsumer, RetryPolicy, RetryTopology};
use idem_core::Name;
use idem_sql::{Runner, Store};
use idem_testkit::{AppDb, all_stores};
use lapin::options::{
    BasicGetOptions, BasicNackOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::sync::Notify;

const AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

struct Fixture {
    connection: Connection,
    publisher: Channel,
    queue: String,
    policy: RetryPolicy,
}

impl Fixture {
    /// A fresh quorum queue and its retry queues under `policy`.
    async fn new(prefix: &str, policy: RetryPolicy) -> Self {
        let connection = Connection::connect(AMQP, ConnectionProperties::default())
            .await
            .expect("connect to RabbitMQ");
        let publisher = connection.create_channel().await.expect("channel");
        publisher
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirm mode");
        let queue = unique(prefix);
        RetryTopology::new(&queue, &policy)
            .unwrap()
            .declare(&publisher)
            .await
            .expect("declare the queues");
        Self {
            connection,
            publisher,
            queue,
            policy,
        }
    }

    async fn channel(&self) -> Channel {
        self.connection.create_channel().await.expect("channel")
    }

    async fn publish(&self, message_id: &str, payload: &str) {
        let properties = BasicProperties::default()
            .with_message_id(message_id.into())
            .with_delivery_mode(2);
        let confirmation = self
            .publisher
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions::default(),
                payload.as_bytes(),
                properties,
            )
            .await
            .expect("publish")
            .await
            .expect("confirm");
        assert!(confirmation.is_ack());
    }

    /// Messages ready in the main queue and in each retry queue (unacknowledged ones are counted
    /// once their channel is closed and they return to the queue).
    async fn ready(&self) -> Vec<u32> {
        let topology = RetryTopology::new(&self.queue, &self.policy).unwrap();
        let mut names = vec![self.queue.clone()];
        names.extend(topology.retry_queues().iter().map(|(n, _)| n.clone()));
        let mut counts = Vec::new();
        for name in names {
            let queue = self
                .publisher
                .queue_declare(
                    name.as_str().into(),
                    QueueDeclareOptions {
                        passive: true,
                        ..QueueDeclareOptions::default()
                    },
                    FieldTable::default(),
                )
                .await
                .expect("passive declare");
            counts.push(queue.message_count());
        }
        counts
    }

    async fn delete(self) {
        let topology = RetryTopology::new(&self.queue, &self.policy).unwrap();
        let mut names = vec![self.queue.clone()];
        names.extend(topology.retry_queues().iter().map(|(n, _)| n.clone()));
        for name in names {
            self.publisher
                .queue_delete(name.as_str().into(), QueueDeleteOptions::default())
                .await
                .expect("delete queue");
        }
        let _ = self.connection.close(200, "done".into()).await;
    }
}

fn shutdown_pair() -> (Arc<Notify>, impl Future<Output = ()> + Send + 'static) {
    let notify = Arc::new(Notify::new());
    let waiter = Arc::clone(&notify);
    (notify, async move { waiter.notified().await })
}

async fn no_dead_letters<DB: AppDb>(store: &Store<DB>, consumer: &Name) {
    let letters = store
        .dead_letters()
        .list(consumer, 100)
        .await
        .expect("list");
    assert!(letters.is_empty(), "no dead letters expected: {letters:?}");
}

fn quick_policy(max_deliveries: u32) -> RetryPolicy {
    RetryPolicy::new(max_deliveries, vec![Duration::from_millis(300)]).unwrap()
}

// Rebalance / redelivery, and the RabbitMQ form of "processing outlives the ack": consumer 1
// commits e100…e109 and its channel is closed after the commits and before the acks; RabbitMQ
// redelivers all ten to consumer 2: zero extra effects, ten duplicates acknowledged, queue empty.
all_stores!(channel_closed_after_commit_gives_duplicates_to_the_next_consumer);
async fn channel_closed_after_commit_gives_duplicates_to_the_next_consumer<DB: AppDb>(
    store: Store<DB>,
) {
    create_effects_table(&store).await;
    let fx = Fixture::new("idem_rebalance", quick_policy(5)).await;
    let consumer = consumer_name("rebalance");
    let source = Name::new("source", "orders").unwrap();
    for n in 100..110 {
        fx.publish(&format!("e{n}"), "{}").await;
    }

    let channel1 = fx.channel().await;
    let committed = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(Notify::new());
    let processor1 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source.clone(),
        effect_handler::<DB>(consumer.clone()),
    )
    .retry(quick_policy(5))
    .observer({
        let (committed, closed, channel1) = (committed.clone(), closed.clone(), channel1.clone());
        move |_, _| {
            let (committed, closed, channel1) =
                (committed.clone(), closed.clone(), channel1.clone());
            Box::pin(async move {
                let wait = closed.notified();
                if committed.fetch_add(1, Ordering::SeqCst) + 1 == 10 {
                    let _ = channel1
                        .close(200, "closed after commit, before ack".into())
                        .await;
                    closed.notify_waiters();
                } else {
                    wait.await;
                }
            })
        }
    });
    let stats1 = processor1.stats();
    let (stop1, shutdown1) = shutdown_pair();
    let run1 = tokio::spawn(
        RabbitMqConsumer::new(channel1, &fx.queue, processor1)
            .unwrap()
            .concurrency(10)
            .run(shutdown1),
    );
    wait_for(&stats1, Duration::from_secs(20), |c| c.applied == 10).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), run1).await;
    stop1.notify_one();
    assert_eq!(effect_rows(&store, &consumer).await, 10);

    let seen = Arc::new(Mutex::new(Vec::new()));
    let channel2 = fx.channel().await;
    let processor2 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source,
        effect_handler::<DB>(consumer.clone()),
    )
    .retry(quick_policy(5))
    .observer({
        let seen = seen.clone();
        move |delivery, _| {
            seen.lock().unwrap().push(delivery.delivered);
            Box::pin(async {})
        }
    });
    let stats2 = processor2.stats();
    let (stop2, shutdown2) = shutdown_pair();
    let run2 = tokio::spawn(
        RabbitMqConsumer::new(channel2.clone(), &fx.queue, processor2)
            .unwrap()
            .concurrency(4)
            .run(shutdown2),
    );
    wait_for(&stats2, Duration::from_secs(20), |c| c.duplicate == 10).await;
    stop2.notify_one();
    run2.await.unwrap().expect("consumer 2 stops cleanly");
    channel2.close(200, "done".into()).await.expect("close");

    let counts = stats2.get();
    assert_eq!(
        (counts.applied, counts.duplicate, counts.dead_lettered),
        (0, 10, 0)
    );
    // Each message was returned once by the closed channel: the quorum queue's x-delivery-count.
    assert_eq!(*seen.lock().unwrap(), vec![2; 10]);
    assert_eq!(
        effect_rows(&store, &consumer).await,
        10,
        "zero extra effects"
    );
    assert_eq!(fx.ready().await, vec![0, 0], "nothing left in the queues");
    no_dead_letters(&store, &consumer).await;
    fx.delete().await;
}

// A duplicate redelivered after a failed ack is acknowledged and never dead-lettered, also after
// a restart, even past N (N = 2; the copy is delivery 4: three returns counted by the quorum queue).
all_stores!(duplicate_past_the_delivery_limit_is_acknowledged_not_dead_lettered);
async fn duplicate_past_the_delivery_limit_is_acknowledged_not_dead_lettered<DB: AppDb>(
    store: Store<DB>,
) {
    create_effects_table(&store).await;
    let fx = Fixture::new("idem_dup_past_n", quick_policy(2)).await;
    let consumer = consumer_name("dup_past_n");
    let source = Name::new("source", "orders").unwrap();
    let handler = {
        let consumer = consumer.clone();
        handler_fn::<DB, _>(move |tx, delivery| {
            let consumer = consumer.clone();
            let delivered = delivery.delivered;
            Box::pin(async move {
                if delivered > 1 {
                    return Err(idem_sql::Error::handler("ran again"));
                }
                write_effect(tx, consumer.as_str(), "e1", delivered).await
            })
        })
    };
    fx.publish("e1", "{}").await;

    let channel1 = fx.channel().await;
    let processor1 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source.clone(),
        handler.clone(),
    )
    .retry(quick_policy(2))
    .observer({
        let channel1 = channel1.clone();
        move |_, _| {
            let channel1 = channel1.clone();
            Box::pin(async move {
                let _ = channel1
                    .close(200, "closed after commit, before ack".into())
                    .await;
            })
        }
    });
    let stats1 = processor1.stats();
    let (_stop1, shutdown1) = shutdown_pair();
    let run1 = tokio::spawn(
        RabbitMqConsumer::new(channel1, &fx.queue, processor1)
            .unwrap()
            .run(shutdown1),
    );
    wait_for(&stats1, Duration::from_secs(10), |c| c.applied == 1).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), run1).await;

    // Two more deliveries returned unprocessed (nack with requeue) by another client.
    let raw = fx.channel().await;
    for _ in 0..2 {
        let start = Instant::now();
        let message = loop {
            if let Some(m) = raw
                .basic_get(fx.queue.as_str().into(), BasicGetOptions::default())
                .await
                .expect("basic.get")
            {
                break m;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "message returned to the queue"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        message
            .delivery
            .acker
            .nack(BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            })
            .await
            .expect("nack");
    }

    let seen = Arc::new(Mutex::new(Vec::new()));
    let channel2 = fx.channel().await;
    let processor2 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source,
        handler,
    )
    .retry(quick_policy(2))
    .observer({
        let seen = seen.clone();
        move |delivery, disposition| {
            seen.lock()
                .unwrap()
                .push((delivery.delivered, disposition.clone()));
            Box::pin(async {})
        }
    });
    let stats2 = processor2.stats();
    let (stop2, shutdown2) = shutdown_pair();
    let run2 = tokio::spawn(
        RabbitMqConsumer::new(channel2.clone(), &fx.queue, processor2)
            .unwrap()
            .run(shutdown2),
    );
    wait_for(&stats2, Duration::from_secs(10), |c| c.duplicate == 1).await;
    stop2.notify_one();
    run2.await.unwrap().expect("consumer 2 stops cleanly");
    channel2.close(200, "done".into()).await.expect("close");
    raw.close(200, "done".into()).await.expect("close");

    assert_eq!(*seen.lock().unwrap(), vec![(4, Disposition::Duplicate)]);
    assert_eq!(stats2.get().dead_lettered, 0);
    no_dead_letters(&store, &consumer).await;
    assert_eq!(effect_rows(&store, &consumer).await, 1);
    assert_eq!(fx.ready().await, vec![0, 0]);
    fx.delete().await;
}

// A handler that always fails for e1: retried through the retry queues (300 ms, then 600 ms),
// dead-lettered on delivery N = 3 with its metadata, every queue empty; later events of the order
// are still processed.
all_stores!(failing_handler_goes_through_the_retry_queues_to_a_dead_letter);
async fn failing_handler_goes_through_the_retry_queues_to_a_dead_letter<DB: AppDb>(
    store: Store<DB>,
) {
    create_effects_table(&store).await;
    let policy = RetryPolicy::new(
        3,
        vec![Duration::from_millis(300), Duration::from_millis(600)],
    )
    .unwrap();
    let fx = Fixture::new("idem_dead", policy.clone()).await;
    let consumer = consumer_name("dead");
    let deliveries_of_e1 = Arc::new(Mutex::new(Vec::<(u32, Instant)>::new()));
    let processor = fails_on_e1(&store, &consumer, deliveries_of_e1.clone(), policy);
    let stats = processor.stats();
    let channel = fx.channel().await;
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        RabbitMqConsumer::new(channel.clone(), &fx.queue, processor)
            .unwrap()
            .run(shutdown),
    );

    let e1 = r#"{"id":"e1","order":"o1","seq":1}"#;
    fx.publish("msg-e1", e1).await;
    wait_for(&stats, Duration::from_secs(20), |c| c.dead_lettered == 1).await;

    let seen = deliveries_of_e1.lock().unwrap().clone();
    assert_eq!(seen.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(
        seen[1].1 - seen[0].1 >= Duration::from_millis(300),
        "retry queue 0: 300 ms"
    );
    assert!(
        seen[2].1 - seen[1].1 >= Duration::from_millis(600),
        "retry queue 1: 600 ms"
    );
    assert_eq!(stats.get().retried, 2);

    let letters = store.dead_letters().list(&consumer, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "one dead letter: {letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.consumer, consumer.as_str());
    assert_eq!(letter.event_id.as_deref(), Some("msg-e1"));
    assert_eq!(letter.dedup_key.as_deref(), Some("orders:e1"));
    assert_eq!(
        (
            letter.aggregate_type.as_deref(),
            letter.aggregate_id.as_deref()
        ),
        (Some("order"), Some("o1"))
    );
    assert_eq!(letter.destination, fx.queue);
    assert!(
        letter.headers.iter().any(|(name, _)| name == "x-death"),
        "the retry path's x-death header is kept: {:?}",
        letter.headers
    );
    assert_eq!(letter.payload, e1.as_bytes());
    assert!(letter.error.contains("card declined for order o1"));
    assert_eq!(letter.delivery_count, 3);

    // A later event of the same order is processed.
    fx.publish("msg-e2", r#"{"id":"e2","order":"o1","seq":2}"#)
        .await;
    wait_for(&stats, Duration::from_secs(10), |c| c.applied == 1).await;
    assert_eq!(effect_rows_for(&store, &consumer, "e2").await, 1);

    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");
    channel.close(200, "done".into()).await.expect("close");
    assert_eq!(
        fx.ready().await,
        vec![0, 0, 0],
        "main and retry queues empty"
    );
    fx.delete().await;
}

// Several messages in flight at once on PostgreSQL, each event published twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_in_flight_messages_on_postgres() {
    let store = idem_testkit::pg_store().await;
    create_effects_table(&store).await;
    let fx = Fixture::new("idem_concurrent", quick_policy(5)).await;
    let consumer = consumer_name("concurrent");
    let source = Name::new("source", "orders").unwrap();
    const EVENTS: usize = 200;
    for n in 0..EVENTS {
        let body = format!(r#"{{"id":"c{n}","order":"o{n}","seq":1}}"#);
        fx.publish(&format!("c{n}-a"), &body).await;
        fx.publish(&format!("c{n}-b"), &body).await;
    }
    let max_open = Arc::new(AtomicUsize::new(0));
    let handler = concurrency_probe(&consumer, max_open.clone());
    let decode_source = source.clone();
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source,
        handler,
    )
    .decode(move |d| order_event(&decode_source, d))
    .retry(quick_policy(5));
    let stats = processor.stats();
    let channel = fx.channel().await;
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        RabbitMqConsumer::new(channel.clone(), &fx.queue, processor)
            .unwrap()
            .concurrency(8)
            .run(shutdown),
    );
    wait_for(&stats, Duration::from_secs(60), |c| {
        c.applied + c.duplicate == 2 * EVENTS as u64
    })
    .await;
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");
    channel.close(200, "done".into()).await.expect("close");

    let counts = stats.get();
    assert_eq!(
        (counts.applied, counts.duplicate),
        (EVENTS as u64, EVENTS as u64),
        "{counts:?}"
    );
    assert_eq!(
        counts.retried + counts.dead_lettered + counts.stale,
        0,
        "{counts:?}"
    );
    assert_eq!(effect_rows(&store, &consumer).await, EVENTS as i64);
    assert!(
        max_open.load(Ordering::SeqCst) > 1,
        "transactions ran concurrently"
    );
    assert_eq!(fx.ready().await, vec![0, 0]);
    fx.delete().await;
}
