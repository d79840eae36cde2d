//! The issue's scenarios from public bug reports, over HTTP, on every store.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request};
use idem_core::Ttl;
use idem_idempotency::{BodyMode, IdempotencyLayer};
use serde_json::json;
use tower::ServiceExt;

use crate::support::{Env, Handlers, all_stores, app, send, send_as, serve};

all_stores!(
    keyless_requests_pass_through_without_touching_the_store,
    a_running_key_is_409_another_route_422_and_a_later_retry_a_replay,
    another_body_is_422_and_a_reformatted_body_depends_on_the_mode,
    a_5xx_releases_the_claim_and_the_retry_executes,
    a_panic_releases_the_claim_and_the_retry_executes,
    a_killed_process_blocks_the_key_until_its_lease_expires,
    two_principals_with_one_key_never_share_a_record,
    deterministic_4xx_are_stored_and_transient_ones_released,
);

fn layer(env: &Env) -> IdempotencyLayer {
    IdempotencyLayer::new(Arc::clone(&env.store)).scope(env.scope_fn())
}

async fn start(_env: &Env, layer: IdempotencyLayer) -> (Arc<Handlers>, String) {
    let handlers = Arc::new(Handlers::default());
    let base = serve(app(Arc::clone(&handlers)).layer(layer)).await;
    (handlers, base)
}

/// Requests without a key (or with `""` or `"   "`) on an optional route pass through and touch
/// the store zero times: two users' keyless POSTs create two different resources.
async fn keyless_requests_pass_through_without_touching_the_store(env: Env) {
    let (handlers, base) = start(&env, layer(&env)).await;
    let mut ids = Vec::new();
    for key in [None, Some("\"\""), Some("\"   \""), Some(""), Some("   ")] {
        for user in ["alice", "bob"] {
            let answer = send_as(&base, "/payments", Some(user), key, r#"{"amt":10}"#).await;
            assert_eq!(answer.status, 201, "{key:?} {user}: {answer:?}");
            assert!(!answer.replayed());
            ids.push(answer.body["id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(handlers.runs("payments"), 10);
    let mut distinct = ids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        10,
        "every keyless POST made its own resource: {ids:?}"
    );
    assert_eq!(env.calls(), 0, "the store was touched");
}

/// Key K: R1 `POST /payments {amt:10}` (handler sleeps 2 s), R2 the same at +0.1 s, R3
/// `POST /refunds` with K at +0.2 s, R4 a retry of R1 at +3 s: the payment handler ran once;
/// R2 → 409 with Retry-After; R3 → 422; R4 → R1's stored status and body with the replay header.
async fn a_running_key_is_409_another_route_422_and_a_later_retry_a_replay(env: Env) {
    let (handlers, base) = start(&env, layer(&env)).await;
    *handlers.payment_delay.lock().unwrap() = Duration::from_secs(2);
    let started = tokio::time::Instant::now();
    let r1 = tokio::spawn({
        let base = base.clone();
        async move { send(&base, "/payments", Some("K"), r#"{"amt":10}"#).await }
    });

    tokio::time::sleep_until(started + Duration::from_millis(100)).await;
    let r2 = send(&base, "/payments", Some("K"), r#"{"amt":10}"#).await;
    assert_eq!(r2.status, 409, "{r2:?}");
    let retry_after: u64 = r2.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=5).contains(&retry_after), "{r2:?}");
    assert_eq!(r2.header("content-type"), Some("application/problem+json"));
    assert_eq!(r2.problem(), Some("idempotency-key-in-use"));
    assert_eq!(r2.body["status"], 409);

    tokio::time::sleep_until(started + Duration::from_millis(200)).await;
    let r3 = send(&base, "/refunds", Some("K"), r#"{"amt":10}"#).await;
    assert_eq!(r3.status, 422, "{r3:?}");
    assert_eq!(r3.problem(), Some("idempotency-key-reused"));

    let r1 = r1.await.unwrap();
    assert_eq!(r1.status, 201);
    assert!(!r1.replayed());
    assert_eq!(r1.body, json!({"id": "pay_1", "amount": 10}));

    tokio::time::sleep_until(started + Duration::from_secs(3)).await;
    let r4 = send(&base, "/payments", Some("K"), r#"{"amt":10}"#).await;
    assert_eq!(r4.status, 201);
    assert!(r4.replayed(), "{r4:?}");
    assert_eq!(r4.body, r1.body, "nothing was overwritten");
    assert_eq!(r4.header("location"), Some("/payments/pay_1"));
    assert_eq!(r4.header("content-type"), Some("application/json"));
    assert_eq!(handlers.runs("payments"), 1);
    assert_eq!(handlers.runs("refunds"), 0);
}

/// R1 `POST /transfers {"amount":100,"to":"acct1"}` with K → 201 `{id:"t1"}`; R2 same K with
/// `{"amount":1000,…}` → 422 and not executed; R3 same K with R1's body re-ordered and re-spaced
/// → replay in canonical-JSON mode, 422 in raw-bytes mode.
async fn another_body_is_422_and_a_reformatted_body_depends_on_the_mode(env: Env) {
    for (mode, key, r3_status) in [
        (BodyMode::CanonicalJson, "K-canonical", 201),
        (BodyMode::Raw, "K-raw", 422),
    ] {
        let (handlers, base) = start(&env, layer(&env).body_mode(mode)).await;
        let r1 = send(
            &base,
            "/transfers",
            Some(key),
            r#"{"amount":100,"to":"acct1"}"#,
        )
        .await;
        assert_eq!(
            (r1.status, &r1.body),
            (201, &json!({"id": "t1"})),
            "{mode:?}"
        );

        let r2 = send(
            &base,
            "/transfers",
            Some(key),
            r#"{"amount":1000,"to":"acct1"}"#,
        )
        .await;
        assert_eq!(r2.status, 422, "{mode:?}: {r2:?}");
        assert_eq!(handlers.runs("transfers"), 1, "{mode:?}: R2 was executed");

        let r3 = send(
            &base,
            "/transfers",
            Some(key),
            "{ \"to\": \"acct1\",\n  \"amount\": 100 }",
        )
        .await;
        assert_eq!(r3.status, r3_status, "{mode:?}: {r3:?}");
        if r3_status == 201 {
            assert!(r3.replayed());
            assert_eq!(r3.body, json!({"id": "t1"}));
        } else {
            assert_eq!(r3.problem(), Some("idempotency-key-reused"));
        }
        assert_eq!(handlers.runs("transfers"), 1, "{mode:?}");
    }
}

/// Handler returns 500 after the claim → the retry executes and returns 201.
async fn a_5xx_releases_the_claim_and_the_retry_executes(env: Env) {
    let (handlers, base) = start(&env, layer(&env)).await;
    let first = send(&base, "/flaky", Some("K"), "{}").await;
    assert_eq!(first.status, 500);
    let retry = send(&base, "/flaky", Some("K"), "{}").await;
    assert_eq!(retry.status, 201, "{retry:?}");
    assert!(!retry.replayed());
    let replay = send(&base, "/flaky", Some("K"), "{}").await;
    assert_eq!((replay.status, replay.replayed()), (201, true));
    assert_eq!(replay.body, retry.body);
    assert_eq!(handlers.runs("flaky"), 2);
}

/// Handler panics after the claim → a 500, the claim released, the retry executes (201).
async fn a_panic_releases_the_claim_and_the_retry_executes(env: Env) {
    let (handlers, base) = start(&env, layer(&env)).await;
    let first = send(&base, "/panics", Some("K"), "{}").await;
    assert_eq!(first.status, 500, "{first:?}");
    assert_eq!(first.problem(), Some("handler-panicked"));
    let retry = send(&base, "/panics", Some("K"), "{}").await;
    assert_eq!(retry.status, 201, "{retry:?}");
    assert!(!retry.replayed());
    assert_eq!(handlers.runs("panics"), 2);
}

/// The process is killed after the claim → a retry before lease expiry gets 409, after expiry
/// executes. The kill: a request is driven in-process until its handler runs, then its future is
/// forgotten (`mem::forget`), so that no destructor runs, as when the process dies. The lease is
/// 1 s on the injected clock.
async fn a_killed_process_blocks_the_key_until_its_lease_expires(env: Env) {
    let lease = Ttl::new(Duration::from_secs(1)).unwrap();
    let handlers = Arc::new(Handlers::default());
    let router = app(Arc::clone(&handlers)).layer(layer(&env).lease(lease));
    let base = serve(router.clone()).await;

    let request = Request::builder()
        .method(Method::POST)
        .uri("/hang")
        .header("authorization", "Bearer alice")
        .header("idempotency-key", "K")
        .header("content-type", "application/json")
        .body(axum::body::Body::from("{}"))
        .unwrap();
    let mut dying = Box::pin(router.oneshot(request));
    tokio::select! {
        _ = &mut dying => panic!("the first run of /hang never ends"),
        () = handlers.hang_started.notified() => {}
    }
    std::mem::forget(dying);

    let before = send(&base, "/hang", Some("K"), "{}").await;
    assert_eq!(before.status, 409, "{before:?}");
    assert_eq!(before.header("retry-after"), Some("1"));

    env.clock.advance(Duration::from_millis(1001));
    let after = send(&base, "/hang", Some("K"), "{}").await;
    assert_eq!(after.status, 201, "{after:?}");
    assert_eq!(after.body, json!({"id": "h2"}));
    assert_eq!(handlers.runs("hang"), 2);
}

/// Scope is (principal, key): alice and bob both sending K run twice and replay their own.
async fn two_principals_with_one_key_never_share_a_record(env: Env) {
    let (handlers, base) = start(&env, layer(&env)).await;
    let alice = send_as(&base, "/payments", Some("alice"), Some("K"), r#"{"amt":1}"#).await;
    let bob = send_as(&base, "/payments", Some("bob"), Some("K"), r#"{"amt":1}"#).await;
    assert_eq!((alice.status, bob.status), (201, 201));
    assert!(!bob.replayed());
    assert_ne!(alice.body["id"], bob.body["id"]);
    let alice_again = send_as(&base, "/payments", Some("alice"), Some("K"), r#"{"amt":1}"#).await;
    let bob_again = send_as(&base, "/payments", Some("bob"), Some("K"), r#"{"amt":1}"#).await;
    assert_eq!(alice_again.body, alice.body);
    assert_eq!(bob_again.body, bob.body);
    assert!(alice_again.replayed() && bob_again.replayed());
    assert_eq!(handlers.runs("payments"), 2);

    // A principal whose name is another's prefix, and a key that ends like a principal.
    let a = send_as(&base, "/payments", Some("ali"), Some("ceK"), r#"{"amt":1}"#).await;
    assert!(!a.replayed());
    assert_eq!(handlers.runs("payments"), 3);
}

/// 4xx are stored (deterministic) except 408, 409, 425 and 429 (transient), which release.
async fn deterministic_4xx_are_stored_and_transient_ones_released(env: Env) {
    let (handlers, base) = start(&env, layer(&env)).await;
    let first = send(&base, "/status/404", Some("K404"), "{}").await;
    let again = send(&base, "/status/404", Some("K404"), "{}").await;
    assert_eq!((first.status, again.status), (404, 404));
    assert_eq!((first.replayed(), again.replayed()), (false, true));
    assert_eq!(again.body, json!({"run": 1}));
    for transient in [408, 409, 425, 429] {
        let key = format!("K{transient}");
        let path = format!("/status/{transient}");
        let first = send(&base, &path, Some(&key), "{}").await;
        let again = send(&base, &path, Some(&key), "{}").await;
        assert_eq!((first.status, again.status), (transient, transient));
        assert!(!again.replayed(), "{transient} was stored");
        assert_ne!(first.body, again.body, "{transient}: the handler ran again");
    }
    assert_eq!(handlers.runs("status"), 1 + 8);

    // With 4xx not stored, a 422 from the handler releases too.
    let (handlers, base) = start(&env, layer(&env).store_client_errors(false)).await;
    send(&base, "/status/422", Some("K422"), "{}").await;
    let again = send(&base, "/status/422", Some("K422"), "{}").await;
    assert!(!again.replayed());
    assert_eq!(handlers.runs("status"), 2);
}
