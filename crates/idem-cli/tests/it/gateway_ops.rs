//! The gateway's operator commands (`idem events`, `idem dlq`) as an operator runs them: on a
//! database a real gateway filled (a real downstream, a dead letter, an event delivered after
//! it), with none of the configuration's secrets in the environment (issue 13, item 6), and
//! `dlq redrive` keeping entity order on the drop-stale route (item 4).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_gateway::time::parse_time;
use idem_gateway::{Config, Gateway, GatewayDb, Server};
use idem_http::verify::stripe;

use crate::support::{Downstream, IDEM, unix_now};

const STRIPE_SECRET: &str = "whsec_ops";
const APP_SECRET: &str = "whsec_aGVsbG8=";

/// Every secret the configuration names, none of which the operator commands are given.
const SECRET_VARS: [&str; 3] = ["OPS_STRIPE_SECRET", "OPS_APP_SECRET", "OPS_ADMIN_TOKEN"];

fn config_text(dir: &std::path::Path, app: std::net::SocketAddr) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
database_url = "sqlite://{}/idem.db"
poll_interval = "20ms"
admin_token_env = "OPS_ADMIN_TOKEN"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["OPS_STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://{app}/events"
retry_schedule = ["10ms"]
signing_secret_env = "OPS_APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
"#,
        dir.display()
    )
}

/// Runs `idem -c CONFIG ARGS` without any of the configuration's secrets: (exit code, stdout,
/// stderr).
fn idem(config: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(IDEM);
    command
        .arg("-c")
        .arg(config)
        .args(args)
        .env("RUST_LOG", "warn");
    for var in SECRET_VARS {
        command.env_remove(var);
    }
    let output = command.output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Waits until no delivery is pending or in flight.
async fn settle<DB: GatewayDb>(gateway: &Gateway<DB>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stats = gateway.stats().await.unwrap();
        if stats
            .destinations
            .values()
            .all(|c| c.pending + c.in_flight == 0)
        {
            return;
        }
        assert!(Instant::now() < deadline, "not settled: {stats:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn event(event_id: &str, ty: &str, created: i64) -> Vec<u8> {
    format!(
        r#"{{"id":"{event_id}","object":"event","type":"{ty}","created":{created},"data":{{"object":{{"id":"pi_ops","object":"payment_intent"}}}}}}"#
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_commands_run_without_secrets_and_redrive_keeps_entity_order() {
    let failing = Arc::new(AtomicBool::new(true));
    let fail = Arc::clone(&failing);
    let downstream = Downstream::start(Arc::new(move |r| {
        if fail.load(Ordering::SeqCst) && r.header("idem-event-id") == Some("evt_ops_created") {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), downstream.addr);
    let path = dir.path().join("idem.toml");
    std::fs::write(&path, &text).unwrap();

    // `idem serve`'s part, in process: payment_intent.created is dead-lettered, then the newer
    // payment_intent.succeeded of the same object is delivered.
    let env = |var: &str| match var {
        "OPS_STRIPE_SECRET" => Some(STRIPE_SECRET.to_owned()),
        "OPS_APP_SECRET" => Some(APP_SECRET.to_owned()),
        "OPS_ADMIN_TOKEN" => Some("admin".to_owned()),
        _ => None,
    };
    let config = Config::from_toml(&text, &env).unwrap();
    let store = idem_sql::SqliteStore::connect(&config.database_url)
        .await
        .unwrap();
    let gateway = Gateway::new(config, store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(gateway.clone(), listener).await.unwrap();
    let client = idem_testkit::http_client();
    let url = format!("http://{}/webhooks/stripe", server.local_addr());
    for (event_id, ty, created) in [
        ("evt_ops_created", "payment_intent.created", 1_700_000_100),
        (
            "evt_ops_succeeded",
            "payment_intent.succeeded",
            1_700_000_200,
        ),
    ] {
        let body = event(event_id, ty, created);
        let answer = client
            .post(&url)
            .header(
                "stripe-signature",
                stripe::sign(STRIPE_SECRET, unix_now(), &body),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200);
        settle(&gateway).await;
    }
    server.shutdown().await.unwrap();
    failing.store(false, Ordering::SeqCst);
    let dead = gateway.dead_letters(None, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    let id = dead[0].id.to_string();

    // Read-only commands, without the secrets.
    let (code, stdout, stderr) = idem(&path, &["events", "list"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("evt_ops_created") && stdout.contains("evt_ops_succeeded"),
        "{stdout}"
    );
    let (code, stdout, stderr) = idem(&path, &["dlq", "list"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("evt_ops_created"), "{stdout}");
    // `--json`: the same rows for scripts, times in RFC 3339.
    let (code, stdout, stderr) = idem(&path, &["events", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let listed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["evt_ops_succeeded", "evt_ops_created"],
        "newest first"
    );
    assert!(listed[0]["received_at"].as_str().unwrap().ends_with('Z'));
    let (code, stdout, stderr) = idem(&path, &["dlq", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let dead_json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(dead_json[0]["event_id"], "evt_ops_created");
    let (code, stdout, stderr) = idem(&path, &["destination", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let destinations: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(destinations.as_array().unwrap().len(), 1, "{stdout}");

    // `events show`: every time RFC 3339 UTC with milliseconds, as the listings show them.
    let (code, stdout, stderr) = idem(&path, &["events", "show", "stripe", "evt_ops_created"]);
    assert_eq!(code, Some(0), "{stderr}");
    let shown: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let (delivery, attempts) = (&shown["deliveries"][0][0], &shown["deliveries"][0][1]);
    // `--json` is accepted and prints the same.
    let (code, json_out, stderr) = idem(
        &path,
        &["events", "show", "stripe", "evt_ops_created", "--json"],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&json_out).unwrap(),
        shown
    );
    assert_eq!(shown["event"]["event_id"], "evt_ops_created");
    let times = [
        &shown["event"]["received_at"],
        &delivery["updated_at"],
        &delivery["next_attempt_at"],
        &attempts[0]["started_at"],
        &attempts[1]["started_at"],
    ];
    // Whole seconds: the times shown may be up to a second after it.
    let now = (unix_now() + 1) * 1000;
    for time in times {
        let text = time
            .as_str()
            .unwrap_or_else(|| panic!("{time} in {stdout}"));
        assert!(
            text.len() == 24 && text.ends_with('Z') && text.as_bytes()[10] == b'T',
            "{text}"
        );
        let ms = parse_time("shown", text, now).unwrap();
        assert!((now - 60_000..=now).contains(&ms), "{text}");
    }
    assert_eq!(attempts[0]["status"], 503);
    assert!(attempts[0]["duration_ms"].is_i64(), "{stdout}");

    // An id that is no dead letter: an error naming it, exit 1, nothing changed.
    let (code, stdout, stderr) = idem(&path, &["dlq", "redrive", "--id", "424242"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(
        stderr,
        "error: no dead letter has id 424242; `idem dlq list` (GET /admin/dlq) lists the dead \
         letters with their ids\n"
    );

    // The older event is refused while the newer one is delivered, and counted.
    let (code, stdout, stderr) = idem(&path, &["dlq", "redrive", "--id", &id]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "0 dead letters redriven; a running `idem serve` sends them now\n\
         1 refused as older than the entity's newest delivered event; use --force\n"
    );
    assert_eq!(gateway.dead_letters(None, 10).await.unwrap().len(), 1);
    // Several ids (issue 17): one that is no dead letter refuses them all; a dry run counts.
    let (code, _, stderr) = idem(&path, &["dlq", "redrive", "--id", &format!("{id},424242")]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("no dead letter has id 424242"), "{stderr}");
    let (code, stdout, stderr) = idem(
        &path,
        &[
            "dlq",
            "redrive",
            "--id",
            &id,
            "--id",
            &id,
            "--force",
            "--dry-run",
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "1 dead letters matched: 1 would be redriven (nothing changed)\n"
    );
    assert_eq!(gateway.dead_letters(None, 10).await.unwrap().len(), 1);
    let (code, stdout, stderr) = idem(&path, &["dlq", "redrive", "--id", &id, "--force"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout,
        "1 dead letters redriven; a running `idem serve` sends them now\n"
    );
    assert!(gateway.dead_letters(None, 10).await.unwrap().is_empty());

    // Replay by event type (issue 17): the redriven created event waits for a gateway (none
    // runs), the succeeded one is delivered.
    for (ty, expected) in [
        (
            "payment_intent.created",
            "1 deliveries matched: 0 would be sent again, 1 still in progress",
        ),
        (
            "payment_intent.*",
            "2 deliveries matched: 1 would be sent again, 1 still in progress",
        ),
        (
            "charge.*",
            "0 deliveries matched: 0 would be sent again, 0 still in progress",
        ),
    ] {
        let (code, stdout, stderr) = idem(
            &path,
            &[
                "replay",
                "--source",
                "stripe",
                "--since",
                "1h",
                "--type",
                ty,
                "--dry-run",
            ],
        );
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stdout.starts_with(expected), "{ty}: {stdout}");
    }

    // A rebuild (issue 33): the dry run's report as JSON counts the pending delivery, and the
    // rebuild itself is refused for it (nothing changed); --destination needs --rebuild.
    let rebuild = ["replay", "--source", "stripe", "--since", "1h", "--rebuild"];
    let dry = [
        &rebuild[..],
        &["--destination", "app", "--dry-run", "--json"],
    ]
    .concat();
    let (code, stdout, stderr) = idem(&path, &dry);
    assert_eq!(code, Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        report,
        serde_json::json!({"matched": 2, "queued": 1, "created": 0, "stale_included": 0,
            "no_body": 0, "filtered": 0, "in_progress": 1})
    );
    let (code, _, stderr) = idem(&path, &[&rebuild[..], &["--destination", "app"]].concat());
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains(
            "1 event(s) of the range are still pending or in flight to destination \"app\""
        ),
        "{stderr}"
    );
    let (code, _, _) = idem(
        &path,
        &[
            "replay",
            "--source",
            "stripe",
            "--since",
            "1h",
            "--destination",
            "app",
        ],
    );
    assert_eq!(code, Some(2), "--destination without --rebuild");

    // `idem serve` still needs every secret, and names the first one missing.
    let (code, _, stderr) = idem(&path, &["serve"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        stderr,
        "error: the admin API (admin_token_env) needs its secret in environment variable OPS_ADMIN_TOKEN, which is not set\n"
    );
}

/// Issue 16: `idem destination pause` (run without the secrets, as another process) pauses
/// the destination of a running gateway: it reads the pause from the database, and an event
/// posted then waits, unattempted, until `idem destination resume` sends it. `list` shows the
/// pause; an unknown name is refused naming the configured destinations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_pause_and_resume_reach_a_running_gateway() {
    let downstream = Downstream::ok().await;
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), downstream.addr);
    let path = dir.path().join("idem.toml");
    std::fs::write(&path, &text).unwrap();
    let env = |var: &str| match var {
        "OPS_STRIPE_SECRET" => Some(STRIPE_SECRET.to_owned()),
        "OPS_APP_SECRET" => Some(APP_SECRET.to_owned()),
        "OPS_ADMIN_TOKEN" => Some("admin".to_owned()),
        _ => None,
    };
    let config = Config::from_toml(&text, &env).unwrap();
    let store = idem_sql::SqliteStore::connect(&config.database_url)
        .await
        .unwrap();
    let gateway = Gateway::new(config, store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(gateway.clone(), listener).await.unwrap();

    let (code, stdout, stderr) = idem(&path, &["destination", "pause", "app"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("destination app paused"), "{stdout}");
    let (code, stdout, _) = idem(&path, &["destination", "pause", "app"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("destination app was already paused (since 20"),
        "{stdout}"
    );
    let (code, stdout, _) = idem(&path, &["destination", "list"]);
    assert_eq!(code, Some(0));
    let row = stdout.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with("app              paused   none"),
        "{stdout}"
    );
    let (code, _, stderr) = idem(&path, &["destination", "resume", "nowhere"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr
            .contains("no destination \"nowhere\" is configured; configured destinations: \"app\""),
        "{stderr}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gateway.destinations().await.unwrap()[0].applied {
        assert!(
            Instant::now() < deadline,
            "the gateway never read the pause"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let body = event("evt_ops_paused", "payment_intent.created", 1_700_000_100);
    let answer = idem_testkit::http_client()
        .post(format!("http://{}/webhooks/stripe", server.local_addr()))
        .header(
            "stripe-signature",
            stripe::sign(STRIPE_SECRET, unix_now(), &body),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let stats = gateway.stats().await.unwrap();
    assert_eq!(stats.destinations["app"].pending, 1, "{stats:?}");
    assert!(downstream.received().is_empty());

    let (code, stdout, stderr) = idem(&path, &["destination", "resume", "app"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("destination app resumed"), "{stdout}");
    settle(&gateway).await;
    assert_eq!(downstream.with_key("stripe:evt_ops_paused").len(), 1);
    server.shutdown().await.unwrap();
}

/// Issue 32, 2: `idem check-config --database` finds what `idem serve` refuses at start, a
/// route renamed without `renamed_from` while its old name has a dead letter and a guard row;
/// with `renamed_from` (or the old name retired) it passes. Without `--database` no database
/// is opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_database_finds_a_silent_rename() {
    let downstream = Downstream::start(Arc::new(|_| StatusCode::SERVICE_UNAVAILABLE)).await;
    let dir = tempfile::tempdir().unwrap();
    let text = config_text(dir.path(), downstream.addr);
    let env = |var: &str| match var {
        "OPS_STRIPE_SECRET" => Some(STRIPE_SECRET.to_owned()),
        "OPS_APP_SECRET" => Some(APP_SECRET.to_owned()),
        "OPS_ADMIN_TOKEN" => Some("admin".to_owned()),
        _ => None,
    };
    let config = Config::from_toml(&text, &env).unwrap();
    let store = idem_sql::SqliteStore::connect(&config.database_url)
        .await
        .unwrap();
    let gateway = Gateway::new(config, store);
    gateway.migrate().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(gateway.clone(), listener).await.unwrap();
    let body = event("evt_ops_dead", "payment_intent.created", 1_700_000_100);
    let answer = idem_testkit::http_client()
        .post(format!("http://{}/webhooks/stripe", server.local_addr()))
        .header(
            "stripe-signature",
            stripe::sign(STRIPE_SECRET, unix_now(), &body),
        )
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    settle(&gateway).await;
    assert_eq!(gateway.dead_letters(None, 10).await.unwrap().len(), 1);
    server.shutdown().await.unwrap();

    let check = |text: &str| {
        let path = dir.path().join("renamed.toml");
        std::fs::write(&path, text).unwrap();
        let output = Command::new(IDEM)
            .arg("-c")
            .arg(&path)
            .args(["check-config", "--database"])
            .env("RUST_LOG", "warn")
            .env("OPS_STRIPE_SECRET", STRIPE_SECRET)
            .env("OPS_APP_SECRET", APP_SECRET)
            .env("OPS_ADMIN_TOKEN", "admin")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let route = |extra: &str| {
        text.replace(
            "[[route]]\nsource = \"stripe\"",
            &format!("[[route]]\nname = \"stripe-payments\"\n{extra}source = \"stripe\""),
        )
    };
    let (code, stdout) = check(&route(""));
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "error: route \"stripe.app\" has 1 open deliveries (pending, in flight or dead) and 1 version-guard rows in the database but is not configured: if it was renamed, add renamed_from = \"stripe.app\""
        ),
        "{stdout}"
    );
    let (code, stdout) = check(&route("renamed_from = \"stripe.app\"\n"));
    assert_eq!(code, Some(0), "{stdout}");
    assert!(
        stdout.contains("every stored route name is configured, renamed or retired"),
        "{stdout}"
    );
    let (code, stdout) = check(&format!("retired_routes = [\"stripe.app\"]\n{}", route("")));
    assert_eq!(code, Some(0), "{stdout}");
    // check-config --database changes nothing: the old name keeps its rows until serve starts.
    assert_eq!(
        gateway.dead_letters(None, 10).await.unwrap()[0].route,
        "stripe.app"
    );
}
