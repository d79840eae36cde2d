//! Unrouted is never silent (issue 32, 1): a source with no route and an `event_types` pattern
//! matching none of the sender's known types are warned about; events no route takes are
//! listed and counted; `replay --backfill` gives them deliveries once a route takes them,
//! through the version guard, once.

use idem_gateway::operations::ReplayRequest;
use idem_gateway::{Config, ConfigWarning, GatewayDb};
use idem_http::verify::github;
use idem_sql::Store;
use idem_testkit::AppDb;

use crate::support::{Downstream, GITHUB_SECRET, Running, env, stripe_event};

/// Sources `github` and `stripe`, one destination `app`; the github route takes
/// `{github_types}` and the stripe route (drop-stale) `{stripe_types}`.
fn config(downstream: &Downstream, github_types: &str, stripe_types: &str) -> Config {
    let text = format!(
        r#"
listen = "127.0.0.1:0"
poll_interval = "20ms"

[[source]]
name = "github"
kind = "github"
secrets_env = ["GITHUB_SECRET"]

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://{}/events"
retry_schedule = ["5ms"]
signing_secret_env = "APP_SECRET"

[[route]]
source = "github"
destination = "app"
ordering = "none"
event_types = {github_types}

[[route]]
source = "stripe"
destination = "app"
event_types = {stripe_types}
"#,
        downstream.addr
    );
    Config::from_toml(&text, &env).unwrap()
}

#[test]
fn a_typo_and_a_source_without_route_are_warned_about() {
    let text = r#"
[[source]]
name = "github"
kind = "github"
secrets_env = ["GITHUB_SECRET"]

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://127.0.0.1:9/events"
signing_secret_env = "APP_SECRET"

[[route]]
source = "github"
destination = "app"
event_types = ["pull-request", "push", "issue*"]
"#;
    let warnings = Config::from_toml(text, &env).unwrap().warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(matches!(
        &warnings[0],
        ConfigWarning::SourceWithoutRoute { name } if name == "stripe"
    ));
    assert!(matches!(
        &warnings[1],
        ConfigWarning::UnknownEventType { route, pattern, .. }
            if route == "github.app" && pattern == "pull-request"
    ));
    assert!(
        warnings[1]
            .to_string()
            .contains("did you mean pull_request"),
        "{}",
        warnings[1]
    );
    // Known types and prefixes are fine.
    let fixed = text.replace("pull-request", "pull_request").replace(
        "[[route]]",
        "[[route]]\nsource = \"stripe\"\ndestination = \"app\"\nevent_types = [\"invoice.*\"]\n\n[[route]]",
    );
    assert_eq!(Config::from_toml(&fixed, &env).unwrap().warnings(), []);
}

async fn post_pull_request<DB: GatewayDb>(gw: &Running<DB>, delivery: &str) -> String {
    let body: &[u8] =
        include_bytes!("../../../../testdata/github/pull_request/opened.payload.json");
    let headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, body)),
        ("x-github-event", "pull_request".to_owned()),
        ("x-github-delivery", delivery.to_owned()),
        ("content-type", "application/json".to_owned()),
    ];
    gw.post("github", &headers, body).await.json["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn all_since_epoch(source: &str, dry_run: bool) -> ReplayRequest {
    ReplayRequest {
        source: source.into(),
        since: 0,
        until: None,
        event_type: None,
        dry_run,
        force: false,
    }
}

/// The operator's story: a typo in `event_types` makes a pull_request event unrouted (accepted,
/// listed, sent nowhere; a plain replay finds nothing); once the route is fixed, a backfill
/// gives it one delivery, sent once; a second backfill creates nothing.
async fn unrouted_event_is_backfilled_once<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let typo = r#"["pull-request"]"#;
    let gw = Running::start(config(&downstream, typo, "[]"), store.clone()).await;
    assert_eq!(post_pull_request(&gw, "pr-1").await, "accepted");
    gw.settle().await;
    let unrouted = gw.gateway.list_unrouted_events(None, 10).await.unwrap();
    assert_eq!(unrouted.len(), 1);
    assert_eq!(unrouted[0].event_id, "pr-1");
    let replay = gw
        .gateway
        .replay(&all_since_epoch("github", true), &|_, _| {})
        .await
        .unwrap();
    assert_eq!(
        replay.matched, 0,
        "replay only re-sends existing deliveries"
    );
    gw.server.shutdown().await.unwrap();
    assert!(downstream.received().is_empty());

    // The route fixed: the same database under the corrected configuration.
    let fixed = r#"["pull_request"]"#;
    let gw = Running::start(config(&downstream, fixed, "[]"), store).await;
    let dry = gw
        .gateway
        .backfill(&all_since_epoch("github", true))
        .await
        .unwrap();
    assert_eq!((dry.matched, dry.events, dry.created), (1, 1, 1));
    let done = gw
        .gateway
        .backfill(&all_since_epoch("github", false))
        .await
        .unwrap();
    assert_eq!(
        (done.matched, done.events, done.created, done.stale),
        (1, 1, 1, 0)
    );
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].header("x-github-event"), Some("pull_request"));
    assert!(
        gw.gateway
            .list_unrouted_events(None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let again = gw
        .gateway
        .backfill(&all_since_epoch("github", false))
        .await
        .unwrap();
    assert_eq!((again.matched, again.covered, again.created), (1, 1, 0));
    // The sender's resend is still a duplicate.
    assert_eq!(post_pull_request(&gw, "pr-1").await, "duplicate");
    gw.settle().await;
    assert_eq!(downstream.received().len(), 1);
    gw.server.shutdown().await.unwrap();
}

/// A backfill on a drop-stale route decides through the version guard in arrival order: of one
/// entity's version 2 then version 1 (arrived out of order), version 1 is recorded stale and
/// only version 2 is sent.
async fn backfill_keeps_entity_order<DB: GatewayDb + AppDb>(store: Store<DB>) {
    let downstream = Downstream::ok().await;
    let gw = Running::start(
        config(&downstream, "[]", r#"["invoice.pald"]"#),
        store.clone(),
    )
    .await;
    let newer = stripe_event("evt_new", "invoice.paid", "invoice", "in_1", 1_700_000_200);
    let older = stripe_event("evt_old", "invoice.paid", "invoice", "in_1", 1_700_000_100);
    assert_eq!(gw.post_stripe(&newer).await.json["status"], "accepted");
    assert_eq!(gw.post_stripe(&older).await.json["status"], "accepted");
    gw.settle().await;
    gw.server.shutdown().await.unwrap();
    let gw = Running::start(config(&downstream, "[]", r#"["invoice.paid"]"#), store).await;
    let done = gw
        .gateway
        .backfill(&all_since_epoch("stripe", false))
        .await
        .unwrap();
    assert_eq!((done.matched, done.created, done.stale), (2, 2, 1));
    gw.settle().await;
    let received = downstream.received();
    assert_eq!(received.len(), 1);
    let body: serde_json::Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(body["id"], "evt_new");
    gw.server.shutdown().await.unwrap();
}

both_stores!(
    unrouted_event_is_backfilled_once,
    backfill_keeps_entity_order
);

/// A filter reading a header the stored event was kept without (no filter read it when it
/// arrived) cannot decide: the backfill says so and creates nothing, rather than calling it
/// filtered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_filter_on_a_header_never_kept_is_undecided() {
    crate::support::capture_logs();
    let downstream = Downstream::ok().await;
    let (_dir, store) = crate::support::sqlite(crate::support::system_clock()).await;
    let typo = r#"["pull-request"]"#;
    let gw = Running::start(config(&downstream, typo, "[]"), store.clone()).await;
    let body: &[u8] =
        include_bytes!("../../../../testdata/github/pull_request/opened.payload.json");
    let headers = vec![
        ("x-hub-signature-256", github::sign(GITHUB_SECRET, body)),
        ("x-github-event", "pull_request".to_owned()),
        ("x-github-delivery", "pr-tag".to_owned()),
        ("x-tag", "yes".to_owned()),
    ];
    assert_eq!(
        gw.post("github", &headers, body).await.json["status"],
        "accepted"
    );
    gw.settle().await;
    gw.server.shutdown().await.unwrap();
    // The route fixed, with a filter on a header no filter read when the event arrived.
    let filtered = format!(
        "listen = \"127.0.0.1:0\"\n[[source]]\nname = \"github\"\nkind = \"github\"\n\
         secrets_env = [\"GITHUB_SECRET\"]\n\n[[destination]]\nname = \"app\"\n\
         url = \"http://{}/events\"\nsigning_secret_env = \"APP_SECRET\"\n\n[[route]]\n\
         source = \"github\"\ndestination = \"app\"\nordering = \"none\"\n\
         filter = \"headers['x-tag'] == 'yes'\"\n",
        downstream.addr
    );
    let config = Config::from_toml(&filtered, &env).unwrap();
    let gw = Running::start(config, store).await;
    let report = gw
        .gateway
        .backfill(&all_since_epoch("github", false))
        .await
        .unwrap();
    assert_eq!(
        (
            report.matched,
            report.created,
            report.not_taken,
            report.undecided,
            report.filtered,
            report.covered
        ),
        (1, 0, 1, 1, 0, 0)
    );
    gw.server.shutdown().await.unwrap();
}
