//! Refusals before the store is asked: each a clear 4xx, problem+json, zero store calls.

use std::sync::Arc;

use http::Method;
use idem_idempotency::{IdempotencyLayer, MAX_KEY_BYTES};

use crate::support::{Env, Handlers, all_stores, app, send, send_as, serve};

all_stores!(
    a_required_route_without_a_key_is_400,
    bad_keys_principals_and_bodies_are_clear_4xx,
    other_methods_pass_through,
);

async fn start(_env: &Env, layer: IdempotencyLayer) -> (Arc<Handlers>, String) {
    let handlers = Arc::new(Handlers::default());
    let base = serve(app(Arc::clone(&handlers)).layer(layer)).await;
    (handlers, base)
}

fn layer(env: &Env) -> IdempotencyLayer {
    IdempotencyLayer::new(Arc::clone(&env.store)).scope(env.scope_fn())
}

/// Required route without a key (or with a blank one): 400 `idempotency-key-missing`.
async fn a_required_route_without_a_key_is_400(env: Env) {
    let (handlers, base) = start(&env, layer(&env).required_for([Method::POST])).await;
    for key in [None, Some("\"\""), Some("\"   \""), Some("   ")] {
        let answer = send(&base, "/payments", key, "{}").await;
        assert_eq!(answer.status, 400, "{key:?}: {answer:?}");
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json")
        );
        assert_eq!(answer.problem(), Some("idempotency-key-missing"));
        assert_eq!(answer.body["status"], 400);
        assert!(
            answer.body["detail"]
                .as_str()
                .unwrap()
                .contains("Idempotency-Key")
        );
    }
    assert_eq!(handlers.runs("payments"), 0);
    assert_eq!(env.calls(), 0);
}

/// A key past 255 bytes, a malformed or non-ASCII key, a keyed request without a principal, a
/// body over the limit, and a body that is not JSON in canonical mode: each its 4xx, the handler
/// never runs and the store is never asked.
async fn bad_keys_principals_and_bodies_are_clear_4xx(env: Env) {
    let (handlers, base) = start(&env, layer(&env).max_body_bytes(64)).await;
    let long = "k".repeat(MAX_KEY_BYTES + 1);
    // (user, key, body, status, problem)
    type Case<'a> = (Option<&'a str>, Option<&'a str>, &'a str, u16, &'a str);
    let cases: [Case; 8] = [
        (
            Some("alice"),
            Some(&long),
            "{}",
            400,
            "idempotency-key-too-long",
        ),
        (
            Some("alice"),
            Some("\"unterminated"),
            "{}",
            400,
            "idempotency-key-invalid",
        ),
        (
            Some("alice"),
            Some("\"a\\nb\""),
            "{}",
            400,
            "idempotency-key-invalid",
        ),
        (None, Some("K"), "{}", 401, "principal-missing"),
        (
            Some("alice"),
            Some("K"),
            &"x".repeat(65),
            413,
            "body-too-large",
        ),
        (
            Some("alice"),
            Some("K"),
            "{\"amt\": 10",
            400,
            "body-not-json",
        ),
        // Not I-JSON (RFC 7493): canonical JSON would confuse these with other requests.
        (
            Some("alice"),
            Some("K"),
            r#"{"amount": 9007199254740993}"#,
            400,
            "body-not-i-json",
        ),
        (
            Some("alice"),
            Some("K"),
            r#"{"amount": 1, "amount": 1000}"#,
            400,
            "body-not-i-json",
        ),
    ];
    for (user, key, body, status, problem) in cases {
        let answer = send_as(&base, "/payments", user, key, body).await;
        assert_eq!(answer.status, status, "{problem}: {answer:?}");
        assert_eq!(answer.problem(), Some(problem));
        assert_eq!(
            answer.header("content-type"),
            Some("application/problem+json")
        );
    }
    let exactly_max = "k".repeat(MAX_KEY_BYTES);
    assert_eq!(env.calls(), 0);
    assert_eq!(
        send(&base, "/payments", Some(&exactly_max), "{}")
            .await
            .status,
        201
    );

    // Non-ASCII bytes in the header value (obs-text), sent raw.
    let response = idem_testkit::http_client()
        .post(format!("{base}/payments"))
        .header("authorization", "Bearer alice")
        .header(
            "idempotency-key",
            reqwest::header::HeaderValue::from_bytes(b"k\xe9y").unwrap(),
        )
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(handlers.runs("payments"), 1);
}

/// GET and other methods outside the handled set are never looked at.
async fn other_methods_pass_through(env: Env) {
    let handlers = Arc::new(Handlers::default());
    let router = app(Arc::clone(&handlers))
        .route("/ping", axum::routing::put(|| async { "pong" }))
        .layer(layer(&env).required_for([Method::POST]));
    let base = serve(router).await;
    let response = idem_testkit::http_client()
        .put(format!("{base}/ping"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "pong");
    assert_eq!(env.calls(), 0);
}
