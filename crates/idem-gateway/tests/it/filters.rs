//! Route filters (CEL over `body`, `headers` and `type`): a table of expressions over the real
//! Stripe events of testdata/ against an independent reading of each payload, on both stores;
//! a filtered event is stored, its key claimed and the route recorded; a runtime error is no
//! match, counted; replay applies the filter as configured when it runs; a malformed filter is
//! refused at start with its position.

use idem_gateway::operations::ReplayRequest;
use idem_gateway::{Config, ConfigError, GatewayDb};
use idem_http::verify::github;
use idem_sql::Store;
use idem_testkit::{AppDb, Value as Bind};
use serde_json::Value;

use crate::support::{Downstream, GITHUB_SECRET, Running, env, sqlite, system_clock};

const STRIPE_EVENTS: &str = include_str!("../../../../testdata/stripe-events/events.jsonl");

/// A filter and the same rule written in Rust over the parsed payload: the expected answer.
struct Case {
    route: &'static str,
    filter: &'static str,
    expected: fn(&Value) -> bool,
}

const CASES: &[Case] = &[
    Case {
        route: "paid",
        filter: "type == 'invoice.paid'",
        expected: |e| e["type"] == "invoice.paid",
    },
    Case {
        route: "customers",
        filter: "type.startsWith('customer.')",
        expected: |e| {
            e["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("customer."))
        },
    },
    Case {
        route: "big-invoices",
        filter: "body.data.object.object == 'invoice' && body.data.object.amount_paid >= 2000",
        expected: |e| {
            e["data"]["object"]["object"] == "invoice"
                && e["data"]["object"]["amount_paid"]
                    .as_i64()
                    .is_some_and(|a| a >= 2000)
        },
    },
    Case {
        route: "changes",
        filter: "has(body.data.previous_attributes)",
        expected: |e| e["data"].get("previous_attributes").is_some(),
    },
    Case {
        route: "live",
        filter: "body.livemode",
        expected: |e| e["livemode"] == true,
    },
    // Fails on every event whose object has no `amount_due` (a runtime error: no match).
    Case {
        route: "due",
        filter: "body.data.object.amount_due > 1000",
        expected: |e| {
            e["data"]["object"]["amount_due"]
                .as_i64()
                .is_some_and(|a| a > 1000)
        },
    },
    Case {
        route: "ends",
        filter: "['charge.refunded', 'customer.subscription.deleted'].exists(t, t == type)",
        expected: |e| {
            e["type"] == "charge.refunded" || e["type"] == "customer.subscription.deleted"
        },
    },
];

/// A gateway with the stripe source and one destination and filtered route per case, plus an
/// unfiltered route `all`; every route unordered, so each taken event is one delivery.
fn config(downstream: &Downstream) -> Config {
    Config::from_toml(&config_text(downstream), &env).unwrap()
}

fn config_text(downstream: &Downstream) -> String {
    let mut text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "all"
url = "http://{}/events"
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "all"
ordering = "none"
"#,
        downstream.addr
    );
    for case in CASES {
        text.push_str(&format!(
            r#"
[[destination]]
name = "{0}"
url = "http://{1}/events"
signing_secret_env = "APP_SECRET"

[[route]]
name = "{0}"
source = "stripe"
destination = "{0}"
ordering = "none"
filter = "{2}"
"#,
            case.route,
            downstream.addr,
            case.filter.replace('"', "\\\"")
        ));
    }
    text
}

async fn deliveries_of<DB: GatewayDb + AppDb>(store: &Store<DB>, route: &str) -> i64 {
    idem_testkit::query_i64(
        store,
        "SELECT COUNT(*) FROM idem_gateway_deliveries WHERE route = $1",
        vec![Bind::Text(route.to_owned())],
    )
    .await[0]
}

async fn filter_table<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = Running::start(config(&downstream), store).await;
    let events: Vec<&str> = STRIPE_EVENTS.lines().filter(|l| !l.is_empty()).collect();
    let parsed: Vec<Value> = events
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for line in &events {
        let answer = gw.post_stripe(line.as_bytes()).await;
        assert_eq!(answer.json["status"], "accepted", "{:?}", answer.json);
    }
    gw.settle().await;
    let store = gw.gateway.store();
    assert_eq!(
        deliveries_of(store, "stripe.all").await,
        events.len() as i64
    );
    for case in CASES {
        let expected = parsed.iter().filter(|e| (case.expected)(e)).count() as i64;
        assert_eq!(
            deliveries_of(store, case.route).await,
            expected,
            "{}: {}",
            case.route,
            case.filter
        );
    }
    // The table holds matches and non-matches: no case takes every event or none.
    for case in CASES.iter().filter(|c| c.route != "live") {
        let taken = parsed.iter().filter(|e| (case.expected)(e)).count();
        assert!(0 < taken && taken < parsed.len(), "{}", case.route);
    }
    // Each event records exactly the routes that filtered it.
    for event in parsed.iter().take(20) {
        let id = event["id"].as_str().unwrap();
        let detail = gw.gateway.show_event("stripe", id).await.unwrap().unwrap();
        let expected: Vec<&str> = CASES
            .iter()
            .filter(|c| !(c.expected)(event))
            .map(|c| c.route)
            .collect();
        assert_eq!(detail.event.filtered_by, expected, "{id}");
        assert_eq!(detail.deliveries.len(), 1 + CASES.len() - expected.len());
    }
    // A resend of a filtered event is a duplicate: its key was claimed.
    let filtered = events
        .iter()
        .zip(&parsed)
        .find(|(_, e)| e["type"] != "invoice.paid")
        .unwrap();
    let answer = gw.post_stripe(filtered.0.as_bytes()).await;
    assert_eq!(answer.json["status"], "duplicate");
    gw.server.shutdown().await.unwrap();
}

both_stores!(filter_table);

/// A filter that fails on an event counts it as no match and never fails the ingest; the
/// failures and the filtered events are counted per route; a header the filter reads by name
/// is kept with the event, so replay sees it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_error_is_no_match_and_counted() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = sqlite(system_clock()).await;
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "gh-filters"
kind = "github"
secrets_env = ["GITHUB_SECRET"]

[[destination]]
name = "pushes"
url = "http://{0}/events"
signing_secret_env = "APP_SECRET"

[[destination]]
name = "refs"
url = "http://{0}/events"
signing_secret_env = "APP_SECRET"

[[route]]
name = "gh-pushes"
source = "gh-filters"
destination = "pushes"
ordering = "none"
filter = "headers['x-github-event'] == 'push' && headers['x-custom'] == 'yes'"

[[route]]
name = "gh-refs"
source = "gh-filters"
destination = "refs"
ordering = "none"
filter = "body.ref.startsWith('refs/tags/')"
"#,
        downstream.addr
    );
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let push: &[u8] = include_bytes!("../../../../testdata/github/push/payload.json");
    let ping: &[u8] = include_bytes!("../../../../testdata/github/ping/payload.json");
    let post =
        |body: &'static [u8], event: &'static str, id: &'static str, custom: &'static str| {
            let headers = vec![
                ("x-hub-signature-256", github::sign(GITHUB_SECRET, body)),
                ("x-github-event", event.to_owned()),
                ("x-github-delivery", id.to_owned()),
                ("x-custom", custom.to_owned()),
            ];
            let gw = &gw;
            async move { gw.post("gh-filters", &headers, body).await }
        };
    // push: ref "refs/tags/simple-tag", x-custom yes: both routes take it.
    assert_eq!(
        post(push, "push", "d-1", "yes").await.json["status"],
        "accepted"
    );
    // push with x-custom no: gh-pushes filters it; gh-refs takes it.
    assert_eq!(
        post(push, "push", "d-2", "no").await.json["status"],
        "accepted"
    );
    // ping has no `ref`: gh-refs fails on it (no match, counted); gh-pushes filters it.
    assert_eq!(
        post(ping, "ping", "d-3", "yes").await.json["status"],
        "accepted"
    );
    gw.settle().await;
    let store = gw.gateway.store();
    assert_eq!(deliveries_of(store, "gh-pushes").await, 1);
    assert_eq!(deliveries_of(store, "gh-refs").await, 2);
    let shown = gw
        .gateway
        .show_event("gh-filters", "d-3")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shown.event.filtered_by, ["gh-pushes", "gh-refs"]);
    let metrics = gw
        .client
        .get(format!("{}/metrics", gw.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "idem_route_filtered_total{route=\"gh-pushes\"} 2",
        "idem_route_filtered_total{route=\"gh-refs\"} 1",
        "idem_route_filter_errors_total{route=\"gh-refs\"} 1",
        // d-3 got no delivery at all.
        "idem_ingest_unrouted_total{source=\"gh-filters\"} 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "missing {line:?}");
    }
    assert_eq!(
        crate::support::lines_with("WARN", "route filter failed").len(),
        1,
        "logged once"
    );
    // Replay applies the filter on the kept headers: d-1's delivery on gh-pushes is sent
    // again (its x-custom header was kept because the filter reads it).
    let report = gw
        .gateway
        .replay(
            &ReplayRequest {
                source: "gh-filters".into(),
                since: 0,
                until: None,
                event_type: None,
                dry_run: true,
                force: false,
            },
            &|_, _| {},
        )
        .await
        .unwrap();
    assert_eq!(
        (report.matched, report.requeued, report.filtered),
        (3, 3, 0)
    );
    gw.server.shutdown().await.unwrap();
}

/// Replay applies the route's filter as configured when it runs: the same database under a
/// stricter filter sends again only what the new filter takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_applies_the_filter_configured_now() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (dir, store) = sqlite(system_clock()).await;
    let gw = Running::start(config(&downstream), store).await;
    let events: Vec<&str> = STRIPE_EVENTS.lines().filter(|l| !l.is_empty()).collect();
    for line in &events {
        gw.post_stripe(line.as_bytes()).await;
    }
    gw.settle().await;
    let url = format!(
        "sqlite://{}",
        dir.as_ref().unwrap().path().join("idem.db").display()
    );
    let Running {
        gateway, server, ..
    } = gw;
    server.shutdown().await.unwrap();
    drop(gateway);
    // The `customers` route now takes only customer.created.
    let text = config_text(&downstream)
        .replace("type.startsWith('customer.')", "type == 'customer.created'");
    let store = idem_sql::SqliteStore::connect(&url).await.unwrap();
    let gw = Running::start(Config::from_toml(&text, &env).unwrap(), store).await;
    let report = gw
        .gateway
        .replay(
            &ReplayRequest {
                source: "stripe".into(),
                since: 0,
                until: None,
                event_type: Some("customer.*".into()),
                dry_run: true,
                force: false,
            },
            &|_, _| {},
        )
        .await
        .unwrap();
    let parsed: Vec<Value> = events
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let customers = parsed
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("customer."))
        .count() as u64;
    let created = parsed
        .iter()
        .filter(|e| e["type"] == "customer.created")
        .count() as u64;
    // Only the `customers` route's filter changed: of its deliveries (one per customer.*
    // event), those of events other than customer.created are not taken now.
    assert!(created > 0 && created < customers);
    assert_eq!(report.filtered, customers - created);
    assert_eq!(report.requeued, report.matched - report.filtered);
    gw.server.shutdown().await.unwrap();
    drop(dir);
}

/// A malformed filter, or one reading a name other than body, headers and type, is refused
/// when the configuration is read, naming the route and the position.
#[test]
fn a_bad_filter_is_refused_at_start_with_its_position() {
    let text = |filter: &str| {
        format!(
            r#"
[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://127.0.0.1:9/events"
signing_secret_env = "APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
filter = "{filter}"
"#
        )
    };
    let err = Config::from_toml(&text("body.amount >= "), &env).unwrap_err();
    assert!(matches!(err, ConfigError::BadFilter { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("route \"stripe.app\" filter \"body.amount >= \": line 1, column 16"),
        "{message}"
    );
    let err = Config::from_toml(&text("bdy.amount > 1"), &env).unwrap_err();
    assert!(err.to_string().contains("unknown name \"bdy\""), "{err}");
}
