//! The scenarios of the issue, from public bug reports, with their expected values.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use idem_gateway::{Config, GatewayDb};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{
    Downstream, Running, config_text, count, env, error_lines_with, stripe_event,
};

const EVENTS: &str = "SELECT COUNT(*) FROM idem_gateway_events";
const INBOX: &str = "SELECT COUNT(*) FROM idem_inbox WHERE consumer = 'idem-gateway'";
const DELIVERIES: &str = "SELECT COUNT(*) FROM idem_gateway_deliveries";

async fn gateway<DB: GatewayDb>(store: Store<DB>, downstream: &Downstream) -> Running<DB> {
    let text = config_text(downstream.addr, r#"["10ms", "20ms", "40ms"]"#);
    Running::start(Config::from_toml(&text, &env).unwrap(), store).await
}

/// The same Stripe event posted twice within 5 ms with the same signature: one inbox row, one
/// delivery, both senders get 200, the second `duplicate`.
async fn same_event_twice_within_5ms<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream).await;
    let body = stripe_event(
        "evt_twice",
        "customer.created",
        "customer",
        "cus_1",
        1_700_000_000,
    );
    let (a, b) = tokio::join!(gw.post_stripe(&body), gw.post_stripe(&body));
    assert_eq!((a.status, b.status), (200, 200));
    let mut statuses = [
        a.json["status"].as_str().unwrap(),
        b.json["status"].as_str().unwrap(),
    ];
    statuses.sort_unstable();
    assert_eq!(statuses, ["accepted", "duplicate"]);
    for answer in [&a, &b] {
        assert_eq!(answer.json["event_id"], "evt_twice");
        assert_eq!(answer.header("idem-status"), answer.json["status"].as_str());
    }
    let stats = gw.settle().await;
    assert_eq!(count(&gw.gateway, INBOX).await, 1);
    assert_eq!(count(&gw.gateway, EVENTS).await, 1);
    assert_eq!(count(&gw.gateway, DELIVERIES).await, 1);
    assert_eq!(stats.destinations["app"].delivered, 1);
    assert_eq!(downstream.with_key("stripe:evt_twice").len(), 1);
    gw.server.shutdown().await.unwrap();
}

/// A known duplicate never produces a 5xx or an error log line.
async fn known_duplicate_is_never_an_error<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream).await;
    let body = stripe_event(
        "evt_dup_known",
        "customer.created",
        "customer",
        "cus_2",
        1_700_000_000,
    );
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    for answer in gw.post_stripe_concurrently(&body, 20).await {
        assert_eq!(answer.status, 200);
        assert_eq!(answer.json["status"], "duplicate");
        assert_eq!(answer.header("idem-status"), Some("duplicate"));
    }
    gw.settle().await;
    assert_eq!(downstream.with_key("stripe:evt_dup_known").len(), 1);
    // A failed batch would have answered 503 above; lines naming other events come from tests
    // that break their own stores on purpose (the log is the process's).
    assert_eq!(error_lines_with("evt_dup_known"), Vec::<String>::new());
    gw.server.shutdown().await.unwrap();
}

/// The downstream fails after the gateway accepted the event: the sender got 200 once, the
/// event is retried internally until delivered, the sender's own retries are duplicates.
async fn downstream_fails_after_acceptance<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let downstream = Downstream::start(Arc::new(move |r| {
        let key = r.header("idempotency-key").unwrap_or_default().to_owned();
        let mut seen = seen.lock().unwrap();
        let n = seen.entry(key).or_default();
        *n += 1;
        if *n <= 2 {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let gw = gateway(store, &downstream).await;
    let body = stripe_event(
        "evt_flaky",
        "invoice.paid",
        "invoice",
        "in_1",
        1_700_000_000,
    );
    let first = gw.post_stripe(&body).await;
    assert_eq!(
        (first.status, first.json["status"].as_str()),
        (200, Some("accepted"))
    );
    let retry = gw.post_stripe(&body).await;
    assert_eq!(
        (retry.status, retry.json["status"].as_str()),
        (200, Some("duplicate"))
    );
    let stats = gw.settle().await;
    let attempts = downstream.with_key("stripe:evt_flaky");
    let numbers: Vec<_> = attempts
        .iter()
        .map(|r| r.header("idem-attempt").unwrap())
        .collect();
    assert_eq!(numbers, ["1", "2", "3"]);
    assert!(attempts.iter().all(|r| r.body == body));
    assert_eq!(stats.destinations["app"].delivered, 1);
    assert_eq!(stats.failed_attempts, 2);
    let late = gw.post_stripe(&body).await;
    assert_eq!(late.json["status"], "duplicate");
    gw.settle().await;
    assert_eq!(downstream.with_key("stripe:evt_flaky").len(), 3);
    gw.server.shutdown().await.unwrap();
}

/// Stripe `updated` (created 1623979266) arrives before `created` (1623979265) for `sub_1`: the
/// app receives only `updated`; the other is counted stale.
async fn updated_before_created_only_updated_is_sent<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream).await;
    let updated = stripe_event(
        "evt_sub_updated",
        "customer.subscription.updated",
        "subscription",
        "sub_1",
        1_623_979_266,
    );
    let created = stripe_event(
        "evt_sub_created",
        "customer.subscription.created",
        "subscription",
        "sub_1",
        1_623_979_265,
    );
    assert_eq!(gw.post_stripe(&updated).await.json["status"], "accepted");
    // Stale events are acknowledged: the sender must not retry them.
    let answer = gw.post_stripe(&created).await;
    assert_eq!(
        (answer.status, answer.json["status"].as_str()),
        (200, Some("accepted"))
    );
    let stats = gw.settle().await;
    let keys: Vec<_> = downstream
        .received()
        .iter()
        .map(|r| r.header("idempotency-key").unwrap().to_owned())
        .collect();
    assert_eq!(keys, [r#""stripe:evt_sub_updated""#]);
    assert_eq!(stats.destinations["app"].stale, 1);
    assert_eq!(stats.destinations["app"].delivered, 1);
    gw.server.shutdown().await.unwrap();
}

/// The store is unavailable (its pool closed): the sender gets 503 as problem+json with
/// `Retry-After`, so it sends again later (C4).
async fn store_unavailable_answers_503<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream).await;
    gw.gateway.store().pool().close().await;
    let body = stripe_event("evt_db_down", "customer.created", "customer", "cus_d", 1);
    let answer = gw.post_stripe(&body).await;
    assert_eq!(answer.status, 503);
    assert_eq!(
        answer.header("content-type"),
        Some(idem_gateway::PROBLEM_JSON)
    );
    assert_eq!(answer.header("retry-after"), Some("1"));
    assert_eq!(answer.json["type"], "urn:idem:problem:store-unavailable");
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    store_unavailable_answers_503,
    same_event_twice_within_5ms,
    known_duplicate_is_never_an_error,
    downstream_fails_after_acceptance,
    updated_before_created_only_updated_is_sent,
);
