//! What the destination receives: headers, signature, entity order, ties, dead letters.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_core::Timestamp;
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::Verifier;
use idem_http::verify::standard_webhooks::StandardWebhooksVerifier;
use idem_sql::Store;
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
    // An RFC 8941 String (issue 15, item 1); Idem-Event-Id keeps the bare id.
    assert_eq!(r.header("idempotency-key"), Some(r#""stripe:evt_headers""#));
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

/// A destination answering `status` to every attempt, under a three-step schedule, with
/// `extra` added to its `[[destination]]`: the attempts it received and the delivery's attempt
/// rows as (status, outcome, excerpt).
async fn answered<DB: GatewayDb + AppDb>(
    store: Store<DB>,
    status: StatusCode,
    extra: &str,
    event_id: &str,
) -> (usize, Vec<(i64, String, String)>) {
    let downstream = Downstream::start(Arc::new(move |_| status)).await;
    let text = config_text(downstream.addr, r#"["5ms", "5ms", "5ms"]"#).replace(
        "signing_secret_env = \"APP_SECRET\"",
        &format!("signing_secret_env = \"APP_SECRET\"\n{extra}"),
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event(event_id, "customer.created", "customer", event_id, 1);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].dead, 1);
    let detail = gw
        .gateway
        .show_event("stripe", event_id)
        .await
        .unwrap()
        .unwrap();
    let attempts = detail.deliveries[0]
        .1
        .iter()
        .map(|a| {
            (
                a.status.unwrap_or_default(),
                a.outcome.as_str().to_owned(),
                a.excerpt.clone(),
            )
        })
        .collect();
    gw.server.shutdown().await.unwrap();
    (
        downstream.with_key(&format!("stripe:{event_id}")).len(),
        attempts,
    )
}

/// A 400 refuses the request itself: a dead letter after exactly one attempt, its status and
/// the start of the answer kept (issue 13, item 5).
async fn a_400_is_dead_lettered_at_once<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let (sent, attempts) = answered(store, StatusCode::BAD_REQUEST, "", "evt_400").await;
    assert_eq!(sent, 1);
    assert_eq!(
        attempts,
        [(400, "dead".to_owned(), "downstream says hi".to_owned())]
    );
}

/// A 429 (and 408, 409, 425) says "not now": retried on the schedule, then dead.
async fn a_429_is_retried_on_the_schedule<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let (sent, attempts) = answered(store, StatusCode::TOO_MANY_REQUESTS, "", "evt_429").await;
    assert_eq!(sent, 4);
    let outcomes: Vec<_> = attempts.iter().map(|(s, o, _)| (*s, o.as_str())).collect();
    assert_eq!(
        outcomes,
        [
            (429, "retry"),
            (429, "retry"),
            (429, "retry"),
            (429, "dead")
        ]
    );
    // Issue 13, item 6: the retry's time is logged in RFC 3339 UTC, not epoch milliseconds.
    let lines = crate::support::lines_with("WARN", "attempt failed; will retry");
    let ours: Vec<_> = lines
        .iter()
        .filter(|l| l.contains("event_id=evt_429 "))
        .collect();
    assert!(!ours.is_empty(), "{lines:?}");
    for line in ours {
        let (_, after) = line.split_once("next_attempt_at=").expect(line);
        let at = after.split(' ').next().unwrap();
        assert!(
            at.len() == 24 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
            "{line}"
        );
        idem_gateway::time::parse_time("next_attempt_at", at, 0).expect(line);
    }
}

/// `retry_4xx = true` retries a 400 like a 5xx.
async fn retry_4xx_retries_a_400<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let (sent, attempts) = answered(
        store,
        StatusCode::BAD_REQUEST,
        "retry_4xx = true",
        "evt_400_retried",
    )
    .await;
    assert_eq!(sent, 4);
    let outcomes: Vec<_> = attempts.iter().map(|(s, o, _)| (*s, o.as_str())).collect();
    assert_eq!(
        outcomes,
        [
            (400, "retry"),
            (400, "retry"),
            (400, "retry"),
            (400, "dead")
        ]
    );
}

/// A 3xx is not followed: it is retried like a 5xx, then dead. A 302 whose `Location` answers
/// 200 would otherwise have turned the POST into a bodiless GET and counted the event as
/// delivered though the application never received it.
async fn a_redirect_is_not_followed<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let destination = idem_testkit::redirecting::Redirecting::start("/events").await;
    let text = config_text(destination.addr, r#"["5ms", "5ms", "5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event("evt_302", "customer.created", "customer", "evt_302", 1);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].dead, 1);
    let detail = gw
        .gateway
        .show_event("stripe", "evt_302")
        .await
        .unwrap()
        .unwrap();
    let outcomes: Vec<_> = detail.deliveries[0]
        .1
        .iter()
        .map(|a| (a.status.unwrap_or_default(), a.outcome.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [
            (302, "retry"),
            (302, "retry"),
            (302, "retry"),
            (302, "dead")
        ]
    );
    assert_eq!(destination.followed(), 0, "the redirect was followed");
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    a_redirect_is_not_followed,
    a_400_is_dead_lettered_at_once,
    a_429_is_retried_on_the_schedule,
    retry_4xx_retries_a_400,
);

both_stores!(
    forwarded_request_is_signed_and_keyed,
    tie_is_sent_flagged,
    dead_letter_keeps_attempts_and_releases_entity,
    refused_connection_is_retried_then_dead,
);

/// Two routes into one destination carry the same `type:id` (two Stripe accounts): order is
/// per (route, entity), so a delivery waiting for its retry on one route does not hold the
/// other route's event of the same entity (finding 4).
async fn entity_order_is_per_route<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::start(Arc::new(|r| {
        if r.header("idem-source") == Some("stripe") {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = format!(
        "{}\n[[source]]\nname = \"stripe2\"\nkind = \"stripe\"\nsecrets_env = [\"STRIPE_SECRET\"]\n\n\
         [[route]]\nsource = \"stripe2\"\ndestination = \"app\"\n",
        config_text(downstream.addr, r#"["1h"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let first = stripe_event(
        "evt_route_a",
        "customer.updated",
        "customer",
        "cus_same",
        100,
    );
    gw.post_stripe(&first).await;
    let second = stripe_event(
        "evt_route_b",
        "customer.updated",
        "customer",
        "cus_same",
        200,
    );
    let signature =
        idem_http::verify::stripe::sign(crate::support::STRIPE_SECRET, unix_now(), &second);
    let answer = gw
        .post("stripe2", &[("stripe-signature", signature)], &second)
        .await;
    assert_eq!(answer.json["status"], "accepted");
    let deadline = Instant::now() + Duration::from_secs(5);
    while downstream.with_key("stripe2:evt_route_b").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the other route's event waited behind a retry of the same type:id"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    gw.server.shutdown().await.unwrap();
}

/// A delivery due but held back by its entity's order does not push the other retries back to
/// the poll interval (finding 5): with a 5 s poll, a 50 ms schedule still runs in 50 ms steps.
async fn held_back_delivery_does_not_delay_retries<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::start(Arc::new(|r| {
        if r.header("idem-event-id") == Some("evt_held_1") {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = config_text(downstream.addr, r#"["50ms", "50ms"]"#)
        // A poll far longer than settle's 10 s: a retry held back until the poll would never
        // settle, whatever the machine's load.
        .replace("poll_interval = \"20ms\"", "poll_interval = \"1h\"");
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let first = stripe_event(
        "evt_held_1",
        "customer.updated",
        "customer",
        "cus_held",
        100,
    );
    let second = stripe_event(
        "evt_held_2",
        "customer.updated",
        "customer",
        "cus_held",
        200,
    );
    gw.post_stripe(&first).await;
    gw.post_stripe(&second).await;
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].dead, 1);
    assert_eq!(stats.destinations["app"].delivered, 1);
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    entity_order_is_per_route,
    held_back_delivery_does_not_delay_retries,
);

/// A dispatcher that panics (here tokio's semaphore, with a concurrency no configuration file
/// may give) fails `/readyz` and stops the server with an error instead of accepting events
/// that would never be sent (finding 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatcher_that_panics_fails_readyz_and_stops_the_server() {
    let downstream = Downstream::ok().await;
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let mut config = Config::from_toml(&config_text(downstream.addr, r#"["5ms"]"#), &env).unwrap();
    config.destinations[0].concurrency = 9_000_000_000_000_000_000;
    let gw = Running::start(config, store).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = gw
            .client
            .get(format!("{}/readyz", gw.url))
            .send()
            .await
            .unwrap();
        if answer.status() == 503 {
            let body = answer.text().await.unwrap();
            assert!(body.contains("dispatcher-stopped"), "{body}");
            assert!(body.contains("destination \\\"app\\\""), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "/readyz stayed ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopped = tokio::time::timeout(
        Duration::from_secs(5),
        gw.server.run_until(std::future::pending()),
    )
    .await
    .expect("run_until returns on a dispatcher failure");
    let error = stopped.unwrap_err();
    assert!(
        matches!(
            error,
            idem_gateway::Error::TaskStopped {
                task: idem_gateway::Task::Dispatcher { .. },
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .starts_with("the dispatcher of destination \"app\" stopped (panicked: "),
        "{error}"
    );
}
