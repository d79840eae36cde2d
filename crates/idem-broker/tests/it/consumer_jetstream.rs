//! The JetStream consumer against the real NATS server (127.0.0.1:4222) on both stores: lost
//! acks after commit, handlers slower than ack_wait, duplicates past the delivery limit, dead
//! letters, and concurrent in-flight messages on PostgreSQL.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::consumer_common::*;
use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::consumer::pull::Config as PullConfig;
use async_nats::jetstream::{self, AckKind, stream};
use futures_util::StreamExt;
use idem_broker::{Delivery, Disposition, JetStreamConsumer, Processor, RetryPolicy};
use idem_core::Name;
use idem_sql::{Runner, Store};
use idem_testkit::tcp_proxy::TcpProxy;
use idem_testkit::{AppDb, all_stores};
use tokio::sync::Notify;

const NATS: &str = "127.0.0.1:4222";

/// A stream with one subject and a durable pull consumer on it, deleted on drop of the test.
struct Fixture {
    js: jetstream::Context,
    stream: String,
    subject: String,
    durable: String,
}

impl Fixture {
    async fn new(prefix: &str, ack_wait: Duration) -> Self {
        let client = async_nats::connect(NATS).await.expect("connect to NATS");
        let js = jetstream::new(client);
        idem_testkit::nats::keep_account_store(&js).await;
        let stream = unique(prefix).to_uppercase();
        let subject = format!("idem.test.{}", stream.to_lowercase());
        js.create_stream(stream::Config {
            name: stream.clone(),
            subjects: vec![subject.clone()],
            ..Default::default()
        })
        .await
        .expect("create stream");
        let durable = format!("{}_v2", stream.to_lowercase());
        js.get_stream(&stream)
            .await
            .expect("get stream")
            .create_consumer(PullConfig {
                durable_name: Some(durable.clone()),
                ack_wait,
                ..Default::default()
            })
            .await
            .expect("create consumer");
        Self {
            js,
            stream,
            subject,
            durable,
        }
    }

    /// The durable consumer, through a new client (a new connection of its own).
    async fn pull(&self) -> (async_nats::Client, PullConsumer) {
        self.pull_via(NATS).await
    }

    /// The durable consumer, through a new client connected to `addr` (a [`TcpProxy`]).
    async fn pull_via(&self, addr: &str) -> (async_nats::Client, PullConsumer) {
        let client = async_nats::connect(addr).await.expect("connect to NATS");
        let pull = jetstream::new(client.clone())
            .get_stream(&self.stream)
            .await
            .expect("get stream")
            .get_consumer(&self.durable)
            .await
            .expect("get consumer");
        (client, pull)
    }

    async fn publish(&self, message_id: &str, payload: &str) {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, message_id);
        self.js
            .publish_with_headers(self.subject.clone(), headers, payload.to_owned().into())
            .await
            .expect("publish")
            .await
            .expect("publish ack");
    }

    /// (messages not yet delivered, messages delivered and not acknowledged, redelivered).
    async fn pending(&self) -> (u64, usize, usize) {
        let mut consumer: PullConsumer = self
            .js
            .get_stream(&self.stream)
            .await
            .expect("get stream")
            .get_consumer(&self.durable)
            .await
            .expect("get consumer");
        let info = consumer.info().await.expect("consumer info");
        (info.num_pending, info.num_ack_pending, info.num_redelivered)
    }

    async fn delete(self) {
        self.js
            .delete_stream(&self.stream)
            .await
            .expect("delete stream");
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

// Rebalance / redelivery: consumer 1 commits e100…e109, its connection closes before the acks;
// consumer 2 gets all ten again: zero extra effects, ten duplicates acknowledged, nothing pending.
all_stores!(lost_acks_after_commit_are_duplicates_for_the_next_consumer);
async fn lost_acks_after_commit_are_duplicates_for_the_next_consumer<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("rebalance", Duration::from_secs(1)).await;
    let consumer = consumer_name("rebalance");
    let source = Name::new("source", "orders").unwrap();
    for n in 100..110 {
        fx.publish(&format!("e{n}"), "{}").await;
    }

    // Consumer 1: the tenth commit cuts the connection; no ack is sent before that.
    let proxy = TcpProxy::start(NATS).await;
    let (_client1, pull1) = fx.pull_via(&proxy.addr.to_string()).await;
    let proxy = Arc::new(proxy);
    let committed = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(Notify::new());
    let processor1 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source.clone(),
        effect_handler::<DB>(consumer.clone()),
    )
    .observer({
        let (committed, closed, proxy) = (committed.clone(), closed.clone(), proxy.clone());
        move |_, _| {
            let (committed, closed, proxy) = (committed.clone(), closed.clone(), proxy.clone());
            Box::pin(async move {
                let wait = closed.notified();
                if committed.fetch_add(1, Ordering::SeqCst) + 1 == 10 {
                    proxy.cut();
                    closed.notify_waiters();
                } else {
                    wait.await;
                }
            })
        }
    });
    let stats1 = processor1.stats();
    let consumer1 = JetStreamConsumer::new(pull1, processor1)
        .unwrap()
        .concurrency(10);
    let (stop1, shutdown1) = shutdown_pair();
    let run1 = tokio::spawn(consumer1.run(shutdown1));
    wait_for(&stats1, Duration::from_secs(20), |c| c.applied == 10).await;
    stop1.notify_one();
    let _ = tokio::time::timeout(Duration::from_secs(10), run1).await;
    assert_eq!(effect_rows(&store, &consumer).await, 10);

    // Consumer 2 on the same durable consumer: every message comes back after ack_wait.
    let (_client2, pull2) = fx.pull().await;
    let processor2 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source,
        effect_handler::<DB>(consumer.clone()),
    );
    let stats2 = processor2.stats();
    let (stop2, shutdown2) = shutdown_pair();
    let run2 = tokio::spawn(
        JetStreamConsumer::new(pull2, processor2)
            .unwrap()
            .concurrency(4)
            .run(shutdown2),
    );
    wait_for(&stats2, Duration::from_secs(20), |c| c.duplicate == 10).await;
    stop2.notify_one();
    run2.await.unwrap().expect("consumer 2 stops cleanly");

    let counts = stats2.get();
    assert_eq!(
        (counts.applied, counts.duplicate, counts.dead_lettered),
        (0, 10, 0)
    );
    assert_eq!(
        effect_rows(&store, &consumer).await,
        10,
        "zero extra effects"
    );
    let (pending, ack_pending, _) = fx.pending().await;
    assert_eq!(
        (pending, ack_pending),
        (0, 0),
        "nothing left unacknowledged"
    );
    no_dead_letters(&store, &consumer).await;
    fx.delete().await;
}

/// A handler that takes 2.5 s (longer than the 1 s ack_wait) and counts its runs.
fn slow_handler<DB: AppDb>(
    consumer: Name,
    runs: Arc<AtomicU32>,
) -> impl for<'t> Fn(
    &'t mut idem_sql::sqlx::Transaction<'static, DB>,
    &'t Delivery,
) -> idem_sql::BoxFuture<'t, Result<(), idem_sql::Error>>
+ Send
+ Sync
+ 'static {
    move |tx, delivery| {
        let (consumer, runs) = (consumer.clone(), runs.clone());
        Box::pin(async move {
            runs.fetch_add(1, Ordering::SeqCst);
            write_effect(tx, consumer.as_str(), "slow", delivery.delivered).await?;
            tokio::time::sleep(Duration::from_millis(2500)).await;
            Ok(())
        })
    }
}

// Processing longer than ack_wait without in-progress acks: JetStream redelivers while the first
// transaction is open; the copy's claim waits for it (PostgreSQL row lock, SQLite write lock) or
// is retried later, the handler never runs twice, and the copy is acknowledged as a duplicate.
all_stores!(slow_handler_without_progress_acks_runs_once);
async fn slow_handler_without_progress_acks_runs_once<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("slow_off", Duration::from_secs(1)).await;
    let consumer = consumer_name("slow_off");
    let runs = Arc::new(AtomicU32::new(0));
    let (_client, pull) = fx.pull().await;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        slow_handler::<DB>(consumer.clone(), runs.clone()),
    )
    .retry(RetryPolicy::new(5, vec![Duration::from_millis(200)]).unwrap());
    let stats = processor.stats();
    let js_consumer = JetStreamConsumer::new(pull, processor)
        .unwrap()
        .concurrency(4)
        .progress_interval(None)
        .unwrap();
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(js_consumer.run(shutdown));
    fx.publish("slow-1", "{}").await;

    wait_for(&stats, Duration::from_secs(20), |c| {
        c.applied == 1 && c.duplicate >= 1
    })
    .await;
    // Every copy delivered while the first transaction ran is settled before the consumer stops.
    let start = Instant::now();
    while fx.pending().await.1 != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "copies still unacknowledged"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");

    let counts = stats.get();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the handler never runs a second time"
    );
    assert_eq!(counts.applied, 1);
    assert!(
        counts.duplicate >= 1,
        "the redelivered copy is a duplicate: {counts:?}"
    );
    assert_eq!(counts.dead_lettered, 0);
    assert_eq!(effect_rows(&store, &consumer).await, 1);
    no_dead_letters(&store, &consumer).await;
    fx.delete().await;
}

// The same slow handler with in-progress acks: no redelivery at all.
all_stores!(slow_handler_with_progress_acks_is_not_redelivered);
async fn slow_handler_with_progress_acks_is_not_redelivered<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("slow_on", Duration::from_secs(1)).await;
    let consumer = consumer_name("slow_on");
    let runs = Arc::new(AtomicU32::new(0));
    let delivered_seen = Arc::new(Mutex::new(Vec::new()));
    let (_client, pull) = fx.pull().await;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        slow_handler::<DB>(consumer.clone(), runs.clone()),
    )
    .observer({
        let seen = delivered_seen.clone();
        move |delivery, _| {
            seen.lock().unwrap().push(delivery.delivered);
            Box::pin(async {})
        }
    });
    let stats = processor.stats();
    // Default interval: half of ack_wait, 500 ms.
    let js_consumer = JetStreamConsumer::new(pull, processor)
        .unwrap()
        .concurrency(4);
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(js_consumer.run(shutdown));
    fx.publish("slow-1", "{}").await;

    wait_for(&stats, Duration::from_secs(20), |c| c.applied == 1).await;
    // Longer than ack_wait after the ack: a redelivery would have shown up by now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");

    assert_eq!(
        *delivered_seen.lock().unwrap(),
        vec![1],
        "delivered exactly once"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let counts = stats.get();
    assert_eq!(
        (counts.applied, counts.duplicate, counts.retried),
        (1, 0, 0)
    );
    assert_eq!(fx.pending().await, (0, 0, 0), "no redelivery at all");
    fx.delete().await;
}

// A duplicate redelivered after a failed ack is acknowledged and never dead-lettered, also after
// a restart, even when its delivery count is past N (here N = 2 and the copy is delivery 4).
all_stores!(duplicate_past_the_delivery_limit_is_acknowledged_not_dead_lettered);
async fn duplicate_past_the_delivery_limit_is_acknowledged_not_dead_lettered<DB: AppDb>(
    store: Store<DB>,
) {
    create_effects_table(&store).await;
    let fx = Fixture::new("dup_past_n", Duration::from_secs(1)).await;
    let consumer = consumer_name("dup_past_n");
    let source = Name::new("source", "orders").unwrap();
    let policy = RetryPolicy::new(2, vec![Duration::from_millis(100)]).unwrap();
    // Would fail on any delivery after the first: proves duplicates never reach the handler.
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

    // Consumer 1 commits, then its connection is cut before the ack.
    let proxy = Arc::new(TcpProxy::start(NATS).await);
    let (_client1, pull1) = fx.pull_via(&proxy.addr.to_string()).await;
    let processor1 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source.clone(),
        handler.clone(),
    )
    .retry(policy.clone())
    .observer(move |_, _| {
        proxy.cut();
        Box::pin(async {})
    });
    let stats1 = processor1.stats();
    let (stop1, shutdown1) = shutdown_pair();
    let run1 = tokio::spawn(
        JetStreamConsumer::new(pull1, processor1)
            .unwrap()
            .run(shutdown1),
    );
    wait_for(&stats1, Duration::from_secs(10), |c| c.applied == 1).await;
    stop1.notify_one();
    let _ = tokio::time::timeout(Duration::from_secs(10), run1).await;

    // Two more deliveries go unacknowledged (a client that NAKs them), so the next is delivery 4.
    let (_raw_client, raw) = fx.pull().await;
    for expected in 2..=3 {
        let mut batch = raw
            .fetch()
            .max_messages(1)
            .expires(Duration::from_secs(5))
            .messages()
            .await
            .expect("fetch");
        let message = batch.next().await.expect("a redelivery").expect("message");
        assert_eq!(message.info().unwrap().delivered, expected);
        message.ack_with(AckKind::Nak(None)).await.expect("nak");
    }

    // The restarted consumer.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (_client2, pull2) = fx.pull().await;
    let processor2 = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        source,
        handler,
    )
    .retry(policy)
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
        JetStreamConsumer::new(pull2, processor2)
            .unwrap()
            .run(shutdown2),
    );
    wait_for(&stats2, Duration::from_secs(10), |c| c.duplicate == 1).await;
    stop2.notify_one();
    run2.await.unwrap().expect("consumer 2 stops cleanly");

    assert_eq!(*seen.lock().unwrap(), vec![(4, Disposition::Duplicate)]);
    assert_eq!(stats2.get().dead_lettered, 0);
    no_dead_letters(&store, &consumer).await;
    assert_eq!(effect_rows(&store, &consumer).await, 1);
    let (pending, ack_pending, _) = fx.pending().await;
    assert_eq!((pending, ack_pending), (0, 0));
    fx.delete().await;
}

// A handler that always fails for e1: retried with backoff, after N = 3 deliveries one dead
// letter with the error and the metadata, nothing pending; later events of the order are
// processed, and a redrive of e1 after a newer version was applied is stale.
all_stores!(failing_handler_is_dead_lettered_after_n_deliveries);
async fn failing_handler_is_dead_lettered_after_n_deliveries<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("dead", Duration::from_secs(5)).await;
    let consumer = consumer_name("dead");
    let deliveries_of_e1 = Arc::new(Mutex::new(Vec::<(u32, Instant)>::new()));
    let processor = fails_on_e1(
        &store,
        &consumer,
        deliveries_of_e1.clone(),
        RetryPolicy::new(
            3,
            vec![Duration::from_millis(300), Duration::from_millis(600)],
        )
        .unwrap(),
    );
    let stats = processor.stats();
    let (_client, pull) = fx.pull().await;
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
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
        "backoff 300 ms"
    );
    assert!(
        seen[2].1 - seen[1].1 >= Duration::from_millis(600),
        "backoff 600 ms"
    );
    assert_eq!(stats.get().retried, 2);

    let letters = store.dead_letters().list(&consumer, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "one dead letter: {letters:?}");
    let letter = &letters[0];
    assert_eq!(letter.consumer, consumer.as_str());
    assert_eq!(letter.source, "orders");
    assert_eq!(letter.event_id.as_deref(), Some("msg-e1"));
    assert_eq!(letter.dedup_key.as_deref(), Some("orders:e1"));
    assert_eq!(letter.aggregate_type.as_deref(), Some("order"));
    assert_eq!(letter.aggregate_id.as_deref(), Some("o1"));
    assert_eq!(letter.destination, fx.subject);
    assert!(
        letter
            .headers
            .contains(&("Nats-Msg-Id".to_owned(), "msg-e1".to_owned()))
    );
    assert_eq!(letter.payload, e1.as_bytes());
    assert!(
        letter.error.contains("card declined for order o1"),
        "{}",
        letter.error
    );
    assert_eq!(letter.delivery_count, 3);
    assert_eq!(letter.first_failed_at, letter.last_failed_at);
    assert_eq!(
        store.dead_letters().get(letter.id).await.unwrap().as_ref(),
        Some(letter)
    );
    let (pending, ack_pending, _) = fx.pending().await;
    assert_eq!(
        (pending, ack_pending),
        (0, 0),
        "the dead-lettered message is settled"
    );

    // A later event of the same order is processed: the dead letter does not block its entity.
    fx.publish("msg-e2", r#"{"id":"e2","order":"o1","seq":2}"#)
        .await;
    wait_for(&stats, Duration::from_secs(10), |c| c.applied == 1).await;
    assert_eq!(effect_rows_for(&store, &consumer, "e2").await, 1);

    // Redriving e1 now (its payload published again) meets the version guard: stale, not applied.
    fx.publish("msg-e1-redrive", e1).await;
    wait_for(&stats, Duration::from_secs(10), |c| c.stale == 1).await;
    assert_eq!(effect_rows_for(&store, &consumer, "e1").await, 0);
    assert_eq!(
        deliveries_of_e1.lock().unwrap().len(),
        3,
        "the handler did not run for the stale redrive"
    );

    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");
    assert!(store.dead_letters().delete(letter.id).await.unwrap());
    assert!(store.dead_letters().get(letter.id).await.unwrap().is_none());
    fx.delete().await;
}

// A handler written as an async closure (`handler!`) that marks an error permanent: the message
// is dead-lettered on its first delivery, not after the retry policy's N, and the next message
// is applied; the handler's write for the failed one was rolled back.
all_stores!(permanent_handler_error_is_dead_lettered_at_once);
async fn permanent_handler_error_is_dead_lettered_at_once<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("permanent", Duration::from_secs(5)).await;
    let consumer = consumer_name("permanent");
    let calls = Arc::new(AtomicU32::new(0));
    let (owner, counted) = (consumer.to_string(), Arc::clone(&calls));
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        idem_sql::handler!(async move |tx, delivery: &Delivery| {
            counted.fetch_add(1, Ordering::SeqCst);
            let event = delivery.message_id.as_deref().unwrap_or_default();
            write_effect_on::<DB>(&mut *tx, &owner, event, delivery.delivered).await?;
            let _order: serde_json::Value = serde_json::from_slice(&delivery.payload)
                .map_err(idem_sql::HandlerError::permanent)?;
            Ok(())
        }),
    )
    .retry(RetryPolicy::new(5, vec![Duration::from_millis(100)]).unwrap());
    let stats = processor.stats();
    let (_client, pull) = fx.pull().await;
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
            .unwrap()
            .run(shutdown),
    );
    fx.publish("msg-bad", "{not json").await;
    fx.publish("msg-good", r#"{"id":"o1"}"#).await;
    wait_for(&stats, Duration::from_secs(20), |c| {
        c.dead_lettered == 1 && c.applied == 1
    })
    .await;
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");

    assert_eq!(stats.get().retried, 0, "a permanent error is not retried");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one run per message");
    let letters = store.dead_letters().list(&consumer, 10).await.unwrap();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert_eq!(letters[0].event_id.as_deref(), Some("msg-bad"));
    assert_eq!(letters[0].delivery_count, 1);
    assert!(
        letters[0].error.contains("permanently"),
        "{}",
        letters[0].error
    );
    assert_eq!(effect_rows_for(&store, &consumer, "msg-bad").await, 0);
    assert_eq!(effect_rows_for(&store, &consumer, "msg-good").await, 1);
    let (pending, ack_pending, _) = fx.pending().await;
    assert_eq!((pending, ack_pending), (0, 0), "both settled");
    fx.delete().await;
}

// Several messages in flight at once on PostgreSQL, each event published twice: every event
// applied exactly once, every copy a duplicate, and more than one transaction open at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_in_flight_messages_on_postgres() {
    let store = idem_testkit::pg_store().await;
    create_effects_table(&store).await;
    let fx = Fixture::new("concurrent", Duration::from_secs(30)).await;
    let consumer = consumer_name("concurrent");
    let source = Name::new("source", "orders").unwrap();
    const EVENTS: usize = 200;
    for n in 0..EVENTS {
        let body = format!(
            r#"{{"id":"c{n}","order":"o{}","seq":{}}}"#,
            n % 20,
            n / 20 + 1
        );
        // Two publishes of one event with distinct message ids, so that JetStream keeps both.
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
    .decode(move |d| order_event(&decode_source, d));
    let stats = processor.stats();
    let (_client, pull) = fx.pull().await;
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
            .unwrap()
            .concurrency(8)
            .run(shutdown),
    );
    wait_for(&stats, Duration::from_secs(60), |c| {
        c.applied + c.duplicate + c.stale == 2 * EVENTS as u64
    })
    .await;
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");

    let counts = stats.get();
    // Each event's first copy to commit applies it (or finds a newer version of its order applied:
    // stale, still its only commit); the other copy is a duplicate.
    assert_eq!(counts.duplicate, EVENTS as u64, "{counts:?}");
    assert_eq!(counts.applied + counts.stale, EVENTS as u64, "{counts:?}");
    assert_eq!(counts.retried + counts.dead_lettered, 0, "{counts:?}");
    assert_eq!(effect_rows(&store, &consumer).await, counts.applied as i64);
    assert!(
        max_open.load(Ordering::SeqCst) > 1,
        "transactions ran concurrently"
    );
    let (pending, ack_pending, _) = fx.pending().await;
    assert_eq!((pending, ack_pending), (0, 0));
    fx.delete().await;
}

// Graceful shutdown: stop pulling, finish the message in flight, commit and ack it, then return.
all_stores!(shutdown_finishes_and_acknowledges_the_message_in_flight);
async fn shutdown_finishes_and_acknowledges_the_message_in_flight<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("shutdown", Duration::from_secs(30)).await;
    let consumer = consumer_name("shutdown");
    let runs = Arc::new(AtomicU32::new(0));
    let (_client, pull) = fx.pull().await;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        slow_handler::<DB>(consumer.clone(), runs.clone()),
    );
    let stats = processor.stats();
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
            .unwrap()
            .run(shutdown),
    );
    fx.publish("in-flight", "{}").await;
    let start = Instant::now();
    while runs.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the handler starts"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");

    // By the time run returned, the 2.5 s handler had committed and the ack was sent.
    assert_eq!(stats.get().applied, 1);
    assert_eq!(effect_rows(&store, &consumer).await, 1);
    // And the consumer registry was flushed: its kind, its one event, the server's pending
    // count after it (none) as its lag.
    let report = store
        .consumers()
        .show(consumer.as_str(), &idem_sql::ListOptions::at(store.now()))
        .await
        .unwrap();
    assert_eq!(report.kind, idem_sql::ConsumerKind::Jetstream);
    assert_eq!(report.windows[0].claimed, 1);
    assert_eq!(report.lag.map(|lag| lag.value), Some(0));
    let start = Instant::now();
    while fx.pending().await != (0, 0, 0) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the ack reaches the server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fx.delete().await;
}

// A message the decoder cannot read (no Nats-Msg-Id for the default decoder) cannot succeed on a
// retry: it is dead-lettered at once, without a dedup key, and terminated.
all_stores!(undecodable_message_is_dead_lettered_at_once);
async fn undecodable_message_is_dead_lettered_at_once<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("undecodable", Duration::from_secs(30)).await;
    let consumer = consumer_name("undecodable");
    let (_client, pull) = fx.pull().await;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        effect_handler::<DB>(consumer.clone()),
    );
    let stats = processor.stats();
    let (stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
            .unwrap()
            .run(shutdown),
    );
    fx.js
        .publish(fx.subject.clone(), "no id".into())
        .await
        .expect("publish")
        .await
        .expect("publish ack");
    wait_for(&stats, Duration::from_secs(10), |c| c.dead_lettered == 1).await;
    stop.notify_one();
    run.await.unwrap().expect("consumer stops cleanly");

    let letters = store.dead_letters().list(&consumer, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (
            letters[0].dedup_key.as_deref(),
            letters[0].event_id.as_deref()
        ),
        (None, None)
    );
    assert_eq!(letters[0].delivery_count, 1);
    assert_eq!(letters[0].payload, b"no id");
    assert!(
        letters[0].error.contains("no message id"),
        "{}",
        letters[0].error
    );
    assert_eq!(effect_rows(&store, &consumer).await, 0);
    let (pending, ack_pending, _) = fx.pending().await;
    assert_eq!(
        (pending, ack_pending),
        (0, 0),
        "terminated, not left pending"
    );
    fx.delete().await;
}

// The durable consumer deleted under a running consumer (an operator's mistake, a redeploy that
// recreates it): run stops with ConsumerError::Deleted instead of pulling on forever (or
// recreating a durable that would start again from the stream's first message).
all_stores!(deleted_durable_consumer_stops_run_with_a_pull_error);
async fn deleted_durable_consumer_stops_run_with_a_pull_error<DB: AppDb>(store: Store<DB>) {
    create_effects_table(&store).await;
    let fx = Fixture::new("deleted", Duration::from_secs(30)).await;
    let consumer = consumer_name("deleted");
    let (_client, pull) = fx.pull().await;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        effect_handler::<DB>(consumer.clone()),
    );
    // Never notified: only the deletion may end the run.
    let (_stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
            .unwrap()
            .run(shutdown),
    );
    fx.publish("before-delete", "{}").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!run.is_finished(), "the consumer runs until the deletion");
    assert_eq!(effect_rows(&store, &consumer).await, 1, "it was working");
    fx.js
        .get_stream(&fx.stream)
        .await
        .expect("get stream")
        .delete_consumer(&fx.durable)
        .await
        .expect("delete the durable consumer");
    let deleted = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("run returns within 10 s of the deletion")
        .unwrap();
    assert!(
        matches!(ended, Err(idem_broker::ConsumerError::Deleted(_))),
        "{ended:?}"
    );
    println!("run returned {:?} after the deletion", deleted.elapsed());
    fx.delete().await;
}

// The same deletion while no pull waits (the one slot is busy with a 2.5 s handler): the next
// pull goes to a consumer that no longer exists, and run still stops with ConsumerError::Deleted,
// within the 5 s pull expiry plus 1 s of that pull.
all_stores!(consumer_deleted_while_no_pull_waits_stops_run_with_a_pull_error);
async fn consumer_deleted_while_no_pull_waits_stops_run_with_a_pull_error<DB: AppDb>(
    store: Store<DB>,
) {
    create_effects_table(&store).await;
    let fx = Fixture::new("deleted_busy", Duration::from_secs(30)).await;
    let consumer = consumer_name("deleted_busy");
    let runs = Arc::new(AtomicU32::new(0));
    let (_client, pull) = fx.pull().await;
    let processor = Processor::new(
        store.clone(),
        Runner::new(store.clone(), &consumer),
        Name::new("source", "orders").unwrap(),
        slow_handler::<DB>(consumer.clone(), runs.clone()),
    );
    let (_stop, shutdown) = shutdown_pair();
    let run = tokio::spawn(
        JetStreamConsumer::new(pull, processor)
            .unwrap()
            .run(shutdown),
    );
    fx.publish("slow", "{}").await;
    let start = Instant::now();
    while runs.load(Ordering::SeqCst) == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the handler starts"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fx.js
        .get_stream(&fx.stream)
        .await
        .expect("get stream")
        .delete_consumer(&fx.durable)
        .await
        .expect("delete the durable consumer");
    let ended = tokio::time::timeout(Duration::from_secs(12), run)
        .await
        .expect("run returns within 2.5 s + 6 s of the deletion, with a margin")
        .unwrap();
    assert!(
        matches!(ended, Err(idem_broker::ConsumerError::Deleted(_))),
        "{ended:?}"
    );
    fx.delete().await;
}
