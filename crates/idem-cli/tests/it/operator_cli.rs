//! The operator commands of the `idem` binary on a real application database (SQLite and
//! PostgreSQL): `idem effects list|show|resolve`, `idem outbox list|show|requeue|discard`,
//! `idem dead-letters list|show|delete`. Each state is made through idem's own APIs (an effect
//! worker whose provider declines or times out, a relay whose target refuses, a consumer's dead
//! letter), then changed with the binary and read back through the APIs.

use std::process::Command;
use std::time::Duration;

use idem_broker::{HttpPublisher, Relay};
use idem_core::EffectKey;
use idem_core::Name;
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{Backend, Store};
use idem_sql::{
    CallOutcome, DeadLetterRecord, EffectCall, EffectStatus, EffectWorker, Enqueued, MessageId,
    OutboxMessage, OutboxPolicy, OutboxStatus,
};

use idem_testkit::AppDb;

use crate::support::{IDEM, pg_database};

/// Runs `idem ARGS --database URL`: (exit success, stdout, stderr).
fn idem(url: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(IDEM)
        .args(args)
        .args(["--database", url])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `idem ARGS --database URL`: (exit code, stderr).
fn idem_exit(url: &str, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(IDEM)
        .args(args)
        .args(["--database", url])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs a command that must succeed; returns its stdout.
fn ok(url: &str, args: &[&str]) -> String {
    let (success, stdout, stderr) = idem(url, args);
    assert!(success, "idem {args:?} failed: {stderr}");
    stdout
}

/// Runs a command that must fail; returns its stderr.
fn refused(url: &str, args: &[&str]) -> String {
    let (success, stdout, stderr) = idem(url, args);
    assert!(!success, "idem {args:?} succeeded: {stdout}");
    stderr
}

async fn app<DB: Backend>(url: &str) -> Store<DB> {
    let store = Store::<DB>::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    store
}

fn key(text: &str) -> EffectKey {
    EffectKey::intent(text).unwrap()
}

/// A charge the provider declined (dead), an email whose call timed out past the key retention
/// (parked), and a refund not yet run (pending).
async fn effects_in_every_state<DB: Backend>(store: &Store<DB>) {
    let mut tx = store.begin().await.unwrap();
    let ledger = store.effects();
    let charge = Name::new("effect", "charge").unwrap();
    let email = Name::new("effect", "send_receipt").unwrap();
    let refund = Name::new("effect", "refund").unwrap();
    let enqueued = ledger
        .enqueue(
            &mut tx,
            &charge,
            &key("charge:order:50266"),
            br#"{"amount":500}"#,
        )
        .await
        .unwrap();
    assert!(matches!(enqueued, Enqueued::Created));
    let enqueued = ledger
        .enqueue(&mut tx, &email, &key("receipt:evt_C"), b"to=a@example.com")
        .await
        .unwrap();
    assert!(matches!(enqueued, Enqueued::Created));
    let enqueued = ledger
        .enqueue(&mut tx, &refund, &key("refund:order:7"), b"{}")
        .await
        .unwrap();
    assert!(matches!(enqueued, Enqueued::Created));
    tx.commit().await.unwrap();
    let worker = EffectWorker::new(store.clone(), |call: EffectCall| async move {
        if call.effect.as_str() == "charge" {
            CallOutcome::Failed {
                retryable: false,
                reason: "card declined".into(),
            }
        } else {
            CallOutcome::Unknown {
                reason: "timed out".into(),
            }
        }
    })
    .effects([charge, email])
    .key_retention(Duration::from_millis(1));
    for _ in 0..50 {
        worker.run_once().await.unwrap();
        let email = ledger.get(&key("receipt:evt_C")).await.unwrap().unwrap();
        if email.status == EffectStatus::Parked {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = |k: &'static str| {
        let ledger = ledger.clone();
        async move { ledger.get(&key(k)).await.unwrap().unwrap().status }
    };
    assert_eq!(status("charge:order:50266").await, EffectStatus::Dead);
    assert_eq!(status("receipt:evt_C").await, EffectStatus::Parked);
    assert_eq!(status("refund:order:7").await, EffectStatus::Pending);
}

async fn effects_commands<DB: Backend>(url: &str) {
    let store = app::<DB>(url).await;
    effects_in_every_state(&store).await;
    let ledger = store.effects();

    // Without --status: what waits for an operator.
    let listed = ok(url, &["effects", "list"]);
    assert!(
        listed.contains("charge:order:50266") && listed.contains("dead"),
        "{listed}"
    );
    assert!(
        listed.contains("receipt:evt_C") && listed.contains("parked"),
        "{listed}"
    );
    assert!(!listed.contains("refund:order:7"), "{listed}");
    let pending = ok(url, &["effects", "list", "--status", "pending"]);
    assert!(pending.contains("refund:order:7"), "{pending}");
    assert!(!pending.contains("charge:order:50266"), "{pending}");

    let shown: serde_json::Value =
        serde_json::from_str(&ok(url, &["effects", "show", "charge:order:50266"])).unwrap();
    assert_eq!(shown["status"], "dead");
    assert_eq!(shown["effect"], "charge");
    // --json: the list as a JSON array of what `show` prints, per status (parked and dead by
    // default); `show --json` is `show`.
    let listed: serde_json::Value =
        serde_json::from_str(&ok(url, &["effects", "list", "--json"])).unwrap();
    let rows = listed.as_array().unwrap();
    let by_key = |k: &str| rows.iter().find(|r| r["key"] == k).cloned();
    assert_eq!(rows.len(), 2, "{listed}");
    assert_eq!(by_key("receipt:evt_C").unwrap()["status"], "parked");
    let charge = by_key("charge:order:50266").unwrap();
    assert_eq!(charge["status"], "dead");
    assert_eq!(charge["effect"], "charge");
    assert_eq!(charge["request"]["amount"], 500);
    assert_eq!(charge["last_error"], "card declined");
    assert!(
        charge["updated_at"].as_str().unwrap().ends_with('Z'),
        "{charge}"
    );
    let pending: serde_json::Value = serde_json::from_str(&ok(
        url,
        &["effects", "list", "--status", "pending", "--json"],
    ))
    .unwrap();
    assert_eq!(pending.as_array().unwrap().len(), 1);
    assert_eq!(pending[0]["key"], "refund:order:7");
    let shown_json: serde_json::Value = serde_json::from_str(&ok(
        url,
        &["effects", "show", "charge:order:50266", "--json"],
    ))
    .unwrap();
    assert_eq!(shown_json, shown);
    assert_eq!(shown["request"]["amount"], 500);
    assert_eq!(shown["last_error"], "card declined");

    // --outcome is stored only with --succeeded: with --failed or --retry it would be lost,
    // so the command is refused as an argument error (exit 2) and changes nothing.
    for other in [&["--failed", "declined"][..], &["--retry"]] {
        let mut args = vec!["effects", "resolve", "charge:order:50266"];
        args.extend_from_slice(other);
        args.extend_from_slice(&["--outcome", "{}"]);
        let (code, stderr) = idem_exit(url, &args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "--outcome goes with --succeeded only: {} stores no outcome, so it would be lost",
                other[0]
            )),
            "{stderr}"
        );
    }
    assert_eq!(
        ledger
            .get(&key("charge:order:50266"))
            .await
            .unwrap()
            .unwrap()
            .status,
        EffectStatus::Dead
    );
    ok(
        url,
        &[
            "effects",
            "resolve",
            "charge:order:50266",
            "--failed",
            "declined; the customer was told",
        ],
    );
    let charge = ledger
        .get(&key("charge:order:50266"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(charge.status, EffectStatus::Failed);
    assert_eq!(
        charge.last_error.as_deref(),
        Some("declined; the customer was told")
    );

    // The provider's dashboard shows the email went out: its id becomes the outcome.
    ok(
        url,
        &[
            "effects",
            "resolve",
            "receipt:evt_C",
            "--succeeded",
            "--outcome",
            r#"{"id":"em_1"}"#,
        ],
    );
    let email = ledger.get(&key("receipt:evt_C")).await.unwrap().unwrap();
    assert_eq!(email.status, EffectStatus::Succeeded);
    // Finished effects are never attempted again: no next attempt time is shown for them; a
    // pending one shows when it runs.
    for finished in ["charge:order:50266", "receipt:evt_C"] {
        let shown: serde_json::Value =
            serde_json::from_str(&ok(url, &["effects", "show", finished])).unwrap();
        assert_eq!(shown.get("next_attempt_at"), None, "{finished}: {shown}");
    }
    let shown: serde_json::Value =
        serde_json::from_str(&ok(url, &["effects", "show", "refund:order:7"])).unwrap();
    assert!(shown["next_attempt_at"].is_string(), "{shown}");
    assert_eq!(
        email.outcome.as_deref(),
        Some(br#"{"id":"em_1"}"#.as_slice())
    );

    let stderr = refused(url, &["effects", "resolve", "nope:1", "--retry"]);
    assert!(
        stderr.contains("no effect is stored under key nope:1"),
        "{stderr}"
    );
    let stderr = refused(url, &["effects", "show", "nope:1"]);
    assert!(
        stderr.contains("no effect is stored under key nope:1"),
        "{stderr}"
    );
    let stderr = refused(url, &["effects", "resolve", "refund:order:7", "--retry"]);
    assert!(
        stderr.contains(
            "effect refund:order:7 is pending; only parked or dead effects can be resolved"
        ),
        "{stderr}"
    );
    let stderr = refused(
        url,
        &[
            "effects",
            "resolve",
            "receipt:evt_C",
            "--succeeded",
            "--outcome",
            "{bad",
        ],
    );
    assert!(stderr.contains("is not JSON"), "{stderr}");
    let stderr = refused(url, &["effects", "resolve", "receipt:evt_C"]);
    assert!(stderr.contains("--succeeded"), "{stderr}");
    let stderr = refused(
        url,
        &[
            "effects",
            "resolve",
            "receipt:evt_C",
            "--retry",
            "--failed",
            "x",
        ],
    );
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    // Nothing changed by the refused commands.
    assert_eq!(
        ledger
            .get(&key("refund:order:7"))
            .await
            .unwrap()
            .unwrap()
            .status,
        EffectStatus::Pending
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_commands_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    effects_commands::<Sqlite>(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_commands_on_postgres() {
    effects_commands::<Postgres>(&pg_database().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_commands_on_mysql() {
    effects_commands::<MySql>(&idem_testkit::mysql_database().await).await;
}

async fn outbox_commands<DB: Backend + AppDb>(url: &str) {
    let store = app::<DB>(url).await;
    let mut tx = store.begin().await.unwrap();
    for id in ["mid-1", "mid-2"] {
        let message = OutboxMessage::new("/hooks/orders", format!(r#"{{"id":"{id}"}}"#))
            .with_message_id(MessageId::new(id).unwrap());
        store.outbox().enqueue(&mut tx, &message).await.unwrap();
    }
    tx.commit().await.unwrap();
    // A receiver that answers 500: with one allowed attempt, both rows are parked.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = format!("http://{}", listener.local_addr().unwrap());
    let failing =
        axum::Router::new().fallback(|| async { axum::http::StatusCode::INTERNAL_SERVER_ERROR });
    tokio::spawn(async move { axum::serve(listener, failing).await });
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: 1,
        ..OutboxPolicy::default()
    });
    let relay = Relay::new(outbox, HttpPublisher::new(receiver).unwrap());
    assert_eq!(relay.run_once().await.unwrap().parked, 2);

    let listed = ok(url, &["outbox", "list"]);
    assert!(
        listed.contains("mid-1") && listed.contains("mid-2"),
        "{listed}"
    );
    assert!(listed.contains("parked"), "{listed}");
    let shown: serde_json::Value =
        serde_json::from_str(&ok(url, &["outbox", "show", "mid-1"])).unwrap();
    assert_eq!(shown["status"], "parked");
    assert_eq!(shown["destination"], "/hooks/orders");
    assert_eq!(shown["payload"]["id"], "mid-1");
    assert_eq!(shown["attempts"], 1);
    let listed: serde_json::Value =
        serde_json::from_str(&ok(url, &["outbox", "list", "--json"])).unwrap();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(ids.contains(&"mid-1") && ids.contains(&"mid-2"), "{listed}");
    let first = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["message_id"] == "mid-1")
        .unwrap();
    assert_eq!(first, &shown);
    let shown_json: serde_json::Value =
        serde_json::from_str(&ok(url, &["outbox", "show", "mid-1", "--json"])).unwrap();
    assert_eq!(shown_json, shown);
    let none: serde_json::Value = serde_json::from_str(&ok(
        url,
        &["outbox", "list", "--status", "published", "--json"],
    ))
    .unwrap();
    assert_eq!(none, serde_json::json!([]));
    // A time past the year 9999 (a hand-edited or corrupt row) cannot be written in RFC 3339:
    // it is shown as its milliseconds, not a panic.
    let rows = idem_testkit::exec(
        &store,
        "UPDATE idem_outbox SET next_attempt_at = 253402300800000 WHERE message_id = 'mid-1'",
        vec![],
    )
    .await;
    assert_eq!(rows, 1);
    let shown: serde_json::Value =
        serde_json::from_str(&ok(url, &["outbox", "show", "mid-1"])).unwrap();
    assert_eq!(shown["next_attempt_at"], "253402300800000");
    let stderr = refused(url, &["outbox", "show", "bad id"]);
    assert!(
        stderr.contains(
            "\"bad id\" is not a valid message id: expected 1 to 255 bytes of visible ASCII ('!' to '~', no spaces), as `idem outbox list` shows them"
        ),
        "{stderr}"
    );

    ok(url, &["outbox", "requeue", "mid-1"]);
    let row = store
        .outbox()
        .get(&MessageId::new("mid-1").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.status, OutboxStatus::Pending);
    assert_eq!(row.attempts, 0);
    let stderr = refused(url, &["outbox", "requeue", "mid-1"]);
    assert!(
        stderr.contains("outbox row \"mid-1\" is pending; only parked rows can be requeued"),
        "{stderr}"
    );
    let stderr = refused(url, &["outbox", "requeue", "nope"]);
    assert!(
        stderr.contains("no outbox row has message id \"nope\""),
        "{stderr}"
    );

    ok(url, &["outbox", "discard", "mid-2"]);
    assert_eq!(
        store
            .outbox()
            .get(&MessageId::new("mid-2").unwrap())
            .await
            .unwrap(),
        None
    );
    let pending = ok(url, &["outbox", "list", "--status", "pending"]);
    assert!(
        pending.contains("mid-1") && !pending.contains("mid-2"),
        "{pending}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_commands_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    outbox_commands::<Sqlite>(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_commands_on_postgres() {
    outbox_commands::<Postgres>(&pg_database().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_commands_on_mysql() {
    outbox_commands::<MySql>(&idem_testkit::mysql_database().await).await;
}

async fn dead_letter_commands<DB: Backend>(url: &str) {
    let store = app::<DB>(url).await;
    let letter = DeadLetterRecord {
        consumer: Name::new("consumer", "billing_v2").unwrap(),
        source: Name::new("source", "orders").unwrap(),
        event_id: Some("evt_9".into()),
        dedup_key: None,
        entity: None,
        destination: "orders.created".into(),
        headers: vec![("Nats-Msg-Id".into(), "evt_9".into())],
        payload: br#"{"order":9}"#.to_vec(),
        error: "handler failed: no such plan".into(),
        delivery_count: 5,
    };
    let id = store.dead_letters().record(&letter).await.unwrap();

    let listed = ok(url, &["dead-letters", "list", "--consumer", "billing_v2"]);
    assert!(
        listed.contains("evt_9") && listed.contains("no such plan"),
        "{listed}"
    );
    let (success, stdout, stderr) = idem(url, &["dead-letters", "list"]);
    assert!(success && !stdout.contains("evt_9"), "{stdout}");
    assert!(
        stderr.contains("no dead letters of consumer idem-gateway"),
        "{stderr}"
    );
    let shown: serde_json::Value =
        serde_json::from_str(&ok(url, &["dead-letters", "show", &id.to_string()])).unwrap();
    assert_eq!(shown["event_id"], "evt_9");
    assert_eq!(shown["payload"]["order"], 9);
    assert_eq!(shown["delivery_count"], 5);
    let listed: serde_json::Value = serde_json::from_str(&ok(
        url,
        &["dead-letters", "list", "--consumer", "billing_v2", "--json"],
    ))
    .unwrap();
    assert_eq!(listed, serde_json::json!([shown.clone()]));
    assert_eq!(listed[0]["id"], id);
    assert_eq!(listed[0]["error"], "handler failed: no such plan");
    let shown_json: serde_json::Value = serde_json::from_str(&ok(
        url,
        &["dead-letters", "show", &id.to_string(), "--json"],
    ))
    .unwrap();
    assert_eq!(shown_json, shown);

    ok(url, &["dead-letters", "delete", &id.to_string()]);
    assert_eq!(store.dead_letters().get(id).await.unwrap(), None);
    let stderr = refused(url, &["dead-letters", "delete", &id.to_string()]);
    assert!(
        stderr.contains(&format!("no dead letter has id {id}")),
        "{stderr}"
    );
    let stderr = refused(url, &["dead-letters", "list", "--consumer", "bad name"]);
    assert!(stderr.contains("--consumer \"bad name\""), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_commands_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    dead_letter_commands::<Sqlite>(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_commands_on_postgres() {
    dead_letter_commands::<Postgres>(&pg_database().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_commands_on_mysql() {
    dead_letter_commands::<MySql>(&idem_testkit::mysql_database().await).await;
}

#[test]
fn a_database_without_idem_tables_is_named_and_never_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none.db");
    let url = format!("sqlite://{}", path.display());
    let stderr = refused(&url, &["effects", "list"]);
    assert!(
        stderr.contains(&format!("no idem_effects table at {url}")),
        "{stderr}"
    );
    assert!(!path.exists(), "the command created a database");
    let stderr = refused("redis://x", &["outbox", "list"]);
    assert!(
        stderr.contains("is not sqlite://, postgres:// or mysql://"),
        "{stderr}"
    );
}

/// An unreachable PostgreSQL server is reported at once with its cause (not "pool timed out"
/// after 30 s), and the password in --database is never printed; so is a login the server
/// refuses.
#[test]
fn an_unreachable_database_is_named_at_once_without_its_password() {
    // Nothing listens on port 1.
    let started = std::time::Instant::now();
    let stderr = refused(
        "postgres://app:hunter2@127.0.0.1:1/app",
        &["outbox", "list"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(stderr.contains("127.0.0.1:1/app"), "{stderr}");
    assert!(stderr.contains("Connection refused"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!stderr.contains("pool timed out"), "{stderr}");

    // The real server, a user it does not know.
    let started = std::time::Instant::now();
    let stderr = refused(
        "postgres://idem_nobody:hunter2@127.0.0.1:5432/postgres",
        &["effects", "list"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert!(stderr.contains("idem_nobody"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
    assert!(!stderr.contains("pool timed out"), "{stderr}");
}

/// sqlx reads a password from the query string too (`?password=`, `?sslpassword=`): the
/// message about a database that cannot be reached names it without either value.
#[test]
fn a_password_in_the_query_string_is_never_printed() {
    // Nothing listens on port 5999.
    let stderr = refused(
        "postgres://postgres@127.0.0.1:5999/x?password=s3cret&sslpassword=k3y",
        &["effects", "list"],
    );
    assert!(stderr.contains("127.0.0.1:5999/x"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(!stderr.contains("k3y"), "{stderr}");
    let stderr = refused(
        "redis://app:s3cret@db/x?password=s3cret",
        &["outbox", "list"],
    );
    assert!(
        stderr.contains(
            "\"redis://***@db/x?password=***\" is not sqlite://, postgres:// or mysql://"
        ),
        "{stderr}"
    );
}

/// Runs `idem ARGS` with its stdout a pipe whose reader is gone before (or while) it writes, as
/// `idem … | head -1` does: (exit code, stderr).
fn idem_into_closed_pipe(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(IDEM)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A reader that stops early (`| head -1`) ends the command quietly: exit 0, no panic, no
/// message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_into_a_closed_pipe_ends_quietly() {
    let (code, stderr) = idem_into_closed_pipe(&["check-config"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");

    // 1000 rows, about 100 KB: more than a pipe holds, so the writer meets the closed pipe
    // however early it starts.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    let store = app::<Sqlite>(&url).await;
    let mut tx = store.begin().await.unwrap();
    for n in 0..1000 {
        let message = OutboxMessage::new("/hooks/orders", format!(r#"{{"n":{n}}}"#));
        store.outbox().enqueue(&mut tx, &message).await.unwrap();
    }
    tx.commit().await.unwrap();
    let (code, stderr) = idem_into_closed_pipe(&[
        "outbox",
        "list",
        "--status",
        "pending",
        "--limit",
        "1000",
        "--database",
        &url,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}
