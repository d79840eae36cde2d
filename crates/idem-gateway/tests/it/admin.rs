//! Dead letters and redrive, replay, retention, and the `/admin` API.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use idem_core::{ManualClock, Timestamp};
use idem_gateway::RequestError;
use idem_gateway::operations::{RedriveRequest, ReplayRequest};
use idem_gateway::{Config, GatewayDb};
use idem_http::verify::stripe;
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{
    Downstream, Running, STRIPE_SECRET, capture_logs, config_text, count, env, lines_with, sqlite,
    stripe_event,
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
    let redrive = RedriveRequest {
        destination: Some("app".into()),
        ..RedriveRequest::default()
    };
    let report = gw.gateway.redrive(&redrive).await.unwrap();
    assert_eq!((report.matched, report.redriven, report.older), (1, 1, 0));
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
    assert_eq!(delivery.state, idem_gateway::DeliveryState::Stale);
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
        event_type: None,
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

/// Issue 13, item 4: redrive keeps entity order on a drop-stale route as replay does, by the
/// same code: after `payment_intent.succeeded` was delivered, the dead-lettered older
/// `payment_intent.created` of the same object is refused (counted, not sent, still a dead
/// letter) unless forced, over the admin API and in the library.
async fn redrive_refuses_an_event_older_than_the_delivered_one<DB: GatewayDb + AppDb>(
    store: Store<DB>,
) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |r| {
        if fail.load(Ordering::SeqCst) && r.header("idem-event-id") == Some("evt_pi_created") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let created = stripe_event(
        "evt_pi_created",
        "payment_intent.created",
        "payment_intent",
        "pi_1",
        1_700_000_100,
    );
    assert_eq!(gw.post_stripe(&created).await.json["status"], "accepted");
    gw.settle().await;
    let succeeded = stripe_event(
        "evt_pi_succeeded",
        "payment_intent.succeeded",
        "payment_intent",
        "pi_1",
        1_700_000_200,
    );
    assert_eq!(gw.post_stripe(&succeeded).await.json["status"], "accepted");
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].delivered,
            stats.destinations["app"].dead
        ),
        (1, 1)
    );
    failing.store(false, Ordering::SeqCst);
    let letters = gw.gateway.dead_letters(None, 10).await.unwrap();
    assert_eq!(letters[0].event_id, "evt_pi_created");
    let id = letters[0].id;

    let answer = admin(
        &gw,
        "/admin/dlq/redrive",
        Some(&format!(r#"{{"delivery": {id}}}"#)),
        JSON,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.json);
    assert_eq!(
        answer.json,
        serde_json::json!({"matched": 1, "redriven": 0, "older": 1, "filtered": 0, "not_configured": 0})
    );
    let report = gw
        .gateway
        .redrive(&RedriveRequest::default())
        .await
        .unwrap();
    assert_eq!((report.matched, report.redriven, report.older), (1, 0, 1));
    let stats = gw.settle().await;
    assert_eq!(stats.destinations["app"].dead, 1);
    assert_eq!(downstream.with_key("stripe:evt_pi_created").len(), 2);

    let forced = format!(r#"{{"delivery": {id}, "force": true}}"#);
    let answer = admin(&gw, "/admin/dlq/redrive", Some(&forced), JSON).await;
    assert_eq!(
        answer.json,
        serde_json::json!({"matched": 1, "redriven": 1, "older": 0, "filtered": 0, "not_configured": 0})
    );
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].delivered,
            stats.destinations["app"].dead
        ),
        (2, 0)
    );
    let tries = downstream.with_key("stripe:evt_pi_created");
    assert_eq!(tries.len(), 3);
    assert_eq!(tries[2].header("idem-attempt"), Some("3"));
    gw.server.shutdown().await.unwrap();
}

both_stores!(redrive_refuses_an_event_older_than_the_delivered_one);

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

/// A gateway with `/admin` on (token `admin-token`) and one delivered Stripe event.
async fn admin_gateway() -> (
    Downstream,
    Option<tempfile::TempDir>,
    Running<idem_sql::sqlx::Sqlite>,
) {
    capture_logs();
    let downstream = Downstream::ok().await;
    let (dir, store) = sqlite(crate::support::system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event("evt_admin", "customer.created", "customer", "c", 1);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    (downstream, dir, gw)
}

/// One `/admin` answer: status, Content-Type and the JSON body.
pub(crate) struct AdminAnswer {
    pub(crate) status: u16,
    content_type: String,
    pub(crate) json: serde_json::Value,
}

impl AdminAnswer {
    /// The problem's `type` code and `detail`, after checking it is problem+json.
    pub(crate) fn problem(&self) -> (&str, &str) {
        assert_eq!(
            self.content_type, "application/problem+json",
            "{}",
            self.json
        );
        assert_eq!(self.json["status"], self.status, "{}", self.json);
        let code = self.json["type"].as_str().unwrap();
        (
            code.strip_prefix("urn:idem:problem:").unwrap(),
            self.json["detail"].as_str().unwrap(),
        )
    }
}

/// `POST path` with `body` as JSON (`content_type` `None`: no Content-Type), or `GET path`
/// when `body` is `None`, with the admin token.
pub(crate) async fn admin<DB: GatewayDb>(
    gw: &Running<DB>,
    path: &str,
    body: Option<&str>,
    content_type: Option<&str>,
) -> AdminAnswer {
    let url = format!("{}{path}", gw.url);
    let request = match body {
        Some(body) => {
            let request = gw.client.post(&url).body(body.to_owned());
            match content_type {
                Some(ct) => request.header("content-type", ct),
                None => request,
            }
        }
        None => gw.client.get(&url),
    };
    let response = request.bearer_auth("admin-token").send().await.unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = response.bytes().await.unwrap();
    let json = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{path}: not JSON ({e}): {status} {:?}",
            String::from_utf8_lossy(&bytes)
        )
    });
    AdminAnswer {
        status,
        content_type,
        json,
    }
}

pub(crate) const JSON: Option<&str> = Some("application/json");

/// A bad admin request: path, body, Content-Type; the status, problem code and texts the
/// detail must contain.
type BadInput = (
    &'static str,
    Option<&'static str>,
    Option<&'static str>,
    u16,
    &'static str,
    &'static [&'static str],
);

/// Finding 2: `POST /admin/replay` takes `since`/`until` as the command line does: a duration
/// ago, RFC 3339, or ms since the epoch (a number or a string of digits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_replay_takes_the_time_forms_of_the_cli() {
    let (_downstream, _dir, gw) = admin_gateway().await;
    let now_ms = crate::support::unix_now() * 1000;
    let hour_ago = idem_gateway::time::format_time(now_ms - 3_600_000);
    let in_range = [
        r#"{"source": "stripe", "since": "1h", "dry_run": true}"#.to_owned(),
        r#"{"source": "stripe", "since": "1h 30m", "until": "1ms", "dry_run": true}"#.to_owned(),
        format!(r#"{{"source": "stripe", "since": "{hour_ago}", "dry_run": true}}"#),
        format!(
            r#"{{"source": "stripe", "since": {}, "until": {}, "dry_run": true}}"#,
            now_ms - 60_000,
            now_ms + 60_000
        ),
        format!(
            r#"{{"source": "stripe", "since": "{}", "dry_run": true}}"#,
            now_ms - 60_000
        ),
    ];
    for body in &in_range {
        let answer = admin(&gw, "/admin/replay", Some(body), JSON).await;
        assert_eq!(answer.status, 200, "{body}: {}", answer.json);
        assert_eq!(
            (
                answer.json["matched"].as_u64(),
                answer.json["requeued"].as_u64()
            ),
            (Some(1), Some(1)),
            "{body}: {}",
            answer.json
        );
    }
    let before = r#"{"source": "stripe", "since": "3h", "until": "2h", "dry_run": true}"#;
    let answer = admin(&gw, "/admin/replay", Some(before), JSON).await;
    assert_eq!((answer.status, &answer.json["matched"]), (200, &0.into()));

    let bad = r#"{"source": "stripe", "since": "yesterday"}"#;
    let answer = admin(&gw, "/admin/replay", Some(bad), JSON).await;
    assert_eq!(answer.status, 400);
    let (code, detail) = answer.problem();
    assert_eq!(code, "bad-time");
    assert!(
        detail.starts_with("since \"yesterday\" is not a time: expected a duration ago")
            && detail.contains("RFC 3339")
            && detail.contains("milliseconds since the epoch"),
        "{detail}"
    );
    let bad = r#"{"source": "stripe", "since": "1h", "until": 1.5}"#;
    let answer = admin(&gw, "/admin/replay", Some(bad), JSON).await;
    assert_eq!(answer.status, 422);
    let (code, detail) = answer.problem();
    assert_eq!(code, "invalid-body");
    assert!(
        detail.contains("until") && detail.contains("1.5"),
        "{detail}"
    );
    gw.server.shutdown().await.unwrap();
}

/// Finding 3: malformed JSON, a wrong Content-Type, a body or query string that does not fit
/// get problem+json naming the problem and what the endpoint expects, not axum's plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_bad_input_gets_problem_json_naming_what_was_expected() {
    let (_downstream, _dir, gw) = admin_gateway().await;
    let cases: [BadInput; 9] = [
        (
            "/admin/replay",
            None,
            None,
            405,
            "method-not-allowed",
            &["GET is not served at /admin/replay", "`Allow`"],
        ),
        (
            "/admin/replay",
            Some(r#"{"source": "stripe", "since": "1h""#),
            JSON,
            400,
            "malformed-json",
            &[
                "not valid JSON",
                "EOF",
                "expected a JSON object with \"source\"",
            ],
        ),
        (
            "/admin/dlq/redrive",
            Some(""),
            JSON,
            400,
            "malformed-json",
            &[
                "not valid JSON",
                "expected a JSON object with optional \"destination\"",
            ],
        ),
        (
            "/admin/replay",
            Some(r#"{"source": "stripe", "since": "1h"}"#),
            None,
            415,
            "unsupported-media-type",
            &["Content-Type: application/json", "expected a JSON object"],
        ),
        (
            "/admin/dlq/redrive",
            Some(r#"{"destination": "app"}"#),
            Some("text/plain"),
            415,
            "unsupported-media-type",
            &["Content-Type: application/json"],
        ),
        (
            "/admin/replay",
            Some(r#"{"source": "stripe"}"#),
            JSON,
            422,
            "invalid-body",
            &["missing field `since`", "\"since\" and optional \"until\""],
        ),
        (
            "/admin/replay",
            Some(r#"{"source": "stripe", "since": "1h", "dryrun": true}"#),
            JSON,
            422,
            "invalid-body",
            &["unknown field `dryrun`", "\"dry_run\""],
        ),
        (
            "/admin/events?limit=abc",
            None,
            None,
            400,
            "bad-query",
            &["limit", "invalid digit", "`limit` (a whole number"],
        ),
        (
            "/admin/dlq?destinaton=app",
            None,
            None,
            400,
            "bad-query",
            &["unknown field `destinaton`", "optional `destination`"],
        ),
    ];
    for (path, body, content_type, status, expected_code, needles) in cases {
        let answer = admin(&gw, path, body, content_type).await;
        assert_eq!(answer.status, status, "{path} {body:?}: {}", answer.json);
        let (code, detail) = answer.problem();
        assert_eq!(code, expected_code, "{path} {body:?}");
        for needle in needles {
            assert!(detail.contains(needle), "{path} {body:?}: {detail}");
        }
    }
    // The token is checked first: without it, bad input learns nothing but 401.
    let denied = gw
        .client
        .post(format!("{}/admin/replay", gw.url))
        .body("{")
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    assert_eq!(denied.headers()["www-authenticate"], "Bearer");
    assert_eq!(denied.headers()["content-type"], idem_gateway::PROBLEM_JSON);
    gw.server.shutdown().await.unwrap();
}

/// Finding 4: redrive and replay refuse an unknown destination or source (listing the
/// configured ones) and an inverted range (showing both times), over HTTP and in the library.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_refuses_unknown_names_and_empty_ranges() {
    let (_downstream, _dir, gw) = admin_gateway().await;
    let answer = admin(
        &gw,
        "/admin/dlq/redrive",
        Some(r#"{"destination": "nosuch"}"#),
        JSON,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.problem(),
        (
            "unknown-destination",
            "no destination \"nosuch\" is configured; configured destinations: \"app\""
        )
    );
    let answer = admin(
        &gw,
        "/admin/replay",
        Some(r#"{"source": "nosuch", "since": "1h"}"#),
        JSON,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.problem(),
        (
            "unknown-source",
            "no source \"nosuch\" is configured; configured sources: \"stripe\", \"github\", \
             \"sw\", \"sw-new\""
        )
    );
    let inverted =
        r#"{"source": "stripe", "since": 1769860800000, "until": "2026-01-31T11:00:00Z"}"#;
    let answer = admin(&gw, "/admin/replay", Some(inverted), JSON).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.problem(),
        (
            "empty-range",
            "since 2026-01-31T12:00:00.000Z (1769860800000 ms) is not before until \
             2026-01-31T11:00:00.000Z (1769857200000 ms): the range is empty"
        )
    );
    let future = r#"{"source": "stripe", "since": 4102444800000}"#;
    let answer = admin(&gw, "/admin/replay", Some(future), JSON).await;
    assert_eq!(answer.status, 400);
    let (code, detail) = answer.problem();
    assert_eq!(code, "empty-range");
    assert!(
        detail.starts_with("since 2100-01-01T00:00:00.000Z"),
        "{detail}"
    );

    // The same checks in the library, before anything is changed.
    let nosuch = RedriveRequest {
        destination: Some("nosuch".into()),
        ..RedriveRequest::default()
    };
    let refused = gw.gateway.redrive(&nosuch).await.unwrap_err();
    assert!(
        matches!(
            &refused,
            idem_gateway::Error::Request(RequestError::UnknownDestination { name, known })
                if name == "nosuch" && known == &["app"]
        ),
        "{refused:?}"
    );
    let request = ReplayRequest {
        source: "stripe".into(),
        since: 2_000,
        until: Some(1_000),
        event_type: None,
        dry_run: false,
        force: false,
    };
    let refused = gw.gateway.replay(&request, &|_, _| {}).await.unwrap_err();
    assert!(
        matches!(
            refused,
            idem_gateway::Error::Request(RequestError::EmptyRange {
                since: 2_000,
                until: 1_000
            })
        ),
        "{refused:?}"
    );
    // Issue 13, item 6: an id that is no dead letter is an error naming it, not "0 redriven";
    // the delivered event's delivery is no dead letter either.
    let delivered = gw
        .gateway
        .show_event("stripe", "evt_admin")
        .await
        .unwrap()
        .unwrap()
        .deliveries[0]
        .0
        .id;
    for id in [987_654, delivered] {
        let body = format!(r#"{{"delivery": {id}}}"#);
        let answer = admin(&gw, "/admin/dlq/redrive", Some(&body), JSON).await;
        assert_eq!(answer.status, 400, "{}", answer.json);
        let expected = format!(
            "no dead letter has id {id}; `idem dlq list` (GET /admin/dlq) lists the dead letters \
             with their ids"
        );
        assert_eq!(answer.problem(), ("unknown-dead-letter", expected.as_str()));
    }
    let unknown = RedriveRequest {
        destination: Some("app".into()),
        deliveries: vec![987_654],
        ..RedriveRequest::default()
    };
    let refused = gw.gateway.redrive(&unknown).await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "no dead letter of destination \"app\" has id 987654; `idem dlq list` (GET /admin/dlq) \
         lists the dead letters with their ids"
    );
    // Valid requests still work and change nothing when there is nothing to do.
    let answer = admin(&gw, "/admin/dlq/redrive", Some("{}"), JSON).await;
    assert_eq!((answer.status, &answer.json["redriven"]), (200, &0.into()));
    gw.server.shutdown().await.unwrap();
}

/// Listing the events of a source, or the dead letters of a destination, that is not configured
/// is refused naming what is (as redrive and replay refuse it), by the library and by `/admin`
/// (400 `unknown-source`, `unknown-destination`): an empty list would say all is well.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_of_unknown_names_are_refused() {
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(crate::support::system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    match gw.gateway.list_events(Some("nope"), 10).await {
        Err(idem_gateway::Error::Request(RequestError::UnknownSource { name, known })) => {
            assert_eq!(name, "nope");
            assert_eq!(known, ["stripe", "github", "sw", "sw-new"]);
        }
        other => panic!("list_events of an unknown source: {other:?}"),
    }
    match gw.gateway.dead_letters(Some("nope"), 10).await {
        Err(idem_gateway::Error::Request(RequestError::UnknownDestination { name, known })) => {
            assert_eq!(name, "nope");
            assert_eq!(known, ["app"]);
        }
        other => panic!("dead_letters of an unknown destination: {other:?}"),
    }
    for (path, code) in [
        ("/admin/events?source=nope", "unknown-source"),
        ("/admin/dlq?destination=nope", "unknown-destination"),
    ] {
        let answer = gw
            .client
            .get(format!("{}{path}", gw.url))
            .bearer_auth("admin-token")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{path}");
        let body: serde_json::Value = serde_json::from_str(&answer.text().await.unwrap()).unwrap();
        assert_eq!(body["type"], format!("urn:idem:problem:{code}"), "{path}");
    }
    gw.server.shutdown().await.unwrap();
}

/// Issue 17: the admin API redrives the dead letters a list of ids names (all of them must be
/// dead letters, or nothing changes), counts first with `dry_run`, and replays only the events
/// of an event-type pattern.
async fn redrive_by_ids_and_replay_by_type<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |_| {
        if fail.load(Ordering::SeqCst) {
            StatusCode::BAD_GATEWAY
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    for n in 1..=3 {
        let body = stripe_event(
            &format!("evt_i{n}"),
            "invoice.paid",
            "invoice",
            &format!("in_{n}"),
            10,
        );
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    }
    assert_eq!(gw.settle().await.destinations["app"].dead, 3);
    let letters = gw.gateway.dead_letters(None, 10).await.unwrap();
    let id = |event: &str| letters.iter().find(|d| d.event_id == event).unwrap().id;
    let (first, second) = (id("evt_i1"), id("evt_i2"));

    let body = format!(r#"{{"deliveries": [{first}, {second}], "dry_run": true}}"#);
    let answer = admin(&gw, "/admin/dlq/redrive", Some(&body), JSON).await;
    assert_eq!(
        answer.json,
        serde_json::json!({"matched": 2, "redriven": 2, "older": 0, "filtered": 0, "not_configured": 0})
    );
    let body = format!(r#"{{"deliveries": [{first}, 987654]}}"#);
    let answer = admin(&gw, "/admin/dlq/redrive", Some(&body), JSON).await;
    assert_eq!(answer.status, 400, "{}", answer.json);
    assert_eq!(answer.problem().0, "unknown-dead-letter");
    assert!(answer.problem().1.contains("987654"), "{}", answer.json);
    assert_eq!(
        gw.settle().await.destinations["app"].dead,
        3,
        "nothing changed"
    );

    failing.store(false, Ordering::SeqCst);
    let body = format!(r#"{{"deliveries": [{first}, {second}]}}"#);
    let answer = admin(&gw, "/admin/dlq/redrive", Some(&body), JSON).await;
    assert_eq!(
        answer.json,
        serde_json::json!({"matched": 2, "redriven": 2, "older": 0, "filtered": 0, "not_configured": 0})
    );
    let stats = gw.settle().await;
    assert_eq!(
        (
            stats.destinations["app"].delivered,
            stats.destinations["app"].dead
        ),
        (2, 1)
    );
    assert_eq!(downstream.with_key("stripe:evt_i3").len(), 2);

    let customer = stripe_event("evt_cust", "customer.created", "customer", "cus_1", 10);
    assert_eq!(gw.post_stripe(&customer).await.json["status"], "accepted");
    gw.settle().await;
    for (pattern, matched) in [("invoice.*", 3), ("customer.created", 1), ("charge.*", 0)] {
        let body = format!(
            r#"{{"source": "stripe", "since": 0, "event_type": "{pattern}", "dry_run": true}}"#
        );
        let answer = admin(&gw, "/admin/replay", Some(&body), JSON).await;
        assert_eq!(
            answer.json["matched"], matched,
            "{pattern}: {}",
            answer.json
        );
        assert_eq!(
            answer.json["requeued"], matched,
            "{pattern}: {}",
            answer.json
        );
    }
    let body = r#"{"source": "stripe", "since": 0, "event_type": "in*voice"}"#;
    let answer = admin(&gw, "/admin/replay", Some(body), JSON).await;
    assert_eq!(answer.status, 400, "{}", answer.json);
    assert_eq!(
        answer.problem(),
        (
            "bad-event-type",
            "event type \"in*voice\" is not a pattern: expected an exact type such as \
             \"invoice.paid\" or a prefix with a single trailing * such as \"invoice.*\""
        )
    );
    gw.server.shutdown().await.unwrap();
}

both_stores!(redrive_by_ids_and_replay_by_type);

/// Issue 33: `POST /admin/replay` with `"rebuild": true` and a `destination` rebuilds it and
/// answers the report; without a destination, with `force`, or to a destination no route of the
/// source leads to it is refused, naming why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_replay_rebuilds_a_destination() {
    let (downstream, _dir, gw) = admin_gateway().await;
    let dry = r#"{"source": "stripe", "since": "1h", "rebuild": true, "destination": "app", "dry_run": true}"#;
    let answer = admin(&gw, "/admin/replay", Some(dry), JSON).await;
    assert_eq!(answer.status, 200, "{}", answer.json);
    assert_eq!(
        answer.json,
        serde_json::json!({"matched": 1, "queued": 1, "created": 0, "stale_included": 0,
            "no_body": 0, "filtered": 0, "in_progress": 0})
    );
    let cases: [(&str, u16, &str, &str); 4] = [
        (
            r#"{"source": "stripe", "since": "1h", "rebuild": true}"#,
            400,
            "bad-body",
            "a rebuild needs \"destination\"",
        ),
        (
            r#"{"source": "stripe", "since": "1h", "rebuild": true, "destination": "app", "force": true}"#,
            400,
            "bad-body",
            "\"force\" does not apply to a rebuild",
        ),
        (
            r#"{"source": "stripe", "since": "1h", "destination": "app"}"#,
            400,
            "bad-body",
            "add \"rebuild\": true",
        ),
        (
            r#"{"source": "github", "since": "1h", "rebuild": true, "destination": "nowhere"}"#,
            400,
            "unknown-destination",
            "no destination \"nowhere\"",
        ),
    ];
    for (body, status, code, text) in cases {
        let answer = admin(&gw, "/admin/replay", Some(body), JSON).await;
        assert_eq!(answer.status, status, "{body}: {}", answer.json);
        let (got, detail) = answer.problem();
        assert_eq!(got, code, "{body}");
        assert!(detail.contains(text), "{body}: {detail}");
    }
    let real = r#"{"source": "stripe", "since": "1h", "rebuild": true, "destination": "app"}"#;
    let answer = admin(&gw, "/admin/replay", Some(real), JSON).await;
    assert_eq!((answer.status, &answer.json["queued"]), (200, &1.into()));
    gw.settle().await;
    let last = downstream.received().pop().unwrap();
    assert_eq!(
        (last.header("idem-event-id"), last.header("idem-replay")),
        (Some("evt_admin"), Some("rebuild"))
    );
    assert!(
        lines_with("INFO", "operator action done")
            .iter()
            .any(|l| l.contains("action=\"rebuild\"") && l.contains("\"matched\":1,\"queued\":1,")),
        "the rebuild's audit line"
    );
    gw.server.shutdown().await.unwrap();
}
