//! Alerts (issue 31): each condition fires once and clears once at a recording receiver, a
//! restart in between repeats nothing (the state is the database's), a notification the
//! receiver refused is sent again with the same `webhook-id`, and two gateways on one
//! PostgreSQL database, each counting some of a source's forged requests, send one alert for
//! their sum. (`destination_failing` and `destination_auto_paused` are checked with the
//! circuit breaker, in `breaker.rs`.)

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::stripe;
use idem_sql::{SqliteStore, Store};
use idem_testkit::downstream::Received;

use crate::support::{Downstream, Running, SW_NEW, post, stripe_event, unix_now};

fn env(var: &str) -> Option<String> {
    match var {
        "ALERT_SECRET" => Some(SW_NEW.to_owned()),
        other => crate::support::env(other),
    }
}

/// Source `stripe` to `dead` (answers 500, no retry: each event a dead letter at once, no
/// breaker) and to `waiting` (answers 200); alerts after 1 dead letter in 4 s, a delivery due
/// for 1 s, 2 forged requests in 4 s.
fn config(dead: &Downstream, waiting: &Downstream, receiver: &Downstream) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"
health_interval = "50ms"
alert_dead_letters_over = 1
alert_dead_letters_window = "4s"
alert_backlog_after = "1s"
alert_rejected_over = 2
alert_rejected_window = "4s"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "dead"
url = "http://{}/events"
retry_schedule = []
circuit_breaker = false
signing_secret_env = "APP_SECRET"

[[destination]]
name = "waiting"
url = "http://{}/events"
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "dead"

[[route]]
source = "stripe"
destination = "waiting"

[[alert]]
name = "ops"
url = "http://{}/events"
secret_env = "ALERT_SECRET"
"#,
        dead.addr, waiting.addr, receiver.addr
    )
}

/// A receiver that refuses its first request (500) and takes the others.
async fn receiver_refusing_once() -> Downstream {
    let seen = Arc::new(AtomicUsize::new(0));
    Downstream::start(Arc::new(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }))
    .await
}

/// Posts `n` requests with a signature made with the wrong secret: each refused.
async fn forge<DB: GatewayDb>(gw: &Running<DB>, n: usize) {
    for i in 0..n {
        let body = stripe_event(
            &format!("evt_forged_{i}"),
            "customer.updated",
            "customer",
            "cus_f",
            1,
        );
        let signature = stripe::sign("whsec_not_the_secret", unix_now(), &body);
        let answer = post(
            &gw.client,
            &gw.url,
            "stripe",
            &[("stripe-signature", signature)],
            &body,
        )
        .await;
        assert_eq!(answer.status, 400);
    }
}

/// Each notification `receiver` took (answered 200 or not) as (webhook-id, state, condition,
/// subject), in arrival order.
fn notifications(receiver: &Downstream) -> Vec<(String, String, String, String)> {
    receiver
        .received()
        .iter()
        .map(|r: &Received| {
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let data = &body["data"];
            let text = |key: &str| data[key].as_str().unwrap().to_owned();
            (
                r.header("webhook-id").unwrap().to_owned(),
                text("state"),
                text("condition"),
                text("subject"),
            )
        })
        .collect()
}

/// How many times each (state, condition, subject) was notified, counting each webhook-id once.
fn distinct(receiver: &Downstream) -> BTreeMap<(String, String, String), usize> {
    let mut seen = BTreeMap::new();
    let mut ids = std::collections::BTreeSet::new();
    for (id, state, condition, subject) in notifications(receiver) {
        if ids.insert(id) {
            *seen.entry((state, condition, subject)).or_default() += 1;
        }
    }
    seen
}

async fn until(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn key(state: &str, condition: &str, subject: &str) -> (String, String, String) {
    (state.to_owned(), condition.to_owned(), subject.to_owned())
}

/// Two dead letters, a delivery left waiting behind a pause, three forged requests: three
/// alerts fire once each; the gateway restarts on its database and sends none again; the
/// pause ends and the windows pass: each clears once. The receiver refused the first
/// notification, which came again (same `webhook-id`) a second later.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_condition_fires_once_and_clears_once_across_a_restart() {
    crate::support::capture_logs();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/alerts.db", dir.path().display());
    let dead = Downstream::start(Arc::new(|_| StatusCode::INTERNAL_SERVER_ERROR)).await;
    let waiting = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let receiver = receiver_refusing_once().await;
    let text = config(&dead, &waiting, &receiver);
    let gw = Running::start(
        Config::from_toml(&text, &env).unwrap(),
        SqliteStore::connect(&url).await.unwrap(),
    )
    .await;
    gw.gateway.pause("waiting").await.unwrap();
    for id in ["evt_a1", "evt_a2"] {
        let body = stripe_event(id, "customer.updated", "customer", id, 1);
        assert_eq!(gw.post_stripe(&body).await.status, 200);
    }
    forge(&gw, 3).await;
    // The metrics the Prometheus rules read are exported once the monitor ran.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let metrics = (gw
        .client
        .get(format!("{}/metrics", gw.url))
        .send()
        .await
        .unwrap())
    .text()
    .await
    .unwrap();
    for name in [
        "idem_ready ",
        "idem_destination_health{destination=\"waiting\"}",
        "idem_circuit_breaker_open{destination=\"dead\"} 0",
        "idem_webhook_rejected_total{source=\"stripe\",reason=\"bad_signature\"}",
        "idem_alerts_firing{condition=\"dead_letters\"}",
    ] {
        assert!(metrics.contains(name), "{name} not in /metrics");
    }
    let fired = [
        key("fired", "backlog_age", "waiting"),
        key("fired", "dead_letters", "dead"),
        key("fired", "rejected_requests", "stripe"),
    ];
    until(Duration::from_secs(10), "three alerts", || {
        distinct(&receiver).len() == 3
    })
    .await;
    assert_eq!(
        distinct(&receiver).keys().cloned().collect::<Vec<_>>(),
        fired
    );
    // A restart on the same database, while every condition still holds: nothing again.
    gw.server.shutdown().await.unwrap();
    let gw = Running::start(
        Config::from_toml(&text, &env).unwrap(),
        SqliteStore::connect(&url).await.unwrap(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        distinct(&receiver).len(),
        3,
        "{:?}",
        notifications(&receiver)
    );
    // The delivery goes out; the windows pass: each alert clears, once.
    gw.gateway.resume("waiting").await.unwrap();
    until(Duration::from_secs(15), "three clearings", || {
        distinct(&receiver).len() == 6
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = distinct(&receiver);
    let mut expected: Vec<_> = fired.to_vec();
    expected.extend([
        key("cleared", "backlog_age", "waiting"),
        key("cleared", "dead_letters", "dead"),
        key("cleared", "rejected_requests", "stripe"),
    ]);
    expected.sort();
    assert_eq!(seen.keys().cloned().collect::<Vec<_>>(), expected);
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    // The first notification was refused and sent again under its id: seven requests, six ids.
    let all = notifications(&receiver);
    assert_eq!(all.len(), 7, "{all:?}");
    assert_eq!(all.iter().filter(|n| n.0 == all[0].0).count(), 2, "{all:?}");
    gw.server.shutdown().await.unwrap();
}

shared_stores!(two_gateways_add_their_refusals_and_alert_once);

/// Two gateways on one database each refuse two forged requests: only their sum
/// (four) is over the limit (three), and the alert fires once and clears once.
async fn two_gateways_add_their_refusals_and_alert_once<DB: GatewayDb>(url: String) {
    crate::support::capture_logs();
    let dead = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let waiting = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let receiver = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let text = config(&dead, &waiting, &receiver)
        .replace("alert_rejected_over = 2", "alert_rejected_over = 3");
    let start = async || {
        Running::start(
            Config::from_toml(&text, &env).unwrap(),
            Store::<DB>::connect(&url).await.unwrap(),
        )
        .await
    };
    let (a, b) = (start().await, start().await);
    forge(&a, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        receiver.received().is_empty(),
        "two refusals are not over three"
    );
    forge(&b, 2).await;
    until(
        Duration::from_secs(10),
        "the alert and its clearing",
        || distinct(&receiver).len() == 2,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = distinct(&receiver);
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        [
            (key("cleared", "rejected_requests", "stripe"), 1),
            (key("fired", "rejected_requests", "stripe"), 1),
        ]
    );
    assert_eq!(receiver.received().len(), 2, "one notification each");
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}
