//! `idem consumers reset NAME --database URL` on a real application database (SQLite and
//! PostgreSQL; issue 33, part 4): without --yes it shows what it would delete and refuses; a
//! dry run deletes nothing; --yes deletes exactly the consumer's cursor rows and leaves the
//! other consumer's and every effect; a live consumer, the gateway's inbox and an unknown name
//! are refused with exit 1.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Clock, DedupKey, Entity, EventId, ManualClock, Name, SystemClock, Version};
use idem_sql::sqlx::{Postgres, Sqlite};
use idem_sql::{Backend, Event, Runner, Store};
use idem_testkit::{AppDb, query_i64};
use serde_json::json;

use crate::support::{IDEM, pg_database};

/// Runs `idem consumers reset ARGS --database URL`: (exit code, stdout, stderr).
fn reset(url: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(IDEM)
        .args(["consumers", "reset"])
        .args(args)
        .args(["--database", url])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `count` events through consumer `name`, each on its own entity and enqueuing one
/// effect, with the store's clock set `ago` before now.
async fn consume<DB: Backend>(store: &Store<DB>, name: &str, count: usize, ago: Duration) {
    let at = SystemClock.now().saturating_sub(ago);
    let store = store.clone().with_clock(Arc::new(ManualClock::new(at)));
    let consumer = Name::new("consumer", name).unwrap();
    let runner = Runner::new(store.clone(), &consumer);
    let (ledger, effect) = (store.effects(), Name::new("effect", "receipt").unwrap());
    let source = Name::new("source", "orders").unwrap();
    for n in 0..count {
        let id = format!("evt_{name}_{n}");
        let event = Event::new(DedupKey::from_event(&source, &EventId::new(&id).unwrap()))
            .with_entity(Entity::new("acct", &id).unwrap(), Version::sequence(1));
        let outcome = runner
            .run(&event, async |tx| {
                let _ = runner
                    .enqueue_effect(tx, &ledger, &event, &effect, id.as_bytes())
                    .await?;
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(outcome.name(), "applied");
    }
}

/// (inbox, version rows) of `consumer`, and every effect row.
async fn rows<DB: AppDb>(store: &Store<DB>, consumer: &str) -> [i64; 3] {
    let name = || vec![consumer.into()];
    [
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1",
            name(),
        )
        .await[0],
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_versions WHERE consumer = $1",
            name(),
        )
        .await[0],
        query_i64(store, "SELECT COUNT(*) FROM idem_effects", vec![]).await[0],
    ]
}

async fn consumers_reset<DB: Backend + AppDb>(url: &str) {
    let store = Store::<DB>::connect(url).await.unwrap();
    store.migrate().await.unwrap();
    consume(&store, "billing_v1", 3, Duration::from_secs(120)).await;
    consume(&store, "other_v1", 2, Duration::from_secs(120)).await;
    consume(&store, "live_v1", 1, Duration::from_secs(10)).await;
    assert_eq!(rows(&store, "billing_v1").await, [3, 3, 6]);

    let (code, stdout, stderr) = reset(url, &["billing_v1"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("would delete") && stdout.contains("idem_inbox"),
        "{stdout}"
    );
    assert!(stderr.contains("add --yes"), "{stderr}");
    assert_eq!(
        rows(&store, "billing_v1").await,
        [3, 3, 6],
        "refused: nothing deleted"
    );

    let (code, stdout, stderr) = reset(url, &["billing_v1", "--dry-run", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let dry: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let counted =
        json!({"idem_inbox": 3, "idem_versions": 3, "idem_parked": 0, "idem_kafka_offsets": 0});
    assert_eq!(
        (&dry["dry_run"], &dry["rows"], &dry["total"]),
        (&json!(true), &counted, &json!(6))
    );
    assert_eq!(
        rows(&store, "billing_v1").await,
        [3, 3, 6],
        "a dry run deletes nothing"
    );

    let (code, stdout, stderr) = reset(url, &["billing_v1", "--yes", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let done: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!((&done["dry_run"], &done["rows"]), (&json!(false), &counted));
    assert!(
        done["last_seen_at"].as_str().unwrap().ends_with('Z'),
        "{done}"
    );
    assert_eq!(
        rows(&store, "billing_v1").await,
        [0, 0, 6],
        "every effect stays"
    );
    assert_eq!(rows(&store, "other_v1").await, [2, 2, 6]);

    for (name, says) in [
        ("live_v1", "consumer live_v1 is live"),
        ("idem-gateway", "idem replay --source S"),
        ("nobody_v1", "known consumers: live_v1, other_v1"),
    ] {
        let (code, stdout, stderr) = reset(url, &[name, "--yes"]);
        assert_eq!(code, Some(1), "{name}: {stdout}");
        assert!(stderr.contains(says), "{name}: {stderr}");
    }
    assert_eq!(rows(&store, "live_v1").await, [1, 1, 6]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_reset_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    consumers_reset::<Sqlite>(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_reset_on_postgres() {
    consumers_reset::<Postgres>(&pg_database().await).await;
}
