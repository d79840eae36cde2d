//! Pause and resume of a destination (issue 16, item 3): while paused, events are accepted and
//! their deliveries wait, with no attempt made or counted and none dead-lettered; on resume
//! every one is delivered once, each entity's in version order. The pause is the database's,
//! so two gateways on one PostgreSQL database both honour a pause made through either.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_gateway::{Config, Gateway, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{
    Downstream, Running, STRIPE_SECRET, count, env, post, stripe_event, unix_now,
    versions_by_event_id,
};
use idem_http::verify::stripe;

/// Source `stripe` (drop-stale) to destination `name`, with admin API: a failed attempt is a
/// dead letter at once (`retry_schedule = []`), so an attempt made while paused against a
/// failing downstream would leave one.
fn config(downstream: &Downstream, name: &str) -> Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"
admin_token_env = "ADMIN_TOKEN"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "{name}"
url = "http://hook:hookpw@{}/events"
timeout = "2s"
retry_schedule = []
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "{name}"
"#,
        downstream.addr
    );
    Config::from_toml(&text, &env).unwrap()
}

/// The JSON body of an admin API answer.
async fn json(response: reqwest::Response) -> serde_json::Value {
    serde_json::from_slice(&response.bytes().await.unwrap()).unwrap()
}

/// A downstream answering 503 until `open` is set, then 200.
async fn gated_downstream() -> (Downstream, Arc<AtomicBool>) {
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

/// Three entities, four versions each, posted in version order to `targets` in turn.
async fn post_events<DB: GatewayDb>(targets: &[&Running<DB>]) -> Vec<(String, i64)> {
    let mut posted = Vec::new();
    let mut n = 0;
    for version in [100, 200, 300, 400] {
        for entity in ["cus_p1", "cus_p2", "cus_p3"] {
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
            posted.push((entity.to_owned(), version));
        }
    }
    posted
}

/// Each entity's versions in the order the downstream got them, from the `customer.updated`
/// events' ids (`evt_{entity}_{version}`); every request must have been answered 200.
/// What the store holds while paused: every delivery pending, no attempt row, no dead letter.
async fn assert_waiting<DB: GatewayDb + AppDb>(gateway: &Gateway<DB>, name: &str, events: u64) {
    let stats = gateway.stats().await.unwrap();
    let counts = stats.destinations[name];
    assert_eq!(
        (
            counts.pending,
            counts.in_flight,
            counts.delivered,
            counts.dead
        ),
        (events, 0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(
        count(gateway, "SELECT COUNT(*) FROM idem_gateway_attempts").await,
        0
    );
}

/// Waits (up to 10 s) until every delivery of `name` is delivered.
async fn wait_delivered<DB: GatewayDb>(gateway: &Gateway<DB>, name: &str, events: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = gateway.stats().await.unwrap();
        if stats.destinations[name].delivered == events {
            return;
        }
        assert!(Instant::now() < deadline, "not delivered: {stats:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Paused through the library's operations (as `idem destination pause` does): events posted
/// meanwhile are accepted, and while the dispatcher polls (20 ms) for ten polls nothing is
/// attempted, although the downstream fails and a failure would be a dead letter at once. The
/// downstream recovers; on resume every event is delivered once, each entity's in version
/// order, as attempt 1.
async fn a_paused_destination_waits_and_resumes_in_entity_order<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let (downstream, open) = gated_downstream().await;
    let name = format!(
        "paused_{}",
        <DB as idem_sql::sqlx::Database>::NAME.to_lowercase()
    );
    let gw = Running::start(config(&downstream, &name), store).await;
    let change = gw.gateway.pause(&name).await.unwrap();
    assert!(change.paused && change.changed);
    assert!(
        !gw.gateway.pause(&name).await.unwrap().changed,
        "already paused"
    );
    let listed = gw.gateway.destinations().await.unwrap();
    assert!(listed[0].paused && listed[0].applied, "{listed:?}");
    let posted = post_events(&[&gw]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_waiting(&gw.gateway, &name, posted.len() as u64).await;
    assert!(downstream.received().is_empty());

    open.store(true, Ordering::SeqCst);
    assert!(gw.gateway.resume(&name).await.unwrap().changed);
    wait_delivered(&gw.gateway, &name, posted.len() as u64).await;
    let got = versions_by_event_id(&downstream);
    for entity in ["cus_p1", "cus_p2", "cus_p3"] {
        assert_eq!(got[entity], [100, 200, 300, 400], "{entity}");
    }
    assert!(
        (downstream.received().iter()).all(|r| r.header("idem-attempt") == Some("1")),
        "every event sent once, as its first attempt"
    );
    assert_eq!(
        count(&gw.gateway, "SELECT COUNT(*) FROM idem_gateway_attempts").await,
        posted.len() as i64
    );
    gw.server.shutdown().await.unwrap();
}

both_stores!(a_paused_destination_waits_and_resumes_in_entity_order);

shared_stores!(two_gateways_honour_a_pause_set_through_either);

/// Two gateways on one database: a pause set through one's admin API is read by the
/// other's dispatcher (within its 20 ms poll); events posted to both meanwhile wait, with no
/// attempt and no dead letter; a resume through the same API, after the downstream recovered,
/// sends each once, each entity's in version order. An unknown destination is refused naming
/// the configured ones.
async fn two_gateways_honour_a_pause_set_through_either<DB: GatewayDb + AppDb>(url: String) {
    crate::support::capture_logs();
    let (downstream, open) = gated_downstream().await;
    let name = "paused_two";
    let a = Running::start(
        config(&downstream, name),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    let b = Running::start(
        config(&downstream, name),
        Store::<DB>::connect(&url).await.unwrap(),
    )
    .await;
    let admin = |gw: &Running<DB>, path: &str| {
        gw.client
            .post(format!("{}/admin/destinations/{path}", gw.url))
            .bearer_auth("admin-token")
            .send()
    };
    let refused = admin(&a, "nowhere/pause").await.unwrap();
    assert_eq!(refused.status(), 400);
    let problem = json(refused).await;
    assert_eq!(problem["type"], "urn:idem:problem:unknown-destination");

    let paused = json(admin(&a, &format!("{name}/pause")).await.unwrap()).await;
    assert_eq!(
        (&paused["paused"], &paused["changed"]),
        (&true.into(), &true.into())
    );
    // B's dispatcher reads the pause from the database.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !b.gateway.destinations().await.unwrap()[0].applied {
        assert!(Instant::now() < deadline, "gateway B never read the pause");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let listed = json(
        (b.client.get(format!("{}/admin/destinations", b.url)))
            .bearer_auth("admin-token")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(listed[0]["name"], name);
    assert_eq!(listed[0]["paused"], true);
    // The URL's user and password are not shown.
    let shown = listed[0]["url"].as_str().unwrap();
    assert!(
        shown.starts_with("http://***@127.0.0.1:") && !shown.contains("hookpw"),
        "{shown}"
    );

    let posted = post_events(&[&a, &b]).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_waiting(&a.gateway, name, posted.len() as u64).await;
    assert!(downstream.received().is_empty());

    open.store(true, Ordering::SeqCst);
    let resumed = json(admin(&a, &format!("{name}/resume")).await.unwrap()).await;
    assert_eq!(resumed["paused"], false);
    wait_delivered(&a.gateway, name, posted.len() as u64).await;
    let got = versions_by_event_id(&downstream);
    for entity in ["cus_p1", "cus_p2", "cus_p3"] {
        assert_eq!(got[entity], [100, 200, 300, 400], "{entity}");
    }
    assert_eq!(downstream.received().len(), posted.len());
    a.server.shutdown().await.unwrap();
    b.server.shutdown().await.unwrap();
}
