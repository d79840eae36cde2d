//! The `idem` binary: `check-config` fails closed, `serve` takes a real Stripe event and exits 0
//! on SIGTERM after draining.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idem_http::verify::stripe;

use crate::support::{Downstream, IDEM as BINARY, unix_now};

fn config(dir: &std::path::Path, port: u16, app: std::net::SocketAddr) -> std::path::PathBuf {
    let path = dir.join("idem.toml");
    let text = format!(
        r#"
listen = "127.0.0.1:{port}"
database_url = "sqlite://{}/data/idem.db"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["BIN_STRIPE_SECRET"]

[[destination]]
name = "app"
url = "http://{app}/events"
retry_schedule = ["10ms"]
signing_secret_env = "BIN_APP_SECRET"

[[route]]
source = "stripe"
destination = "app"
"#,
        dir.display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn check_config_refuses_a_missing_secret_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), 1, "127.0.0.1:1".parse().unwrap());
    let output = Command::new(BINARY)
        .args(["--config", path.to_str().unwrap(), "check-config"])
        .env_remove("BIN_STRIPE_SECRET")
        .env("BIN_APP_SECRET", "whsec_aGVsbG8=")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("environment variable BIN_STRIPE_SECRET, which is not set"),
        "{stderr}"
    );
}

/// `check-config` shows each route's ordering as it is written in the file.
#[test]
fn check_config_shows_routes_as_configured() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), 1, "127.0.0.1:1".parse().unwrap());
    let output = Command::new(BINARY)
        .args(["--config", path.to_str().unwrap(), "check-config"])
        .env("BIN_STRIPE_SECRET", "whsec_bin")
        .env("BIN_APP_SECRET", "whsec_aGVsbG8=")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("  route         stripe.app: stripe -> app (ordering drop-stale)\n"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_forwards_a_real_stripe_event_and_drains_on_sigterm() {
    let downstream = Downstream::ok().await;
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = config(dir.path(), port, downstream.addr);
    let mut child = Command::new(BINARY)
        .args(["--config", path.to_str().unwrap(), "serve"])
        .env("BIN_STRIPE_SECRET", "whsec_bin")
        .env("BIN_APP_SECRET", "whsec_aGVsbG8=")
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let client = idem_testkit::http_client();
    let base = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.get(format!("{base}/readyz")).send().await.is_err() {
        assert!(Instant::now() < deadline, "idem serve did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = include_str!("../../../../testdata/stripe-events/events.jsonl");
    let body = events.lines().next().unwrap().as_bytes();
    let answer = client
        .post(format!("{base}/webhooks/stripe"))
        .header(
            "stripe-signature",
            stripe::sign("whsec_bin", unix_now(), body),
        )
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.headers()["idem-status"], "accepted");
    while downstream.received().is_empty() {
        assert!(Instant::now() < deadline, "event not forwarded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(downstream.received()[0].body, body);

    let killed = Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "idem serve exited with {status}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("idem serve did not exit after SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn idem(args: &[&str], cwd: &std::path::Path) -> (bool, String) {
    let output = Command::new(BINARY)
        .args(args)
        .current_dir(cwd)
        .env("BIN_STRIPE_SECRET", "whsec_bin")
        .env("BIN_APP_SECRET", "whsec_aGVsbG8=")
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Finding 3: a cause is printed once, not once per layer that includes it.
#[test]
fn errors_name_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, stderr) = idem(&["serve", "-c", "nope.toml"], dir.path());
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: cannot read configuration nope.toml: No such file or directory (os error 2)\n"
    );
}

/// Finding 6: admin commands on a database `idem serve` never made say so and create nothing;
/// `check-config` opens no database. Finding 7: `demo` refuses `--config`.
#[test]
fn admin_commands_on_a_database_never_served_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["events", "list"][..],
        &["dlq", "list"],
        &["gc"],
        &["replay", "--source", "stripe", "--since", "1h"],
    ] {
        let (ok, stderr) = idem(args, dir.path());
        assert!(!ok, "{args:?}");
        assert_eq!(
            stderr,
            "error: no idem gateway tables at sqlite://./idem-data/idem.db: check database_url or --config (idem serve creates them)\n",
            "{args:?}"
        );
    }
    let (ok, _) = idem(&["check-config"], dir.path());
    assert!(ok);
    let path = config(dir.path(), 1, "127.0.0.1:1".parse().unwrap());
    let (ok, stderr) = idem(&["-c", path.to_str().unwrap(), "check-config"], dir.path());
    assert!(ok, "{stderr}");
    let (ok, stderr) = idem(&["-c", path.to_str().unwrap(), "demo"], dir.path());
    assert!(!ok);
    assert!(
        stderr.starts_with("error: idem demo takes no --config"),
        "{stderr}"
    );
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["idem.toml"], "files were created");
}

/// Finding 7: typos and inverted ranges are refused, naming what is configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typos_and_inverted_ranges_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), 1, "127.0.0.1:1".parse().unwrap());
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let url = format!("sqlite://{}/data/idem.db", dir.path().display());
    let env = |var: &str| match var {
        "BIN_STRIPE_SECRET" => Some("whsec_bin".to_owned()),
        "BIN_APP_SECRET" => Some("whsec_aGVsbG8=".to_owned()),
        _ => None,
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let config = idem_gateway::Config::from_toml(&text, &env).unwrap();
    let store = idem_sql::SqliteStore::connect(&url).await.unwrap();
    idem_gateway::Gateway::new(config, store)
        .migrate()
        .await
        .unwrap();
    let c = path.to_str().unwrap();
    let (ok, stderr) = idem(
        &["-c", c, "dlq", "redrive", "--destination", "nosuch"],
        dir.path(),
    );
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: no destination \"nosuch\" is configured; configured destinations: \"app\"\n"
    );
    let (ok, stderr) = idem(
        &["-c", c, "replay", "--source", "nosuch", "--since", "1h"],
        dir.path(),
    );
    assert!(!ok);
    assert_eq!(
        stderr,
        "error: no source \"nosuch\" is configured; configured sources: \"stripe\"\n"
    );
    let (ok, stderr) = idem(
        &[
            "-c", c, "replay", "--source", "stripe", "--since", "1h", "--until", "2h",
        ],
        dir.path(),
    );
    assert!(!ok);
    assert!(
        stderr.starts_with("error: --since 1h (") && stderr.contains("is not before --until 2h ("),
        "{stderr}"
    );
    let (ok, stderr) = idem(
        &["-c", c, "replay", "--source", "stripe", "--since", "1h"],
        dir.path(),
    );
    assert!(ok, "{stderr}");
    let (ok, stderr) = idem(
        &["-c", c, "dlq", "redrive", "--destination", "app"],
        dir.path(),
    );
    assert!(ok, "{stderr}");
}

/// `idem lint …` runs the `idem-lint` found beside `idem` (as git runs its subcommands), passes
/// every argument through, and exits with its code; without one it exits 2 naming how to
/// install it.
#[test]
fn lint_runs_the_idem_lint_beside_it_with_every_argument() {
    let dir = tempfile::tempdir().unwrap();
    let idem = dir.path().join("idem");
    crate::support::install_executable(std::path::Path::new(BINARY), &idem);
    let run = |args: &[&str]| {
        Command::new(&idem)
            .args(args)
            .env("PATH", dir.path().join("nowhere"))
            .output()
            .unwrap()
    };
    let missing = run(&["lint", "src"]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("cargo install --path crates/idem-lint"),
        "{stderr}"
    );

    // A stand-in that records its arguments and exits 1, as idem-lint does on findings.
    let lint = dir.path().join("idem-lint");
    let record = dir.path().join("args");
    crate::support::install_script(
        &lint,
        &format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\nexit 1\n",
            record.display()
        ),
    );
    let found = run(&["lint", "--format", "sarif", "--help", "a b", "-x"]);
    assert_eq!(found.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        "--format\nsarif\n--help\na b\n-x\n"
    );
}
