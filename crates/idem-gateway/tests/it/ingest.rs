//! Ingest: signatures over raw bytes, freshness, Standard Webhooks signature lists, and the 4xx
//! answers for bad input. Nothing that fails is stored.

use std::sync::Arc;

use idem_core::{ManualClock, Timestamp};
use idem_gateway::{Config, PROBLEM_JSON};
use idem_http::verify::{github, standard_webhooks, stripe};

use crate::support::{
    Answer, Downstream, GITHUB_SECRET, Running, STRIPE_SECRET, SW_NEW, SW_OLD, capture_logs,
    config_text, count, env, sqlite,
};

const EVENTS: &str = "SELECT COUNT(*) FROM idem_gateway_events";

/// The receiver's clock in the freshness scenarios, in Unix seconds.
const NOW: i64 = 1_700_000_000;

async fn gateway_at(
    now: i64,
    downstream: &Downstream,
    extra: &str,
) -> (Option<tempfile::TempDir>, Running<idem_sql::sqlx::Sqlite>) {
    capture_logs();
    let clock = ManualClock::new(Timestamp(now * 1000));
    let (dir, store) = sqlite(Arc::new(clock)).await;
    let text = format!("{extra}\n{}", config_text(downstream.addr, r#"["5ms"]"#));
    (
        dir,
        Running::start(Config::from_toml(&text, &env).unwrap(), store).await,
    )
}

fn assert_problem(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{:?}", answer.json);
    assert_eq!(answer.header("content-type"), Some(PROBLEM_JSON));
    assert_eq!(
        answer.json["type"],
        format!("urn:idem:problem:{code}"),
        "{:?}",
        answer.json
    );
    assert_eq!(answer.json["status"], status);
    assert!(!answer.json["detail"].as_str().unwrap().is_empty());
}

/// Bodies with `\u00e9` escapes, CRLF line endings, a trailing newline and `1.50` verify and are
/// forwarded byte for byte; the same body parsed and re-serialised does not (400, nothing
/// stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_is_checked_on_the_raw_bytes() {
    let downstream = Downstream::ok().await;
    let (_dir, gw) = gateway_at(NOW, &downstream, "").await;
    let body: &[u8] = b"{\"id\":\"evt_raw\",\r\n \"type\":\"charge.succeeded\",\r\n \"name\":\"caf\\u00e9\",\r\n \"amount\":1.50}\n";
    let signature = stripe::sign(STRIPE_SECRET, NOW, body);
    let answer = gw
        .post("stripe", &[("stripe-signature", signature.clone())], body)
        .await;
    assert_eq!(
        (answer.status, answer.json["status"].as_str()),
        (200, Some("accepted"))
    );

    let parsed: serde_json::Value = serde_json::from_slice(body).unwrap();
    let reserialised = serde_json::to_vec(&parsed).unwrap();
    assert_ne!(reserialised, body);
    let answer = gw
        .post("stripe", &[("stripe-signature", signature)], &reserialised)
        .await;
    assert_problem(&answer, 400, "bad-signature");
    assert_eq!(answer.json["reason"], "no_matching_signature");

    gw.settle().await;
    assert_eq!(count(&gw.gateway, EVENTS).await, 1);
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, body);
    gw.server.shutdown().await.unwrap();
}

/// Stripe and Standard Webhooks, tolerance 300 s: now−3600 → 400; now−290 → accepted; no
/// timestamp → 400; now+600 → 400; a fresh re-signed copy of a stored event → 200 duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn freshness_of_signed_timestamps() {
    let downstream = Downstream::ok().await;
    let (_dir, gw) = gateway_at(NOW, &downstream, "").await;
    let body: &[u8] = br#"{"id":"evt_fresh","type":"customer.created"}"#;
    let stripe_at = |t: i64| vec![("stripe-signature", stripe::sign(STRIPE_SECRET, t, body))];

    let old = gw.post("stripe", &stripe_at(NOW - 3600), body).await;
    assert_problem(&old, 400, "bad-signature");
    assert_eq!(old.json["reason"], "timestamp_out_of_tolerance");
    let future = gw.post("stripe", &stripe_at(NOW + 600), body).await;
    assert_eq!(future.json["reason"], "timestamp_out_of_tolerance");
    let v1_only = stripe::sign(STRIPE_SECRET, NOW, body);
    let no_t = v1_only.split_once(',').unwrap().1.to_owned();
    let missing = gw.post("stripe", &[("stripe-signature", no_t)], body).await;
    assert_problem(&missing, 400, "bad-signature");
    assert_eq!(count(&gw.gateway, EVENTS).await, 0);

    let recent = gw.post("stripe", &stripe_at(NOW - 290), body).await;
    assert_eq!(recent.json["status"], "accepted");
    let resigned = gw.post("stripe", &stripe_at(NOW), body).await;
    assert_eq!(
        (resigned.status, resigned.json["status"].as_str()),
        (200, Some("duplicate"))
    );

    let sw_body: &[u8] = br#"{"type":"order.paid","data":{"id":"o_1"}}"#;
    let sw_at = |t: i64| {
        vec![
            ("webhook-id", "msg_fresh".to_owned()),
            ("webhook-timestamp", t.to_string()),
            (
                "webhook-signature",
                standard_webhooks::sign(SW_OLD, "msg_fresh", t, sw_body).unwrap(),
            ),
        ]
    };
    assert_problem(
        &gw.post("sw", &sw_at(NOW - 3600), sw_body).await,
        400,
        "bad-signature",
    );
    assert_problem(
        &gw.post("sw", &sw_at(NOW + 600), sw_body).await,
        400,
        "bad-signature",
    );
    let mut no_timestamp = sw_at(NOW);
    no_timestamp.remove(1);
    let missing = gw.post("sw", &no_timestamp, sw_body).await;
    assert_problem(&missing, 400, "bad-signature");
    assert_eq!(missing.json["reason"], "missing_header");
    assert_eq!(
        gw.post("sw", &sw_at(NOW - 290), sw_body).await.json["status"],
        "accepted"
    );
    assert_eq!(
        gw.post("sw", &sw_at(NOW), sw_body).await.json["status"],
        "duplicate"
    );
    assert_eq!(count(&gw.gateway, EVENTS).await, 2);
    gw.server.shutdown().await.unwrap();
}

/// Standard Webhooks: `v1,` with an empty signature is rejected; a header listing two
/// signatures (old and new secret) verifies with either secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_webhooks_signature_lists() {
    let downstream = Downstream::ok().await;
    let (_dir, gw) = gateway_at(NOW, &downstream, "").await;
    let body: &[u8] = br#"{"type":"order.paid"}"#;
    let headers = |id: &str, signature: String| {
        vec![
            ("webhook-id", id.to_owned()),
            ("webhook-timestamp", NOW.to_string()),
            ("webhook-signature", signature),
        ]
    };
    let empty = gw
        .post("sw", &headers("msg_empty", "v1,".into()), body)
        .await;
    assert_problem(&empty, 400, "bad-signature");
    assert_eq!(empty.json["reason"], "empty_signature");

    let both = format!(
        "{} {}",
        standard_webhooks::sign(SW_OLD, "msg_rotating", NOW, body).unwrap(),
        standard_webhooks::sign(SW_NEW, "msg_rotating", NOW, body).unwrap()
    );
    let old = gw
        .post("sw", &headers("msg_rotating", both.clone()), body)
        .await;
    assert_eq!(old.json["status"], "accepted", "{:?}", old.json);
    let new = gw
        .post("sw-new", &headers("msg_rotating", both), body)
        .await;
    assert_eq!(new.json["status"], "accepted", "{:?}", new.json);
    gw.server.shutdown().await.unwrap();
}

/// Unknown source 404, unreadable source name 400, oversize 413, no id or malformed JSON 400: problem+json naming the
/// problem, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_4xx() {
    let downstream = Downstream::ok().await;
    let (_dir, gw) = gateway_at(NOW, &downstream, "max_body_bytes = 1024").await;
    let sign = |body: &[u8]| vec![("stripe-signature", stripe::sign(STRIPE_SECRET, NOW, body))];

    let unknown = gw.post("nope", &[], b"{}").await;
    assert_problem(&unknown, 404, "unknown-source");
    // A source name that is not percent-encoded UTF-8 is problem+json too.
    let unreadable = gw.post("%FF", &[], b"{}").await;
    assert_problem(&unreadable, 400, "bad-path");

    let no_id: &[u8] = br#"{"type":"customer.created"}"#;
    let big = format!(r#"{{"id":"evt_big","pad":"{}"}}"#, "x".repeat(2000)).into_bytes();
    let answer = gw.post("stripe", &sign(&big), &big).await;
    assert_problem(&answer, 413, "body-too-large");

    assert_problem(
        &gw.post("stripe", &sign(no_id), no_id).await,
        400,
        "no-event-id",
    );

    let broken: &[u8] = br#"{"id":"evt_broken","#;
    assert_problem(
        &gw.post("stripe", &sign(broken), broken).await,
        400,
        "malformed-json",
    );

    // GitHub without `X-GitHub-Delivery`: the id is in no header.
    let ping: &[u8] = br#"{"zen":"Keep it logically awesome."}"#;
    let github_headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, ping)),
        ("x-github-event", "ping".to_owned()),
    ];
    let answer = gw.post("github", &github_headers, ping).await;
    assert_problem(&answer, 400, "no-event-id");
    assert_eq!(
        answer.json["detail"],
        "no event id: header `x-github-delivery` is missing"
    );

    assert_eq!(count(&gw.gateway, EVENTS).await, 0);
    gw.server.shutdown().await.unwrap();
}

/// A real GitHub payload with its delivery id: accepted, forwarded with `X-GitHub-Event`; the
/// redelivery (same `X-GitHub-Delivery`) is a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn github_push_is_forwarded_with_its_event_header() {
    let downstream = Downstream::ok().await;
    let (_dir, gw) = gateway_at(NOW, &downstream, "").await;
    let push: &[u8] = include_bytes!("../../../../testdata/github/push/payload.json");
    let headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, push)),
        ("x-github-event", "push".to_owned()),
        (
            "x-github-delivery",
            "72d3162e-cc78-11e3-81ab-4c9367dc0958".to_owned(),
        ),
        ("content-type", "application/json".to_owned()),
    ];
    assert_eq!(
        gw.post("github", &headers, push).await.json["status"],
        "accepted"
    );
    assert_eq!(
        gw.post("github", &headers, push).await.json["status"],
        "duplicate"
    );
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, push);
    assert_eq!(received[0].header("x-github-event"), Some("push"));
    assert_eq!(
        received[0].header("idempotency-key"),
        Some(r#""github:72d3162e-cc78-11e3-81ab-4c9367dc0958""#)
    );
    gw.server.shutdown().await.unwrap();
}

/// A generic source as in the issue's example (`id` from a header, entity and integer version
/// from the body) keeps entity order; a Shopify source falls back to `X-Shopify-Webhook-Id`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_and_shopify_sources() {
    use idem_http::verify::{Encoding, generic_hmac, shopify};
    capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(crate::support::system_clock()).await;
    let text = format!(
        r#"{}
[[source]]
name = "acme"
kind = "generic"
secrets_env = ["GITHUB_SECRET"]
signature_header = "X-Acme-Signature"
id = {{ header = "X-Event-Id" }}
entity = {{ json = "$.order.id" }}
entity_type = "order"
version = {{ json = "$.order.version", type = "integer" }}

[[source]]
name = "shop"
kind = "shopify"
secrets_env = ["GITHUB_SECRET"]

[[route]]
source = "acme"
destination = "app"

[[route]]
source = "shop"
destination = "app"
"#,
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let acme = |id: &str, version: i64| {
        let body = format!(r#"{{"order":{{"id":"o-7","version":{version}}}}}"#).into_bytes();
        let headers = vec![
            ("x-event-id", id.to_owned()),
            (
                "x-acme-signature",
                generic_hmac::sign(GITHUB_SECRET, Encoding::Hex, "", &body),
            ),
        ];
        (headers, body)
    };
    for (id, version) in [("a-2", 2), ("a-1", 1), ("a-3", 3)] {
        let (headers, body) = acme(id, version);
        let answer = gw.post("acme", &headers, &body).await;
        assert_eq!(answer.json["status"], "accepted", "{:?}", answer.json);
    }
    let body: &[u8] = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    let shop_headers = vec![
        ("x-shopify-hmac-sha256", shopify::sign(GITHUB_SECRET, body)),
        ("x-shopify-topic", "orders/create".to_owned()),
        (
            "x-shopify-webhook-id",
            "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043".to_owned(),
        ),
    ];
    assert_eq!(
        gw.post("shop", &shop_headers, body).await.json["status"],
        "accepted"
    );
    assert_eq!(
        gw.post("shop", &shop_headers, body).await.json["status"],
        "duplicate"
    );
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].stale, 1);
    let keys: Vec<_> = downstream
        .received()
        .iter()
        .map(|r| r.header("idempotency-key").unwrap().to_owned())
        .collect();
    let acme_keys: Vec<_> = keys.iter().filter(|k| k.starts_with("\"acme:")).collect();
    assert_eq!(acme_keys, [r#""acme:a-2""#, r#""acme:a-3""#]);
    let shop_key = r#""shop:b54557e4-bdd9-4b37-8a5f-bf7d70bcd043""#;
    assert_eq!(keys.iter().filter(|k| *k == shop_key).count(), 1);
    gw.server.shutdown().await.unwrap();
}

/// Issue 13, item 6: a Stripe event without `created`, or whose `data.object` lacks `object`,
/// is accepted and sent on the drop-stale route, with a WARN naming the event, what it lacks
/// and that it is not ordered; a whole event gets no such line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_event_that_cannot_be_ordered_is_accepted_with_a_warning() {
    let downstream = Downstream::ok().await;
    let (_dir, gw) = gateway_at(crate::support::unix_now(), &downstream, "").await;
    let no_created = br#"{"id":"evt_no_created","object":"event","type":"payment_intent.created","data":{"object":{"id":"pi_w","object":"payment_intent"}}}"#;
    let no_object = br#"{"id":"evt_no_object","object":"event","type":"payment_intent.created","created":1700000000,"data":{"object":{"id":"pi_w"}}}"#;
    let whole = crate::support::stripe_event(
        "evt_whole",
        "payment_intent.created",
        "payment_intent",
        "pi_w",
        1_700_000_000,
    );
    for body in [&no_created[..], &no_object[..], &whole] {
        assert_eq!(gw.post_stripe(body).await.json["status"], "accepted");
    }
    gw.settle().await;
    assert_eq!(downstream.received().len(), 3);
    for (event_id, missing) in [
        ("evt_no_created", "body field `$.created`"),
        ("evt_no_object", "body field `$.data.object.object`"),
    ] {
        let lines = crate::support::lines_with("WARN", &format!("event_id={event_id} "));
        assert_eq!(lines.len(), 1, "{event_id}: {lines:?}");
        assert!(
            lines[0].contains(&format!(
                "event accepted but not ordered: it lacks {missing}, which its source reads the \
                 entity and version from"
            )) && lines[0].contains("route=stripe.app"),
            "{}",
            lines[0]
        );
    }
    assert!(crate::support::lines_with("WARN", "event_id=evt_whole ").is_empty());
    gw.server.shutdown().await.unwrap();
}

/// An event type past 255 bytes (Stripe's `type`, GitHub's `X-GitHub-Event`) is answered 400
/// `bad-event-field` on every store, nothing stored; its 255-byte neighbour is accepted. MySQL
/// keeps the type in a `VARBINARY(255)` key column, and a longer one was answered 503 there,
/// which a sender retries for ever.
async fn an_event_type_past_255_bytes_is_refused<
    DB: idem_gateway::GatewayDb + idem_testkit::AppDb,
>(
    store: idem_sql::Store<DB>,
) {
    let downstream = Downstream::ok().await;
    let text = config_text(downstream.addr, r#"["5ms"]"#);
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let now = crate::support::unix_now();
    let stripe_body = |id: &str, len: usize| {
        format!(
            r#"{{"id":"{id}","type":"{}","created":{now}}}"#,
            "t".repeat(len)
        )
        .into_bytes()
    };
    let post = |body: Vec<u8>| {
        let gw = &gw;
        async move {
            let signature = stripe::sign(STRIPE_SECRET, now, &body);
            gw.post("stripe", &[("stripe-signature", signature)], &body)
                .await
        }
    };
    let answer = post(stripe_body("evt_long_type", 256)).await;
    assert_problem(&answer, 400, "bad-event-field");
    assert_eq!(
        answer.json["detail"],
        "body field `$.type` holds an event type of 256 bytes; expected an event type of at most \
         255 bytes"
    );
    let ping: &[u8] = br#"{"zen":"x"}"#;
    let github_headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, ping)),
        ("x-github-event", "e".repeat(300)),
        ("x-github-delivery", "delivery-long-type".to_owned()),
    ];
    assert_problem(
        &gw.post("github", &github_headers, ping).await,
        400,
        "bad-event-field",
    );
    assert_eq!(count(&gw.gateway, EVENTS).await, 0);

    let answer = post(stripe_body("evt_255_type", 255)).await;
    assert_eq!(answer.status, 200, "{:?}", answer.json);
    assert_eq!(count(&gw.gateway, EVENTS).await, 1);
    gw.server.shutdown().await.unwrap();
}

both_stores!(an_event_type_past_255_bytes_is_refused);
