//! Issue 15: what the senders' and verifiers' own libraries expose. The outbound
//! `Idempotency-Key` as an RFC 8941 String, unpadded Standard Webhooks secrets, Shopify's
//! unprefixed headers, RFC 3339 versions, `version_secondary`, `dedup_scope`,
//! `retention = "forever"`, and the messages of item 8.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use idem_core::{ManualClock, Timestamp};
use idem_gateway::dispatch::send::webhook_id;
use idem_gateway::operations::RedriveRequest;
use idem_gateway::{Config, GatewayDb, Retention};
use idem_http::verify::{Encoding, generic_hmac, github, shopify};
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, GITHUB_SECRET, Running, config_text, count, env};

/// The test environment plus an unpadded Standard Webhooks secret: the 32 bytes 0, 1, …, 31,
/// `whsec_` and 43 base64 characters.
fn env_with_unpadded(var: &str) -> Option<String> {
    match var {
        "UNPADDED" => Some("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8".to_owned()),
        _ => env(var),
    }
}

fn error(text: &str) -> String {
    Config::from_toml(text, &env).unwrap_err().to_string()
}

const BASE: &str = r#"
[[destination]]
name = "app"
url = "http://127.0.0.1:3000/events"
signing_secret_env = "APP_SECRET"
"#;

/// Item 2: `whsec_` and 43 characters is taken for a source and for a destination.
#[test]
fn unpadded_standard_webhooks_secrets_are_taken() {
    let text = r#"
[[source]]
name = "sw"
kind = "standard-webhooks"
secrets_env = ["UNPADDED"]

[[destination]]
name = "app"
url = "http://127.0.0.1:3000/events"
signing_secret_env = "UNPADDED"
"#;
    let config = Config::from_toml(text, &env_with_unpadded).unwrap();
    assert_eq!(config.sources[0].name.as_str(), "sw");
    assert_eq!(config.destinations[0].name.as_str(), "app");
}

/// Item 4: a version type that cannot be compared, or a `unit` where it means nothing, stops
/// the start naming the key.
#[test]
fn version_types_that_cannot_be_compared_are_refused() {
    let source = |version: &str| {
        format!(
            "{BASE}\n[[source]]\nname = \"shop\"\nkind = \"shopify\"\nsecrets_env = [\"GITHUB_SECRET\"]\nentity = {{ json = \"$.id\" }}\n{version}\n"
        )
    };
    assert_eq!(
        error(&source(
            r#"version = { json = "$.updated_at", type = "text" }"#
        )),
        "source \"shop\" version.type = \"text\" is not valid; expected \"integer\" (a dense sequence) or \"timestamp\" (RFC 3339 times, or integer Unix seconds or milliseconds with `unit`): versions are compared, and only these can be"
    );
    assert_eq!(
        error(&source(
            r#"version = { json = "$.updated_at", type = "timestamp", unit = "h" }"#
        )),
        "source \"shop\" version.unit = \"h\" is not valid; expected \"s\" (integer Unix seconds) or \"ms\" (integer Unix milliseconds)"
    );
    assert_eq!(
        error(&source(r#"version = { json = "$.v", unit = "ms" }"#)),
        "source \"shop\" version.unit = \"ms\" is not valid; expected no `unit` with type = \"integer\": `unit` says how a type = \"timestamp\" writes its times"
    );
    let on_id = source(r#"version = { json = "$.v" }"#).replace(
        "entity = {",
        "id = { header = \"X-Id\", unit = \"s\" }\nentity = {",
    );
    assert!(
        error(&on_id).starts_with("source \"shop\" id.unit = \"s\" is not valid"),
        "{}",
        error(&on_id)
    );
    assert_eq!(
        error(&source(
            r#"version_secondary = { json = "$.updated_at", type = "timestamp" }"#
        )),
        "source \"shop\" version is missing or empty; expected a version where the entity's version is read: `version_secondary` only breaks ties between equal versions, so it needs a `version`"
    );
    let ok = Config::from_toml(
        &source(
            "version = { json = \"$.updated_at\", type = \"timestamp\", unit = \"ms\" }\nversion_secondary = { header = \"X-Seq\" }",
        ),
        &env,
    );
    assert!(ok.is_ok(), "{:?}", ok.err());
}

/// Item 6: sources of one scope must read the event id alike; the default scope is the name.
#[test]
fn sources_of_one_scope_read_their_ids_alike() {
    let text = format!(
        r#"{BASE}
[[source]]
name = "github"
kind = "github"
secrets_env = ["GITHUB_SECRET"]

[[source]]
name = "github-legacy"
kind = "generic"
secrets_env = ["GITHUB_SECRET"]
signature_header = "X-Hub-Signature-256"
signature_prefix = "sha256="
dedup_scope = "github"
id = {{ json = "$.hook_id" }}
"#
    );
    assert_eq!(
        error(&text),
        "sources \"github\" and \"github-legacy\" share dedup_scope \"github\" but read the event id differently (header `x-github-delivery` and body field `$.hook_id`); sources of one scope must read it from the same place"
    );
    let same = text.replace(
        r#"id = { json = "$.hook_id" }"#,
        r#"id = { header = "X-GitHub-Delivery" }"#,
    );
    let config = Config::from_toml(&same, &env).unwrap();
    let scopes: Vec<_> = config
        .sources
        .iter()
        .map(|s| s.dedup_scope.as_str())
        .collect();
    assert_eq!(scopes, ["github", "github"]);
    let bad = same.replace("dedup_scope = \"github\"", "dedup_scope = \"git:hub\"");
    assert!(
        error(&bad).starts_with(
            "source \"github-legacy\" dedup_scope: dedup scope \"git:hub\" is not a valid name; expected 1 to 64"
        ),
        "{}",
        error(&bad)
    );
}

/// Items 7 and 8: `retention = "forever"` is taken (no horizon to check, any body_retention);
/// zero is refused as zero; a destination without `signing_secret_env` is refused naming it,
/// as the reference says it is required.
#[test]
fn retention_forever_zero_and_the_required_signing_secret() {
    let text = format!(
        "retention = \"forever\"\nbody_retention = \"400d\"\n{BASE}\n[[source]]\nname = \"shop\"\nkind = \"shopify\"\nsecrets_env = [\"GITHUB_SECRET\"]\n"
    );
    let config = Config::from_toml(&text, &env).unwrap();
    assert_eq!(config.retention, Retention::Forever);
    assert_eq!(config.retention.to_string(), "forever");
    assert_eq!(
        config.body_retention,
        Some(Duration::from_secs(400 * 86_400))
    );
    assert_eq!(
        error(&format!("retention = \"0s\"\n{BASE}")),
        "retention = \"0s\" is zero; expected a duration greater than zero (no key of the configuration means \"never\")"
    );
    let unsigned = BASE.replace("signing_secret_env = \"APP_SECRET\"\n", "");
    let message = error(&unsigned);
    assert!(
        message.contains("destination \"app\" signing_secret_env is missing or empty; expected the environment variable"),
        "{message}"
    );
}

/// The gateway for the scenarios below: the support configuration plus `extra` sources and
/// routes, a destination retried every 5 ms (`schedule`).
async fn start<DB: GatewayDb>(
    store: Store<DB>,
    downstream: &Downstream,
    schedule: &str,
    extra: &str,
) -> Running<DB> {
    let text = format!("{}\n{extra}", config_text(downstream.addr, schedule));
    Running::start(Config::from_toml(&text, &env).unwrap(), store).await
}

/// Item 1: the `Idempotency-Key` is an RFC 8941 String with `"` and `\` escaped; an id with
/// bytes outside printable ASCII is sent in its `#sha256:` form; `Idem-Event-Id` keeps the bare
/// id (percent-encoded outside visible ASCII).
async fn idempotency_key_is_an_sf_string<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = start(store, &downstream, "[]", "").await;
    for id in [r#"evt_q\"b\\c"#, "evt_\\u00e9"] {
        let body =
            format!(r#"{{"id":"{id}","object":"event","type":"customer.created","created":1}}"#);
        let answer = gw.post_stripe(body.as_bytes()).await;
        assert_eq!(answer.json["status"], "accepted", "{}", answer.json);
    }
    gw.settle().await;
    let mut seen: Vec<(String, String)> = downstream
        .received()
        .iter()
        .map(|r| {
            (
                r.header("idem-event-id").unwrap().to_owned(),
                r.header("idempotency-key").unwrap().to_owned(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            // SHA-256 of the UTF-8 of `stripe:evt_é`: `printf 'stripe:evt_\xc3\xa9' | sha256sum`.
            (
                "evt_%C3%A9".to_owned(),
                "\"#sha256:21165b32fae59ecfbf745ddffbcbf8da90dcf959950685de6056e68d723efc19\""
                    .to_owned()
            ),
            (
                r#"evt_q"b\c"#.to_owned(),
                r#""stripe:evt_q\"b\\c""#.to_owned()
            ),
        ]
    );
    gw.server.shutdown().await.unwrap();
}

/// Item 3: a Shopify delivery with only the unprefixed `shopify-*` headers is verified and
/// read; the same event sent again with `X-Shopify-*` headers and another subscription's
/// webhook id is a duplicate (the event id is the dedup key in either form).
async fn shopify_unprefixed_headers_are_read<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let extra = r#"
[[source]]
name = "shop"
kind = "shopify"
secrets_env = ["GITHUB_SECRET"]

[[route]]
source = "shop"
destination = "app"
"#;
    let gw = start(store, &downstream, "[]", extra).await;
    let body: &[u8] = br#"{"id":820982911946154508,"email":"jon@example.com"}"#;
    let signature = shopify::sign(GITHUB_SECRET, body);
    let unprefixed = vec![
        ("shopify-hmac-sha256", signature.clone()),
        ("shopify-topic", "orders/create".to_owned()),
        ("shopify-event-id", "ev-1".to_owned()),
        ("shopify-webhook-id", "wh-a".to_owned()),
    ];
    let answer = gw.post("shop", &unprefixed, body).await;
    assert_eq!(answer.json["status"], "accepted", "{}", answer.json);
    let prefixed = vec![
        ("x-shopify-hmac-sha256", signature),
        ("x-shopify-topic", "orders/create".to_owned()),
        ("x-shopify-event-id", "ev-1".to_owned()),
        ("x-shopify-webhook-id", "wh-b".to_owned()),
    ];
    assert_eq!(
        gw.post("shop", &prefixed, body).await.json["status"],
        "duplicate"
    );
    let forged = vec![
        ("shopify-hmac-sha256", shopify::sign("other", body)),
        ("shopify-event-id", "ev-2".to_owned()),
    ];
    assert_eq!(gw.post("shop", &forged, body).await.status, 400);
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].header("idempotency-key"),
        Some(r#""shop:ev-1""#)
    );
    assert_eq!(received[0].header("idem-event-type"), Some("orders/create"));
    gw.server.shutdown().await.unwrap();
}

/// The `acme` source of the RFC 3339 and tie-breaker scenarios: a generic source whose entity
/// is `$.order.id`, `version` and `version_secondary` as given.
fn acme(version: &str, secondary: &str) -> String {
    format!(
        r#"
[[source]]
name = "acme"
kind = "generic"
secrets_env = ["GITHUB_SECRET"]
signature_header = "X-Acme-Signature"
id = {{ header = "X-Event-Id" }}
entity = {{ json = "$.order.id" }}
entity_type = "order"
version = {version}
{secondary}

[[route]]
source = "acme"
destination = "app"
"#
    )
}

/// POSTs `body` to `acme` as event `id`.
async fn post_acme<DB: GatewayDb>(gw: &Running<DB>, id: &str, body: &str) -> String {
    let headers = vec![
        ("x-event-id", id.to_owned()),
        (
            "x-acme-signature",
            generic_hmac::sign(GITHUB_SECRET, Encoding::Hex, "", body.as_bytes()),
        ),
    ];
    let answer = gw.post("acme", &headers, body.as_bytes()).await;
    assert_eq!(answer.status, 200, "{id}: {}", answer.json);
    answer.json["status"].as_str().unwrap().to_owned()
}

/// The event ids the downstream received, in order.
fn received_ids(downstream: &Downstream) -> Vec<String> {
    downstream
        .received()
        .iter()
        .map(|r| r.header("idem-event-id").unwrap().to_owned())
        .collect()
}

/// Item 4: RFC 3339 `updated_at` versions (Shopify's, GitHub's) are compared to the
/// microsecond with offsets normalised: 09:06:30.400+02:00 is 100 ms before 07:06:30.500Z, so
/// stale; integers in `unit = "ms"` compare with them on one scale.
async fn rfc3339_versions_are_ordered<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let extra = acme(
        r#"{ json = "$.order.updated_at", type = "timestamp", unit = "ms" }"#,
        "",
    );
    let gw = start(store, &downstream, "[]", &extra).await;
    let order = |at: &str| format!(r#"{{"order":{{"id":"o-1","updated_at":{at}}}}}"#);
    let cases = [
        ("a", order(r#""2026-10-06T07:06:30.500Z""#), "accepted"),
        ("b", order(r#""2026-10-06T09:06:30.400+02:00""#), "accepted"),
        ("c", order(r#""2026-10-06T07:06:30.500250Z""#), "accepted"),
        // 2026-10-06T07:06:30.500Z in milliseconds: older than c by 250 µs.
        ("d", order("1791270390500"), "accepted"),
        ("e", order("1791270391000"), "accepted"),
    ];
    for (id, body, status) in &cases {
        assert_eq!(post_acme(&gw, id, body).await, *status, "{id}");
    }
    assert_eq!(
        gw.post(
            "acme",
            &[
                ("x-event-id", "f".to_owned()),
                (
                    "x-acme-signature",
                    generic_hmac::sign(
                        GITHUB_SECRET,
                        Encoding::Hex,
                        "",
                        order(r#""yesterday""#).as_bytes()
                    )
                )
            ],
            order(r#""yesterday""#).as_bytes()
        )
        .await
        .status,
        400
    );
    let stats = gw.settle().await;
    assert_eq!(received_ids(&downstream), ["a", "c", "e"]);
    assert_eq!(stats.destinations["app"].stale, 2);
    gw.server.shutdown().await.unwrap();
}

/// Item 5: two events of one object in the same second are told apart by
/// `version_secondary` (the library's tie rule): the lower one arriving second is stale, not a
/// tie; an event without the secondary value ties; a dead letter with a lower secondary value
/// than the delivered event is refused by redrive as older.
async fn version_secondary_breaks_ties<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |r| {
        if fail.load(Ordering::SeqCst) && r.header("idem-event-id") == Some("p1") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let extra = acme(
        r#"{ json = "$.order.at", type = "timestamp" }"#,
        r#"version_secondary = { json = "$.order.seq" }"#,
    );
    let gw = start(store, &downstream, "[]", &extra).await;
    let order =
        |id: &str, seq: &str| format!(r#"{{"order":{{"id":"{id}","at":1791270390{seq}}}}}"#);
    for (id, body) in [
        ("t2", order("o-1", r#","seq":2"#)),
        ("t1", order("o-1", r#","seq":1"#)),
        ("t3", order("o-1", r#","seq":3"#)),
        ("t-none", order("o-1", "")),
    ] {
        assert_eq!(post_acme(&gw, id, &body).await, "accepted", "{id}");
    }
    gw.settle().await;
    let ties: Vec<(String, Option<String>)> = downstream
        .received()
        .iter()
        .map(|r| {
            (
                r.header("idem-event-id").unwrap().to_owned(),
                r.header("idem-version-tie").map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        ties,
        [
            ("t2".to_owned(), None),
            ("t3".to_owned(), None),
            ("t-none".to_owned(), Some("true".to_owned()))
        ]
    );
    assert_eq!(
        count(
            &gw.gateway,
            "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE version_secondary = 3"
        )
        .await,
        1
    );

    // Another object: p1 (seq 1) fails and is a dead letter, p2 (seq 2, same second) is
    // delivered; redriving p1 would put the older state after the newer one.
    assert_eq!(
        post_acme(&gw, "p1", &order("o-2", r#","seq":1"#)).await,
        "accepted"
    );
    gw.settle().await;
    assert_eq!(
        post_acme(&gw, "p2", &order("o-2", r#","seq":2"#)).await,
        "accepted"
    );
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].dead, 1);
    failing.store(false, Ordering::SeqCst);
    let report = gw
        .gateway
        .redrive(&RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!((report.matched, report.redriven, report.older), (1, 0, 1));
    gw.server.shutdown().await.unwrap();
}

/// Item 6: a legacy path of the same GitHub deliveries shares the scope `github`: the second
/// copy is a duplicate, and the one request downstream carries the scope's key and the
/// scope's `webhook-id`.
async fn one_scope_two_paths_one_delivery<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let extra = r#"
[[source]]
name = "github-legacy"
kind = "github"
secrets_env = ["GITHUB_SECRET"]
dedup_scope = "github"

[[route]]
source = "github-legacy"
destination = "app"
"#;
    let gw = start(store, &downstream, "[]", extra).await;
    let body: &[u8] = br#"{"zen":"Keep it logically awesome."}"#;
    let headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, body)),
        ("x-github-event", "ping".to_owned()),
        ("x-github-delivery", "d-1".to_owned()),
    ];
    assert_eq!(
        gw.post("github-legacy", &headers, body).await.json["status"],
        "accepted"
    );
    assert_eq!(
        gw.post("github", &headers, body).await.json["status"],
        "duplicate"
    );
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].header("idempotency-key"),
        Some(r#""github:d-1""#)
    );
    assert_eq!(received[0].header("idem-source"), Some("github-legacy"));
    assert_eq!(
        received[0].header("webhook-id"),
        Some(webhook_id("github", "d-1", "app").as_str())
    );
    gw.server.shutdown().await.unwrap();
}

/// Item 7: with `retention = "forever"`, `idem gc` a year later deletes no key and no event
/// (bodies still go after body_retention), and a resend on an `ordering = "none"` route is a
/// duplicate, not a second delivery.
async fn forever<DB: GatewayDb + AppDb>(store: Store<DB>, clock: ManualClock) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "retention = \"forever\"\nbody_retention = \"1h\"\n{}",
        config_text(downstream.addr, "[]")
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body: &[u8] = br#"{"zen":"Design for failure."}"#;
    let headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, body)),
        ("x-github-event", "ping".to_owned()),
        ("x-github-delivery", "d-forever".to_owned()),
    ];
    assert_eq!(
        gw.post("github", &headers, body).await.json["status"],
        "accepted"
    );
    gw.settle().await;
    clock.advance(Duration::from_secs(365 * 86_400));
    let report = gw.gateway.gc().await.unwrap();
    assert_eq!((report.inbox_keys, report.events, report.bodies), (0, 0, 1));
    assert_eq!(
        count(&gw.gateway, "SELECT COUNT(*) FROM idem_inbox").await,
        1
    );
    assert_eq!(
        gw.post("github", &headers, body).await.json["status"],
        "duplicate"
    );
    gw.settle().await;
    assert_eq!(downstream.received().len(), 1);
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    idempotency_key_is_an_sf_string,
    shopify_unprefixed_headers_are_read,
    rfc3339_versions_are_ordered,
    version_secondary_breaks_ties,
    one_scope_two_paths_one_delivery,
);

mod keys_forever {
    use super::*;

    fn clock() -> ManualClock {
        ManualClock::new(Timestamp(crate::support::unix_now() * 1000))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let clock = clock();
        let (_dir, store) = crate::support::sqlite(Arc::new(clock.clone())).await;
        forever(store, clock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let clock = clock();
        let (_dir, store) = crate::support::postgres(Arc::new(clock.clone())).await;
        forever(store, clock).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        let clock = clock();
        let (_dir, store) = crate::support::mysql(Arc::new(clock.clone())).await;
        forever(store, clock).await;
    }
}
