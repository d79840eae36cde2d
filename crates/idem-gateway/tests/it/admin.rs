//! Dead letters and redrive, replay, retention, and the `/admin` API.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use idem::{ManualClock, Store, Timestamp};
use idem_gateway::admin::ReplayRequest;
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::stripe;
use idem_testkit::AppDb;

use crate::support::{
    Downstream, Running, STRIPE_SECRET, capture_logs, config_text, count, env, sqlite, stripe_event,
};

/// A dead letter is listed, redriven (same Idempotency-Key, attempts numbered on), and
/// replays re-send finished events except, on a drop-stale route, those older than their
/// entity's newest, unless forced.
async fn dead_letters_redrive_and_replay<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |r| {
        if fail.load(Ordering::SeqCst) && r.header("idem-event-id") == Some("evt_a_dead") {
            StatusCode::BAD_GATEWAY
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = config_text(downstream.addr, r#"["5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let dead = stripe_event("evt_a_dead", "invoice.paid", "invoice", "in_a", 10);
    gw.post_stripe(&dead).await;
    gw.settle().await;
    let letters = gw.gateway.dead_letters(None, 10).await.unwrap();
    assert_eq!(letters.len(), 1);
    assert_eq!(
        (letters[0].event_id.as_str(), letters[0].attempts),
        ("evt_a_dead", 2)
    );

    failing.store(false, Ordering::SeqCst);
    assert_eq!(gw.gateway.redrive(Some("app"), None).await.unwrap(), 1);
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].dead,
            stats.destinations["app"].delivered
        ),
        (0, 1)
    );
    let tries = downstream.with_key("stripe:evt_a_dead");
    let numbers: Vec<_> = tries
        .iter()
        .map(|r| r.header("idem-attempt").unwrap())
        .collect();
    assert_eq!(numbers, ["1", "2", "3"]);

    for (id, created) in [("evt_r_old", 100), ("evt_r_new", 200), ("evt_r_stale", 150)] {
        let body = stripe_event(
            id,
            "customer.subscription.updated",
            "subscription",
            "sub_r",
            created,
        );
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    }
    gw.settle().await;
    let detail = gw
        .gateway
        .show_event("stripe", "evt_r_stale")
        .await
        .unwrap()
        .unwrap();
    let (delivery, attempts) = &detail.deliveries[0];
    assert_eq!(delivery.state, "stale");
    let note = delivery.note.as_deref().unwrap();
    assert!(
        note.contains("timestamp=200") && note.contains("timestamp=150"),
        "{note}"
    );
    assert!(attempts.is_empty());

    let mut request = ReplayRequest {
        source: "stripe".into(),
        since: 0,
        until: None,
        dry_run: true,
        force: false,
    };
    let dry = gw.gateway.replay(&request, &|_, _| {}).await.unwrap();
    assert_eq!((dry.matched, dry.requeued, dry.older), (4, 2, 2));
    request.dry_run = false;
    let done = gw.gateway.replay(&request, &|_, _| {}).await.unwrap();
    assert_eq!(done.requeued, 2);
    gw.settle().await;
    assert_eq!(downstream.with_key("stripe:evt_a_dead").len(), 4);
    assert_eq!(downstream.with_key("stripe:evt_r_new").len(), 2);
    assert_eq!(downstream.with_key("stripe:evt_r_old").len(), 1);
    assert_eq!(downstream.with_key("stripe:evt_r_stale").len(), 0);

    request.force = true;
    let forced = gw.gateway.replay(&request, &|_, _| {}).await.unwrap();
    assert_eq!(forced.requeued, 4);
    gw.settle().await;
    assert_eq!(downstream.with_key("stripe:evt_r_old").len(), 2);
    assert_eq!(downstream.with_key("stripe:evt_r_stale").len(), 1);
    gw.server.shutdown().await.unwrap();
}

both_stores!(dead_letters_redrive_and_replay);

/// Retention: bodies go after body_retention, finished events and inbox keys after retention;
/// dead letters stay (with their body), and their redelivery is still a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gc_keeps_dead_letters_and_drops_what_retention_allows() {
    capture_logs();
    let start = 1_700_000_000_i64;
    let clock = ManualClock::new(Timestamp(start * 1000));
    let (_dir, store) = sqlite(Arc::new(clock.clone())).await;
    let downstream = Downstream::start(Arc::new(|r| {
        if r.header("idem-event-id") == Some("evt_gc_dead") {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = format!(
        "retention = \"3d\"\nbody_retention = \"1h\"\n{}",
        config_text(downstream.addr, "[]")
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let post = |id: &'static str, at: i64| {
        let body = stripe_event(id, "customer.created", "customer", id, 1);
        let signature = stripe::sign(STRIPE_SECRET, at, &body);
        let gw = &gw;
        async move {
            gw.post("stripe", &[("stripe-signature", signature)], &body)
                .await
        }
    };
    assert_eq!(post("evt_gc", start).await.json["status"], "accepted");
    assert_eq!(post("evt_gc_dead", start).await.json["status"], "accepted");
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].delivered,
            stats.destinations["app"].dead
        ),
        (1, 1)
    );

    clock.advance(Duration::from_secs(2 * 3600));
    let report = gw.gateway.gc().await.unwrap();
    assert_eq!((report.inbox_keys, report.events, report.bodies), (0, 0, 1));

    clock.advance(Duration::from_secs(4 * 86_400));
    let report = gw.gateway.gc().await.unwrap();
    assert_eq!((report.inbox_keys, report.events, report.bodies), (2, 1, 0));
    assert_eq!(
        count(&gw.gateway, "SELECT COUNT(*) FROM idem_gateway_events").await,
        1
    );
    let letters = gw.gateway.dead_letters(None, 10).await.unwrap();
    assert_eq!(letters[0].event_id, "evt_gc_dead");
    let now = start + 2 * 3600 + 4 * 86_400;
    assert_eq!(post("evt_gc_dead", now).await.json["status"], "duplicate");
    gw.server.shutdown().await.unwrap();
}

/// `/admin` answers only with the bearer token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_needs_the_token() {
    capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(crate::support::system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    gw.post_stripe(&stripe_event(
        "evt_admin",
        "customer.created",
        "customer",
        "c",
        1,
    ))
    .await;
    let url = format!("{}/admin/events?source=stripe", gw.url);
    let denied = gw.client.get(&url).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    let wrong = gw
        .client
        .get(&url)
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let listed = gw
        .client
        .get(&url)
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let events: serde_json::Value = serde_json::from_slice(&listed.bytes().await.unwrap()).unwrap();
    assert_eq!(events[0]["event_id"], "evt_admin");
    let shown = gw
        .client
        .get(format!("{}/admin/events/stripe/evt_admin", gw.url))
        .bearer_auth("admin-token")
        .send()
        .await
        .unwrap();
    assert_eq!(shown.status(), 200);
    // The scheme is case-insensitive (RFC 9110 §11.1).
    for scheme in ["bearer", "BEARER"] {
        let lower = gw
            .client
            .get(&url)
            .header("authorization", format!("{scheme} admin-token"))
            .send()
            .await
            .unwrap();
        assert_eq!(lower.status(), 200, "{scheme}");
    }
    gw.server.shutdown().await.unwrap();
}
