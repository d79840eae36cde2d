//! Destination health, the circuit breaker and its alerts (issue 31): a destination failing
//! for its window is paused automatically (a pause marked `auto` with the reason and the last
//! errors), nothing is attempted while paused, one probe follows the cool-down (doubled after
//! a failed probe), the first delivered probe resumes it, and every event is delivered once in
//! entity order. Alerts reach a recording receiver once each, signed with Standard Webhooks.
//! The same across two gateways on one PostgreSQL database: one probe, one alert. An
//! operator's pause survives what would have been an automatic resume.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_core::Timestamp;
use idem_gateway::{Config, Gateway, GatewayDb};
use idem_http::verify::Verifier;
use idem_http::verify::standard_webhooks::StandardWebhooksVerifier;
use idem_sql::Store;
use idem_testkit::downstream::Received;
use idem_testkit::{AppDb, Value};

use crate::support::{
    Downstream, Running, STRIPE_SECRET, SW_NEW, count, post, stripe_event, unix_now,
};
use idem_http::verify::stripe;

/// The cool-down before the first probe, and its cap (one doubling).
const COOLDOWN_MS: i64 = 600;

fn env(var: &str) -> Option<String> {
    match var {
        "ALERT_SECRET" => Some(SW_NEW.to_owned()),
        other => crate::support::env(other),
    }
}

/// Source `stripe` to destination `name` (drop-stale), judged every 50 ms: failing after 3
/// attempts in a minute below a 50 % success rate; a cool-down of 600 ms doubling to 1.2 s;
/// retries every 100 ms (many, so no event becomes a dead letter); alerts to `alerts`.
pub(crate) fn config(downstream: &Downstream, alerts: &Downstream, name: &str) -> Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"
health_interval = "50ms"
admin_token_env = "ADMIN_TOKEN"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "{name}"
url = "http://{}/events"
timeout = "1s"
concurrency = 2
retry_schedule = ["100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms"]
signing_secret_env = "APP_SECRET"
health_window = "1m"
min_attempts = 3
failing_below = 0.5
breaker_cooldown = "{COOLDOWN_MS}ms"
breaker_cooldown_cap = "{}ms"

[[route]]
source = "stripe"
destination = "{name}"

[[alert]]
name = "ops"
url = "http://{}/events"
secret_env = "ALERT_SECRET"
"#,
        downstream.addr,
        COOLDOWN_MS * 2,
        alerts.addr
    );
    Config::from_toml(&text, &env).unwrap()
}

/// A downstream answering 503 until `open` is set, then 200; and whether it is open.
pub(crate) async fn gated() -> (Downstream, Arc<AtomicBool>) {
    let open = Arc::new(AtomicBool::new(false));
    let gate = Arc::clone(&open);
    let downstream = Downstream::start(Arc::new(move |_| {
        if gate.load(Ordering::SeqCst) {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        }
    }))
    .await;
    (downstream, open)
}

/// Two entities, three versions each, posted in version order to `targets` in turn.
async fn post_events<DB: GatewayDb>(targets: &[&Running<DB>]) -> usize {
    let mut n = 0;
    for version in [100, 200, 300] {
        for entity in ["cus_b1", "cus_b2"] {
            let id = format!("evt_{entity}_{version}");
            let body = stripe_event(&id, "customer.updated", "customer", entity, version);
            let signature = stripe::sign(STRIPE_SECRET, unix_now(), &body);
            let gw = targets[n % targets.len()];
            n += 1;
            let answer = post(
                &gw.client,
                &gw.url,
                "stripe",
                &[("stripe-signature", signature)],
                &body,
            )
            .await;
            assert_eq!(answer.json["status"], "accepted", "{id}");
        }
    }
    n
}

/// The pause row: (auto, reason, last errors, probe at, cool-down).
type PauseRow = (
    bool,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

/// Destination `name`'s pause row, if it is paused.
async fn pause_row<DB: GatewayDb + AppDb>(gateway: &Gateway<DB>, name: &str) -> Option<PauseRow> {
    let store = gateway.store();
    let bind = || vec![Value::Text(name.to_owned())];
    let numbers = idem_testkit::query_i64(
        store,
        "SELECT CASE WHEN auto THEN 1 ELSE 0 END FROM idem_gateway_paused_destinations WHERE destination = $1 \
         UNION ALL SELECT COALESCE(probe_at, -1) FROM idem_gateway_paused_destinations WHERE destination = $1 \
         UNION ALL SELECT COALESCE(cooldown_ms, -1) FROM idem_gateway_paused_destinations WHERE destination = $1",
        bind(),
    )
    .await;
    let [auto, probe_at, cooldown] = numbers[..] else {
        return None;
    };
    let mut conn = store.pool().acquire().await.unwrap();
    let texts = DB::fetch_text_pairs(
        &mut conn,
        "SELECT COALESCE(reason, ''), COALESCE(last_errors, '') FROM idem_gateway_paused_destinations \
         WHERE destination = $1",
        bind(),
    )
    .await
    .unwrap();
    let (reason, errors) = texts.into_iter().next()?;
    let some = |n: i64| (n >= 0).then_some(n);
    let text = |t: String| (!t.is_empty()).then_some(t);
    Some((
        auto == 1,
        text(reason),
        text(errors),
        some(probe_at),
        some(cooldown),
    ))
}

/// Waits up to `within` for `check`, polling every 10 ms.
async fn until(within: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The alerts `receiver` got, each checked against its Standard Webhooks signature:
/// `(state, condition, subject)` in arrival order.
fn alerts_received(receiver: &Downstream) -> Vec<(String, String, String)> {
    let verifier = StandardWebhooksVerifier::new(&[SW_NEW]).unwrap();
    let now = Timestamp(unix_now() * 1000);
    receiver
        .received()
        .iter()
        .map(|r: &Received| {
            verifier
                .verify(&r.headers, &r.body, now)
                .expect("a signed notification");
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            let data = &body["data"];
            assert_eq!(
                r.header("webhook-id"),
                Some(format!("idem-alert-{}-{}", data["id"], data["at"]).as_str())
            );
            (
                data["state"].as_str().unwrap().to_owned(),
                data["condition"].as_str().unwrap().to_owned(),
                data["subject"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Each entity's versions among `requests`, from event ids `evt_{entity}_{version}`.
fn by_entity(requests: &[Received]) -> BTreeMap<String, Vec<i64>> {
    let mut per_entity = BTreeMap::<String, Vec<i64>>::new();
    for request in requests {
        let id = request.header("idem-event-id").unwrap();
        let (entity, version) = id.strip_prefix("evt_").unwrap().rsplit_once('_').unwrap();
        (per_entity.entry(entity.to_owned()).or_default()).push(version.parse().unwrap());
    }
    per_entity
}

/// The breaker's whole round on one or two gateways (`gateways`, sharing one database): the
/// events fail until the breaker pauses the destination; nothing is sent until the first probe
/// (at `probe_at`), which fails and doubles the cool-down; the downstream recovers, the next
/// probe delivers and resumes it; every event arrives once after that, in entity order; the
/// receiver gets four alerts, once each.
async fn breaker_round<DB: GatewayDb + AppDb>(
    gateways: &[&Running<DB>],
    name: &str,
    (downstream, open, receiver): (&Downstream, &AtomicBool, &Downstream),
) {
    let gateway = &gateways[0].gateway;
    let events = post_events(gateways).await;
    until(Duration::from_secs(10), "the automatic pause", async || {
        pause_row(gateway, name).await.is_some()
    })
    .await;
    let (auto, reason, errors, probe_at, cooldown) = pause_row(gateway, name).await.unwrap();
    assert!(auto, "paused by the breaker");
    assert!(
        reason
            .as_deref()
            .unwrap()
            .starts_with("success rate 0% over "),
        "{reason:?}"
    );
    assert!(errors.as_deref().unwrap().contains("503"), "{errors:?}");
    assert_eq!(cooldown, Some(COOLDOWN_MS));
    let listed = gateway.destinations().await.unwrap();
    assert_eq!(listed[0].paused_by, Some("circuit_breaker"));
    // Every gateway applies the pause (read within a second), then the attempts started before
    // it end: from then until the probe is due, nothing is attempted.
    for gw in gateways {
        until(Duration::from_secs(5), "the pause applied", async || {
            gw.gateway.destinations().await.unwrap()[0].applied
        })
        .await;
    }
    until(Duration::from_secs(5), "no attempt in flight", async || {
        gateway.stats().await.unwrap().destinations[name].in_flight == 0
    })
    .await;
    let paused_with = downstream.received().len();
    let probe_at = probe_at.unwrap();
    let quiet = probe_at - gateway.store().now().as_millis() - 50;
    assert!(
        quiet > 100,
        "the pause was applied {quiet} ms before the probe"
    );
    tokio::time::sleep(Duration::from_millis(u64::try_from(quiet).unwrap())).await;
    assert_eq!(
        downstream.received().len(),
        paused_with,
        "nothing sent while paused"
    );
    // The first probe: one request, failed; the cool-down doubles.
    until(
        Duration::from_secs(5),
        "the first probe's failure",
        async || pause_row(gateway, name).await.and_then(|row| row.4) == Some(COOLDOWN_MS * 2),
    )
    .await;
    assert_eq!(downstream.received().len(), paused_with + 1, "one probe");
    let (auto, _, errors, next_probe, _) = pause_row(gateway, name).await.unwrap();
    assert!(auto);
    assert!(errors.unwrap().contains("503"));
    // The downstream recovers; the next probe (its cool-down later) resumes the destination.
    let recovered_at = downstream.received().len();
    open.store(true, Ordering::SeqCst);
    until(Duration::from_secs(10), "the resume", async || {
        pause_row(gateway, name).await.is_none()
    })
    .await;
    assert!(
        gateway.store().now().as_millis() >= next_probe.unwrap(),
        "resumed by the probe"
    );
    until(
        Duration::from_secs(10),
        "every event delivered",
        async || gateway.stats().await.unwrap().destinations[name].delivered == events as u64,
    )
    .await;
    let delivered = &downstream.received()[recovered_at..];
    assert_eq!(
        delivered.len(),
        events,
        "each event once after the recovery"
    );
    let order = by_entity(delivered);
    assert_eq!(order["cus_b1"], [100, 200, 300]);
    assert_eq!(order["cus_b2"], [100, 200, 300]);
    // The alerts: failing and auto-paused fired, then both cleared, once each.
    until(Duration::from_secs(5), "four alerts", async || {
        receiver.received().len() >= 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut alerts = alerts_received(receiver);
    let cleared_last = alerts.split_off(2);
    let mut fired = alerts;
    fired.sort();
    let mut cleared = cleared_last;
    cleared.sort();
    let one =
        |state: &str, condition: &str| (state.to_owned(), condition.to_owned(), name.to_owned());
    assert_eq!(
        fired,
        [
            one("fired", "destination_auto_paused"),
            one("fired", "destination_failing")
        ]
    );
    assert_eq!(
        cleared,
        [
            one("cleared", "destination_auto_paused"),
            one("cleared", "destination_failing")
        ]
    );
    assert_eq!(
        count(
            gateway,
            "SELECT COUNT(*) FROM idem_gateway_alert_sends WHERE sent_at IS NULL"
        )
        .await,
        0
    );
}

async fn a_failing_destination_is_paused_probed_and_resumed<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let (downstream, open) = gated().await;
    let receiver = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let name = "breaker";
    let gw = Running::start(config(&downstream, &receiver, name), store).await;
    breaker_round(&[&gw], name, (&downstream, &open, &receiver)).await;
    gw.server.shutdown().await.unwrap();
}

both_stores!(a_failing_destination_is_paused_probed_and_resumed);

shared_stores!(two_gateways_pause_probe_and_alert_once);

/// Two gateways on one database, events posted to both: one automatic pause, one
/// probe per cool-down (the first probe is the only request between the pause and its
/// failure), one notification per alert.
async fn two_gateways_pause_probe_and_alert_once<DB: GatewayDb + idem_testkit::AppDb>(url: String) {
    crate::support::capture_logs();
    let (downstream, open) = gated().await;
    let receiver = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let name = "breaker_two";
    let a = Running::start(
        config(&downstream, &receiver, name),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    let b = Running::start(
        config(&downstream, &receiver, name),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    breaker_round(&[&a, &b], name, (&downstream, &open, &receiver)).await;
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}

/// An operator pauses a destination the breaker paused: the pause is the operator's now
/// (`auto` false), no probe is sent however long it waits, and the recovered downstream gets
/// nothing until the operator resumes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operators_pause_survives_the_breaker() {
    crate::support::capture_logs();
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let (downstream, open) = gated().await;
    let receiver = Downstream::start(Arc::new(|_| StatusCode::OK)).await;
    let name = "breaker_operator";
    let gw = Running::start(config(&downstream, &receiver, name), store).await;
    let events = post_events(&[&gw]).await;
    until(Duration::from_secs(10), "the automatic pause", async || {
        pause_row(&gw.gateway, name).await.is_some()
    })
    .await;
    let change = gw.gateway.pause(name).await.unwrap();
    assert!(change.changed, "the operator takes the pause over");
    assert!(
        !pause_row(&gw.gateway, name).await.unwrap().0,
        "no longer auto"
    );
    open.store(true, Ordering::SeqCst);
    until(Duration::from_secs(5), "no attempt in flight", async || {
        gw.gateway.stats().await.unwrap().destinations[name].in_flight == 0
    })
    .await;
    let before = downstream.received().len();
    // Three cool-downs: a probe would have resumed it.
    tokio::time::sleep(Duration::from_millis(
        u64::try_from(COOLDOWN_MS * 3).unwrap(),
    ))
    .await;
    assert_eq!(downstream.received().len(), before, "no probe, no attempt");
    assert!(pause_row(&gw.gateway, name).await.is_some(), "still paused");
    assert!(gw.gateway.resume(name).await.unwrap().changed);
    until(
        Duration::from_secs(10),
        "every event delivered",
        async || gw.gateway.stats().await.unwrap().destinations[name].delivered == events as u64,
    )
    .await;
    assert_eq!(downstream.received().len(), before + events);
    gw.server.shutdown().await.unwrap();
}
