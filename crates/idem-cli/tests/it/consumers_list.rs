//! `idem consumers list|show` on a gateway's database (issue 34): a gateway with two webhook
//! sources and a Kafka source (the Kafka-protocol broker at `IDEM_TEST_KAFKA`, default
//! 127.0.0.1:19092) is sent events with duplicates and a stale one on each; the real binary's
//! `list --json` shows each source, the Kafka cursor and the destination with first and last
//! seen and exactly the counts sent; `--since` in the future lists none; `show` of an unknown
//! name lists the known ones and exits 1; on an application's database (no gateway tables) a
//! runner's counts are read through the library. SQLite and PostgreSQL.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_broker::rskafka::chrono::{TimeZone, Utc};
use idem_broker::rskafka::client::Client;
use idem_broker::rskafka::client::partition::{Compression, UnknownTopicHandling};
use idem_broker::rskafka::record::Record;
use idem_broker::{MESSAGE_ID_HEADER, kafka_connect};
use idem_core::{Clock, Name, SystemClock};
use idem_gateway::{Config, Gateway, GatewayDb, Server};
use idem_http::verify::{standard_webhooks, stripe};
use idem_sql::Store;
use serde_json::Value;

use crate::support::{Downstream, IDEM, pg_database, unix_now};

const STRIPE_SECRET: &str = "whsec_inventory";
const SHOP_SECRET: &str = "whsec_aW52ZW50b3J5LXNob3A=";
const APP_SECRET: &str = "whsec_aGVsbG8=";

/// Events sent to each source: distinct ones (versions 1..=N of one entity), this many of
/// them delivered twice, then one event with version 1 again (stale).
const N: usize = 5;
const DUPLICATES: usize = 2;

fn kafka_addr() -> String {
    std::env::var("IDEM_TEST_KAFKA").unwrap_or_else(|_| "127.0.0.1:19092".to_owned())
}

fn secrets(var: &str) -> Option<String> {
    match var {
        "INV_STRIPE_SECRET" => Some(STRIPE_SECRET.to_owned()),
        "INV_SHOP_SECRET" => Some(SHOP_SECRET.to_owned()),
        "INV_APP_SECRET" => Some(APP_SECRET.to_owned()),
        _ => None,
    }
}

/// Sources `stripe`, `shop` (Standard Webhooks, entity and version read from the body) and
/// `orders` (Kafka, consumer `orders_v1`), each routed to `app`.
fn config_text(url: &str, topic: &str, app: std::net::SocketAddr) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
database_url = "{url}"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["INV_STRIPE_SECRET"]

[[source]]
name = "shop"
kind = "standard-webhooks"
secrets_env = ["INV_SHOP_SECRET"]
entity = {{ json = "$.data.id" }}
entity_type = "order"
version = {{ json = "$.data.v", type = "integer" }}

[[source]]
name = "orders"
kind = "kafka"
brokers = ["{kafka}"]
topic = "{topic}"
consumer = "orders_v1"
entity = {{ json = "$.id" }}
entity_type = "acct"
version = {{ json = "$.v", type = "integer" }}

[[destination]]
name = "app"
url = "http://{app}/events"
retry_schedule = ["10ms"]
signing_secret_env = "INV_APP_SECRET"

[[route]]
source = "stripe"
destination = "app"

[[route]]
source = "shop"
destination = "app"

[[route]]
source = "orders"
destination = "app"
"#,
        kafka = kafka_addr()
    )
}

/// The (id, version) of each delivery every source is sent, in order: versions 1..=N, the
/// first [`DUPLICATES`] again, then a new event with version 1 (stale).
fn deliveries(prefix: &str) -> Vec<(String, i64)> {
    let mut sent: Vec<(String, i64)> = (1..=N as i64)
        .map(|v| (format!("{prefix}_{v}"), v))
        .collect();
    sent.extend(sent.clone().into_iter().take(DUPLICATES));
    sent.push((format!("{prefix}_late"), 1));
    sent
}

async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: &str,
) -> String {
    let mut request = client.post(url).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let answer: Value = request.send().await.unwrap().json().await.unwrap();
    answer["status"].as_str().unwrap_or_default().to_owned()
}

/// Sends [`deliveries`] to `stripe` and `shop` at `base`, checking each answer.
async fn send_webhooks(base: &str) {
    let client = idem_testkit::http_client();
    for (i, (id, version)) in deliveries("evt_inv").into_iter().enumerate() {
        let expected = if (N..N + DUPLICATES).contains(&i) {
            "duplicate"
        } else {
            "accepted"
        };
        // Stripe's version is `created`, compared as it is: 1000 + version keeps the order.
        let body = format!(
            r#"{{"id":"{id}","object":"event","type":"customer.updated","created":{},"data":{{"object":{{"id":"cus_inv","object":"customer"}}}}}}"#,
            1_000 + version
        );
        let signature = stripe::sign(STRIPE_SECRET, unix_now(), body.as_bytes());
        let url = format!("{base}/webhooks/stripe");
        let status = post(&client, &url, &[("stripe-signature", signature)], &body).await;
        assert_eq!(status, expected, "stripe {id}");

        let msg = id.replace("evt", "msg");
        let body = format!(r#"{{"type":"order.paid","data":{{"id":"o_inv","v":{version}}}}}"#);
        let now = unix_now();
        let headers = [
            ("webhook-id", msg.clone()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                standard_webhooks::sign(SHOP_SECRET, &msg, now, body.as_bytes()).unwrap(),
            ),
        ];
        let status = post(&client, &format!("{base}/webhooks/shop"), &headers, &body).await;
        assert_eq!(status, expected, "shop {msg}");
    }
}

/// A fresh one-partition topic.
async fn create_topic(client: &Client) -> String {
    let topic = idem_testkit::unique("idem-inv");
    let controller = client.controller_client().expect("controller client");
    controller
        .create_topic(&topic, 1, 1, 5_000)
        .await
        .unwrap_or_else(|e| panic!("create topic {topic}: {e}"));
    topic
}

/// Produces [`deliveries`] to `topic` (message id header, body `{"id", "v"}`).
async fn produce(client: &Client, topic: &str) -> usize {
    let records: Vec<Record> = deliveries("k_inv")
        .into_iter()
        .map(|(id, version)| Record {
            key: None,
            value: Some(format!(r#"{{"id":"a_inv","v":{version}}}"#).into_bytes()),
            headers: BTreeMap::from([(MESSAGE_ID_HEADER.to_owned(), id.into_bytes())]),
            timestamp: Utc.timestamp_millis_opt(1_700_000_000_000).unwrap(),
        })
        .collect();
    let count = records.len();
    let partition = client
        .partition_client(topic, 0, UnknownTopicHandling::Retry)
        .await
        .unwrap();
    partition
        .produce(records, Compression::NoCompression)
        .await
        .expect("produced");
    count
}

/// Waits (up to 15 s) until `orders_v1`'s stored next offset on `topic` is `end`, then until
/// nothing is pending or in flight.
async fn settle<DB: GatewayDb>(gateway: &Gateway<DB>, topic: &str, end: i64) {
    let offsets = gateway
        .store()
        .kafka_offsets(&Name::new("consumer", "orders_v1").unwrap());
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let stored: Vec<Option<i64>> = offsets
            .list(topic)
            .await
            .unwrap()
            .iter()
            .map(|o| o.next_offset)
            .collect();
        let stats = gateway.stats().await.unwrap();
        let open = stats
            .destinations
            .values()
            .map(|c| c.pending + c.in_flight)
            .sum::<u64>();
        if stored == [Some(end)] && open == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "offsets {stored:?}, open deliveries {open}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `idem [-c CONFIG] consumers ARGS --database URL`: (exit code, stdout, stderr).
fn idem(
    config: Option<&std::path::Path>,
    url: &str,
    args: &[&str],
) -> (Option<i32>, String, String) {
    let mut command = Command::new(IDEM);
    if let Some(config) = config {
        command.arg("-c").arg(config);
    }
    let output = command
        .arg("consumers")
        .args(args)
        .args(["--database", url])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `idem consumers list --json ARGS` as JSON.
fn list(config: &std::path::Path, url: &str, args: &[&str]) -> Value {
    let (code, out, err) = idem(Some(config), url, &[&["list", "--json"], args].concat());
    assert_eq!(code, Some(0), "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// (kind, claimed, duplicates, stale of the last 24 hours, first seen, last seen) of `name`.
fn figures(list: &Value, name: &str) -> (String, [u64; 3], i64, i64) {
    let e = (list.as_array().unwrap().iter())
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no consumer {name} in {list}"));
    let day = (e["windows"].as_array().unwrap().iter())
        .find(|w| w["window_secs"] == 86_400)
        .unwrap();
    let n = |f: &str| day[f].as_u64().unwrap();
    (
        e["kind"].as_str().unwrap().to_owned(),
        [n("claimed"), n("duplicates"), n("stale")],
        e["first_seen"].as_i64().unwrap(),
        e["last_seen"].as_i64().unwrap(),
    )
}

async fn consumers_are_listed_with_what_was_sent<DB: GatewayDb>(store: Store<DB>, url: &str) {
    let kafka = Arc::new(kafka_connect(&[kafka_addr()]).await.unwrap_or_else(|e| {
        panic!(
            "no Kafka broker at {} (set IDEM_TEST_KAFKA, or run scripts/test): {e}",
            kafka_addr()
        )
    }));
    let topic = create_topic(&kafka).await;
    let records = produce(&kafka, &topic).await;
    let app = Downstream::ok().await;
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(url, &topic, app.addr);
    let path = dir.path().join("idem.toml");
    std::fs::write(&path, &text).unwrap();

    let started = SystemClock.now().as_millis();
    let gateway = Gateway::new(Config::from_toml(&text, &secrets).unwrap(), store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(gateway.clone(), listener).await.unwrap();
    send_webhooks(&format!("http://{}", server.local_addr())).await;
    settle(&gateway, &topic, records as i64).await;
    let ended = SystemClock.now().as_millis();

    let listed = list(&path, url, &[]);
    let sent = [N as u64 + 1, DUPLICATES as u64, 1];
    for (name, kind) in [
        ("stripe", "gateway_source"),
        ("shop", "gateway_source"),
        ("orders", "gateway_source"),
        ("orders_v1", "kafka"),
    ] {
        let (got_kind, counts, first, last) = figures(&listed, name);
        assert_eq!(
            (got_kind.as_str(), counts),
            (kind, sent),
            "{name}: {listed}"
        );
        assert!(
            started <= first && first <= last && last <= ended,
            "{name}: {listed}"
        );
    }
    // Every source's N fresh events were delivered; the stale ones were not sent.
    let (kind, counts, _, _) = figures(&listed, "app");
    assert_eq!(
        (kind.as_str(), counts),
        ("gateway_destination", [3 * N as u64, 0, 3])
    );
    assert_eq!(
        list(&path, url, &["--since", "2999-01-01T00:00:00Z"]),
        serde_json::json!([])
    );
    assert_eq!(
        list(&path, url, &["--since", "1h"])
            .as_array()
            .unwrap()
            .len(),
        listed.as_array().unwrap().len()
    );

    let (code, out, _) = idem(Some(&path), url, &["list"]);
    assert_eq!(code, Some(0));
    let row = out
        .lines()
        .find(|l| l.starts_with("orders_v1 "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains(" kafka "), "{row}");
    let (code, out, _) = idem(Some(&path), url, &["show", "orders_v1"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("consumer orders_v1 (kafka)"), "{out}");
    let (code, _, err) = idem(Some(&path), url, &["show", "nobody_v1"]);
    assert_eq!(code, Some(1), "{err}");
    for known in ["stripe", "shop", "orders_v1", "app"] {
        assert!(err.contains(known), "{known} not in {err}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_are_listed_with_what_was_sent_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("idem.db").display());
    let store = idem_sql::SqliteStore::connect(&url).await.unwrap();
    consumers_are_listed_with_what_was_sent(store, &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_are_listed_with_what_was_sent_postgres() {
    let url = pg_database().await;
    let store = idem_sql::PgStore::connect(&url).await.unwrap();
    consumers_are_listed_with_what_was_sent(store, &url).await;
}

/// On an application's database (no gateway tables) the commands read idem's library: a
/// runner's events, one of them delivered twice, are listed once flushed.
async fn consumers_of_an_application_database<DB: idem_sql::Backend>(url: &str) {
    let store = Store::<DB>::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    let runner =
        idem_sql::Runner::new(store.clone(), &Name::new("consumer", "billing_v1").unwrap());
    let source = Name::new("source", "orders").unwrap();
    let ids = ["evt_a", "evt_b", "evt_c", "evt_a"];
    for (i, id) in ids.into_iter().enumerate() {
        let key = idem_core::DedupKey::from_event(&source, &idem_core::EventId::new(id).unwrap());
        let event = idem_sql::Event::new(key);
        let outcome = runner.run(&event, async |_tx| Ok(())).await.unwrap();
        let expected = if i < 3 { "applied" } else { "duplicate" };
        assert_eq!(outcome.name(), expected, "{id}");
    }
    store.flush_consumer_counts().await.unwrap();

    let (code, out, err) = idem(None, url, &["list", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let (kind, counts, first, last) = figures(&listed, "billing_v1");
    assert_eq!((kind.as_str(), counts), ("runner", [3, 1, 0]), "{listed}");
    assert!(first <= last, "{listed}");
    let (code, out, err) = idem(None, url, &["show", "billing_v1"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("consumer billing_v1 (runner)"), "{out}");
    let (code, _, err) = idem(None, url, &["show", "nobody_v1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("billing_v1"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_of_an_application_database_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    consumers_of_an_application_database::<idem_sql::sqlx::Sqlite>(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_of_an_application_database_postgres() {
    consumers_of_an_application_database::<idem_sql::sqlx::Postgres>(&pg_database().await).await;
}

/// A database an idem older than the registry migrated (simulated: a migrated one without
/// `idem_consumers`, once an application's, once with a gateway's events table) is named as
/// such, not failed on the first query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_older_than_the_registry_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("old.db").display());
    let store = Store::<idem_sql::sqlx::Sqlite>::connect(&url)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    idem_sql::sqlx::query("DROP TABLE idem_consumers")
        .execute(store.pool())
        .await
        .unwrap();
    for gateway in [false, true] {
        if gateway {
            idem_sql::sqlx::query("CREATE TABLE idem_gateway_events (event_id TEXT)")
                .execute(store.pool())
                .await
                .unwrap();
        }
        for args in [&["list"][..], &["show", "billing_v1"]] {
            let (code, out, err) = idem(None, &url, args);
            assert_eq!((code, out.as_str()), (Some(1), ""), "{args:?}: {err}");
            assert!(
                err.contains("predates the consumer registry (migration 0007)"),
                "gateway {gateway}, {args:?}: {err}"
            );
        }
    }
}
