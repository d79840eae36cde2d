//! The operator commands of the `idem` binary on a real application database (SQLite and
//! PostgreSQL): `idem effects list|show|resolve`, `idem outbox list|show|requeue|discard`,
//! `idem dead-letters list|show|delete`. Each state is made through idem's own APIs (an effect
//! worker whose provider declines or times out, a relay whose target refuses, a consumer's dead
//! letter), then changed with the binary and read back through the APIs.

use std::process::Command;
use std::time::Duration;

use idem::sqlx::{Postgres, Sqlite};
use idem::{Backend, Name, Store};
use idem_broker::{HttpPublisher, Relay};
use idem_core::EffectKey;
use idem_sql::{
    CallOutcome, DeadLetterRecord, EffectCall, EffectStatus, EffectWorker, Enqueued, MessageId,
    OutboxMessage, OutboxPolicy, OutboxStatus,
};

use crate::support::pg_database;

/// Runs `idem ARGS --database URL`: (exit success, stdout, stderr).
fn idem(url: &str, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_idem"))
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
    assert_eq!(shown["request"]["amount"], 500);
    assert_eq!(shown["last_error"], "card declined");

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

async fn outbox_commands<DB: Backend>(url: &str) {
    let store = app::<DB>(url).await;
    let mut tx = store.begin().await.unwrap();
    for id in ["mid-1", "mid-2"] {
        let message = OutboxMessage::new("/hooks/orders", format!(r#"{{"id":"{id}"}}"#))
            .with_message_id(MessageId::new(id).unwrap());
        store.outbox().enqueue(&mut tx, &message).await.unwrap();
    }
    tx.commit().await.unwrap();
    // Nothing listens on port 1: with one allowed attempt, both rows are parked.
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: 1,
        ..OutboxPolicy::default()
    });
    let relay = Relay::new(outbox, HttpPublisher::new("http://127.0.0.1:1").unwrap());
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
    let stderr = refused("mysql://x", &["outbox", "list"]);
    assert!(
        stderr.contains("neither sqlite:// nor postgres://"),
        "{stderr}"
    );
}
