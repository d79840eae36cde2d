//! The events list over HTTP, on the injectable clock: paging by a cursor that stays put while
//! new events arrive (no event twice, none left out, even where two events share a received
//! time across the page's end); and each filter (source, type, entity, event id, time range,
//! route and each delivery state) against a scenario that has an event in every state, with
//! the pages of those events: the version guard's decision, the attempts' timeline, and the
//! note of a body that body_retention dropped.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use idem_core::{Clock, ManualClock};
use idem_gateway::time::format_time;
use idem_gateway::{Config, GatewayDb, Stats};
use idem_sql::Store;
use idem_testkit::AppDb;
use tokio::sync::{Notify, Semaphore};

use super::client::{Client, Page, text_of};
use crate::support::{Downstream, Running, config_text, env, stripe_event};

/// POSTs a Stripe invoice event `id` signed at `clock`'s time.
async fn post_invoice<DB: GatewayDb>(gw: &Running<DB>, clock: &ManualClock, id: &str) {
    let body = stripe_event(id, "invoice.paid", "invoice", id, 10);
    let answer = gw.post_stripe_at(clock.now(), &body).await;
    assert_eq!(answer.json["status"], "accepted", "{}", answer.json);
}

/// The link of the page's "Older events", as the browser follows it.
fn next_link(page: &Page) -> Option<String> {
    let marker = "rel=\"next\" href=\"";
    let start = page.html.find(marker)? + marker.len();
    let end = page.html[start..].find('"').unwrap() + start;
    Some(page.html[start..end].replace("&amp;", "&"))
}

fn ids(range: impl DoubleEndedIterator<Item = u32>) -> Vec<String> {
    range.rev().map(|n| format!("evt_p{n:02}")).collect()
}

/// 55 events, a second apart but the 5th and 6th in the same millisecond; page 1 is the 50
/// newest. Five events arrive; the next page (page 1's cursor) is exactly the 5 oldest, and
/// the first page now starts with the new ones.
async fn the_cursor_stays_put_while_events_arrive<DB: GatewayDb>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let downstream = Downstream::ok().await;
    let text = format!(
        "admin_token_env = \"ADMIN_TOKEN\"\n{}",
        config_text(downstream.addr, r#"["5ms"]"#)
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    for n in 1..=55 {
        if n != 6 {
            clock.advance(Duration::from_secs(1));
        }
        post_invoice(&gw, &clock, &format!("evt_p{n:02}")).await;
    }
    let mut client = Client::new(&gw.url);
    client.sign_in().await;
    let first = client.get("/console/events?source=stripe").await;
    assert_eq!(first.event_ids(), ids(6..=55));
    let next = next_link(&first).expect("an older page");
    assert!(
        next.starts_with("/console/events?source=stripe&after="),
        "{next}"
    );

    for n in 56..=60 {
        clock.advance(Duration::from_secs(1));
        post_invoice(&gw, &clock, &format!("evt_p{n:02}")).await;
    }
    let second = client.get(&next).await;
    assert_eq!(second.event_ids(), ids(1..=5));
    assert_eq!(next_link(&second), None, "the last page");
    assert!(second.html.contains("Back to the newest"));
    let again = client.get("/console/events?source=stripe").await;
    assert_eq!(again.event_ids(), ids(11..=60));
    gw.server.shutdown().await.unwrap();
}

/// The application of destination `hold`: it holds every request until the test lets it go.
struct Hold {
    addr: std::net::SocketAddr,
    arrived: Arc<Notify>,
    go: Arc<Semaphore>,
}

impl Hold {
    async fn start() -> Self {
        let (arrived, go) = (Arc::new(Notify::new()), Arc::new(Semaphore::new(0)));
        let state = (Arc::clone(&arrived), Arc::clone(&go));
        let app = Router::new().route(
            "/events",
            post(move || {
                let (arrived, go) = state.clone();
                async move {
                    arrived.notify_one();
                    let _permit = go.acquire().await;
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { addr, arrived, go }
    }
}

/// Destinations: `app` (invoices and subscriptions; it refuses `evt_dead` with a 400, a dead
/// letter at once), `later` (failed charges; every first attempt fails, retried after an
/// hour), `hold` (pending charges, held), `paused` (payouts). Bodies are kept for an hour.
fn scenario_config(app: &Downstream, later: &Downstream, hold: &Hold) -> Config {
    let destination = |name: &str, addr, schedule: &str| {
        format!(
            "[[destination]]\nname = \"{name}\"\nurl = \"http://{addr}/events\"\n\
             timeout = \"30s\"\nretry_schedule = {schedule}\nsigning_secret_env = \"APP_SECRET\"\n"
        )
    };
    let route = |destination: &str, types: &str| {
        format!(
            "[[route]]\nsource = \"stripe\"\ndestination = \"{destination}\"\n\
             event_types = {types}\n"
        )
    };
    let text = [
        "admin_token_env = \"ADMIN_TOKEN\"\nlisten = \"127.0.0.1:0\"\npoll_interval = \"20ms\"\n\
         body_retention = \"1h\"\n[[source]]\nname = \"stripe\"\nkind = \"stripe\"\n\
         secrets_env = [\"STRIPE_SECRET\"]\n"
            .to_owned(),
        destination("app", app.addr, "[\"5ms\"]"),
        destination("later", later.addr, "[\"1h\"]"),
        destination("hold", hold.addr, "[\"1h\"]"),
        destination("paused", app.addr, "[\"5ms\"]"),
        route("app", "[\"invoice.*\", \"customer.subscription.*\"]"),
        route("later", "[\"charge.failed\"]"),
        route("hold", "[\"charge.pending\"]"),
        route("paused", "[\"payout.*\"]"),
    ]
    .concat();
    Config::from_toml(&text, &env).unwrap()
}

/// Waits (up to 10 s) until `done` holds for the gateway's stats.
async fn until<DB: GatewayDb>(gw: &Running<DB>, done: impl Fn(&Stats) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = gw.gateway.stats().await.unwrap();
        if done(&stats) {
            return;
        }
        assert!(Instant::now() < deadline, "not reached: {stats:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The one value `sql` reads, with `id` for `$1`.
async fn value<DB: GatewayDb + AppDb>(gw: &Running<DB>, sql: &'static str, id: &str) -> i64 {
    let binds = vec![idem_testkit::Value::Text(id.to_owned())];
    idem_testkit::query_i64(gw.gateway.store(), sql, binds).await[0]
}

/// A duration as the console writes a short one.
fn short(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{} s", ms / 1000)
    }
}

/// One event in each state, at known times; each filter shows exactly the events it selects,
/// newest first, and the events' pages say what the stored rows hold.
async fn every_filter_selects_what_the_scenario_put_there<DB: GatewayDb + AppDb>(
    store: Store<DB>,
    clock: ManualClock,
) {
    let app = Downstream::start(Arc::new(|r| {
        if r.header("idem-event-id") == Some("evt_dead") {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let later = Downstream::start(Arc::new(|r| {
        if r.header("idem-attempt") == Some("1") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let hold = Hold::start().await;
    let gw = Running::start(scenario_config(&app, &later, &hold), store).await;
    assert!(gw.gateway.pause("paused").await.unwrap().changed);
    let sub = |id: &str, created| {
        stripe_event(
            id,
            "customer.subscription.updated",
            "subscription",
            "sub_1",
            created,
        )
    };
    let events = [
        (
            "evt_early",
            stripe_event("evt_early", "invoice.created", "invoice", "in_0", 5),
        ),
        ("evt_s1", sub("evt_s1", 200)),
        ("evt_s2", sub("evt_s2", 300)),
        ("evt_s0", sub("evt_s0", 100)),
        (
            "evt_dead",
            stripe_event("evt_dead", "invoice.paid", "invoice", "in_1", 10),
        ),
        (
            "evt_retry",
            stripe_event("evt_retry", "charge.failed", "charge", "ch_1", 10),
        ),
        (
            "evt_pend",
            stripe_event("evt_pend", "payout.paid", "payout", "po_1", 10),
        ),
        // Last: the clock must not pass its claim's end, or it would be taken and sent again.
        (
            "evt_hold",
            stripe_event("evt_hold", "charge.pending", "charge", "ch_2", 10),
        ),
    ];
    // Received times: evt_early first, the others two hours later, a minute apart.
    let mut received = Vec::new();
    for (i, (id, body)) in events.iter().enumerate() {
        if i == 1 {
            clock.advance(Duration::from_secs(2 * 3600));
        } else if i > 1 {
            clock.advance(Duration::from_secs(60));
        }
        received.push(clock.now().as_millis());
        let answer = gw.post_stripe_at(clock.now(), body).await;
        assert_eq!(answer.json["status"], "accepted", "{id}: {}", answer.json);
        if *id == "evt_hold" {
            hold.arrived.notified().await;
        } else {
            // Its attempts ended before the clock moves on past their claims.
            until(&gw, |s| s.destinations.values().all(|d| d.in_flight == 0)).await;
        }
    }
    until(&gw, |s| {
        let d = |name: &str| s.destinations[name];
        (d("app").pending, d("app").in_flight, d("app").dead) == (0, 0, 1)
            && (d("later").pending, d("later").in_flight) == (1, 0)
            && d("hold").in_flight == 1
            && d("paused").pending == 1
    })
    .await;
    // Its attempt failed: it is retrying, not pending.
    let failures = "SELECT failures FROM idem_gateway_deliveries d \
                    JOIN idem_gateway_events e ON e.id = d.event WHERE e.event_id = $1";
    assert_eq!(value(&gw, failures, "evt_retry").await, 1);
    assert_eq!(gw.gateway.gc().await.unwrap().bodies, 1, "evt_early's");

    let mut client = Client::new(&gw.url);
    client.sign_in().await;
    let since_s2 = encode(&format_time(received[2]));
    let until_dead = encode(&format_time(received[4]));
    for (query, expected) in [
        (
            "",
            &[
                "evt_hold",
                "evt_pend",
                "evt_retry",
                "evt_dead",
                "evt_s0",
                "evt_s2",
                "evt_s1",
                "evt_early",
            ][..],
        ),
        ("state=pending", &["evt_pend"]),
        ("state=in_flight", &["evt_hold"]),
        ("state=retrying", &["evt_retry"]),
        ("state=delivered", &["evt_s2", "evt_s1", "evt_early"]),
        ("state=stale", &["evt_s0"]),
        ("state=dead", &["evt_dead"]),
        ("route=stripe.later", &["evt_retry"]),
        (
            "route=stripe.app&state=delivered",
            &["evt_s2", "evt_s1", "evt_early"],
        ),
        ("route=stripe.later&state=delivered", &[]),
        ("entity=subscription:sub_1", &["evt_s0", "evt_s2", "evt_s1"]),
        ("entity=sub_1", &["evt_s0", "evt_s2", "evt_s1"]),
        ("entity=invoice:sub_1", &[]),
        ("event_id=evt_hold", &["evt_hold"]),
        ("type=invoice.paid", &["evt_dead"]),
        ("type=charge.*", &["evt_hold", "evt_retry"]),
        (
            "since=1h",
            &[
                "evt_hold",
                "evt_pend",
                "evt_retry",
                "evt_dead",
                "evt_s0",
                "evt_s2",
                "evt_s1",
            ],
        ),
        ("until=1h", &["evt_early"]),
        (
            &format!("since={since_s2}&until={until_dead}"),
            &["evt_s0", "evt_s2"],
        ),
        ("source=stripe&type=charge.*&state=retrying", &["evt_retry"]),
    ] {
        let page = client.get(&format!("/console/events?{query}")).await;
        assert_eq!(page.status, 200, "{query}: {}", page.html);
        assert_eq!(page.event_ids(), expected, "{query}");
        if expected.is_empty() {
            assert!(page.html.contains("No event matches."), "{query}");
        }
    }
    for (query, problem) in [
        ("state=bogus", "\"bogus\" is not a delivery state"),
        ("route=nowhere", "no route \"nowhere\" is configured"),
        ("source=github", "no source \"github\" is configured"),
    ] {
        let page = client.get(&format!("/console/events?{query}")).await;
        assert_eq!(page.text("class=\"problem\"", "</p>"), problem, "{query}");
    }

    // The event pages: the guard's decision and the attempts as the rows hold them.
    let version = "SELECT version FROM idem_gateway_events WHERE event_id = $1";
    let decision = |page: &Page, route: &str| {
        let section =
            super::client::fragment(&page.html, &format!("data-route=\"{route}\""), "</section>");
        text_of(super::client::fragment(
            section,
            "class=\"decision\"",
            "</p>",
        ))
    };
    let s1 = client.get("/console/event?source=stripe&id=evt_s1").await;
    assert_eq!(
        decision(&s1, "stripe.app"),
        format!(
            "In order: the first event of entity subscription:sub_1 on this route, so there was \
             no stored version to compare with; version {} became the entity's version.",
            value(&gw, version, "evt_s1").await
        )
    );
    let s2 = client.get("/console/event?source=stripe&id=evt_s2").await;
    assert_eq!(
        decision(&s2, "stripe.app"),
        format!(
            "In order: version {} was newer than entity subscription:sub_1's stored version; \
             sent after the entity's earlier events on this route.",
            value(&gw, version, "evt_s2").await
        )
    );
    let attempt = |column: &'static str| match column {
        "started_at" => {
            "SELECT a.started_at FROM idem_gateway_attempts a \
                         JOIN idem_gateway_deliveries d ON d.id = a.delivery \
                         JOIN idem_gateway_events e ON e.id = d.event WHERE e.event_id = $1"
        }
        _ => {
            "SELECT a.duration_ms FROM idem_gateway_attempts a \
              JOIN idem_gateway_deliveries d ON d.id = a.delivery \
              JOIN idem_gateway_events e ON e.id = d.event WHERE e.event_id = $1"
        }
    };
    let next = "SELECT d.next_attempt_at FROM idem_gateway_deliveries d \
                JOIN idem_gateway_events e ON e.id = d.event WHERE e.event_id = $1";
    let retry = client
        .get("/console/event?source=stripe&id=evt_retry")
        .await;
    assert_eq!(
        retry.text("aria-label=\"Attempts on route stripe.later\"", "</ol>"),
        format!(
            "Attempt 1 at {}: HTTP 503 in {}, retry; next attempt {} downstream says hi",
            format_time(value(&gw, attempt("started_at"), "evt_retry").await),
            short(value(&gw, attempt("duration_ms"), "evt_retry").await),
            format_time(value(&gw, next, "evt_retry").await),
        )
    );
    assert!(
        retry.html.contains("data-state=\"retrying\""),
        "{}",
        retry.html
    );
    let dead = client.get("/console/event?source=stripe&id=evt_dead").await;
    assert_eq!(
        dead.text("aria-label=\"Attempts on route stripe.app\"", "</ol>"),
        format!(
            "Attempt 1 at {}: HTTP 400 in {}, dead downstream says hi",
            format_time(value(&gw, attempt("started_at"), "evt_dead").await),
            short(value(&gw, attempt("duration_ms"), "evt_dead").await),
        )
    );
    assert!(dead.html.contains("Redrive it from the dead letters"));
    let held = client.get("/console/event?source=stripe&id=evt_hold").await;
    let section = held.text("data-route=\"stripe.hold\"", "</section>");
    assert!(
        section.contains(&format!(
            "claim lapses {}",
            format_time(value(&gw, next, "evt_hold").await)
        )) && section.ends_with("Attempt 1: being sent, no outcome yet"),
        "{section}"
    );
    let early = client
        .get("/console/event?source=stripe&id=evt_early")
        .await;
    assert_eq!(
        early.text("id=\"body-dropped\"", "</p>"),
        "The body was dropped by body_retention: it can no longer be shown, replayed or redriven."
    );
    let kept = client.get("/console/event?source=stripe&id=evt_s1").await;
    assert!(
        kept.text("id=\"body\"", "</pre>")
            .contains("\"id\": \"evt_s1\"")
    );

    hold.go.add_permits(1);
    gw.server.shutdown().await.unwrap();
}

/// `text` percent-encoded for a query string.
fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

on_a_manual_clock!(
    the_cursor_stays_put_while_events_arrive,
    every_filter_selects_what_the_scenario_put_there
);
