//! Helpers shared by the contract tests: unique consumer names, the application's tables and
//! writes, a process-wide metrics recorder, pool health checks and the Stripe corpus.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use idem_core::{DedupKey, EventId, Name};
use idem_sql::Store;
use idem_sql::sqlx::{Connection, Database};
use idem_testkit::{AppDb, exec, query_i64};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use serde_json::Value as Json;

/// A consumer name no other test in this process uses: the PostgreSQL and MySQL databases and
/// the metrics recorder are shared by every test of the binary, including the runs of one test
/// on each store.
pub(crate) fn consumer(prefix: &str) -> Name {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Name::new("consumer", format!("{prefix}_{n}")).expect("a valid consumer name")
}

/// The default dedup key of a Stripe event.
pub(crate) fn stripe_key(event_id: &str) -> DedupKey {
    DedupKey::from_event(
        &Name::new("source", "stripe").expect("valid source"),
        &EventId::new(event_id).expect("valid event id"),
    )
}

// ---------------------------------------------------------------------------------------------
// The application's tables.

/// Serializes `CREATE TABLE IF NOT EXISTS` on the shared PostgreSQL database: two concurrent
/// creations of one table can fail there with a unique violation in the catalog.
///
/// Key columns are `VARCHAR(255)`: MySQL indexes no `TEXT` column without a prefix length.
static SCHEMA: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Creates the application tables the handlers write to (every row carries its consumer, so
/// tests sharing the PostgreSQL database never see each other's rows).
pub(crate) async fn app_tables<DB: AppDb>(store: &Store<DB>) {
    let _guard = SCHEMA.lock().await;
    exec(
        store,
        "CREATE TABLE IF NOT EXISTS app_effects (\
         consumer TEXT NOT NULL, event_id TEXT NOT NULL, note TEXT NOT NULL)",
        vec![],
    )
    .await;
    exec(
        store,
        "CREATE TABLE IF NOT EXISTS app_state (\
         consumer VARCHAR(255) NOT NULL, object_id VARCHAR(255) NOT NULL, status TEXT NOT NULL, \
         event_type TEXT NOT NULL, event_id TEXT NOT NULL, created BIGINT NOT NULL, \
         PRIMARY KEY (consumer, object_id))",
        vec![],
    )
    .await;
}

/// One row of `app_effects`: what a handler that "does the work" writes.
pub(crate) async fn write_effect<DB: AppDb>(
    conn: &mut DB::Connection,
    consumer: &str,
    event_id: &str,
    note: &str,
) -> Result<(), idem_sql::Error> {
    DB::execute(
        conn,
        "INSERT INTO app_effects (consumer, event_id, note) VALUES ($1, $2, $3)",
        vec![consumer.into(), event_id.into(), note.into()],
    )
    .await?;
    Ok(())
}

/// The state a handler keeps per object (the last event it applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StateRow {
    pub consumer: String,
    pub object_id: String,
    pub status: String,
    pub event_type: String,
    pub event_id: String,
    pub created: i64,
}

impl StateRow {
    /// Upserts the row inside the handler's transaction.
    pub(crate) async fn write<DB: AppDb>(
        &self,
        conn: &mut DB::Connection,
    ) -> Result<(), idem_sql::Error> {
        let upsert = DB::dialect(
            "INSERT INTO app_state (consumer, object_id, status, event_type, event_id, created) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (consumer, object_id) DO UPDATE SET status = excluded.status, \
             event_type = excluded.event_type, event_id = excluded.event_id, \
             created = excluded.created",
            "INSERT INTO app_state (consumer, object_id, status, event_type, event_id, created) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON DUPLICATE KEY UPDATE status = $3, event_type = $4, event_id = $5, created = $6",
        );
        DB::execute(
            conn,
            upsert,
            vec![
                self.consumer.clone().into(),
                self.object_id.clone().into(),
                self.status.clone().into(),
                self.event_type.clone().into(),
                self.event_id.clone().into(),
                self.created.into(),
            ],
        )
        .await?;
        Ok(())
    }
}

/// How many effect rows the handlers of `consumer` wrote (optionally for one event).
pub(crate) async fn effects<DB: AppDb>(store: &Store<DB>, consumer: &Name, event_id: &str) -> i64 {
    query_i64(
        store,
        "SELECT COUNT(*) FROM app_effects WHERE consumer = $1 AND event_id = $2",
        vec![consumer.as_str().into(), event_id.into()],
    )
    .await[0]
}

/// The status the handlers of `consumer` left for `object_id`, if any.
pub(crate) async fn state_status<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    object_id: &str,
) -> Option<String> {
    let mut conn = store.pool().acquire().await.expect("acquire a connection");
    let rows = DB::fetch_text_pairs(
        &mut conn,
        "SELECT object_id, status FROM app_state WHERE consumer = $1 AND object_id = $2",
        vec![consumer.as_str().into(), object_id.into()],
    )
    .await
    .expect("read app_state");
    rows.into_iter().next().map(|(_, status)| status)
}

/// Every object the handlers of `consumer` left: object id → (created, status, type, event id).
pub(crate) async fn state_of<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
) -> HashMap<String, (i64, String, String, String)> {
    let mut conn = store.pool().acquire().await.expect("acquire a connection");
    // One text column joined with '|' keeps this within AppDb's (TEXT, TEXT) rows.
    let rows = DB::fetch_text_pairs(
        &mut conn,
        "SELECT object_id, CONCAT(created, '|', status, '|', event_type, '|', event_id) \
         FROM app_state WHERE consumer = $1",
        vec![consumer.as_str().into()],
    )
    .await
    .expect("read app_state");
    rows.into_iter()
        .map(|(id, joined)| {
            let parts: Vec<&str> = joined.splitn(4, '|').collect();
            let created = parts[0].parse().expect("created is an integer");
            (
                id,
                (
                    created,
                    parts[1].to_owned(),
                    parts[2].to_owned(),
                    parts[3].to_owned(),
                ),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// idem's own tables, read directly to check what was committed.

/// Whether `key` is in the inbox of `consumer`.
pub(crate) async fn in_inbox<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    key: &DedupKey,
) -> bool {
    let n = query_i64(
        store,
        "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1 AND dedup_key = $2",
        vec![consumer.as_str().into(), key.as_str().into()],
    )
    .await[0];
    assert!(n <= 1, "the inbox holds {key} {n} times");
    n == 1
}

/// The number of inbox keys of `consumer`.
pub(crate) async fn inbox_count<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> i64 {
    query_i64(
        store,
        "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1",
        vec![consumer.as_str().into()],
    )
    .await[0]
}

/// The stored version of an entity: (kind, primary, secondary as text or "none").
pub(crate) async fn stored_version<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Option<(String, String)> {
    let mut conn = store.pool().acquire().await.expect("acquire a connection");
    let rows = DB::fetch_text_pairs(
        &mut conn,
        "SELECT version_kind, CONCAT(version, '/', \
         CASE WHEN version_secondary IS NULL THEN 'none' ELSE CONCAT(version_secondary) END) \
         FROM idem_versions WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3",
        vec![
            consumer.as_str().into(),
            aggregate_type.into(),
            aggregate_id.into(),
        ],
    )
    .await
    .expect("read idem_versions");
    rows.into_iter().next()
}

/// The number of version guard rows of `consumer`.
pub(crate) async fn version_rows<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> i64 {
    query_i64(
        store,
        "SELECT COUNT(*) FROM idem_versions WHERE consumer = $1",
        vec![consumer.as_str().into()],
    )
    .await[0]
}

// ---------------------------------------------------------------------------------------------
// Pool health.

/// Holds every connection the pool allows at once and checks that each is usable and outside
/// any transaction: a connection left inside a transaction (or an aborted one on PostgreSQL)
/// would poison the next delivery it serves.
pub(crate) async fn assert_pool_reusable<DB: AppDb>(store: &Store<DB>) {
    let max = store.pool().options().get_max_connections();
    let mut held = Vec::with_capacity(max as usize);
    for _ in 0..max {
        held.push(
            store
                .pool()
                .acquire()
                .await
                .expect("acquire a pooled connection"),
        );
    }
    for (i, conn) in held.iter_mut().enumerate() {
        if let Err(problem) = connection_is_clean::<DB>(conn).await {
            panic!("pooled connection {i}: {problem}");
        }
    }
}

/// Whether `conn` runs statements and is outside any transaction, both as sqlx tracks it and
/// as the server sees it.
pub(crate) async fn connection_is_clean<DB: AppDb>(
    conn: &mut DB::Connection,
) -> Result<(), String> {
    if conn.is_in_transaction() {
        return Err("sqlx counts an open transaction".into());
    }
    let one = DB::fetch_i64(
        conn,
        DB::dialect("SELECT CAST(1 AS BIGINT)", "SELECT CAST(1 AS SIGNED)"),
        vec![],
    )
    .await
    .map_err(|e| format!("SELECT 1 failed: {e}"))?;
    if one != [1] {
        return Err(format!("SELECT 1 returned {one:?}"));
    }
    if <DB as Database>::NAME == "MySQL" {
        // The server's own flag; MySQL would commit an open transaction at a BEGIN.
        let open = DB::fetch_i64(conn, "SELECT CAST(@@in_transaction AS SIGNED)", vec![])
            .await
            .map_err(|e| format!("reading @@in_transaction failed: {e}"))?;
        if open == [0] {
            Ok(())
        } else {
            Err(format!(
                "inside a server-side transaction: @@in_transaction = {open:?}"
            ))
        }
    } else if <DB as Database>::NAME == "PostgreSQL" {
        // SAVEPOINT outside a transaction block fails with 25P01 (no_active_sql_transaction);
        // inside one it succeeds, and inside an aborted one it fails with 25P02.
        match DB::execute(conn, "SAVEPOINT idem_pool_probe", vec![]).await {
            Err(idem_sql::sqlx::Error::Database(e)) if e.code().as_deref() == Some("25P01") => {
                Ok(())
            }
            other => Err(format!("inside a server-side transaction: {other:?}")),
        }
    } else {
        // SQLite refuses BEGIN inside a transaction.
        DB::execute(conn, "BEGIN", vec![])
            .await
            .map_err(|e| format!("inside a transaction: {e}"))?;
        DB::execute(conn, "ROLLBACK", vec![])
            .await
            .map_err(|e| format!("ROLLBACK of the probe failed: {e}"))?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics: one DebuggingRecorder for the whole binary.

/// A metric's identity: its name and its sorted labels.
type MetricId = (String, Vec<(String, String)>);

#[derive(Default)]
struct Totals {
    counters: HashMap<MetricId, u64>,
    histograms: HashMap<MetricId, Vec<f64>>,
}

struct Recorded {
    snapshotter: Snapshotter,
    totals: Mutex<Totals>,
}

fn recorded() -> &'static Recorded {
    static RECORDED: OnceLock<Recorded> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        metrics::set_global_recorder(recorder)
            .expect("only this module installs a metrics recorder");
        Recorded {
            snapshotter,
            totals: Mutex::new(Totals::default()),
        }
    })
}

/// Installs the recorder; call before the actions a test measures (metrics recorded before it
/// is installed are lost).
pub(crate) fn install_metrics() {
    recorded();
}

/// A snapshot resets counters and drains histograms, so every snapshot is folded into running
/// totals under one lock: concurrent tests then never take each other's values away.
fn totals() -> MutexGuard<'static, Totals> {
    let recorded = recorded();
    let mut totals = recorded.totals.lock().unwrap_or_else(|e| e.into_inner());
    for (key, _, _, value) in recorded.snapshotter.snapshot().into_vec() {
        let key = key.key();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        labels.sort();
        let id = (key.name().to_owned(), labels);
        match value {
            DebugValue::Counter(n) => *totals.counters.entry(id).or_default() += n,
            DebugValue::Histogram(values) => totals
                .histograms
                .entry(id)
                .or_default()
                .extend(values.into_iter().map(|v| v.0)),
            DebugValue::Gauge(_) => {}
        }
    }
    totals
}

fn matches(id: &MetricId, name: &str, labels: &[(&str, &str)]) -> bool {
    id.0 == name
        && labels
            .iter()
            .all(|(k, v)| id.1.iter().any(|(ik, iv)| ik == k && iv == v))
}

/// The total of counter `name` over every series carrying all of `labels`.
pub(crate) fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    totals()
        .counters
        .iter()
        .filter(|(id, _)| matches(id, name, labels))
        .map(|(_, n)| *n)
        .sum()
}

/// Every value recorded in histogram `name` in series carrying all of `labels`.
pub(crate) fn histogram(name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    totals()
        .histograms
        .iter()
        .filter(|(id, _)| matches(id, name, labels))
        .flat_map(|(_, v)| v.iter().copied())
        .collect()
}

/// Held by tests that change a metric without a consumer label (lease takeovers), so that the
/// runs of one test on each store do not count each other's takeovers.
pub(crate) static UNLABELED_METRICS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

// ---------------------------------------------------------------------------------------------
// The Stripe corpus.

/// The events of testdata/stripe-events/events.jsonl, in the order the sender generated them.
pub(crate) fn stripe_events() -> Vec<Json> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/stripe-events/events.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read {path}: {e}"))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("one JSON event per line"))
        .collect()
}

/// testdata/stripe-events/expected_final_state.json.
pub(crate) fn stripe_expected_state() -> Json {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/stripe-events/expected_final_state.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("read the expected state"))
        .expect("valid JSON")
}
