//! Every console route but sign-in and the stylesheet answers a redirect to sign-in without a
//! session, whatever the method, and changes nothing; the routes are read from the console's
//! router source, so a route added later is checked too. With a session, the rebuild form
//! counts, then rebuilds.

use std::sync::Arc;

use axum::http::StatusCode;
use idem_gateway::Config;

use super::client::Client;
use crate::support::{
    Downstream, Running, capture_logs, config_text, env, sqlite, stripe_event, system_clock,
};

/// The console's router, as written.
const ROUTER: &str = include_str!("../../../src/http/console/mod.rs");

/// The routes the router declares: (path, methods), a path given as a literal or by the
/// constants `SIGN_IN` and `assets::STYLESHEET`.
fn declared_routes() -> Vec<(String, Vec<&'static str>)> {
    let mut routes = Vec::new();
    let mut rest = ROUTER;
    while let Some(at) = rest.find(".route(") {
        rest = &rest[at + ".route(".len()..];
        let end = rest.find(".route(").unwrap_or(rest.len());
        let call = &rest[..end];
        let path = if let Some(quoted) = call.trim_start().strip_prefix('"') {
            quoted[..quoted.find('"').unwrap()].to_owned()
        } else if call.trim_start().starts_with("SIGN_IN") {
            idem_gateway::console::SIGN_IN.to_owned()
        } else if call.trim_start().starts_with("assets::STYLESHEET") {
            "/console/assets/console.css".to_owned()
        } else {
            panic!("a route whose path this test cannot read: {call}");
        };
        let methods = [("get(", "GET"), ("post(", "POST")]
            .into_iter()
            .filter(|(call_name, _)| call.contains(call_name))
            .map(|(_, method)| method)
            .collect();
        routes.push((path, methods));
    }
    routes
}

/// What every POST of the test sends: the fields of a confirmed redrive of every dead letter,
/// of a confirmed replay (and rebuild to `app`) of every Stripe event and of a resend of
/// `evt_ok`, so that a route doing its work without a session would change what the gateway
/// stored and sent.
const FIELDS: [(&str, &str); 7] = [
    ("destination", "app"),
    ("confirm", "yes"),
    ("id", "evt_ok"),
    ("scope", "all"),
    ("source", "stripe"),
    ("since_ms", "0"),
    ("until_ms", "9999999999999"),
];

/// A gateway with a delivered event (`evt_ok`) and a dead letter (`evt_dead`, refused with a
/// 400) is asked every route, without a session and with a bogus cookie: each answers a
/// redirect to sign-in, and nothing is stored, redriven or replayed; the same POSTs with a
/// session and its token redrive and replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_without_a_session_redirects_to_sign_in() {
    capture_logs();
    let downstream = Downstream::start(Arc::new(|r| {
        if r.header("idem-event-id") == Some("evt_dead") {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let (_dir, store) = sqlite(system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    for id in ["evt_ok", "evt_dead"] {
        let body = stripe_event(id, "invoice.paid", "invoice", id, 10);
        assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    }
    let before = gw.settle().await;
    assert_eq!(
        (
            before.destinations["app"].delivered,
            before.destinations["app"].dead
        ),
        (1, 1)
    );
    let received = |id: &str| downstream.with_key(&format!("stripe:{id}")).len();
    let routes = declared_routes();
    // The router's fourteen paths, each with its methods: what the test reads must be all of
    // them.
    assert_eq!(routes.len(), 14, "{routes:?}");
    let public = ["/console/sign-in", "/console/assets/console.css"];
    let mut checked = 0;
    for (path, methods) in &routes {
        assert!(!methods.is_empty(), "{path} has no method the test knows");
        for method in methods {
            for cookie in [None, Some("idem_console=00ff00ff")] {
                let mut client = Client::new(&gw.url);
                if let Some(cookie) = cookie {
                    let (name, value) = cookie.split_once('=').unwrap();
                    client.cookies.insert(name.into(), value.into());
                }
                let answer = match *method {
                    "GET" => client.get(path).await,
                    _ => client.post(path, &FIELDS).await,
                };
                if public.contains(&path.as_str()) {
                    // Sign-in's POST without its form token is refused, not signed in.
                    let expected = if *method == "GET" { 200 } else { 403 };
                    assert_eq!(answer.status, expected, "{method} {path}: {}", answer.html);
                    continue;
                }
                assert_eq!(
                    answer.status, 303,
                    "{method} {path} ({cookie:?}): {}",
                    answer.html
                );
                assert_eq!(
                    answer.location.as_deref(),
                    Some("/console/sign-in"),
                    "{method} {path}"
                );
                checked += 1;
            }
        }
    }
    // Twelve guarded routes: overview, events, event, resend, dead letters, redrive, replay
    // (GET and POST), rebuild, consumers, consumer, configuration, sign-out: thirteen
    // method-path pairs, each without and with a bogus cookie.
    assert_eq!(checked, 26);
    // A redrive or replay made would be sent by the time nothing is pending.
    assert_eq!(gw.settle().await, before, "nothing changed");
    assert_eq!((received("evt_ok"), received("evt_dead")), (1, 1));

    // The same forms with a session and its token: they do change what a refusal left alone.
    let mut client = Client::new(&gw.url);
    let csrf = client.sign_in().await;
    let mut fields = FIELDS.to_vec();
    fields.push(("csrf", &csrf));
    let redriven = client.post("/console/dead-letters/redrive", &fields).await;
    assert_eq!(redriven.status, 200, "{}", redriven.html);
    gw.settle().await;
    assert_eq!((received("evt_ok"), received("evt_dead")), (1, 2));
    let replayed = client.post("/console/replay", &fields).await;
    assert_eq!(replayed.status, 200, "{}", replayed.html);
    gw.settle().await;
    assert_eq!((received("evt_ok"), received("evt_dead")), (2, 3));
    gw.server.shutdown().await.unwrap();
}

/// The console is off without an admin token, and with `console = false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_console_without_an_admin_token_or_when_turned_off() {
    capture_logs();
    let downstream = Downstream::ok().await;
    for prefix in ["", "admin_token_env = \"ADMIN_TOKEN\"\nconsole = false\n"] {
        let (_dir, store) = sqlite(system_clock()).await;
        let text = format!("{prefix}{}", config_text(downstream.addr, r#"["5ms"]"#));
        let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
        let mut client = Client::new(&gw.url);
        for path in ["/console", "/console/sign-in"] {
            assert_eq!(client.get(path).await.status, 404, "{prefix:?} {path}");
        }
        gw.server.shutdown().await.unwrap();
    }
}

/// Issue 33: the replay page's rebuild form counts first (a dry run, nothing sent), then,
/// confirmed, queues the rebuild: the event goes to the destination again with
/// `Idem-Replay: rebuild`. A destination no route of the source leads to is refused on the form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rebuild_form_counts_then_rebuilds() {
    capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(system_clock()).await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let body = stripe_event("evt_rb", "invoice.paid", "invoice", "in_rb", 10);
    assert_eq!(gw.post_stripe(&body).await.json["status"], "accepted");
    gw.settle().await;
    let mut client = Client::new(&gw.url);
    let csrf = client.sign_in().await;
    let page = client.get("/console/replay").await;
    assert!(page.html.contains("id=\"count-rebuild\""), "{}", page.html);

    let form = [
        ("csrf", csrf.as_str()),
        ("source", "stripe"),
        ("since", "1h"),
    ];
    let dry = client
        .post(
            "/console/rebuild",
            &[&form[..], &[("destination", "app")]].concat(),
        )
        .await;
    assert_eq!(dry.status, 200, "{}", dry.html);
    assert!(dry.html.contains("id=\"would-queue\">1<"), "{}", dry.html);
    let wrong = client
        .post(
            "/console/rebuild",
            &[&form[..], &[("destination", "nowhere")]].concat(),
        )
        .await;
    assert_eq!(wrong.status, 400);
    assert!(wrong.html.contains("no destination"), "{}", wrong.html);
    gw.settle().await;
    assert_eq!(downstream.received().len(), 1, "the dry run sent nothing");

    let confirm = [
        ("csrf", csrf.as_str()),
        ("confirm", "yes"),
        ("source", "stripe"),
        ("destination", "app"),
        ("since_ms", "0"),
        ("until_ms", "9999999999999"),
    ];
    let done = client.post("/console/rebuild", &confirm).await;
    assert_eq!(done.status, 200, "{}", done.html);
    assert!(done.html.contains("queued as a rebuild"), "{}", done.html);
    gw.settle().await;
    let last = downstream.received().pop().unwrap();
    assert_eq!(
        (last.header("idem-event-id"), last.header("idem-replay")),
        (Some("evt_rb"), Some("rebuild"))
    );
    gw.server.shutdown().await.unwrap();
}
