//! The reference app over HTTP on SQLite: payments, refunds and transfers behind the
//! Idempotency-Key layer, per-user scoping, and the 159 Stripe events of testdata applied (each
//! twice, signed) through the webhook endpoint, unsigned and forged deliveries refused.

use std::time::{SystemTime, UNIX_EPOCH};

use idem_http::verify::stripe::{self, StripeVerifier};
use payments::{DEMO_STRIPE_SECRET, Tokens};
use serde_json::{Value, json};

const EVENTS: &str = include_str!("../../../testdata/stripe-events/events.jsonl");
const EXPECTED: &str = include_str!("../../../testdata/stripe-events/expected_final_state.json");

async fn start() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("payments.db").display());
    let store = idem::SqliteStore::connect(&url).await.unwrap();
    (dir, serve(store).await)
}

/// The app on this test process's fresh PostgreSQL database (127.0.0.1:5432 unless
/// `IDEM_TEST_POSTGRES_URL` says otherwise).
async fn start_postgres() -> String {
    serve(idem_testkit::pg_store().await).await
}

async fn serve<DB: payments::PaymentsDb>(store: idem::Store<DB>) -> String {
    let stripe = StripeVerifier::new([DEMO_STRIPE_SECRET]).unwrap();
    let router = payments::app(store, Tokens::demo(), stripe).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    base
}

async fn call(
    method: reqwest::Method,
    url: String,
    token: Option<&str>,
    key: Option<&str>,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = idem_testkit::http_client().request(method, url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (
        status,
        headers,
        response.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_refunds_and_transfers_run_once_per_key_and_user() {
    let (_dir, base) = start().await;
    let post = |path: &str, token, key, body| {
        call(
            reqwest::Method::POST,
            format!("{base}{path}"),
            token,
            key,
            Some(body),
        )
    };

    let (status, _, _) = post("/payments", None, Some("k1"), json!({"amount": 1000})).await;
    assert_eq!(status, 401);
    let (status, _, problem) = post(
        "/payments",
        Some("alice-token"),
        None,
        json!({"amount": 1000}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(problem["type"], "/problems/idempotency-key-missing");

    let (status, headers, first) = post(
        "/payments",
        Some("alice-token"),
        Some("k1"),
        json!({"amount": 1000}),
    )
    .await;
    assert_eq!(status, 201);
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(headers["location"], format!("/payments/{id}"));
    let (status, headers, again) = post(
        "/payments",
        Some("alice-token"),
        Some("k1"),
        json!({"amount": 1000}),
    )
    .await;
    assert_eq!((status, &again), (201, &first));
    assert_eq!(headers["idempotent-replayed"], "true");
    let (status, _, _) = post(
        "/payments",
        Some("alice-token"),
        Some("k1"),
        json!({"amount": 999}),
    )
    .await;
    assert_eq!(status, 422);

    // Bob's k1 is his own; he cannot see or refund Alice's payment.
    let (status, _, bobs) = post(
        "/payments",
        Some("bob-token"),
        Some("k1"),
        json!({"amount": 1000}),
    )
    .await;
    assert_eq!(status, 201);
    assert_ne!(bobs["id"], first["id"]);
    let read = |token| {
        call(
            reqwest::Method::GET,
            format!("{base}/payments/{id}"),
            Some(token),
            None,
            None,
        )
    };
    assert_eq!(read("bob-token").await.0, 404);
    let refund = json!({"payment_id": id, "amount": 400});
    let (status, _, _) = post("/refunds", Some("bob-token"), Some("r1"), refund.clone()).await;
    assert_eq!(status, 404);

    let (status, _, r1) = post("/refunds", Some("alice-token"), Some("r1"), refund.clone()).await;
    assert_eq!(status, 201);
    let (_, _, r1_again) = post("/refunds", Some("alice-token"), Some("r1"), refund.clone()).await;
    assert_eq!(r1_again, r1, "a retried refund refunds once");
    let (status, _, too_much) = post(
        "/refunds",
        Some("alice-token"),
        Some("r2"),
        json!({"payment_id": id, "amount": 700}),
    )
    .await;
    assert_eq!(status, 422, "{too_much}");
    let (status, _, payment) = read("alice-token").await;
    assert_eq!(status, 200);
    assert_eq!(payment["refunded"], 400);

    let (status, _, transfer) = post(
        "/transfers",
        Some("alice-token"),
        Some("t1"),
        json!({"amount": 100, "to": "acct1"}),
    )
    .await;
    assert_eq!(status, 201);
    let (_, headers, replay) = post(
        "/transfers",
        Some("alice-token"),
        Some("t1"),
        json!({"to": "acct1", "amount": 100}),
    )
    .await;
    assert_eq!(
        replay, transfer,
        "canonical JSON: the re-ordered body is the same request"
    );
    assert_eq!(headers["idempotent-replayed"], "true");
}

/// Ten refunds of the whole of one 100-cent payment, sent at once with ten different keys:
/// exactly one is made (201), the others are refused (422), and 100 is refunded, not 200 or
/// 300 (the refund locks its payment before reading what was already refunded).
async fn concurrent_refunds_refund_at_most_the_payment(base: String) {
    let (status, _, payment) = call(
        reqwest::Method::POST,
        format!("{base}/payments"),
        Some("alice-token"),
        Some("race-pay"),
        Some(json!({"amount": 100})),
    )
    .await;
    assert_eq!(status, 201, "{payment}");
    let id = payment["id"].as_str().unwrap().to_owned();
    let refunds: Vec<_> = (0..10)
        .map(|n| {
            let (url, body) = (
                format!("{base}/refunds"),
                json!({"payment_id": id, "amount": 100}),
            );
            tokio::spawn(async move {
                let key = format!("race-refund-{n}");
                let post = reqwest::Method::POST;
                call(post, url, Some("alice-token"), Some(&key), Some(body)).await
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for refund in refunds {
        statuses.push(refund.await.unwrap().0);
    }
    statuses.sort_unstable();
    let mut expected = vec![422; 9];
    expected.insert(0, 201);
    assert_eq!(statuses, expected);
    let (status, _, payment) = call(
        reqwest::Method::GET,
        format!("{base}/payments/{id}"),
        Some("alice-token"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(payment["refunded"], 100, "{payment}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_refunds_refund_at_most_the_payment_sqlite() {
    let (_dir, base) = start().await;
    concurrent_refunds_refund_at_most_the_payment(base).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_refunds_refund_at_most_the_payment_postgres() {
    concurrent_refunds_refund_at_most_the_payment(start_postgres().await).await;
}

/// The layer wraps the app's routes only (`route_layer`): an unknown path is a 404, with or
/// without a key, and that 404 is not stored under the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_are_404_not_idempotency_errors() {
    let (_dir, base) = start().await;
    for key in [None, Some("typo")] {
        let (status, headers, _) = call(
            reqwest::Method::POST,
            format!("{base}/nope"),
            Some("alice-token"),
            key,
            Some(json!({"amount": 100})),
        )
        .await;
        assert_eq!(status, 404, "key {key:?}");
        assert!(headers.get("idempotent-replayed").is_none());
    }
    let (status, _, _) = call(
        reqwest::Method::POST,
        format!("{base}/payments"),
        Some("alice-token"),
        Some("typo"),
        Some(json!({"amount": 100})),
    )
    .await;
    assert_eq!(status, 201, "the key was not spent on the typo'd URL");
}

/// Delivers `body` to the webhook endpoint, signed with `secret` (as Stripe does, at the current
/// time) unless `None`; returns the status and the `Idem-Outcome` or the problem type.
async fn deliver(base: &str, body: &str, secret: Option<&str>) -> (u16, String) {
    let mut request = idem_testkit::http_client()
        .post(format!("{base}/webhooks/stripe"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(secret) = secret {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let signature = stripe::sign(secret, now.as_secs() as i64, body.as_bytes());
        request = request.header(stripe::SIGNATURE_HEADER, signature);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let outcome = match response.headers().get("idem-outcome") {
        Some(outcome) => outcome.to_str().unwrap().to_owned(),
        None => {
            let problem: Value = response.json().await.unwrap_or(Value::Null);
            problem["type"].as_str().unwrap_or_default().to_owned()
        }
    };
    (status, outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_events_delivered_twice_reach_the_expected_state() {
    let (_dir, base) = start().await;
    let first = EVENTS.lines().next().unwrap();
    // Unsigned, or signed with another secret: 400 naming the problem, and nothing is stored
    // (the same event, signed, is applied afterwards, not a duplicate).
    assert_eq!(
        deliver(&base, first, None).await,
        (400, "/problems/invalid-signature".to_owned())
    );
    assert_eq!(
        deliver(&base, first, Some("whsec_someone_else")).await,
        (400, "/problems/invalid-signature".to_owned())
    );

    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for round in 0..2 {
        for (n, line) in EVENTS.lines().enumerate() {
            let (status, outcome) = deliver(&base, line, Some(DEMO_STRIPE_SECRET)).await;
            assert_eq!(status, 200, "round {round}: {outcome}");
            if round == 0 && n == 0 {
                assert_eq!(outcome, "applied", "the refused deliveries stored nothing");
            }
            if round == 1 {
                assert_eq!(outcome, "duplicate");
            }
            *outcomes.entry(outcome).or_default() += 1;
        }
    }
    assert_eq!(outcomes["duplicate"], 159, "{outcomes:?}");

    let expected: Value = serde_json::from_str(EXPECTED).unwrap();
    for (id, want) in expected["objects"].as_object().unwrap() {
        let (status, _, got) = call(
            reqwest::Method::GET,
            format!("{base}/stripe/objects/{id}"),
            None,
            None,
            None,
        )
        .await;
        assert_eq!(status, 200, "{id}");
        assert_eq!(got["status"], want["status"], "{id}");
        assert_eq!(got["event"], want["event"], "{id}");
        assert_eq!(got["type"], want["type"], "{id}");
        assert_eq!(got["created"], want["created"], "{id}");
    }

    // Signed, but not an event.
    assert_eq!(
        deliver(&base, "{\"id\": 1}", Some(DEMO_STRIPE_SECRET)).await,
        (400, "/problems/invalid-stripe-event".to_owned())
    );
}
