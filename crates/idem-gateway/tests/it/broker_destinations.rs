//! Broker destinations (issue 30, part 2) on the real NATS JetStream (127.0.0.1:4222), RabbitMQ
//! (127.0.0.1:5672) and Kafka-protocol broker (`IDEM_TEST_KAFKA`, default 127.0.0.1:19092):
//! each event is published once per destination with the delivery's `webhook-id` as its message
//! id, the body unchanged and idem's headers as message headers; two NATS destinations on one
//! stream each get every event; Kafka keeps one entity's events in one partition in version
//! order; a refusal (unroutable) is a failed attempt naming the reason that ends as a dead
//! letter; a wrong kind, a missing key and a missing stream, exchange or topic are refused at
//! start, naming the key.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures_util::StreamExt;
use idem_broker::rskafka::client::partition::UnknownTopicHandling;
use idem_broker::{MESSAGE_ID_HEADER, kafka_connect, partition_for_key};
use idem_gateway::dispatch::send::webhook_id;
use idem_gateway::{Config, Error, GatewayDb, Server};
use idem_sql::Store;
use idem_testkit::AppDb;
use idem_testkit::tcp_proxy::TcpProxy;
use idem_testkit::unique;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, ExchangeDeclareOptions, ExchangeDeleteOptions,
    QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties, ExchangeKind};

use crate::support::{Running, count, env, sqlite, stripe_event, system_clock, unix_now};

const NATS_URL: &str = "nats://127.0.0.1:4222";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// The Kafka broker: `IDEM_TEST_KAFKA`, else tansu's port in `scripts/services`.
fn kafka_addr() -> String {
    std::env::var("IDEM_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:19092".to_owned())
}

/// A configuration with the Stripe source `stripe` and `destinations` (their whole
/// `[[destination]]` and `[[route]]` sections).
fn config_text(destinations: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]
{destinations}
"#
    )
}

/// A broker destination `name` of `keys`, with a route from `stripe` (`ordering`).
fn destination(name: &str, keys: &str, ordering: &str) -> String {
    format!(
        r#"
[[destination]]
name = "{name}"
retry_schedule = ["10ms", "10ms"]
timeout = "5s"
{keys}

[[route]]
source = "stripe"
destination = "{name}"
ordering = "{ordering}"
"#
    )
}

/// Event `i` of entity `e` (invoice `in_{e}`), its version growing with `i`.
fn event(tag: &str, e: usize, i: usize) -> (String, Vec<u8>) {
    let id = format!("evt_{tag}_{e}_{i}");
    let body = stripe_event(
        &id,
        "invoice.updated",
        "invoice",
        &format!("in_{e}"),
        unix_now() - 10_000 + i as i64,
    );
    (id, body)
}

/// Posts `events` in order, each answered 200.
async fn post_all<DB: GatewayDb>(running: &Running<DB>, events: &[(String, Vec<u8>)]) {
    for (id, body) in events {
        let answer = running.post_stripe(body).await;
        assert_eq!(answer.status, 200, "{id}: {answer:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// NATS JetStream

/// A fresh stream taking `{subject}.>` (default 2-minute duplicate window).
async fn nats_stream() -> (jetstream::Context, String, String) {
    let client = async_nats::connect(NATS_URL).await.expect("NATS on 4222");
    let context = jetstream::new(client);
    idem_testkit::nats::keep_account_store(&context).await;
    let name = unique("IDEMDEST");
    let subject = name.to_lowercase();
    context
        .create_stream(jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![format!("{subject}.>")],
            ..Default::default()
        })
        .await
        .expect("create stream");
    (context, name, subject)
}

/// A message read back from a stream: its subject, headers and body.
struct Stored {
    subject: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// The messages of stream `name` once it holds `n` (waiting up to 15 s), then 300 ms more
/// for any extra copy to show.
async fn stored(context: &jetstream::Context, name: &str, n: u64) -> Vec<Stored> {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut stream = context.get_stream(name).await.expect("stream");
    while stream.info().await.expect("info").state.messages < n {
        assert!(
            Instant::now() < deadline,
            "fewer than {n} messages in {name}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let last = stream.info().await.expect("info").state.last_sequence;
    let mut out = Vec::new();
    for seq in 1..=last {
        let message = stream.get_raw_message(seq).await.expect("stored message");
        let headers = message
            .headers
            .iter()
            .map(|(k, v)| (k.to_string(), v[0].as_str().to_owned()))
            .collect();
        out.push(Stored {
            subject: message.subject.to_string(),
            headers,
            body: message.payload.to_vec(),
        });
    }
    out
}

/// Checks the message of event `id` (body `body`) at `destination`: its `Nats-Msg-Id` is the
/// delivery's `webhook-id`, and idem's headers are there.
fn check_headers(headers: &BTreeMap<String, String>, id: &str, destination: &str) {
    let get = |name: &str| headers.get(name).map(String::as_str);
    assert_eq!(
        get("Idempotency-Key"),
        Some(format!("\"stripe:{id}\"").as_str())
    );
    assert_eq!(get("Idem-Event-Id"), Some(id));
    assert_eq!(get("Idem-Source"), Some("stripe"));
    assert_eq!(get("Idem-Event-Type"), Some("invoice.updated"));
    assert_eq!(get("Idem-Attempt"), Some("1"));
    assert_eq!(get("Content-Type"), Some("application/json"));
    // No signature: the broker's own authentication stands for it.
    assert_eq!(get("webhook-signature"), None, "{destination}");
}

/// Every event is published once to the destination's subject, `Nats-Msg-Id` = its
/// `webhook-id`, the body byte for byte, `Idempotency-Key` and the `Idem-*` headers as message
/// headers; a resend of an event to the gateway is a duplicate there and publishes nothing.
async fn nats_destination_publishes_every_event_with_its_webhook_id<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let (context, stream, subject) = nats_stream().await;
    let keys = format!("kind = \"nats\"\nurl = \"{NATS_URL}\"\nsubject = \"{subject}.invoices\"");
    let text = config_text(&destination("bus", &keys, "drop-stale"));
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let events: Vec<_> = (0..5).map(|e| event("n", e, 0)).collect();
    post_all(&running, &events).await;
    // A resend to the gateway is a duplicate: nothing more is published.
    assert_eq!(running.post_stripe(&events[0].1).await.status, 200);
    running.settle().await;

    let messages = stored(&context, &stream, 5).await;
    assert_eq!(messages.len(), 5, "each event once");
    for (id, body) in &events {
        let expected = webhook_id("stripe", id, "bus");
        let message = messages
            .iter()
            .find(|m| m.headers.get("Nats-Msg-Id") == Some(&expected))
            .unwrap_or_else(|| panic!("{id} not published as {expected}"));
        assert_eq!(message.subject, format!("{subject}.invoices"));
        assert_eq!(&message.body, body, "{id}: the body unchanged");
        check_headers(&message.headers, id, "bus");
    }
    let delivered = count(
        &running.gateway,
        "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome = 'delivered' AND excerpt LIKE 'published to %'",
    )
    .await;
    assert_eq!(delivered, 5);
    running.server.shutdown().await.unwrap();
    let _ = context.delete_stream(&stream).await;
}

both_stores!(nats_destination_publishes_every_event_with_its_webhook_id);

/// Two destinations on one stream (subjects `….a` and `….b`) each get every event, under ids
/// that differ per destination, so the stream's duplicate window drops neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_nats_destinations_on_one_stream_both_receive_every_event() {
    let (context, stream, subject) = nats_stream().await;
    let keys = |leaf: &str| format!("kind = \"nats\"\nsubject = \"{subject}.{leaf}\"");
    let text = config_text(&format!(
        "{}{}",
        destination("bus-a", &keys("a"), "none"),
        destination("bus-b", &keys("b"), "none")
    ));
    let (_dir, store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let events: Vec<_> = (0..6).map(|e| event("two", e, 0)).collect();
    post_all(&running, &events).await;
    running.settle().await;

    let messages = stored(&context, &stream, 12).await;
    assert_eq!(messages.len(), 12, "6 events to each of 2 destinations");
    for (leaf, name) in [("a", "bus-a"), ("b", "bus-b")] {
        let ids: BTreeSet<&str> = messages
            .iter()
            .filter(|m| m.subject == format!("{subject}.{leaf}"))
            .map(|m| m.headers["Nats-Msg-Id"].as_str())
            .collect();
        let expected: BTreeSet<String> = events
            .iter()
            .map(|(id, _)| webhook_id("stripe", id, name))
            .collect();
        assert_eq!(ids, expected.iter().map(String::as_str).collect(), "{name}");
    }
    for (id, _) in &events {
        assert_ne!(
            webhook_id("stripe", id, "bus-a"),
            webhook_id("stripe", id, "bus-b")
        );
    }
    running.server.shutdown().await.unwrap();
    let _ = context.delete_stream(&stream).await;
}

/// The machinery around the seam works unchanged for a broker destination: with its stream
/// deleted while serving, each publish fails naming the reason, is retried on the schedule and
/// becomes a dead letter; with the stream back and the destination paused, a redrive publishes
/// nothing until it is resumed; then each event is published under the same id as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_stream_makes_dead_letters_that_a_redrive_publishes_after_a_pause() {
    let (context, stream, subject) = nats_stream().await;
    let keys = format!("kind = \"nats\"\nsubject = \"{subject}.x\"");
    let text = config_text(&destination("bus", &keys, "none"));
    let (_dir, store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    context
        .delete_stream(&stream)
        .await
        .expect("delete the stream");
    let events: Vec<_> = (0..3).map(|e| event("dl", e, 0)).collect();
    post_all(&running, &events).await;
    running.settle().await;
    let counts = running.gateway.stats().await.unwrap().destinations["bus"];
    assert_eq!((counts.dead, counts.delivered), (3, 0));
    // 3 attempts each (the first and the schedule's two retries), each naming why.
    let failed = count(
        &running.gateway,
        "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome IN ('retry', 'dead') AND status IS NULL AND excerpt LIKE 'publish ack for %: no stream found for given subject'",
    )
    .await;
    assert_eq!(failed, 9);

    idem_testkit::nats::keep_account_store(&context).await;
    context
        .create_stream(jetstream::stream::Config {
            name: stream.clone(),
            subjects: vec![format!("{subject}.>")],
            ..Default::default()
        })
        .await
        .expect("create the stream again");
    running.gateway.pause("bus").await.unwrap();
    let redriven = running
        .gateway
        .redrive(&idem_gateway::operations::RedriveRequest {
            destination: Some("bus".into()),
            deliveries: Vec::new(),
            force: false,
            dry_run: false,
        })
        .await
        .unwrap();
    assert_eq!(redriven.redriven, 3);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let held = context
        .get_stream(&stream)
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .messages;
    assert_eq!(held, 0, "nothing is published while paused");
    running.gateway.resume("bus").await.unwrap();
    running.settle().await;
    let messages = stored(&context, &stream, 3).await;
    assert_eq!(messages.len(), 3);
    for (id, body) in &events {
        let expected = webhook_id("stripe", id, "bus");
        let message = messages
            .iter()
            .find(|m| m.headers.get("Nats-Msg-Id") == Some(&expected))
            .unwrap_or_else(|| panic!("{id} not published as {expected}"));
        assert_eq!(&message.body, body);
        // Attempts go on counting: the fourth.
        assert_eq!(
            message.headers.get("Idem-Attempt").map(String::as_str),
            Some("4")
        );
    }
    running.server.shutdown().await.unwrap();
    let _ = context.delete_stream(&stream).await;
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ

/// A fresh topic exchange, with a queue bound to it by `binding` (none for `None`).
async fn rabbit_exchange(binding: Option<&str>) -> (lapin::Channel, String, String) {
    let connection = Connection::connect(AMQP_URL, ConnectionProperties::default())
        .await
        .expect("RabbitMQ on 5672");
    let channel = connection.create_channel().await.unwrap();
    let exchange = unique("idem-dest-x");
    let queue = unique("idem-dest-q");
    channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    if let Some(binding) = binding {
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        channel
            .queue_bind(
                queue.as_str().into(),
                exchange.as_str().into(),
                binding.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
    }
    (channel, exchange, queue)
}

/// An AMQP header as text.
fn amqp_text(headers: &FieldTable, name: &str) -> Option<String> {
    match headers.inner().get(name)? {
        AMQPValue::LongString(s) => Some(s.to_string()),
        other => Some(format!("{other:?}")),
    }
}

/// Each event is published to the exchange with routing key = its type, AMQP `message_id` =
/// the delivery's `webhook-id`, confirmed; the body unchanged, idem's headers in the header
/// table. An exchange no queue is bound to returns the message: a failed attempt naming the
/// reason, retried on the schedule, then a dead letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rabbitmq_destination_publishes_with_message_ids_and_refusals_become_dead_letters() {
    let (channel, exchange, queue) = rabbit_exchange(Some("invoice.#")).await;
    let (_, unbound, _) = rabbit_exchange(None).await;
    let text = config_text(&format!(
        "{}{}",
        destination(
            "rabbit",
            &format!("kind = \"rabbitmq\"\nurl = \"{AMQP_URL}\"\nexchange = \"{exchange}\""),
            "none"
        ),
        destination(
            "nowhere",
            &format!("kind = \"rabbitmq\"\nexchange = \"{unbound}\"\nrouting_key = \"fixed.key\""),
            "none"
        )
    ));
    let (_dir, store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let events: Vec<_> = (0..4).map(|e| event("r", e, 0)).collect();
    post_all(&running, &events).await;
    running.settle().await;

    let mut consumer = channel
        .basic_consume(
            queue.as_str().into(),
            "test".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 4 {
        let delivery = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("a message within 10 s")
            .expect("the consumer goes on")
            .expect("a delivery");
        delivery.ack(BasicAckOptions::default()).await.unwrap();
        got.push(delivery);
    }
    // Nothing more comes.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), consumer.next())
            .await
            .is_err(),
        "each event once"
    );
    for (id, body) in &events {
        let expected = webhook_id("stripe", id, "rabbit");
        let message = got
            .iter()
            .find(|d| d.properties.message_id().as_ref().map(|m| m.as_str()) == Some(&expected))
            .unwrap_or_else(|| panic!("{id} not published as {expected}"));
        assert_eq!(&message.data, body);
        assert_eq!(message.routing_key.as_str(), "invoice.updated");
        let headers = message.properties.headers().clone().expect("headers");
        let mut table = BTreeMap::new();
        for name in [
            "Idempotency-Key",
            "Idem-Event-Id",
            "Idem-Source",
            "Idem-Event-Type",
            "Idem-Attempt",
            "Content-Type",
        ] {
            if let Some(value) = amqp_text(&headers, name) {
                table.insert(name.to_owned(), value);
            }
        }
        check_headers(&table, id, "rabbit");
    }

    // The unbound exchange returned each message: 3 failed attempts each (the first and two
    // retries), the last one dead.
    let dead = count(
        &running.gateway,
        "SELECT COUNT(*) FROM idem_gateway_deliveries d JOIN idem_gateway_attempts a ON a.delivery = d.id WHERE d.destination = 'nowhere' AND d.state = 'dead' AND a.outcome = 'dead' AND a.excerpt LIKE 'returned by the broker, no queue took it (312 NO_ROUTE)%'",
    )
    .await;
    assert_eq!(dead, 4, "each event a dead letter after its retries");
    let failed = count(
        &running.gateway,
        "SELECT COUNT(*) FROM idem_gateway_deliveries d JOIN idem_gateway_attempts a ON a.delivery = d.id WHERE d.destination = 'nowhere'",
    )
    .await;
    assert_eq!(failed, 12);
    running.server.shutdown().await.unwrap();
    for x in [exchange, unbound] {
        let _ = channel
            .exchange_delete(x.as_str().into(), ExchangeDeleteOptions::default())
            .await;
    }
    let _ = channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await;
}

// ---------------------------------------------------------------------------------------------
// Kafka

/// 4 entities × 6 events, each entity's sent in version order, to a topic of 3 partitions: each
/// record is keyed by its entity (`invoice:in_{e}`), lands in the partition Kafka's default
/// partitioner gives that key, carries its `webhook-id` in `idem-message-id`, and one entity's
/// records are in version order in their partition; an event without an entity is keyed by its
/// event id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_destination_keeps_each_entity_in_one_partition_in_version_order() {
    let addr = kafka_addr();
    let kafka = kafka_connect(std::slice::from_ref(&addr))
        .await
        .unwrap_or_else(|e| panic!("no Kafka broker at {addr} (run scripts/services): {e}"));
    let topic = unique("idem-dest");
    kafka
        .controller_client()
        .unwrap()
        .create_topic(&topic, 3, 1, 5_000)
        .await
        .unwrap();
    let keys = format!("kind = \"kafka\"\nbootstrap = \"{addr}\"\ntopic = \"{topic}\"");
    let text = config_text(&destination("log", &keys, "drop-stale"));
    let (_dir, store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let (entities, per_entity) = (4, 6);
    let mut all = Vec::new();
    for i in 0..per_entity {
        for e in 0..entities {
            all.push(event("k", e, i));
        }
    }
    // An event without an entity is keyed by its event id.
    let plain = (
        "evt_k_plain".to_owned(),
        format!(
            r#"{{"id":"evt_k_plain","object":"event","type":"ping","created":{}}}"#,
            unix_now()
        )
        .into_bytes(),
    );
    post_all(&running, &all).await;
    post_all(&running, std::slice::from_ref(&plain)).await;
    running.settle().await;

    // (partition, offset, key, message id, body) of every record.
    let mut records = Vec::new();
    for p in 0..3 {
        let partition = kafka
            .partition_client(&topic, p, UnknownTopicHandling::Retry)
            .await
            .unwrap();
        // Every record up to the high watermark: a fetch may return only the first batches.
        let mut next = 0;
        loop {
            let (read, high_watermark) = partition
                .fetch_records(next, 1..10_000_000, 1_000)
                .await
                .unwrap();
            for r in read {
                let id = r
                    .record
                    .headers
                    .get(MESSAGE_ID_HEADER)
                    .cloned()
                    .expect("idem-message-id");
                next = r.offset + 1;
                records.push((
                    p,
                    r.offset,
                    String::from_utf8(r.record.key.expect("a key")).unwrap(),
                    String::from_utf8(id).unwrap(),
                    r.record.value.unwrap_or_default(),
                ));
            }
            if next >= high_watermark {
                break;
            }
        }
    }
    assert_eq!(records.len(), entities * per_entity + 1, "each event once");
    records.sort_by_key(|r| (r.0, r.1));
    let unkeyed: Vec<_> = records.iter().filter(|r| r.2 == "evt_k_plain").collect();
    assert_eq!(unkeyed.len(), 1);
    assert_eq!(unkeyed[0].0, partition_for_key(b"evt_k_plain", 3));
    assert_eq!(unkeyed[0].3, webhook_id("stripe", "evt_k_plain", "log"));
    assert_eq!(unkeyed[0].4, plain.1);
    for e in 0..entities {
        let key = format!("invoice:in_{e}");
        let mine: Vec<_> = records.iter().filter(|r| r.2 == key).collect();
        let partition = partition_for_key(key.as_bytes(), 3);
        assert!(
            mine.iter().all(|r| r.0 == partition),
            "entity {e} in partition {partition} only"
        );
        let order: Vec<String> = mine.iter().map(|r| r.3.clone()).collect();
        let expected: Vec<String> = (0..per_entity)
            .map(|i| webhook_id("stripe", &format!("evt_k_{e}_{i}"), "log"))
            .collect();
        assert_eq!(order, expected, "entity {e} in version order");
        let bodies: Vec<&Vec<u8>> = all
            .iter()
            .filter(|(id, _)| id.starts_with(&format!("evt_k_{e}_")))
            .map(|(_, body)| body)
            .collect();
        let read: Vec<&Vec<u8>> = mine.iter().map(|r| &r.4).collect();
        assert_eq!(read, bodies, "entity {e}: the bodies unchanged");
    }
    running.server.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------------------
// Reconnecting

/// A NATS destination whose server stops answering: each publish is cut at the destination's
/// `timeout`, a failed attempt saying so, retried on the schedule; once the server answers
/// again the event is delivered, and the stream holds it once (every attempt had one
/// `Nats-Msg-Id`, the held ones included).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_publish_without_a_confirm_within_timeout_is_a_failed_attempt() {
    let (context, stream, subject) = nats_stream().await;
    let proxy = TcpProxy::start("127.0.0.1:4222").await;
    let schedule = vec!["\"100ms\""; 50].join(", ");
    let text = config_text(&format!(
        "\n[[destination]]\nname = \"bus\"\nkind = \"nats\"\nurl = \"nats://{}\"\nsubject = \"{subject}.x\"\ntimeout = \"300ms\"\nretry_schedule = [{schedule}]\n\
         # its attempts fail on purpose until the server answers: no circuit breaker\n\
         circuit_breaker = false\n\n[[route]]\nsource = \"stripe\"\ndestination = \"bus\"\n",
        proxy.addr
    ));
    let (_dir, store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    proxy.stall();
    let (id, body) = event("to", 0, 0);
    post_all(&running, &[(id.clone(), body.clone())]).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let timed_out = loop {
        let n = count(
            &running.gateway,
            "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome = 'retry' AND status IS NULL AND excerpt = 'timed out: no confirm from the nats broker within 300ms (timeout)'",
        )
        .await;
        if n >= 2 {
            break n;
        }
        assert!(Instant::now() < deadline, "no attempt timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    proxy.release();
    running.settle().await;
    let counts = running.gateway.stats().await.unwrap().destinations["bus"];
    assert_eq!(counts.delivered, 1);
    let messages = stored(&context, &stream, 1).await;
    assert_eq!(
        messages.len(),
        1,
        "{timed_out} timed-out attempts, one message"
    );
    assert_eq!(
        messages[0].headers["Nats-Msg-Id"],
        webhook_id("stripe", &id, "bus")
    );
    assert_eq!(messages[0].body, body);
    running.server.shutdown().await.unwrap();
    let _ = context.delete_stream(&stream).await;
}

/// A NATS and a RabbitMQ destination reached through proxies whose connections are dropped
/// between two bursts of events: each client connects again on its own (no restart) and every
/// event of both bursts is published, under its id; the connections are closed when the
/// gateway stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broker_destinations_connect_again_after_a_dropped_connection() {
    let (context, stream, subject) = nats_stream().await;
    let (channel, exchange, queue) = rabbit_exchange(Some("#")).await;
    let nats_proxy = TcpProxy::start("127.0.0.1:4222").await;
    let amqp_proxy = TcpProxy::start("127.0.0.1:5672").await;
    let schedule = vec!["\"100ms\""; 30].join(", ");
    let keys = |kind: &str, rest: String| {
        format!("kind = \"{kind}\"\nretry_schedule = [{schedule}]\n{rest}")
    };
    let mut text = config_text("");
    for (name, kind, rest) in [
        (
            "bus",
            "nats",
            format!(
                "url = \"nats://{}\"\nsubject = \"{subject}.x\"",
                nats_proxy.addr
            ),
        ),
        (
            "rabbit",
            "rabbitmq",
            format!(
                "url = \"amqp://guest:guest@{}/%2f\"\nexchange = \"{exchange}\"",
                amqp_proxy.addr
            ),
        ),
    ] {
        text.push_str(&format!(
            "\n[[destination]]\nname = \"{name}\"\ntimeout = \"2s\"\n{}\n\n[[route]]\nsource = \"stripe\"\ndestination = \"{name}\"\nordering = \"none\"\n",
            keys(kind, rest)
        ));
    }
    let (_dir, store) = sqlite(system_clock()).await;
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let first: Vec<_> = (0..3).map(|e| event("re", e, 0)).collect();
    post_all(&running, &first).await;
    running.settle().await;
    nats_proxy.drop_connections();
    amqp_proxy.drop_connections();
    let second: Vec<_> = (3..6).map(|e| event("re", e, 0)).collect();
    post_all(&running, &second).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let counts = running.gateway.stats().await.unwrap().destinations;
        if counts.values().map(|c| c.delivered).sum::<u64>() == 12 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all delivered again: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all: Vec<_> = first.iter().chain(&second).collect();

    let messages = stored(&context, &stream, 6).await;
    let ids: BTreeSet<String> = messages
        .iter()
        .map(|m| m.headers["Nats-Msg-Id"].clone())
        .collect();
    let expected = |destination: &str| -> BTreeSet<String> {
        all.iter()
            .map(|(id, _)| webhook_id("stripe", id, destination))
            .collect()
    };
    assert_eq!(messages.len(), 6);
    assert_eq!(ids, expected("bus"));

    // RabbitMQ does not deduplicate: a publish cut with its connection may come twice, under
    // one id; every event comes.
    let mut consumer = channel
        .basic_consume(
            queue.as_str().into(),
            "reconnect".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut rabbit_ids = BTreeSet::new();
    while let Ok(Some(Ok(delivery))) =
        tokio::time::timeout(Duration::from_millis(500), consumer.next()).await
    {
        delivery.ack(BasicAckOptions::default()).await.unwrap();
        rabbit_ids.insert(
            delivery
                .properties
                .message_id()
                .clone()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(rabbit_ids, expected("rabbit"));
    // The gateway closes its connections when it stops.
    running.server.shutdown().await.unwrap();
    nats_proxy.all_closed().await;
    amqp_proxy.all_closed().await;
    let _ = context.delete_stream(&stream).await;
    let _ = channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    let _ = channel
        .exchange_delete(exchange.as_str().into(), ExchangeDeleteOptions::default())
        .await;
}

// ---------------------------------------------------------------------------------------------
// Refused at start

/// The error `Config::from_toml` gives for `destination_keys` (one destination `d`).
fn config_error(keys: &str) -> String {
    let text = config_text(&format!("[[destination]]\nname = \"d\"\n{keys}\n"));
    Config::from_toml(&text, &env)
        .expect_err("refused")
        .to_string()
}

/// An unknown kind, a broker destination without its subject, exchange or topic, an HTTP key
/// on a broker and a broker key on HTTP: each refused naming the key and what was expected.
#[test]
fn bad_broker_destinations_are_refused_naming_the_key() {
    let cases = [
        (
            "kind = \"sqs\"",
            "destination \"d\" kind = \"sqs\" is not valid; expected \"http\" (the default), \"nats\", \"rabbitmq\" or \"kafka\"",
        ),
        (
            "kind = \"nats\"",
            "destination \"d\" subject is missing or empty; expected the literal subject events are published to",
        ),
        (
            "kind = \"nats\"\nsubject = \"orders.>\"",
            "destination \"d\" subject = \"orders.>\" is not valid; expected a literal NATS subject",
        ),
        (
            "kind = \"rabbitmq\"",
            "destination \"d\" exchange is missing or empty; expected the name of an existing exchange",
        ),
        (
            "kind = \"kafka\"\nbootstrap = \"127.0.0.1:19092\"",
            "destination \"d\" topic is missing or empty; expected the name of an existing topic",
        ),
        (
            "kind = \"kafka\"\ntopic = \"orders\"",
            "destination \"d\" bootstrap is missing or empty; expected the bootstrap brokers as host:port",
        ),
        (
            "kind = \"nats\"\nsubject = \"orders\"\nsigning_secret_env = \"APP_SECRET\"",
            "destination \"d\" signing_secret_env = \"APP_SECRET\" is not valid; expected no signing_secret_env on a kind = \"nats\" destination",
        ),
        (
            "kind = \"kafka\"\ntopic = \"orders\"\nbootstrap = \"k:9092\"\nurl = \"nats://x\"",
            "destination \"d\" url = \"nats://x\" is not valid; expected no url on a kind = \"kafka\" destination: a kafka destination takes `bootstrap`",
        ),
        (
            "url = \"http://127.0.0.1:1/\"\nsigning_secret_env = \"APP_SECRET\"\ntopic = \"orders\"",
            "destination \"d\" topic = \"orders\" is not valid; expected no topic on a kind = \"http\" destination",
        ),
        (
            "kind = \"rabbitmq\"\nexchange = \"events\"\nsubject = \"a.b\"",
            "destination \"d\" subject = \"a.b\" is not valid; expected no subject on a kind = \"rabbitmq\" destination",
        ),
        (
            "kind = \"rabbitmq\"\nexchange = \"events\"\nurl = \"nats://127.0.0.1:4222\"",
            "destination \"d\" url = \"nats://127.0.0.1:4222\" is not valid; expected a URL starting with amqp:// or amqps://",
        ),
    ];
    for (keys, expected) in cases {
        let message = config_error(keys);
        assert!(
            message.starts_with(expected),
            "{keys}:\n{message}\nexpected:\n{expected}"
        );
    }
    // The kind defaults to http, as before.
    let text = config_text(&destination(
        "plain",
        "url = \"http://127.0.0.1:1/\"\nsigning_secret_env = \"APP_SECRET\"",
        "none",
    ));
    let config = Config::from_toml(&text, &env).unwrap();
    assert_eq!(config.destinations[0].target.kind(), "http");
}

/// Starts `text` and returns the error.
async fn start_error(text: &str) -> Error {
    let (_dir, store) = sqlite(system_clock()).await;
    let gateway = idem_gateway::Gateway::new(Config::from_toml(text, &env).unwrap(), store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    Server::start(gateway, listener)
        .await
        .expect_err("refused at start")
}

/// A subject no stream takes, an exchange and a topic that do not exist: `idem serve` refuses
/// to start, naming the destination and what is missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_stream_exchange_or_topic_is_refused_at_start() {
    let subject = unique("nostream").to_lowercase();
    let exchange = unique("no-exchange");
    let topic = unique("no-topic");
    let cases = [
        (
            format!("kind = \"nats\"\nsubject = \"{subject}.x\""),
            format!(
                "destination \"d\": no JetStream stream takes subject \"{subject}.x\" at {NATS_URL}"
            ),
        ),
        (
            format!("kind = \"rabbitmq\"\nexchange = \"{exchange}\""),
            format!(
                "destination \"d\": exchange \"{exchange}\" does not exist at amqp://***@127.0.0.1:5672/%2f"
            ),
        ),
        (
            format!(
                "kind = \"kafka\"\nbootstrap = \"{}\"\ntopic = \"{topic}\"",
                kafka_addr()
            ),
            format!(
                "destination \"d\": topic \"{topic}\" does not exist; create it (idem never creates topics) (at {})",
                kafka_addr()
            ),
        ),
    ];
    for (keys, expected) in cases {
        let error = start_error(&config_text(&destination("d", &keys, "none"))).await;
        assert!(matches!(error, Error::Destination { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with(&expected),
            "{message}\nexpected:\n{expected}"
        );
    }
}
