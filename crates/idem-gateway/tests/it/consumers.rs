//! The consumer inventory on a gateway (issue 34): `GET /admin/consumers` lists every source
//! and destination of the configuration with first and last seen and exactly the counts the
//! test sent (claimed, duplicates, stale), `?since=` in the future lists none, `GET
//! /admin/consumers/{name}` answers the same entry and 404 naming the known consumers for an
//! unknown name; the console's consumers page shows the same counts; `/metrics` carries the
//! per-consumer gauges.

use std::time::{Duration, Instant};

use idem_core::{Clock, Name, SystemClock};
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::standard_webhooks;
use idem_sql::{ConsumerKind, Store};
use serde_json::Value;

use super::console::client::{Client, fragment, text_of};
use crate::admin::{JSON, admin};
use crate::support::{Downstream, Running, SW_OLD, config_text, env, stripe_event, unix_now};

/// What the test sends to each source: distinct events, duplicate deliveries, stale events.
struct Sent {
    claimed: u64,
    duplicates: u64,
    stale: u64,
}

/// Posts `n` Stripe events of entity cus_inv (created 1000 + i), each delivered twice when
/// `i < dups`, then one event older than the newest (stale on the drop-stale route).
async fn send_stripe<DB: GatewayDb>(gw: &Running<DB>, n: usize, dups: usize) -> Sent {
    let body = |i: usize, created: i64| {
        stripe_event(
            &format!("evt_inv_{i}"),
            "customer.updated",
            "customer",
            "cus_inv",
            created,
        )
    };
    for i in 0..n {
        let event = body(i, 1_000 + i as i64);
        assert_eq!(gw.post_stripe(&event).await.json["status"], "accepted");
        if i < dups {
            assert_eq!(gw.post_stripe(&event).await.json["status"], "duplicate");
        }
    }
    assert_eq!(
        gw.post_stripe(&body(n, 500)).await.json["status"],
        "accepted"
    );
    Sent {
        claimed: n as u64 + 1,
        duplicates: dups as u64,
        stale: 1,
    }
}

/// Posts `n` Standard Webhooks messages to `sw`, each delivered twice when `i < dups`.
async fn send_sw<DB: GatewayDb>(gw: &Running<DB>, n: usize, dups: usize) -> Sent {
    for i in 0..n {
        let id = format!("msg_inv_{i}");
        let body = format!(r#"{{"type":"order.paid","data":{{"id":"o_{i}"}}}}"#);
        let now = unix_now();
        let headers = [
            ("webhook-id", id.clone()),
            ("webhook-timestamp", now.to_string()),
            (
                "webhook-signature",
                standard_webhooks::sign(SW_OLD, &id, now, body.as_bytes()).unwrap(),
            ),
        ];
        let copies = if i < dups { 2 } else { 1 };
        for copy in 0..copies {
            let answer = gw.post("sw", &headers, body.as_bytes()).await;
            let expected = if copy == 0 { "accepted" } else { "duplicate" };
            assert_eq!(answer.json["status"], expected, "{id}");
        }
    }
    Sent {
        claimed: n as u64,
        duplicates: dups as u64,
        stale: 0,
    }
}

/// The entry of `name` in a listing.
fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
    (list.as_array().unwrap().iter())
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no consumer {name} in {list}"))
}

/// (claimed, duplicates, stale) of `entry`'s 24-hour window.
fn day_counts(entry: &Value) -> (u64, u64, u64) {
    let day = (entry["windows"].as_array().unwrap().iter())
        .find(|w| w["window_secs"] == 86_400)
        .unwrap_or_else(|| panic!("no 24 h window in {entry}"));
    let n = |f: &str| day[f].as_u64().unwrap();
    (n("claimed"), n("duplicates"), n("stale"))
}

/// Reads `/metrics` until it shows every line of `wanted` (the monitor sets the gauges every
/// `health_interval`), up to 10 s.
async fn metrics_with<DB: GatewayDb>(gw: &Running<DB>, wanted: &[String]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = (gw
            .client
            .get(format!("{}/metrics", gw.url))
            .send()
            .await
            .unwrap())
        .text()
        .await
        .unwrap();
        if wanted.iter().all(|w| text.contains(w.as_str())) {
            return text;
        }
        assert!(Instant::now() < deadline, "{wanted:?} not in {text}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn gateway_consumers_are_listed_with_their_counts<DB: GatewayDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\nhealth_interval = \"50ms\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let started = SystemClock.now().as_millis();
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    // What an older idem's database back-fills as `runner` rows: the gateway's inbox and a
    // route's version guard (parts of the sources, never listed) beside an application's own.
    let store = gw.gateway.store();
    for name in ["idem-gateway", "stripe.app", "billing_v1"] {
        store.register_consumer(&Name::new("consumer", name).unwrap(), ConsumerKind::Runner);
    }
    store.flush_consumer_counts().await.unwrap();
    let stripe = send_stripe(&gw, 5, 2).await;
    let sw = send_sw(&gw, 4, 3).await;
    gw.settle().await;
    let ended = SystemClock.now().as_millis();

    let listed = admin(&gw, "/admin/consumers", None, None).await;
    assert_eq!(listed.status, 200, "{}", listed.json);
    let list = &listed.json;
    for (name, sent) in [("stripe", &stripe), ("sw", &sw)] {
        let e = entry(list, name);
        assert_eq!(e["kind"], "gateway_source", "{e}");
        assert_eq!(
            day_counts(e),
            (sent.claimed, sent.duplicates, sent.stale),
            "{name}: {e}"
        );
        let (first, last) = (
            e["first_seen"].as_i64().unwrap(),
            e["last_seen"].as_i64().unwrap(),
        );
        assert!(
            started <= first && first <= last && last <= ended,
            "{name}: {e}"
        );
        assert_eq!(e["first_seen_exact"], true, "{name}");
    }
    for name in ["github", "sw-new"] {
        let e = entry(list, name);
        assert_eq!(
            (&e["kind"], day_counts(e)),
            (&Value::from("gateway_source"), (0, 0, 0))
        );
    }
    let names: Vec<&str> = (list.as_array().unwrap().iter())
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"billing_v1"), "{names:?}");
    for internal in ["idem-gateway", "stripe.app"] {
        assert!(!names.contains(&internal), "{internal} listed: {names:?}");
    }
    // Every event but the stale one was delivered to `app`; the stale one was judged stale on
    // its drop-stale route, and nothing is due.
    let app = entry(list, "app");
    assert_eq!(app["kind"], "gateway_destination");
    let delivered = stripe.claimed - stripe.stale + sw.claimed;
    assert_eq!(day_counts(app), (delivered, 0, stripe.stale), "{app}");
    assert_eq!(app["delivery_lag_ms"], 0, "{app}");
    assert_eq!(app["flags"], serde_json::json!([]), "{app}");

    let future = admin(
        &gw,
        "/admin/consumers?since=2999-01-01T00:00:00Z",
        None,
        None,
    )
    .await;
    assert_eq!((future.status, &future.json), (200, &serde_json::json!([])));
    let shown = admin(&gw, "/admin/consumers/stripe", None, None).await;
    assert_eq!(shown.status, 200, "{}", shown.json);
    assert_eq!(day_counts(&shown.json), day_counts(entry(list, "stripe")));
    assert_eq!(
        shown.json["first_seen"],
        entry(list, "stripe")["first_seen"]
    );
    let unknown = admin(&gw, "/admin/consumers/nobody_v1", None, None).await;
    assert_eq!(unknown.status, 404, "{}", unknown.json);
    let (code, detail) = unknown.problem();
    assert_eq!(code, "unknown-consumer");
    for known in ["stripe", "sw", "app"] {
        assert!(detail.contains(known), "{known} not in {detail}");
    }
    let bad = admin(&gw, "/admin/consumers?since=yesterday-ish", None, None).await;
    assert_eq!((bad.status, bad.problem().0), (400, "bad-time"));

    let mut console = Client::new(&gw.url);
    let signed_out = console.get("/console/consumers").await;
    assert_eq!(
        (signed_out.status, signed_out.location.as_deref()),
        (303, Some("/console/sign-in"))
    );
    console.sign_in().await;
    let page = console.get("/console/consumers").await;
    assert_eq!(page.status, 200, "{}", page.html);
    let row = page.fragment("data-consumer=\"stripe\"", "</tr>");
    let cell = |metric: &str| text_of(fragment(row, &format!("data-metric=\"{metric}\""), "</td>"));
    let shown: Vec<String> = ["claimed", "duplicates", "stale", "lag", "flags"]
        .map(cell)
        .to_vec();
    let expected = [stripe.claimed, stripe.duplicates, stripe.stale].map(|n| n.to_string());
    assert_eq!(shown[..3], expected, "{row}");
    assert_eq!(shown[3..], ["—", "none"], "{row}");
    let one = console.get("/console/consumer?name=app").await;
    assert_eq!(one.status, 200, "{}", one.html);
    assert!(one.text("id=\"consumer-flags\"", "</p>").contains("none"));
    assert_eq!(
        console.get("/console/consumer?name=nobody_v1").await.status,
        404
    );

    let wanted = [
        "idem_consumer_seconds_since_last_seen{consumer=\"stripe\"}".to_owned(),
        "idem_consumer_lag{consumer=\"app\",unit=\"seconds\"} 0".to_owned(),
    ];
    let metrics = metrics_with(&gw, &wanted).await;
    assert!(
        !metrics.contains("idem_consumer_lag{consumer=\"stripe\""),
        "{metrics}"
    );
    gw.server.shutdown().await.unwrap();
}

/// Waits (up to 10 s) until `probe` holds of the consumer listing, and returns it.
async fn listing_where<DB: GatewayDb>(gw: &Running<DB>, probe: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = admin(gw, "/admin/consumers", None, None).await;
        assert_eq!(listed.status, 200, "{}", listed.json);
        if probe(&listed.json) {
            return listed.json;
        }
        assert!(Instant::now() < deadline, "{}", listed.json);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A destination whose delivery was dead-lettered, and a paused one whose delivery has been due
/// longer than its `backlog_after`, are flagged unhealthy with the reason; the paused one's lag
/// is its oldest due delivery's age, in the listing and in `idem_consumer_lag`.
async fn unhealthy_destinations_say_why<DB: GatewayDb>(store: Store<DB>) {
    let down = Downstream::start(std::sync::Arc::new(|_| {
        axum::http::StatusCode::SERVICE_UNAVAILABLE
    }))
    .await;
    let held = Downstream::ok().await;
    let text = format!(
        r#"admin_token_env = "ADMIN_TOKEN"
health_interval = "50ms"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "down"
url = "http://{}/events"
retry_schedule = ["5ms"]
circuit_breaker = false
signing_secret_env = "APP_SECRET"

[[destination]]
name = "held"
url = "http://{}/events"
backlog_after = "20ms"
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "down"
ordering = "none"

[[route]]
source = "stripe"
destination = "held"
ordering = "none"
"#,
        down.addr, held.addr
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let paused = admin(&gw, "/admin/destinations/held/pause", Some("{}"), JSON).await;
    assert_eq!(paused.status, 200, "{}", paused.json);
    let event = stripe_event("evt_sick", "customer.updated", "customer", "cus_sick", 1);
    assert_eq!(gw.post_stripe(&event).await.json["status"], "accepted");

    let flagged = |list: &Value, name: &str| {
        entry(list, name)["flags"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    };
    let list = listing_where(&gw, |l| flagged(l, "down") && flagged(l, "held")).await;
    let down_entry = entry(&list, "down");
    assert_eq!(
        down_entry["flags"],
        serde_json::json!([{"flag": "unhealthy", "reasons": ["1 dead letters in the last 24 hours > 0"]}]),
        "{down_entry}"
    );
    let held_entry = entry(&list, "held");
    assert!(
        held_entry["delivery_lag_ms"].as_u64().unwrap() > 20,
        "{held_entry}"
    );
    assert_eq!(held_entry["flags"][0]["flag"], "unhealthy", "{held_entry}");
    let reason = held_entry["flags"][0]["reasons"][0].as_str().unwrap();
    assert!(
        reason.starts_with("oldest due delivery due for ")
            && reason.ends_with(" > backlog_after 20ms"),
        "{held_entry}"
    );
    assert!(held.received().is_empty(), "paused: nothing sent");
    let wanted = ["idem_consumer_lag{consumer=\"held\",unit=\"seconds\"}".to_owned()];
    metrics_with(&gw, &wanted).await;
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    gateway_consumers_are_listed_with_their_counts,
    unhealthy_destinations_say_why
);
