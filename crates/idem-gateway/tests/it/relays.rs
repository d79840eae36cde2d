//! Outbox relays run by the gateway: rows an application commits to `idem_outbox` in its own
//! database are published by `idem serve` to NATS JetStream (with `Nats-Msg-Id` = the row's
//! message id), RabbitMQ (AMQP `message_id`) or HTTP (`Idempotency-Key`), and marked published.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::routing;
use idem_gateway::{Config, Error};
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{Backend, Store};
use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties};

use idem_testkit::nats::TestStream as Stream;
use idem_testkit::outbox::{app_store, enqueue, wait_published};
use idem_testkit::unique;

use crate::support::{Running, env, pg_database, sqlite, system_clock};

const NATS_URL: &str = "nats://127.0.0.1:4222";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A gateway configuration with no sources and one relay (its keys in `relay`).
fn config(relay: &str) -> Config {
    let text = format!(
        "listen = \"127.0.0.1:0\"\n\n[[relay]]\nname = \"out\"\npoll_interval = \"20ms\"\n{relay}\n"
    );
    Config::from_toml(&text, &env).expect("valid configuration")
}

async fn relays_to_nats<DB: Backend>(app_url: &str) {
    let app = app_store::<DB>(app_url).await;
    let stream = Stream::new().await;
    let subject = format!("{}.orders", stream.subject);
    let before: Vec<String> = (0..10).map(|n| format!("mid-{n}")).collect();
    enqueue(&app, &subject, &before).await;

    let (_dir, gateway_store) = sqlite(system_clock()).await;
    let relay = format!("database_url = \"{app_url}\"\ntarget = \"nats\"\nurl = \"{NATS_URL}\"");
    let running = Running::start(config(&relay), gateway_store).await;
    // Rows committed while the gateway runs go out too.
    let after: Vec<String> = (10..15).map(|n| format!("mid-{n}")).collect();
    enqueue(&app, &subject, &after).await;

    wait_published(&app, 15).await;
    let messages = stream.messages(15).await;
    assert_eq!(messages.len(), 15, "each row published once");
    let mut ids: Vec<&str> = messages.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort_unstable();
    let mut expected: Vec<String> = before.iter().chain(&after).cloned().collect();
    expected.sort_unstable();
    assert_eq!(ids, expected);
    for (id, body) in &messages {
        assert_eq!(body, format!(r#"{{"id":"{id}"}}"#).as_bytes());
    }
    running.server.shutdown().await.unwrap();
    stream.delete().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_relays_rows_of_a_postgres_database_to_nats() {
    relays_to_nats::<Postgres>(&pg_database().await).await;
}

/// A Rails, Laravel or Django application on MySQL or MariaDB commits its outbox rows in its own
/// database; the gateway relays them (issue 29).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_relays_rows_of_a_mysql_database_to_nats() {
    relays_to_nats::<MySql>(&idem_testkit::mysql_database().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_relays_rows_of_a_sqlite_database_to_nats() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    relays_to_nats::<Sqlite>(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_relays_rows_to_rabbitmq_with_their_message_ids() {
    let dir = tempfile::tempdir().unwrap();
    let app_url = format!("sqlite://{}", dir.path().join("app.db").display());
    let app = app_store::<Sqlite>(&app_url).await;
    let connection = Connection::connect(AMQP_URL, ConnectionProperties::default())
        .await
        .expect("RabbitMQ on 5672");
    let channel = connection.create_channel().await.unwrap();
    let queue = unique("idem-relay");
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
    let ids: Vec<String> = (0..5).map(|n| format!("amqp-{n}")).collect();
    enqueue(&app, &queue, &ids).await;

    let (_dir, gateway_store) = sqlite(system_clock()).await;
    let relay =
        format!("database_url = \"{app_url}\"\ntarget = \"rabbitmq\"\nurl = \"{AMQP_URL}\"");
    let running = Running::start(config(&relay), gateway_store).await;
    wait_published(&app, 5).await;
    running.server.shutdown().await.unwrap();

    let mut got = Vec::new();
    while let Some(message) = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        let id = message.delivery.properties.message_id().clone().unwrap();
        got.push(id.as_str().to_owned());
    }
    got.sort();
    assert_eq!(got, ids, "each row once, with its message id");
    let _ = channel
        .queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
        .await;
    let _ = connection.close(200, "done".into()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_relays_rows_over_http_with_idempotency_keys() {
    let dir = tempfile::tempdir().unwrap();
    let app_url = format!("sqlite://{}", dir.path().join("app.db").display());
    let app = app_store::<Sqlite>(&app_url).await;
    let received: Arc<Mutex<Vec<(String, String, Bytes)>>> = Arc::default();
    let log = Arc::clone(&received);
    let receiver = Router::new().route(
        "/hooks/{name}",
        routing::post(
            move |axum::extract::Path(name): axum::extract::Path<String>,
                  headers: HeaderMap,
                  body: Bytes| {
                let log = Arc::clone(&log);
                async move {
                    let key = headers
                        .get("idempotency-key")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    log.lock().unwrap().push((name, key, body));
                    "ok"
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, receiver).await });
    let ids: Vec<String> = (0..4).map(|n| format!("http-{n}")).collect();
    enqueue(&app, "/hooks/orders", &ids).await;

    let (_dir, gateway_store) = sqlite(system_clock()).await;
    let relay = format!(
        "database_url = \"{app_url}\"\ntarget = \"http\"\nurl = \"http://{addr}\"\ntimeout = \"2s\""
    );
    let running = Running::start(config(&relay), gateway_store).await;
    wait_published(&app, 4).await;
    running.server.shutdown().await.unwrap();
    let mut got = received.lock().unwrap().clone();
    got.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(got.len(), 4, "each row POSTed once");
    for ((name, key, body), id) in got.iter().zip(&ids) {
        assert_eq!(name, "orders");
        assert_eq!(key, id);
        assert_eq!(body, format!(r#"{{"id":"{id}"}}"#).as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_without_an_outbox_stops_the_start_naming_the_relay() {
    let dir = tempfile::tempdir().unwrap();
    let app_url = format!("sqlite://{}", dir.path().join("app.db").display());
    // A database the application never migrated.
    let _bare = Store::<Sqlite>::connect(&app_url).await.unwrap();
    let (_gw_dir, gateway_store) = sqlite(system_clock()).await;
    let gateway = idem_gateway::Gateway::new(
        config(&format!("database_url = \"{app_url}\"\ntarget = \"nats\"")),
        gateway_store,
    );
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = idem_gateway::Server::start(gateway, listener)
        .await
        .expect_err("no outbox table, no start");
    let Error::Relay { relay, reason } = &error else {
        panic!("{error}");
    };
    assert_eq!(relay, "out");
    assert!(reason.contains("no idem_outbox table"), "{reason}");
}

#[test]
fn relay_mistakes_are_named() {
    let cases = [
        (
            "target = \"sqs\"",
            "relay \"out\" target = \"sqs\" is not valid; expected \"nats\", \"rabbitmq\", \"kafka\" or \"http\"",
        ),
        (
            "target = \"kafka\"",
            "relay \"out\" brokers is missing or empty; expected a list of bootstrap brokers as host:port",
        ),
        (
            "target = \"kafka\"\nbrokers = [\"k:9092\"]\nurl = \"nats://x\"",
            "relay \"out\" url = \"a URL, not shown\" is not valid; expected no url",
        ),
        (
            "target = \"nats\"\nbrokers = [\"k:9092\"]",
            "relay \"out\" brokers = \"k:9092\" is not valid; expected no brokers",
        ),
        ("target = \"http\"", "relay \"out\" url is missing or empty"),
        (
            "target = \"http\"\nurl = \"ftp://x\"",
            "an http:// or https:// URL",
        ),
        (
            "target = \"http\"\nurl = \"http://x\"\nca_file = \"ca.pem\"",
            "relay \"out\" url = \"http://x\" is not valid; expected an https:// URL: ca_file",
        ),
        (
            "target = \"nats\"\nca_file = \"ca.pem\"",
            "relay \"out\" ca_file = \"ca.pem\" is not valid; expected no ca_file: it is a key of target = \"http\" relays",
        ),
        (
            "target = \"http\"\nurl = \"https://x\"\nclient_key_file = \"key.pem\"",
            "relay \"out\" client_key_file = \"key.pem\" is not valid; expected client_key_file together with client_cert_file",
        ),
        (
            "target = \"nats\"\nurl = \"amqp://x\"",
            "a URL starting with nats:// or tls://",
        ),
        (
            "target = \"nats\"\ntimeout = \"1s\"",
            "it is a key of target = \"http\" relays",
        ),
        (
            "target = \"http\"\nurl = \"http://x\"\ntimeout = \"30s\"\nclaim_ttl = \"30s\"",
            "more than timeout (30s)",
        ),
        ("target = \"nats\"\nbatch_size = 0", "between 1 and 10000"),
        ("target = \"nats\"\nmax_attempts = 0", "at least 1"),
        (
            "target = \"nats\"\ndatabase_url = \"redis://x\"",
            "a sqlite://, postgres:// or mysql:// URL",
        ),
        (
            "target = \"nats\"\ndatabase_url_env = \"NOT_SET\"",
            "relay \"out\" needs its secret in environment variable NOT_SET",
        ),
        (
            "target = \"nats\"\npoll_interval = \"1ms\"",
            "relay \"out\" poll_interval = \"1ms\" is not valid; expected between 10ms and 1h",
        ),
        (
            "target = \"nats\"\npoll_interval = \"2h\"",
            "relay \"out\" poll_interval = \"2h\" is not valid; expected between 10ms and 1h",
        ),
        (
            "target = \"nats\"\nclaim_ttl = \"500ms\"",
            "relay \"out\" claim_ttl = \"500ms\" is not valid; expected between 1s and 1h",
        ),
        (
            "target = \"nats\"\nclaim_ttl = \"1000years\"",
            "relay \"out\" claim_ttl = \"1000years\" is not valid; expected between 1s and 1h",
        ),
        // A URL of another scheme is refused from url_env too, without its credentials.
        (
            "target = \"http\"\nurl_env = \"HTTPS_TARGET\"",
            "relay \"out\" url_env = \"ftp://***@hooks.example.com\" is not valid; expected an http:// or https:// URL",
        ),
    ];
    let env = |var: &str| {
        if var == "HTTPS_TARGET" {
            Some("ftp://user:pw@hooks.example.com".to_owned())
        } else {
            env(var)
        }
    };
    for (relay, expected) in cases {
        let text = format!("[[relay]]\nname = \"out\"\n{relay}\n");
        let error = Config::from_toml(&text, &env).expect_err(relay).to_string();
        assert!(error.contains(expected), "{relay:?}: {error}");
    }
    let twice = "[[relay]]\nname = \"out\"\ntarget = \"nats\"\n[[relay]]\nname = \"out\"\ntarget = \"http\"\nurl = \"http://x\"\n";
    assert_eq!(
        Config::from_toml(twice, &env).unwrap_err().to_string(),
        "relay \"out\" is configured twice"
    );
    let bounds = Config::from_toml(
        "[[relay]]\nname = \"out\"\ntarget = \"nats\"\nclaim_ttl = \"1h\"\npoll_interval = \"10ms\"\n",
        &env,
    )
    .unwrap()
    .relays
    .remove(0);
    assert_eq!(bounds.claim_ttl, Duration::from_secs(3600));
    assert_eq!(bounds.poll_interval, Duration::from_millis(10));
    let defaults = Config::from_toml("[[relay]]\nname = \"out\"\ntarget = \"nats\"\n", &env)
        .unwrap()
        .relays
        .remove(0);
    assert_eq!(
        defaults.database_url.expose(),
        idem_gateway::DEFAULT_DATABASE_URL
    );
    assert_eq!(defaults.batch_size, 100);
    assert_eq!(defaults.poll_interval, Duration::from_secs(1));
    assert_eq!(defaults.claim_ttl, Duration::from_secs(30));
    assert_eq!(defaults.max_attempts, 10);
    assert_eq!(
        defaults.target.display_url(),
        idem_gateway::DEFAULT_NATS_URL
    );
}

/// `idem_outbox` has no column naming a row's relay: two relays on one database with different
/// targets would publish each other's rows, so the configuration is refused, naming both and why.
/// Relays with the same target on one database (they share the rows), or with different targets
/// on different databases, are accepted.
#[test]
fn relays_on_one_database_must_share_their_target() {
    let relay = |name: &str, database: &str, target: &str| {
        format!("[[relay]]\nname = \"{name}\"\ndatabase_url = \"{database}\"\n{target}\n")
    };
    let app = "postgres://app:pw@127.0.0.1/app";
    let nats = "target = \"nats\"\nurl = \"nats://127.0.0.1:4222\"";
    let http = "target = \"http\"\nurl = \"http://127.0.0.1:3000\"";
    let other_nats = "target = \"nats\"\nurl = \"nats://127.0.0.1:4223\"";
    for (second, second_target) in [
        (http, "http at http://127.0.0.1:3000"),
        (other_nats, "nats at nats://127.0.0.1:4223"),
    ] {
        let text = relay("to-nats", app, nats) + &relay("second", app, second);
        assert_eq!(
            Config::from_toml(&text, &env).unwrap_err().to_string(),
            format!(
                "relays \"to-nats\" and \"second\" both publish the idem_outbox rows of postgres://***@127.0.0.1/app, to different targets (nats at nats://127.0.0.1:4222 and {second_target}): idem_outbox has no column naming a row's relay, so each would publish the other's rows; give them the same target, or separate databases"
            )
        );
    }
    // The gateway's own database is the default: a relay without database_url shares it.
    let text = relay("explicit", idem_gateway::DEFAULT_DATABASE_URL, nats)
        + "[[relay]]\nname = \"implicit\"\n"
        + http;
    assert!(matches!(
        Config::from_toml(&text, &env),
        Err(idem_gateway::ConfigError::RelayTargetConflict { .. })
    ));

    let same_target = relay("a", app, nats) + &relay("b", app, nats);
    assert_eq!(
        Config::from_toml(&same_target, &env).unwrap().relays.len(),
        2
    );
    let two_databases =
        relay("a", app, nats) + &relay("b", "postgres://app:pw@127.0.0.1/other", http);
    assert_eq!(
        Config::from_toml(&two_databases, &env)
            .unwrap()
            .relays
            .len(),
        2
    );
}

/// "One database" is the database the URLs reach, not their text: a re-check ran a NATS relay
/// on `…@127.0.0.1:5432/db` and a RabbitMQ relay on `…@localhost:5432/db`, and the RabbitMQ
/// relay parked 510 NATS-bound rows. `localhost` and the loopback addresses, a missing default
/// port (5432) and extra parameters (`sslmode`, a password) all name one PostgreSQL database;
/// `./x.db`, `x.db` and the absolute path one SQLite file. Another port, database name or host
/// is another database.
#[test]
fn relays_on_one_database_are_found_however_the_url_is_written() {
    let relay = |name: &str, database: &str, target: &str| {
        format!("[[relay]]\nname = \"{name}\"\ndatabase_url = \"{database}\"\n{target}\n")
    };
    let nats = "target = \"nats\"\nurl = \"nats://127.0.0.1:4222\"";
    let rabbit = "target = \"rabbitmq\"\nurl = \"amqp://guest:guest@127.0.0.1:5672/%2f\"";
    let first = "postgres://postgres@127.0.0.1:5432/db";
    for second in [
        "postgres://postgres@localhost:5432/db",
        "postgres://postgres@127.0.0.1/db",
        "postgres://postgres@127.0.0.1:5432/db?sslmode=disable",
        "postgresql://other:pw@[::1]/db?password=x",
        "postgres://postgres@LOCALHOST/db",
    ] {
        let text = relay("to-nats", first, nats) + &relay("to-rabbit", second, rabbit);
        let error = Config::from_toml(&text, &env).expect_err(second);
        let idem_gateway::ConfigError::RelayTargetConflict {
            first: a,
            second: b,
            database,
            ..
        } = &error
        else {
            panic!("{second}: {error}");
        };
        assert_eq!((a.as_str(), b.as_str()), ("to-nats", "to-rabbit"));
        assert_eq!(
            database,
            &format!(
                "{} (the database of postgres://***@127.0.0.1:5432/db too)",
                idem_sql::redact_url(second)
            )
        );
        assert!(!error.to_string().contains("pw@"), "{error}");
    }
    for other in [
        "postgres://postgres@127.0.0.1:5433/db",
        "postgres://postgres@127.0.0.1:5432/db2",
        "postgres://postgres@10.0.0.7:5432/db",
    ] {
        let text = relay("to-nats", first, nats) + &relay("to-rabbit", other, rabbit);
        assert_eq!(
            Config::from_toml(&text, &env).expect(other).relays.len(),
            2,
            "{other}"
        );
    }

    // SQLite: the file, whichever way its path is written.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app.db");
    std::fs::write(&file, b"").unwrap();
    let absolute = format!("sqlite://{}", file.display());
    let dotted = format!("sqlite://{}/./app.db?mode=rw", dir.path().display());
    let text = relay("to-nats", &absolute, nats) + &relay("to-rabbit", &dotted, rabbit);
    assert!(matches!(
        Config::from_toml(&text, &env),
        Err(idem_gateway::ConfigError::RelayTargetConflict { .. })
    ));
    let elsewhere = format!("sqlite://{}", dir.path().join("other.db").display());
    let text = relay("to-nats", &absolute, nats) + &relay("to-rabbit", &elsewhere, rabbit);
    assert_eq!(Config::from_toml(&text, &env).unwrap().relays.len(), 2);
}

/// A relay's HTTP `timeout` is at most 30m, so that a `claim_ttl` (at most 1h) can exceed it;
/// when claim_ttl does not, the error names the key the user wrote and the range to set
/// claim_ttl in, whether or not claim_ttl was written.
#[test]
fn relay_timeout_and_claim_ttl_errors_say_what_to_set() {
    let error = |keys: &str| {
        let text = format!(
            "[[relay]]\nname = \"out\"\ntarget = \"http\"\nurl = \"http://127.0.0.1:3000\"\n{keys}\n"
        );
        Config::from_toml(&text, &env).expect_err(keys).to_string()
    };
    assert_eq!(
        error("timeout = \"1h\""),
        "relay \"out\" timeout = \"1h\" is not valid; expected between 100ms and 30m (claim_ttl, at most 1h, must exceed it)"
    );
    assert_eq!(
        error("timeout = \"31m\"\nclaim_ttl = \"1h\""),
        "relay \"out\" timeout = \"31m\" is not valid; expected between 100ms and 30m (claim_ttl, at most 1h, must exceed it)"
    );
    // claim_ttl left at its default (30s): the error is about the timeout the user wrote.
    assert_eq!(
        error("timeout = \"5m\""),
        "relay \"out\" timeout = \"5m\" is not valid; expected less than claim_ttl, which is 30s by default: a claim must outlive the requests of its cycle, or another relay publishes the same rows meanwhile; set claim_ttl between 5m and 1h"
    );
    assert_eq!(
        error("timeout = \"30m\"\nclaim_ttl = \"10m\""),
        "relay \"out\" claim_ttl = \"10m\" is not valid; expected more than timeout (30m): a claim must outlive the requests of its cycle, or another relay publishes the same rows meanwhile; set claim_ttl between 30m and 1h"
    );
    // The longest timeout with the longest claim_ttl is accepted.
    let text = "[[relay]]\nname = \"out\"\ntarget = \"http\"\nurl = \"http://127.0.0.1:3000\"\ntimeout = \"30m\"\nclaim_ttl = \"1h\"\n";
    let relay = Config::from_toml(text, &env).unwrap().relays.remove(0);
    assert_eq!(relay.claim_ttl, Duration::from_secs(3600));
    let idem_gateway::RelayTarget::Http { timeout, .. } = relay.target else {
        panic!("an http target");
    };
    assert_eq!(timeout, Duration::from_secs(30 * 60));
}
