//! Broker sources on the real NATS JetStream (127.0.0.1:4222) and RabbitMQ (127.0.0.1:5672):
//! messages, duplicates included, are forwarded once each; every message is acknowledged only
//! after its commit (nothing pending in the stream or queue afterwards); a message without an
//! id becomes a dead letter; a store failure hands the message back and it is taken later.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use axum::body::Bytes;
use idem_core::Name;
use idem_gateway::{Config, Error, GatewayDb, INBOX_CONSUMER};
use idem_sql::Store;
use idem_testkit::AppDb;
use lapin::options::{BasicPublishOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Connection, ConnectionProperties};

use idem_testkit::unique;

use crate::support::{Downstream, Running, env};

const NATS_URL: &str = "nats://127.0.0.1:4222";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A configuration with one broker source `orders` (its keys in `source`) routed to the
/// downstream `app`.
fn config(source: &str, app: &Downstream) -> Config {
    Config::from_toml(&config_text(source, app), &env).expect("valid configuration")
}

/// The text of [`config`]; top-level keys may be put before it.
fn config_text(source: &str, app: &Downstream) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "orders"
{source}

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
        app.addr
    )
}

/// Waits (up to 15 s) until the downstream has received requests with `n` distinct
/// `Idempotency-Key`s, then a little longer for any extra copy to show.
async fn wait_for_keys(app: &Downstream, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let mut keys: Vec<String> = app
            .received()
            .iter()
            .filter_map(|r| r.header("idempotency-key").map(str::to_owned))
            .collect();
        keys.sort();
        keys.dedup();
        if keys.len() >= n {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {} of {n} events forwarded",
            keys.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// The gateway's dead letters.
async fn dead_letters<DB: GatewayDb>(store: &Store<DB>) -> Vec<idem_sql::DeadLetter> {
    store
        .dead_letters()
        .list(&Name::new("consumer", INBOX_CONSUMER).unwrap(), 100)
        .await
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// NATS JetStream

struct Nats {
    context: jetstream::Context,
    stream: String,
    subject: String,
}

impl Nats {
    /// A fresh stream on subjects `{prefix}.>` whose duplicate window is 100 ms, so that a copy
    /// published after it reaches the consumer (the gateway's inbox is then the guarantee).
    async fn new() -> Self {
        let client = async_nats::connect(NATS_URL).await.expect("NATS on 4222");
        let context = jetstream::new(client);
        idem_testkit::nats::keep_account_store(&context).await;
        let stream = unique("IDEMGW");
        let subject = stream.to_lowercase();
        context
            .create_stream(jetstream::stream::Config {
                name: stream.clone(),
                subjects: vec![format!("{subject}.>")],
                duplicate_window: Duration::from_millis(100),
                ..Default::default()
            })
            .await
            .expect("create stream");
        Self {
            context,
            stream,
            subject,
        }
    }

    fn source(&self, durable: &str) -> String {
        format!(
            r#"kind = "nats"
url = "{NATS_URL}"
stream = "{}"
subject = "{}.>"
durable = "{durable}"
ack_wait = "5s""#,
            self.stream, self.subject
        )
    }

    /// Publishes `body` on `{prefix}.{suffix}` with `Nats-Msg-Id: id` (none for `None`); returns
    /// whether JetStream called it a duplicate.
    async fn publish(&self, suffix: &str, id: Option<&str>, body: &str) -> bool {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(id) = id {
            headers.insert("Nats-Msg-Id", id);
        }
        self.context
            .publish_with_headers(
                format!("{}.{suffix}", self.subject),
                headers,
                Bytes::from(body.to_owned()),
            )
            .await
            .expect("publish")
            .await
            .expect("publish ack")
            .duplicate
    }

    /// Waits (up to 10 s) until consumer `durable` has nothing pending and nothing unacked.
    async fn wait_drained(&self, durable: &str) -> jetstream::consumer::Info {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut consumer: jetstream::consumer::PullConsumer = self
                .context
                .get_consumer_from_stream(durable, &self.stream)
                .await
                .expect("consumer exists");
            let info = consumer.info().await.expect("consumer info").clone();
            if info.num_pending == 0 && info.num_ack_pending == 0 {
                return info;
            }
            assert!(
                Instant::now() < deadline,
                "messages left: {} pending, {} unacked",
                info.num_pending,
                info.num_ack_pending
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn delete(self) {
        let _ = self.context.delete_stream(&self.stream).await;
    }
}

async fn nats_messages_are_forwarded_once_and_acked<DB: GatewayDb>(store: Store<DB>) {
    let nats = Nats::new().await;
    let app = Downstream::ok().await;
    let running = Running::start(config(&nats.source("gw"), &app), store).await;

    for n in 0..20 {
        let fresh = nats
            .publish(
                "created",
                Some(&format!("o-{n}")),
                &format!(r#"{{"n":{n}}}"#),
            )
            .await;
        assert!(!fresh, "a first publish is no duplicate");
    }
    // Past the stream's duplicate window, so these copies reach the consumer.
    tokio::time::sleep(Duration::from_millis(200)).await;
    for n in 0..5 {
        nats.publish(
            "created",
            Some(&format!("o-{n}")),
            &format!(r#"{{"n":{n}}}"#),
        )
        .await;
    }
    nats.publish("created", None, r#"{"n":"no id"}"#).await;

    wait_for_keys(&app, 20).await;
    running.settle().await;
    let received = app.received();
    assert_eq!(received.len(), 20, "each of the 20 events forwarded once");
    for n in 0..20 {
        let copies = app.with_key(&format!("orders:o-{n}"));
        assert_eq!(copies.len(), 1, "o-{n}");
        assert_eq!(copies[0].body, format!(r#"{{"n":{n}}}"#).as_bytes());
        assert_eq!(
            copies[0].header("idem-event-type"),
            Some(format!("{}.created", nats.subject).as_str())
        );
    }
    let info = nats.wait_drained("gw").await;
    assert_eq!(
        info.delivered.stream_sequence, 26,
        "20 + 5 copies + 1 without id"
    );
    // The consumer sequence counts every delivery, redeliveries included (num_redelivered
    // counts only those still unacked): 26 deliveries for 26 messages.
    assert_eq!(
        info.delivered.consumer_sequence, 26,
        "every message acked (or terminated) at its first delivery"
    );

    let dead = dead_letters(running.gateway.store()).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].source, "orders");
    assert_eq!(dead[0].event_id, None);
    assert_eq!(dead[0].payload, br#"{"n":"no id"}"#);
    assert_eq!(dead[0].destination, format!("{}.created", nats.subject));
    assert!(
        dead[0].error.starts_with("no-event-id"),
        "{}",
        dead[0].error
    );

    running.server.shutdown().await.unwrap();
    nats.delete().await;
}

async fn nats_store_failure_naks_and_the_message_comes_again<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let nats = Nats::new().await;
    let app = Downstream::ok().await;
    let running = Running::start(config(&nats.source("gw"), &app), store).await;
    // The store fails every commit while the gateway's events table is away.
    idem_testkit::exec(
        running.gateway.store(),
        "ALTER TABLE idem_gateway_events RENAME TO idem_gateway_events_away",
        vec![],
    )
    .await;
    nats.publish("created", Some("o-1"), r#"{"n":1}"#).await;
    let consumer_sequence = || async {
        let mut consumer: jetstream::consumer::PullConsumer = nats
            .context
            .get_consumer_from_stream("gw", &nats.stream)
            .await
            .unwrap();
        consumer.info().await.unwrap().delivered.consumer_sequence
    };
    // Each delivery of the one message raises the consumer sequence. A second delivery within
    // the source's ack_wait (5 s) proves the first was NAKed (with its 1 s delay), not left to
    // time out.
    let published = Instant::now();
    while consumer_sequence().await < 2 {
        assert!(
            published.elapsed() < Duration::from_secs(5),
            "no second delivery within ack_wait: the first was not NAKed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The second delivery fails too (its commit needs the missing table, a matter of
    // milliseconds) and is NAKed for 2 s; the table is back before the third.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(app.received().is_empty());
    idem_testkit::exec(
        running.gateway.store(),
        "ALTER TABLE idem_gateway_events_away RENAME TO idem_gateway_events",
        vec![],
    )
    .await;
    wait_for_keys(&app, 1).await;
    running.settle().await;
    assert_eq!(app.with_key("orders:o-1").len(), 1);
    let info = nats.wait_drained("gw").await;
    assert_eq!(
        info.delivered.consumer_sequence, 3,
        "two deliveries NAKed while the table was away, acked at the third"
    );
    running.server.shutdown().await.unwrap();
    nats.delete().await;
}

/// Entity and version are read from the message body as for webhooks: on a drop-stale route an
/// older version of an order, arriving after a newer one, is acked and never forwarded.
async fn nats_versions_drop_stale_messages<DB: GatewayDb>(store: Store<DB>) {
    let nats = Nats::new().await;
    let app = Downstream::ok().await;
    let source = format!(
        "{}\nentity = {{ json = \"$.order\" }}\nentity_type = \"order\"\nversion = {{ json = \"$.v\" }}",
        nats.source("gw")
    );
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "orders"
{source}

[[destination]]
name = "app"
url = "http://{}/events"
retry_schedule = ["10ms"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "orders"
destination = "app"
ordering = "drop-stale"
"#,
        app.addr
    );
    let config = Config::from_toml(&text, &env).unwrap();
    let running = Running::start(config, store).await;
    nats.publish("updated", Some("o7-v2"), r#"{"order":"7","v":2}"#)
        .await;
    wait_for_keys(&app, 1).await;
    nats.publish("updated", Some("o7-v1"), r#"{"order":"7","v":1}"#)
        .await;
    nats.publish("updated", Some("o7-v3"), r#"{"order":"7","v":3}"#)
        .await;
    wait_for_keys(&app, 2).await;
    running.settle().await;
    let keys: Vec<String> = app
        .received()
        .iter()
        .filter_map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(
        keys,
        [r#""orders:o7-v2""#, r#""orders:o7-v3""#],
        "v1 is stale"
    );
    let stats = running.gateway.stats().await.unwrap();
    assert_eq!(stats.destinations["app"].stale, 1);
    nats.wait_drained("gw").await;
    running.server.shutdown().await.unwrap();
    nats.delete().await;
}

both_stores!(nats_versions_drop_stale_messages);

both_stores!(
    nats_messages_are_forwarded_once_and_acked,
    nats_store_failure_naks_and_the_message_comes_again
);

/// An existing durable keeps its own ack_wait (1 s here, where the source says 5 s): the
/// in-progress acks sent while a commit waits follow the durable's, so a commit held up for 3 s
/// causes no redelivery (at half the configured 5 s they would come after the durable's 1 s
/// had run out), and the difference is logged at WARN.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_existing_durables_ack_wait_paces_the_in_progress_acks() {
    crate::support::capture_logs();
    let nats = Nats::new().await;
    let durable = unique("slow").replace('_', "-");
    let stream = nats.context.get_stream(&nats.stream).await.unwrap();
    stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(durable.clone()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(1),
            max_ack_pending: 1000,
            filter_subject: format!("{}.>", nats.subject),
            ..Default::default()
        })
        .await
        .unwrap();
    let app = Downstream::ok().await;
    let (_dir, store) = crate::support::postgres(crate::support::system_clock()).await;
    // The commit below is held 3 s: past the 2 s default database_timeout, which would refuse
    // the batch and nak the message.
    let text = format!(
        "database_timeout = \"10s\"\n{}",
        config_text(&nats.source(&durable), &app)
    );
    let config = Config::from_toml(&text, &env).expect("valid configuration");
    let running = Running::start(config, store).await;
    let warnings = crate::support::lines_with("WARN", &durable);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    for value in [
        "ack_wait=1s",
        "configured_ack_wait=5s",
        "max_ack_pending=1000",
        "configured_max_in_flight=256",
    ] {
        assert!(warnings[0].contains(value), "{value}: {}", warnings[0]);
    }

    // Inserts into the events table wait for this lock: the message's commit is held 3 s.
    let mut lock = running.gateway.store().pool().begin().await.unwrap();
    idem_sql::sqlx::query("LOCK TABLE idem_gateway_events IN EXCLUSIVE MODE")
        .execute(&mut *lock)
        .await
        .unwrap();
    nats.publish("created", Some("o-1"), r#"{"n":1}"#).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(app.received().is_empty(), "the commit was held");
    lock.commit().await.unwrap();

    wait_for_keys(&app, 1).await;
    running.settle().await;
    assert_eq!(app.with_key("orders:o-1").len(), 1);
    let info = nats.wait_drained(&durable).await;
    assert_eq!(
        info.delivered.consumer_sequence, 1,
        "delivered once: in-progress acks every 0.5 s kept the 1 s ack_wait from running out"
    );
    running.server.shutdown().await.unwrap();
    nats.delete().await;
}

/// A durable deleted while the gateway reads it stops that source's reader, naming the durable:
/// `/readyz` answers 503 and the server stops (as for any task that ends), instead of a durable
/// recreated in silence, which would deliver the stream again from its first message.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_durable_stops_the_source_naming_it() {
    let nats = Nats::new().await;
    let durable = unique("gone").replace('_', "-");
    let app = Downstream::ok().await;
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let running = Running::start(config(&nats.source(&durable), &app), store).await;
    nats.publish("created", Some("o-1"), r#"{"n":1}"#).await;
    wait_for_keys(&app, 1).await;

    let stream = nats.context.get_stream(&nats.stream).await.unwrap();
    stream.delete_consumer(&durable).await.unwrap();
    // The reader notices within a pull's expiry (5 s) plus 1 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let answer = running
            .client
            .get(format!("{}/readyz", running.url))
            .send()
            .await
            .unwrap();
        if answer.status() == 503 {
            break answer.text().await.unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "still ready after the durable was deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let problem: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problem["type"], "urn:idem:problem:task-stopped", "{body}");
    let detail = problem["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("JetStream consumer {durable:?}")),
        "{detail}"
    );
    assert!(detail.contains("was deleted"), "{detail}");
    let info = stream
        .get_consumer::<jetstream::consumer::pull::Config>(&durable)
        .await;
    assert!(info.is_err(), "the durable was not recreated");
    let stopped = running.server.shutdown().await;
    assert!(
        matches!(stopped, Err(Error::TaskStopped { .. })),
        "{stopped:?}"
    );
    nats.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_stream_stops_the_start_naming_it() {
    let app = Downstream::ok().await;
    let source = format!(
        "kind = \"nats\"\nurl = \"{NATS_URL}\"\nstream = \"NO_SUCH_STREAM_IDEMGW\"\ndurable = \"gw\""
    );
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let gateway = idem_gateway::Gateway::new(config(&source, &app), store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = idem_gateway::Server::start(gateway, listener)
        .await
        .expect_err("no stream, no start");
    let Error::Broker {
        source_name,
        reason,
    } = &error
    else {
        panic!("{error}");
    };
    assert_eq!(source_name, "orders");
    assert!(reason.contains("\"NO_SUCH_STREAM_IDEMGW\""), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_with_another_filter_is_refused() {
    let nats = Nats::new().await;
    let stream = nats.context.get_stream(&nats.stream).await.unwrap();
    stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some("taken".into()),
            filter_subject: format!("{}.other", nats.subject),
            ..Default::default()
        })
        .await
        .unwrap();
    let app = Downstream::ok().await;
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let gateway = idem_gateway::Gateway::new(config(&nats.source("taken"), &app), store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = idem_gateway::Server::start(gateway, listener)
        .await
        .expect_err("a consumer filtering other subjects is not ours");
    let text = error.to_string();
    assert!(
        text.contains("\"taken\"") && text.contains("filter subject"),
        "{text}"
    );
    nats.delete().await;
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ

struct Rabbit {
    connection: Connection,
    channel: lapin::Channel,
    queue: String,
}

impl Rabbit {
    async fn new() -> Self {
        let connection = Connection::connect(AMQP_URL, ConnectionProperties::default())
            .await
            .expect("RabbitMQ on 5672");
        let channel = connection.create_channel().await.unwrap();
        let queue = unique("idem-gw");
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        Self {
            connection,
            channel,
            queue,
        }
    }

    fn source(&self) -> String {
        format!(
            "kind = \"rabbitmq\"\nurl = \"{AMQP_URL}\"\nqueue = \"{}\"\nmax_in_flight = 64",
            self.queue
        )
    }

    /// Publishes `body` to the queue (default exchange) with `message_id` and `type`, and waits
    /// for the broker's confirm.
    async fn publish(&self, id: Option<&str>, ty: &str, body: &str) {
        let mut properties = BasicProperties::default()
            .with_type(ty.into())
            .with_content_type("application/json".into());
        if let Some(id) = id {
            properties = properties.with_message_id(id.into());
        }
        self.channel
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                properties,
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    /// Messages ready in the queue (unacked ones of a closed channel are ready again).
    async fn ready(&self) -> u32 {
        self.channel
            .queue_declare(
                self.queue.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap()
            .message_count()
    }

    async fn delete(self) {
        let _ = self
            .channel
            .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
            .await;
        let _ = self.connection.close(200, "done".into()).await;
    }
}

async fn rabbitmq_messages_are_forwarded_once_and_acked<DB: GatewayDb>(store: Store<DB>) {
    let rabbit = Rabbit::new().await;
    let app = Downstream::ok().await;
    let running = Running::start(config(&rabbit.source(), &app), store).await;

    for n in 0..20 {
        rabbit
            .publish(
                Some(&format!("m-{n}")),
                "order.created",
                &format!(r#"{{"n":{n}}}"#),
            )
            .await;
    }
    for n in 0..5 {
        rabbit
            .publish(
                Some(&format!("m-{n}")),
                "order.created",
                &format!(r#"{{"n":{n}}}"#),
            )
            .await;
    }
    rabbit
        .publish(None, "order.created", r#"{"n":"no id"}"#)
        .await;

    wait_for_keys(&app, 20).await;
    running.settle().await;
    assert_eq!(
        app.received().len(),
        20,
        "each of the 20 events forwarded once"
    );
    for n in 0..20 {
        let copies = app.with_key(&format!("orders:m-{n}"));
        assert_eq!(copies.len(), 1, "m-{n}");
        assert_eq!(copies[0].header("idem-event-type"), Some("order.created"));
        assert_eq!(copies[0].header("content-type"), Some("application/json"));
    }
    let dead = dead_letters(running.gateway.store()).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].payload, br#"{"n":"no id"}"#);
    assert_eq!(dead[0].destination, rabbit.queue);

    // Closing the gateway's channel would put any unacked message back in the queue.
    running.server.shutdown().await.unwrap();
    assert_eq!(
        rabbit.ready().await,
        0,
        "every message was acked or rejected"
    );
    rabbit.delete().await;
}

async fn rabbitmq_store_failure_requeues_and_the_message_comes_again<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let rabbit = Rabbit::new().await;
    let app = Downstream::ok().await;
    let running = Running::start(config(&rabbit.source(), &app), store).await;
    idem_testkit::exec(
        running.gateway.store(),
        "ALTER TABLE idem_gateway_events RENAME TO idem_gateway_events_away",
        vec![],
    )
    .await;
    rabbit
        .publish(Some("m-1"), "order.created", r#"{"n":1}"#)
        .await;
    // Held for its 1 s retry delay, then requeued; the table is back before the redelivery.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(app.received().is_empty());
    idem_testkit::exec(
        running.gateway.store(),
        "ALTER TABLE idem_gateway_events_away RENAME TO idem_gateway_events",
        vec![],
    )
    .await;
    wait_for_keys(&app, 1).await;
    running.settle().await;
    assert_eq!(app.with_key("orders:m-1").len(), 1);
    running.server.shutdown().await.unwrap();
    assert_eq!(rabbit.ready().await, 0);
    rabbit.delete().await;
}

both_stores!(
    rabbitmq_messages_are_forwarded_once_and_acked,
    rabbitmq_store_failure_requeues_and_the_message_comes_again
);

/// A body over `max_body_bytes` never becomes an event, and its dead letter is no way around
/// the limit: the stored payload is cut at `max_body_bytes` (1024 here) and the error gives the
/// body's full length (5000 bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversize_message_is_dead_lettered_cut_at_max_body_bytes() {
    let rabbit = Rabbit::new().await;
    let app = Downstream::ok().await;
    let text = format!(
        "max_body_bytes = 1024\n{}",
        config_text(&rabbit.source(), &app)
    );
    let config = Config::from_toml(&text, &env).unwrap();
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let running = Running::start(config, store).await;
    let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(4990));
    assert_eq!(body.len(), 5000);
    rabbit.publish(Some("big-1"), "order.created", &body).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let dead = loop {
        let dead = dead_letters(running.gateway.store()).await;
        if !dead.is_empty() {
            break dead;
        }
        assert!(Instant::now() < deadline, "no dead letter");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].event_id.as_deref(), Some("big-1"));
    assert_eq!(dead[0].payload.len(), 1024);
    assert_eq!(dead[0].payload, body.as_bytes()[..1024]);
    assert_eq!(
        dead[0].error,
        "body-too-large: the body is 5000 bytes, more than max_body_bytes = 1024; the dead letter keeps its first 1024 bytes"
    );
    running.server.shutdown().await.unwrap();
    assert!(app.received().is_empty());
    assert_eq!(rabbit.ready().await, 0, "rejected, not requeued");
    rabbit.delete().await;
}

/// Dead letters without their payloads, for assertion messages: id, dedup key, event id, first
/// and last failure (ms).
fn rows(dead: &[idem_sql::DeadLetter]) -> Vec<String> {
    dead.iter()
        .map(|d| {
            format!(
                "{} {:?} {:?} {}..{}",
                d.id,
                d.dedup_key,
                d.event_id,
                d.first_failed_at.as_millis(),
                d.last_failed_at.as_millis()
            )
        })
        .collect()
}

/// Waits (up to 10 s) until the gateway's dead letters satisfy `done`, and returns them.
async fn dead_letters_until<DB: GatewayDb>(
    store: &Store<DB>,
    done: impl Fn(&[idem_sql::DeadLetter]) -> bool,
) -> Vec<idem_sql::DeadLetter> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let dead = dead_letters(store).await;
        if done(&dead) {
            return dead;
        }
        assert!(
            Instant::now() < deadline,
            "dead letters so far: {:?}",
            rows(&dead)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A rejected message that arrives again (its publisher sent `big-1` twice) keeps one dead
/// letter, keyed `orders:big-1` as the inbox keys events, whose last failure is the second
/// arrival; messages without an id cannot be told apart, so two of them make two rows.
async fn a_rejected_message_that_arrives_again_keeps_one_dead_letter<DB: GatewayDb>(
    store: Store<DB>,
) {
    let rabbit = Rabbit::new().await;
    let app = Downstream::ok().await;
    let text = format!(
        "max_body_bytes = 1024\n{}",
        config_text(&rabbit.source(), &app)
    );
    let running = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(4990));
    rabbit.publish(Some("big-1"), "order.created", &body).await;
    let first = dead_letters_until(running.gateway.store(), |dead| !dead.is_empty()).await;
    assert_eq!(first.len(), 1, "{:?}", rows(&first));
    // The store's clock counts milliseconds: the second failure is at a later one.
    tokio::time::sleep(Duration::from_millis(50)).await;
    rabbit.publish(Some("big-1"), "order.created", &body).await;
    let dead = dead_letters_until(running.gateway.store(), |dead| {
        dead.len() > 1
            || dead
                .first()
                .is_some_and(|d| d.last_failed_at.as_millis() > first[0].last_failed_at.as_millis())
    })
    .await;
    assert_eq!(
        dead.len(),
        1,
        "one row for both copies of big-1: {:?}",
        rows(&dead)
    );
    let letter = &dead[0];
    assert_eq!(letter.id, first[0].id);
    assert_eq!(letter.dedup_key.as_deref(), Some("orders:big-1"));
    assert_eq!(letter.event_id.as_deref(), Some("big-1"));
    assert_eq!(letter.first_failed_at, first[0].first_failed_at);
    assert!(
        letter.last_failed_at.as_millis() >= first[0].first_failed_at.as_millis() + 50,
        "{:?}",
        rows(&dead)
    );
    // Each copy was a first delivery of its own AMQP message.
    assert_eq!(letter.delivery_count, 1);
    assert!(
        letter
            .error
            .starts_with("body-too-large: the body is 5000 bytes")
    );

    rabbit.publish(None, "order.created", &body).await;
    rabbit.publish(None, "order.created", &body).await;
    let dead = dead_letters_until(running.gateway.store(), |dead| dead.len() >= 3).await;
    assert_eq!(dead.len(), 3, "{:?}", rows(&dead));
    assert_eq!(
        dead.iter().filter(|d| d.dedup_key.is_none()).count(),
        2,
        "{:?}",
        rows(&dead)
    );
    running.server.shutdown().await.unwrap();
    assert!(app.received().is_empty());
    assert_eq!(rabbit.ready().await, 0, "rejected, not requeued");
    rabbit.delete().await;
}

both_stores!(a_rejected_message_that_arrives_again_keeps_one_dead_letter);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_queue_stops_the_start_naming_it() {
    let app = Downstream::ok().await;
    let source =
        format!("kind = \"rabbitmq\"\nurl = \"{AMQP_URL}\"\nqueue = \"no-such-queue-idemgw\"");
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let gateway = idem_gateway::Gateway::new(config(&source, &app), store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = idem_gateway::Server::start(gateway, listener)
        .await
        .expect_err("no queue, no start");
    let text = error.to_string();
    assert!(
        text.starts_with("source \"orders\"") && text.contains("\"no-such-queue-idemgw\""),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// Configuration and the webhook endpoint

#[test]
fn broker_sources_load_with_their_defaults() {
    let app_addr = "127.0.0.1:9";
    let text = format!(
        r#"
[[source]]
name = "orders.v2"
kind = "nats"
stream = "ORDERS"

[[source]]
name = "billing"
kind = "rabbitmq"
url_env = "AMQP_URL"
queue = "billing-events"
entity = {{ json = "$.account" }}
version = {{ json = "$.seq" }}

[[destination]]
name = "app"
url = "http://{app_addr}/events"
signing_secret_env = "APP_SECRET"
"#
    );
    let env = |var: &str| {
        if var == "AMQP_URL" {
            Some("amqp://user:pw@127.0.0.1:5672/%2f".to_owned())
        } else {
            env(var)
        }
    };
    let config = Config::from_toml(&text, &env).unwrap();
    let Some(idem_gateway::Broker::Nats(nats)) = config.sources[0].broker() else {
        panic!("a nats source");
    };
    assert_eq!(nats.url.expose(), idem_gateway::DEFAULT_NATS_URL);
    assert_eq!(nats.stream, "ORDERS");
    assert_eq!(nats.subject, None);
    assert_eq!(nats.durable, "idem-gateway-orders_v2");
    assert_eq!(nats.ack_wait, Duration::from_secs(30));
    assert_eq!(nats.max_in_flight, 256);
    let broker = config.sources[1].broker().unwrap();
    assert_eq!(broker.display_url(), "amqp://***@127.0.0.1:5672/%2f");
    assert_eq!(broker.describe(), "queue billing-events");
    assert!(config.sources[1].kind.is_broker());
}

#[test]
fn broker_source_mistakes_are_named() {
    let cases = [
        (
            "kind = \"nats\"",
            "source \"orders\" stream is missing or empty",
        ),
        (
            "kind = \"nats\"\nstream = \"S\"\nsecrets_env = [\"APP_SECRET\"]",
            "source \"orders\" (kind nats) cannot have `secrets_env`: broker messages carry no webhook signature",
        ),
        (
            "kind = \"nats\"\nstream = \"S\"\nqueue = \"q\"",
            "cannot have `queue`: it is a key of kind = \"rabbitmq\" sources",
        ),
        (
            "kind = \"rabbitmq\"\nqueue = \"q\"\ntrust_traceparent = true",
            "(kind rabbitmq) cannot have `trust_traceparent`: it is a key of webhook sources: broker messages are not read for a traceparent",
        ),
        (
            "kind = \"rabbitmq\"\nqueue = \"q\"\nstream = \"S\"",
            "cannot have `stream`: it is a key of kind = \"nats\" sources",
        ),
        ("kind = \"rabbitmq\"", "source \"orders\" queue"),
        (
            "kind = \"nats\"\nstream = \"S\"\nurl = \"http://127.0.0.1:4222\"",
            "expected a URL starting with nats:// or tls://",
        ),
        (
            "kind = \"rabbitmq\"\nqueue = \"q\"\nurl = \"amqp://a\"\nurl_env = \"X\"",
            "either url or url_env, not both",
        ),
        (
            "kind = \"rabbitmq\"\nqueue = \"q\"\nurl_env = \"NOT_SET\"",
            "environment variable NOT_SET, which is not set",
        ),
        (
            "kind = \"nats\"\nstream = \"S\"\nsubject = \"orders.>.x\"",
            "a NATS subject filter",
        ),
        ("kind = \"nats\"\nstream = \"S.T\"", "a JetStream name"),
        (
            "kind = \"nats\"\nstream = \"S\"\nack_wait = \"10ms\"",
            "source \"orders\" ack_wait = \"10ms\" is not valid; expected between 100ms and 12h",
        ),
        // JetStream holds ack_wait in i64 nanoseconds: years would make a broken durable.
        (
            "kind = \"nats\"\nstream = \"S\"\nack_wait = \"1000years\"",
            "source \"orders\" ack_wait = \"1000years\" is not valid; expected between 100ms and 12h",
        ),
        (
            "kind = \"nats\"\nstream = \"S\"\nack_wait = \"13h\"",
            "source \"orders\" ack_wait = \"13h\" is not valid; expected between 100ms and 12h",
        ),
        (
            "kind = \"rabbitmq\"\nqueue = \"q\"\nmax_in_flight = 0",
            "between 1 and 65535",
        ),
        (
            "kind = \"stripe\"\nsecrets_env = [\"APP_SECRET\"]\nqueue = \"q\"",
            "(kind stripe) cannot have `queue`: it is a key of kind = \"rabbitmq\" sources",
        ),
        (
            "kind = \"github\"\nsecrets_env = [\"APP_SECRET\"]\nurl = \"nats://x\"",
            "(kind github) cannot have `url`: it is a key of kind = \"nats\" and \"rabbitmq\" sources",
        ),
        (
            "kind = \"sqs\"",
            "expected stripe, github, shopify, standard-webhooks, generic, nats, rabbitmq or kafka",
        ),
        (
            "kind = \"kafka\"\ntopic = \"orders\"\nconsumer = \"orders_v1\"",
            "source \"orders\" brokers is missing or empty; expected a list of bootstrap brokers as host:port",
        ),
        (
            "kind = \"kafka\"\nbrokers = [\"k:9092\"]\ntopic = \"orders\"",
            "source \"orders\" consumer is missing or empty",
        ),
        (
            "kind = \"kafka\"\nbrokers = [\"k:9092\"]\ntopic = \"a/b\"\nconsumer = \"c\"",
            "source \"orders\" topic = \"a/b\" is not valid",
        ),
    ];
    for (source, expected) in cases {
        let text = format!("[[source]]\nname = \"orders\"\n{source}\n");
        let error = Config::from_toml(&text, &env).expect_err(source);
        let text = error.to_string();
        assert!(text.contains(expected), "{source:?}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_source_takes_no_webhooks() {
    let nats = Nats::new().await;
    let app = Downstream::ok().await;
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let running = Running::start(config(&nats.source("gw"), &app), store).await;
    let answer = running
        .post("orders", &[("nats-msg-id", "forged".to_owned())], b"{}")
        .await;
    assert_eq!(answer.status, 404);
    let detail = answer.json["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("stream {}", nats.stream)),
        "{detail}"
    );
    running.server.shutdown().await.unwrap();
    assert!(app.received().is_empty());
    nats.delete().await;
}
