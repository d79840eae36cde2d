//! Configuration reload (issue 32, item 3): the file read again applies routes, filters,
//! destinations and file secrets live, refuses by key what needs a restart, a removed source
//! and a removed destination that still has deliveries, and keeps the running configuration
//! whole when it refuses.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_core::Timestamp;
use idem_gateway::{Config, GatewayDb, ReloadError};
use idem_http::verify::Verifier;
use idem_http::verify::standard_webhooks::StandardWebhooksVerifier;
use idem_http::verify::stripe;
use idem_sql::Store;

use crate::support::{Downstream, Running, post, unix_now};

const ADMIN_TOKEN: &str = "reload-test-admin-token-0123456789abcdef";
const STRIPE_V1: &str = "whsec_reload_one";
const STRIPE_V2: &str = "whsec_reload_two";
const APP_SECRET: &str = "whsec_c2VjcmV0LWZvci10aGUtYXBw";
const APP_SECRET_V2: &str = "whsec_QWxsIHlvdXIgYmFzZSBhcmUgYmVsb25nIHRvIHVz";

/// A directory of secret files and the configuration that reads them.
struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        let files = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        files.secret("admin", ADMIN_TOKEN);
        files.secret("stripe", STRIPE_V1);
        files.secret("app", APP_SECRET);
        files
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a secret file as a mounted secret is: with a trailing newline.
    fn secret(&self, name: &str, value: &str) {
        std::fs::write(self.path(name), format!("{value}\n")).unwrap();
    }

    /// Writes `idem.toml`: source `stripe`, destination `app` at `app`, route stripe→app, then
    /// `more`; every secret from a file.
    fn write(&self, app: SocketAddr, more: &str) -> PathBuf {
        let dir = self.dir.path().display();
        let text = format!(
            r#"listen = "127.0.0.1:0"
poll_interval = "20ms"
admin_token_file = "{dir}/admin"

[[source]]
name = "stripe"
kind = "stripe"
secrets_file = ["{dir}/stripe"]

[[destination]]
name = "app"
url = "http://{app}/events"
retry_schedule = ["20ms", "20ms"]
signing_secret_file = "{dir}/app"

[[route]]
source = "stripe"
destination = "app"
ordering = "none"
{more}"#
        );
        let path = self.path("idem.toml");
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// A Stripe invoice event of `amount`, its id `evt_{n}`.
fn invoice(n: usize, amount: u64) -> Vec<u8> {
    format!(
        r#"{{"id":"evt_{n}","object":"event","type":"invoice.paid","created":{},"data":{{"object":{{"id":"in_{n}","object":"invoice","amount":{amount}}}}}}}"#,
        1_700_000_000 + n
    )
    .into_bytes()
}

async fn send(running: &Running<impl GatewayDb>, secret: &str, body: &[u8]) -> u16 {
    let signature = stripe::sign(secret, unix_now(), body);
    post(
        &running.client,
        &running.url,
        "stripe",
        &[("stripe-signature", signature)],
        body,
    )
    .await
    .status
}

/// The event ids `downstream` received, sorted.
fn ids(downstream: &Downstream) -> Vec<String> {
    let mut ids: Vec<String> = (downstream.received().iter())
        .filter_map(|r| r.header("idem-event-id").map(str::to_owned))
        .collect();
    ids.sort();
    ids
}

async fn until_received(downstream: &Downstream, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while downstream.received().len() < count {
        assert!(
            Instant::now() < deadline,
            "{} of {count} received",
            downstream.received().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn start<DB: GatewayDb>(path: &Path, store: Store<DB>) -> Running<DB> {
    let config = Config::load(path).expect("a valid configuration");
    let running = Running::start(config, store).await;
    let gateway = running.gateway.clone().with_config_file(path);
    Running { gateway, ..running }
}

fn kind(result: Result<idem_gateway::ReloadReport, ReloadError>) -> &'static str {
    match result {
        Ok(report) => panic!("applied: {report:?}"),
        Err(e) => e.kind(),
    }
}

/// A new destination with a filtered route applies to the next event; a changed `listen`, a
/// removed source and a file that is not TOML are refused by key and change nothing; the
/// admin API reloads and says when nothing changed.
async fn a_reload_applies_routes_and_destinations_and_refuses_what_needs_a_restart<
    DB: GatewayDb,
>(
    store: Store<DB>,
) {
    let (app, app2) = (Downstream::ok().await, Downstream::ok().await);
    let files = Files::new();
    let path = files.write(app.addr, "");
    let running = start(&path, store).await;
    let reload = running.server.reload_handle();
    assert_eq!(send(&running, STRIPE_V1, &invoice(1, 500)).await, 200);
    until_received(&app, 1).await;

    let second = format!(
        r#"
[[destination]]
name = "app2"
url = "http://{}/events"
signing_secret_file = "{}"

[[route]]
source = "stripe"
destination = "app2"
ordering = "none"
filter = "body.data.object.amount >= 100"
"#,
        app2.addr,
        files.path("app").display()
    );
    files.write(app.addr, &second);
    let report = reload.reload().await.expect("applied");
    assert_eq!(report.added_destinations, ["app2"]);
    assert_eq!(report.added_routes, ["stripe.app2"]);
    assert!(report.changed_routes.is_empty() && report.removed_routes.is_empty());
    assert!(report.changed_destinations.is_empty() && report.removed_destinations.is_empty());
    assert_eq!(
        (report.routes, report.generation, report.unchanged),
        (2, 1, false)
    );
    assert_eq!(running.gateway.config().destinations.len(), 2);
    // The reload registered the new destination as a consumer (issue 34).
    let options = idem_sql::ListOptions::at(running.gateway.now());
    let consumers = running.gateway.consumers(&options).await.unwrap();
    let registered = consumers.iter().find(|e| e.report.name == "app2");
    assert_eq!(
        registered.map(|e| e.report.kind),
        Some(idem_sql::ConsumerKind::GatewayDestination),
        "{consumers:?}"
    );

    assert_eq!(send(&running, STRIPE_V1, &invoice(2, 500)).await, 200);
    assert_eq!(send(&running, STRIPE_V1, &invoice(3, 5)).await, 200);
    until_received(&app, 3).await;
    until_received(&app2, 1).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ids(&app), ["evt_1", "evt_2", "evt_3"]);
    assert_eq!(ids(&app2), ["evt_2"], "the filter of the new route applies");

    // Refused by key; the running configuration stays whole.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("127.0.0.1:0", "127.0.0.1:1")).unwrap();
    let refused = reload.reload().await.unwrap_err();
    assert_eq!(refused.kind(), "needs-restart");
    assert!(
        refused.to_string().starts_with("listen changed"),
        "{refused}"
    );
    std::fs::write(
        &path,
        text.replace("name = \"stripe\"\nkind", "name = \"stripe2\"\nkind")
            .replace("source = \"stripe\"", "source = \"stripe2\""),
    )
    .unwrap();
    assert_eq!(kind(reload.reload().await), "source-removed");
    std::fs::write(&path, "[[route]\n").unwrap();
    assert_eq!(kind(reload.reload().await), "invalid-config");
    assert_eq!(running.gateway.config().destinations.len(), 2);
    assert_eq!(send(&running, STRIPE_V1, &invoice(4, 500)).await, 200);
    until_received(&app2, 2).await;

    // The admin API: the same file again changes nothing; a bad one is a 409 naming why.
    std::fs::write(&path, &text).unwrap();
    let admin = |client: &reqwest::Client| {
        client
            .post(format!("{}/admin/reload", running.url))
            .bearer_auth(ADMIN_TOKEN)
    };
    let answer = admin(&running.client).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let report: serde_json::Value = serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert_eq!(report["unchanged"], true);
    assert_eq!(
        report["generation"], 2,
        "swapped all the same: file secrets apply"
    );
    std::fs::write(&path, text.replace("127.0.0.1:0", "127.0.0.1:1")).unwrap();
    let answer = admin(&running.client).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    let problem: serde_json::Value =
        serde_json::from_slice(&answer.bytes().await.unwrap()).unwrap();
    assert!(
        problem["type"].as_str().unwrap().ends_with("needs-restart"),
        "{problem}"
    );
    running.server.shutdown().await.unwrap();
}

/// Secrets read from files are read again: after the Stripe secret and the destination's
/// signing secret are rotated and the file reloaded, an event signed with the old secret is
/// refused, one signed with the new one is accepted and forwarded signed with the new signing
/// secret (`app` is reported changed: its dispatcher was restarted).
async fn secrets_in_files_are_read_again_by_a_reload<DB: GatewayDb>(store: Store<DB>) {
    let app = Downstream::ok().await;
    let files = Files::new();
    let path = files.write(app.addr, "");
    let running = start(&path, store).await;
    assert_eq!(send(&running, STRIPE_V1, &invoice(1, 1)).await, 200);
    files.secret("stripe", STRIPE_V2);
    files.secret("app", APP_SECRET_V2);
    let report = running
        .server
        .reload_handle()
        .reload()
        .await
        .expect("applied");
    assert_eq!(report.changed_destinations, ["app"]);
    assert_eq!(send(&running, STRIPE_V1, &invoice(2, 1)).await, 400);
    assert_eq!(send(&running, STRIPE_V2, &invoice(3, 1)).await, 200);
    until_received(&app, 2).await;
    let last = app.received().pop().unwrap();
    assert_eq!(last.header("idem-event-id"), Some("evt_3"));
    let verifier = StandardWebhooksVerifier::new([APP_SECRET_V2]).unwrap();
    let verified = verifier.verify(&last.headers, &last.body, Timestamp(unix_now() * 1000));
    assert!(verified.is_ok(), "signed with the new secret: {verified:?}");

    // Only a secret file rewritten, nothing else: the reload applies it all the same.
    files.secret("stripe", STRIPE_V1);
    let report = running
        .server
        .reload_handle()
        .reload()
        .await
        .expect("applied");
    assert!(report.unchanged, "{report:?}");
    assert_eq!(send(&running, STRIPE_V2, &invoice(4, 1)).await, 400);
    assert_eq!(send(&running, STRIPE_V1, &invoice(5, 1)).await, 200);
    running.server.shutdown().await.unwrap();
}

/// A destination with a pending delivery cannot be removed (its delivery would never be
/// sent); one without deliveries can, and its dispatcher stops.
async fn a_destination_with_open_deliveries_is_not_removed<DB: GatewayDb>(store: Store<DB>) {
    let refusing = Downstream::start(Arc::new(|_| StatusCode::SERVICE_UNAVAILABLE)).await;
    let idle = Downstream::ok().await;
    let files = Files::new();
    let idle_destination = format!(
        r#"
[[destination]]
name = "idle"
url = "http://{}/events"
signing_secret_file = "{}"
"#,
        idle.addr,
        files.path("app").display()
    );
    let path = files.write(refusing.addr, &idle_destination);
    let text = std::fs::read_to_string(&path).unwrap();
    // A schedule of hours: the delivery stays pending.
    std::fs::write(&path, text.replace(r#"["20ms", "20ms"]"#, r#"["1h"]"#)).unwrap();
    let running = start(&path, store).await;
    assert_eq!(send(&running, STRIPE_V1, &invoice(1, 1)).await, 200);
    until_received(&refusing, 1).await;

    let without_app = std::fs::read_to_string(&path).unwrap().replace(
        "[[route]]\nsource = \"stripe\"\ndestination = \"app\"\nordering = \"none\"\n",
        "",
    );
    let without_app = without_app.replacen(
        &format!(
            "[[destination]]\nname = \"app\"\nurl = \"http://{}/events\"\nretry_schedule = [\"1h\"]\nsigning_secret_file = \"{}\"\n",
            refusing.addr,
            files.path("app").display()
        ),
        "",
        1,
    );
    assert!(!without_app.contains("name = \"app\""), "{without_app}");
    std::fs::write(&path, &without_app).unwrap();
    match running.server.reload_handle().reload().await {
        Err(ReloadError::OpenDeliveries { destination, open }) => {
            assert_eq!((destination.as_str(), open), ("app", 1));
        }
        other => panic!("expected open deliveries: {other:?}"),
    }
    assert_eq!(running.gateway.config().destinations.len(), 2);

    let without_idle = text
        .replace(r#"["20ms", "20ms"]"#, r#"["1h"]"#)
        .replace(&idle_destination, "");
    std::fs::write(&path, without_idle).unwrap();
    let report = running
        .server
        .reload_handle()
        .reload()
        .await
        .expect("applied");
    assert_eq!(report.removed_destinations, ["idle"]);
    let names: Vec<String> = (running.gateway.config().destinations.iter())
        .map(|d| d.name.to_string())
        .collect();
    assert_eq!(names, ["app"]);
    running.server.shutdown().await.unwrap();
}

/// A route renamed by a reload is refused (its rows move at start); a route removed while its
/// version-guard rows remain is refused unless `retired_routes` lists it, as the next start
/// would refuse it.
async fn a_reload_neither_renames_nor_strands_a_route<DB: GatewayDb>(store: Store<DB>) {
    let app = Downstream::ok().await;
    let files = Files::new();
    let path = files.write(app.addr, "");
    let drop_stale = std::fs::read_to_string(&path)
        .unwrap()
        .replace("ordering = \"none\"\n", "");
    std::fs::write(&path, &drop_stale).unwrap();
    let running = start(&path, store).await;
    let reload = running.server.reload_handle();
    assert_eq!(send(&running, STRIPE_V1, &invoice(1, 1)).await, 200);
    until_received(&app, 1).await;

    let renamed = drop_stale.replace(
        "destination = \"app\"\n",
        "destination = \"app\"\nname = \"invoices\"\nrenamed_from = \"stripe.app\"\n",
    );
    std::fs::write(&path, &renamed).unwrap();
    let refused = reload.reload().await.unwrap_err();
    assert_eq!(refused.kind(), "rename-needs-restart", "{refused}");

    let (head, _) = drop_stale.split_once("[[route]]").unwrap();
    std::fs::write(&path, head).unwrap();
    let refused = reload.reload().await.unwrap_err();
    assert_eq!(refused.kind(), "unconfigured-route", "{refused}");
    assert!(refused.to_string().contains("stripe.app"), "{refused}");
    assert_eq!(running.gateway.config().routes.len(), 1);

    let retired = head.replacen("\n", "\nretired_routes = [\"stripe.app\"]\n", 1);
    std::fs::write(&path, retired).unwrap();
    let report = reload.reload().await.expect("applied");
    assert_eq!(report.routes, 0);

    // The retired route brought back under a new name by a reload: its rows would stay behind.
    std::fs::write(&path, &renamed).unwrap();
    let refused = reload.reload().await.unwrap_err();
    assert_eq!(refused.kind(), "rename-needs-restart", "{refused}");
    running.server.shutdown().await.unwrap();
}

/// Dead letters of a destination a reload removed (its route retired) are not redriven: no
/// dispatcher would send them; they stay dead letters, counted as not configured.
async fn dead_letters_of_a_removed_destination_stay_dead<DB: GatewayDb>(store: Store<DB>) {
    let gone = Downstream::start(Arc::new(|_| StatusCode::NOT_FOUND)).await;
    let files = Files::new();
    let path = files.write(gone.addr, "");
    let text = std::fs::read_to_string(&path).unwrap();
    let running = start(&path, store).await;
    assert_eq!(send(&running, STRIPE_V1, &invoice(1, 1)).await, 200);
    until_received(&gone, 1).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while running.gateway.stats().await.unwrap().destinations["app"].dead < 1 {
        assert!(Instant::now() < deadline, "no dead letter");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (head, _) = text.split_once("[[destination]]").unwrap();
    let retired = head.replacen("\n", "\nretired_routes = [\"stripe.app\"]\n", 1);
    std::fs::write(&path, retired).unwrap();
    let report = running
        .server
        .reload_handle()
        .reload()
        .await
        .expect("applied");
    assert_eq!(report.removed_destinations, ["app"]);
    let request = idem_gateway::operations::RedriveRequest {
        destination: None,
        deliveries: Vec::new(),
        force: false,
        dry_run: false,
    };
    let redriven = running.gateway.redrive(&request).await.unwrap();
    assert_eq!(
        (redriven.matched, redriven.redriven, redriven.not_configured),
        (1, 0, 1)
    );
    running.server.shutdown().await.unwrap();
}

/// Under `--strict` a reload refuses a file with warnings (a source no route leaves), as the
/// start does; without it the same file applies.
async fn a_strict_reload_refuses_warnings<DB: GatewayDb>(store: Store<DB>) {
    let app = Downstream::ok().await;
    let files = Files::new();
    let path = files.write(app.addr, "");
    let config = Config::load(&path).expect("a valid configuration");
    let running = Running::start(config, store).await;
    let gateway = (running.gateway.clone())
        .with_config_file(&path)
        .with_strict_reload(true);
    let lonely = format!(
        "\n[[source]]\nname = \"lonely\"\nkind = \"stripe\"\nsecrets_file = [\"{}\"]\n",
        files.path("stripe").display()
    );
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.clone() + &lonely).unwrap();
    let refused = running.server.reload_handle().reload().await.unwrap_err();
    assert_eq!(refused.kind(), "warnings", "{refused}");
    assert!(refused.to_string().contains("lonely"), "{refused}");
    assert_eq!(gateway.config().sources.len(), 1);
    let answer = (running.client)
        .get(format!("{}/admin/events?limit=0", running.url))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer.status(),
        StatusCode::BAD_REQUEST,
        "limit=0 lists nothing"
    );
    running.server.shutdown().await.unwrap();
}

both_stores!(
    a_strict_reload_refuses_warnings,
    dead_letters_of_a_removed_destination_stay_dead,
    a_reload_neither_renames_nor_strands_a_route,
    a_reload_applies_routes_and_destinations_and_refuses_what_needs_a_restart,
    secrets_in_files_are_read_again_by_a_reload,
    a_destination_with_open_deliveries_is_not_removed,
);
