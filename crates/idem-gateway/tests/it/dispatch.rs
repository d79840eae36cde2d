//! What the destination receives: headers, signature, entity order, ties, dead letters.

use std::sync::Arc;

use axum::http::StatusCode;
use idem::{Store, Timestamp};
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::Verifier;
use idem_http::verify::standard_webhooks::StandardWebhooksVerifier;
use idem_testkit::AppDb;

use crate::support::{
    APP_SECRET, Downstream, Running, config_text, count, env, stripe_event, unix_now,
};

async fn gateway<DB: GatewayDb>(store: Store<DB>, downstream: &Downstream) -> Running<DB> {
    let text = config_text(downstream.addr, r#"["5ms", "5ms", "5ms"]"#);
    Running::start(Config::from_toml(&text, &env).unwrap(), store).await
}

/// The raw body with `Idempotency-Key`, `Idem-*` headers and a Standard Webhooks signature that
/// the application can verify with the destination's secret.
async fn forwarded_request_is_signed_and_keyed<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream).await;
    let body = stripe_event(
        "evt_headers",
        "customer.created",
        "customer",
        "cus_h",
        1_700_000_000,
    );
    gw.post_stripe(&body).await;
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    let r = &received[0];
    assert_eq!(r.body, body);
    assert_eq!(r.header("idempotency-key"), Some("stripe:evt_headers"));
    assert_eq!(r.header("idem-event-id"), Some("evt_headers"));
    assert_eq!(r.header("idem-source"), Some("stripe"));
    assert_eq!(r.header("idem-attempt"), Some("1"));
    assert_eq!(r.header("idem-event-type"), Some("customer.created"));
    assert_eq!(r.header("idem-version-tie"), None);
    let webhook_id = r.header("webhook-id").unwrap();
    assert!(
        webhook_id.starts_with("msg_") && !webhook_id.contains('.'),
        "{webhook_id}"
    );
    let verifier = StandardWebhooksVerifier::new([APP_SECRET]).unwrap();
    verifier
        .verify(&r.headers, &r.body, Timestamp(unix_now() * 1000))
        .expect("the application verifies idem's signature");
    gw.server.shutdown().await.unwrap();
}

/// A tie (same `created` for one object, another event) is sent with `Idem-Version-Tie: true`.
async fn tie_is_sent_flagged<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = gateway(store, &downstream).await;
    let created = stripe_event(
        "evt_tie_1",
        "invoice.created",
        "invoice",
        "in_tie",
        1_700_000_100,
    );
    let finalized = stripe_event(
        "evt_tie_2",
        "invoice.finalized",
        "invoice",
        "in_tie",
        1_700_000_100,
    );
    gw.post_stripe(&created).await;
    gw.post_stripe(&finalized).await;
    gw.settle().await;
    let received = downstream.received();
    let seen: Vec<_> = received
        .iter()
        .map(|r| {
            (
                r.header("idem-event-id").unwrap(),
                r.header("idem-version-tie"),
            )
        })
        .collect();
    assert_eq!(seen, [("evt_tie_1", None), ("evt_tie_2", Some("true"))]);
    gw.server.shutdown().await.unwrap();
}

/// One delivery per entity in flight, in version order: the next event of an entity waits for
/// the one before it, through its retries, until it is delivered or dead-lettered; the dead
/// letter keeps every attempt and releases the entity.
async fn dead_letter_keeps_attempts_and_releases_entity<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::start(Arc::new(|r| {
        if r.header("idem-event-id") == Some("evt_doomed") {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let gw = gateway(store, &downstream).await;
    let doomed = stripe_event(
        "evt_doomed",
        "customer.subscription.created",
        "subscription",
        "sub_d",
        100,
    );
    let next = stripe_event(
        "evt_after",
        "customer.subscription.updated",
        "subscription",
        "sub_d",
        200,
    );
    gw.post_stripe(&doomed).await;
    gw.post_stripe(&next).await;
    let stats = gw.settle().await;
    let order: Vec<_> = downstream
        .received()
        .iter()
        .map(|r| {
            (
                r.header("idem-event-id").unwrap().to_owned(),
                r.header("idem-attempt").unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("evt_doomed", "1"),
        ("evt_doomed", "2"),
        ("evt_doomed", "3"),
        ("evt_doomed", "4"),
        ("evt_after", "1"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_owned(), b.to_owned()))
    .collect();
    assert_eq!(order, expected);
    assert_eq!(stats.destinations["app"].dead, 1);
    assert_eq!(stats.destinations["app"].delivered, 1);
    let attempts = count(
        &gw.gateway,
        "SELECT COUNT(*) FROM idem_gateway_attempts a \
         JOIN idem_gateway_deliveries d ON d.id = a.delivery \
         JOIN idem_gateway_events e ON e.id = d.event \
         WHERE e.event_id = 'evt_doomed' AND a.status = 500 AND a.excerpt = 'downstream says hi'",
    )
    .await;
    assert_eq!(attempts, 4);
    let dead = count(
        &gw.gateway,
        "SELECT COUNT(*) FROM idem_gateway_attempts WHERE outcome = 'dead'",
    )
    .await;
    assert_eq!(dead, 1);
    gw.server.shutdown().await.unwrap();
}

/// A refused connection is retried like a failure and dead-lettered after the schedule.
async fn refused_connection_is_retried_then_dead<DB: GatewayDb + AppDb>(store: Store<DB>) {
    // A port nobody listens on: bind, note it, close.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let text = config_text(closed, r#"["5ms", "5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event("evt_refused", "customer.created", "customer", "cus_r", 1);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].dead, 1);
    assert_eq!(stats.failed_attempts, 3);
    let transport = count(
        &gw.gateway,
        "SELECT COUNT(*) FROM idem_gateway_attempts WHERE status IS NULL AND excerpt LIKE 'connection failed%'",
    )
    .await;
    assert_eq!(transport, 3);
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    forwarded_request_is_signed_and_keyed,
    tie_is_sent_flagged,
    dead_letter_keeps_attempts_and_releases_entity,
    refused_connection_is_retried_then_dead,
);
