//! `idem serve` with `[[relay]]` sections: the binary publishes an application's outbox rows
//! and stops, naming the relay, when its database cannot be reached.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idem_sql::sqlx::Sqlite;
use idem_testkit::nats::{NATS_URL, TestStream};
use idem_testkit::outbox::{app_store, enqueue, wait_published};

use crate::support::IDEM;

/// `idem serve` whose relay database cannot be reached stops, naming it without the password
/// its URL gives in the query string (sqlx reads `password` there; `sslpassword` it only logs,
/// with its value, unless filtered).
#[test]
fn serve_names_an_unreachable_relay_database_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        format!(
            "listen = \"127.0.0.1:0\"\ndatabase_url = \"sqlite://{}/gw/idem.db\"\n\n[[relay]]\nname = \"out\"\ndatabase_url = \"postgres://postgres@127.0.0.1:5999/x?password=s3cret&sslpassword=k3y\"\ntarget = \"http\"\nurl = \"http://127.0.0.1:3000\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    // Nothing listens on port 5999.
    let output = Command::new(IDEM)
        .args(["--config", path.to_str().unwrap(), "serve"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("postgres://***@127.0.0.1:5999/x?password=***&sslpassword=***"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(!stderr.contains("k3y"), "{stderr}");
}

/// The binary: `idem serve` with a `[[relay]]` publishes a SQLite application's outbox rows to
/// NATS, then drains and exits 0 on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idem_serve_publishes_outbox_rows_to_nats() {
    let dir = tempfile::tempdir().unwrap();
    let app_url = format!("sqlite://{}", dir.path().join("app.db").display());
    let app = app_store::<Sqlite>(&app_url).await;
    let stream = TestStream::new().await;
    let subject = format!("{}.invoices", stream.subject);
    let ids: Vec<String> = (0..8).map(|n| format!("inv-{n}")).collect();
    enqueue(&app, &subject, &ids).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let path = dir.path().join("idem.toml");
    std::fs::write(
        &path,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase_url = \"sqlite://{}/gw/idem.db\"\n\n[[relay]]\nname = \"invoices\"\ndatabase_url_env = \"APP_DATABASE_URL\"\ntarget = \"nats\"\nurl = \"{NATS_URL}\"\npoll_interval = \"50ms\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let mut child = Command::new(IDEM)
        .args(["--config", path.to_str().unwrap(), "serve"])
        .env("APP_DATABASE_URL", &app_url)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let messages = stream.messages(8).await;
    let mut got: Vec<&str> = messages.iter().map(|(id, _)| id.as_str()).collect();
    got.sort_unstable();
    assert_eq!(got, ids);
    wait_published(&app, 8).await;

    let killed = Command::new("kill")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
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
    stream.delete().await;
}
