//! The replay helper (issue 33, parts 2 and 3 for library users): an application's event log
//! fed through a runner in the log's order, its dry run, the refusal of events past the
//! effects' retention, and the JSONL log's errors.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{EffectKey, ManualClock, Name, RetentionPolicy, Timestamp, horizon};
use idem_sql::{
    EffectLedger, Enqueued, Error, ErrorKind, Event, JsonlLog, LoggedEvent, MySqlStore, PgStore,
    Replay, Runner, Store,
};
use idem_testkit::{AppDb, Value, all_stores, exec, query_i64};

use crate::provider::{Recorder, drain};
use crate::support::{consumer, inbox_count, stripe_key};

const DAY: Duration = Duration::from_secs(24 * 3600);

const PROJECTION: &str = "CREATE TABLE IF NOT EXISTS replay_payments (\
     consumer VARCHAR(191) NOT NULL, event_id VARCHAR(191) NOT NULL, \
     amount BIGINT NOT NULL, PRIMARY KEY (consumer, event_id))";
const INSERT: &str = "INSERT INTO replay_payments (consumer, event_id, amount) VALUES ($1, $2, $3)";

/// The handler every version runs: the payment in the projection, the receipt as an effect
/// whose key comes from the runner.
async fn handle<DB: AppDb>(
    runner: &Runner<DB>,
    ledger: &EffectLedger<DB>,
    receipt: &Name,
    tx: &mut DB::Connection,
    logged: &LoggedEvent<i64>,
) -> Result<Enqueued, idem_sql::HandlerError> {
    let n = logged.payload;
    DB::execute(
        tx,
        INSERT,
        vec![
            Value::from(runner.consumer().as_str()),
            Value::from(format!("evt_{n}")),
            Value::Int(100 + n),
        ],
    )
    .await?;
    let request = format!(r#"{{"receipt":{n}}}"#);
    Ok(runner
        .enqueue_effect(tx, ledger, &logged.event, receipt, request.as_bytes())
        .await?)
}

async fn projection_rows<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> i64 {
    query_i64(
        store,
        "SELECT COUNT(*) FROM replay_payments WHERE consumer = $1",
        vec![consumer.as_str().into()],
    )
    .await[0]
}

/// `billing_v1` handled 10 events as they happened, 4 on day 0 and 6 on day 20, each sending
/// a receipt. On day 40 `gc` (keeping 30 days) deletes the 4 old receipts' ledger rows. For
/// `billing_v2`, succeeding it: the dry run counts exactly those 4 events as past the
/// retention; the run refuses them and applies nothing; with `allow_effects_rerun` it runs
/// all 10, and exactly the 4 receipts are sent again, under their old keys.
async fn gc_before_the_replay_is_the_limit<DB: AppDb>(store: Store<DB>) {
    let start = Timestamp(1_700_000_000_000);
    let clock = ManualClock::new(start);
    let store = store.with_clock(Arc::new(clock.clone()));
    exec(&store, PROJECTION, vec![]).await;
    let (provider, url) = Recorder::start().await;
    let ledger = store.effects();
    let receipt = Name::new("effect", "receipt").unwrap();
    let (v1, v2) = (consumer("billing_v1"), consumer("billing_v2"));
    let policy = RetentionPolicy::new(30 * DAY, horizon::STRIPE).unwrap();
    let log: Vec<LoggedEvent<i64>> = (0..10)
        .map(|n: i64| LoggedEvent {
            event: Event::new(stripe_key(&format!("evt_{n}"))),
            occurred_at: start.saturating_add(if n < 4 { Duration::ZERO } else { 20 * DAY }),
            payload: n,
        })
        .collect();

    let first = Runner::new(store.clone(), &v1);
    for logged in &log {
        clock.set(logged.occurred_at);
        let one = std::slice::from_ref(logged);
        Replay::new(&first, &policy)
            .run(one, async |tx, logged| {
                handle(&first, &ledger, &receipt, tx, logged).await
            })
            .await
            .unwrap();
        drain(&store, &receipt, &url).await;
    }
    assert_eq!(provider.calls().len(), 10);

    clock.set(start.saturating_add(40 * DAY));
    let collected = store
        .gc(&policy, NonZeroU32::new(3).unwrap())
        .await
        .unwrap();
    assert_eq!(collected.effects, 4, "the 4 receipts of day 0");
    assert_eq!(ledger.count_scope(&v1).await.unwrap(), 6);

    let second = Runner::new(store.clone(), &v2).succeeds(&v1);
    let handler = async |tx: &mut DB::Connection, logged: &LoggedEvent<i64>| {
        handle(&second, &ledger, &receipt, tx, logged).await
    };
    let preview = Replay::new(&second, &policy)
        .dry_run(true)
        .run(&log, handler)
        .await
        .unwrap();
    assert!(preview.dry_run);
    assert_eq!(
        (preview.read, preview.applied, preview.duplicates),
        (10, 10, 0)
    );
    assert_eq!(
        (preview.past_retention, preview.oldest_past_retention),
        (4, Some(start))
    );
    assert_eq!(preview.effects_recorded, 6);
    assert_eq!(
        inbox_count(&store, &v2).await,
        0,
        "a dry run changes nothing"
    );

    let refused = Replay::new(&second, &policy).run(&log, handler).await;
    match &refused {
        Err(Error::EffectsPastRetention {
            count,
            oldest,
            cutoff,
        }) => {
            assert_eq!((*count, *oldest), (4, start));
            assert_eq!(*cutoff, start.saturating_add(10 * DAY));
        }
        other => panic!("expected a refusal: {other:?}"),
    }
    let refused = refused.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidInput);
    assert!(
        refused.to_string().contains("4 events"),
        "the message names the count: {refused}"
    );
    assert_eq!(inbox_count(&store, &v2).await, 0, "nothing applied");
    assert_eq!(projection_rows(&store, &v2).await, 0);
    assert_eq!(ledger.count_scope(&v1).await.unwrap(), 6);

    let report = Replay::new(&second, &policy)
        .allow_effects_rerun(true)
        .run(&log, handler)
        .await
        .unwrap();
    assert_eq!(
        (report.read, report.applied, report.past_retention),
        (10, 10, 4)
    );
    assert_eq!((report.effects_created, report.effects_existing), (4, 6));
    drain(&store, &receipt, &url).await;
    let again: Vec<String> = provider.calls()[10..].to_vec();
    let expected: Vec<String> = (0..4)
        .map(|n| {
            EffectKey::derive(&v1, &stripe_key(&format!("evt_{n}")), &receipt)
                .as_str()
                .to_owned()
        })
        .collect();
    let mut sorted = again.clone();
    sorted.sort();
    assert_eq!(
        sorted, expected,
        "the 4 receipts ran again, under their keys"
    );
    assert_eq!(projection_rows(&store, &v2).await, 10);
}

/// The log's order is the original order: per entity, a later line with a lower version is
/// stale; a second run finds every event a duplicate.
async fn the_log_order_decides_per_entity<DB: AppDb>(store: Store<DB>) {
    let runner = Runner::new(store.clone(), &consumer("orders_v2"));
    let policy = RetentionPolicy::new(30 * DAY, horizon::STRIPE).unwrap();
    let now = store.now().as_millis();
    let line = |id: &str, seq: i64| {
        format!(
            r#"{{"source":"shop","event_id":"{id}","occurred_at":{now},"entity":{{"type":"order","id":"o_1","sequence":{seq}}},"payload":{{"seq":{seq}}}}}"#
        )
    };
    let log = JsonlLog::from_text(
        [line("e1", 1), line("e3", 3), String::new(), line("e2", 2)].join("\n"),
    );
    let mut seen = Vec::new();
    let report = Replay::new(&runner, &policy)
        .run_with_progress(
            &log,
            async |_tx: &mut DB::Connection, _: &LoggedEvent<serde_json::Value>| Ok(()),
            |p| seen.push((p.position, p.outcome)),
        )
        .await
        .unwrap();
    assert_eq!(seen, [(1, "applied"), (2, "gap"), (4, "stale")]);
    assert_eq!(
        (report.read, report.applied, report.gaps, report.stale),
        (3, 2, 1, 1),
        "{report:?}"
    );
    let again = Replay::new(&runner, &policy)
        .run(&log, async |_tx: &mut DB::Connection, _| Ok(()))
        .await
        .unwrap();
    assert_eq!(
        (again.read, again.duplicates, again.applied),
        (3, 3, 0),
        "{again:?}"
    );
}

/// A JSONL line that is not an event stops the replay before anything runs, naming its line
/// and what was expected; a log that cannot be opened names its path.
async fn a_malformed_log_line_names_its_number<DB: AppDb>(store: Store<DB>) {
    let v2 = consumer("billing_v2");
    let runner = Runner::new(store.clone(), &v2);
    let policy = RetentionPolicy::new(30 * DAY, horizon::STRIPE).unwrap();
    let good = r#"{"source":"stripe","event_id":"evt_1","occurred_at":"2026-12-01T13:29:18Z"}"#;
    let cases = [
        (r#"{"source":"stripe","event_id":"evt_2"}"#, "occurred_at"),
        ("not json", "one JSON object per line"),
        (r#"{"event_id":"evt_2","occurred_at":1}"#, "dedup key"),
        (
            r#"{"source":"stripe","event_id":"evt_2","occurred_at":"yesterday"}"#,
            "RFC 3339",
        ),
        (
            r#"{"command_id":"c1","occurred_at":1,"entity":{"type":"order","id":"o","sequence":1,"timestamp":2}}"#,
            "exactly one of",
        ),
    ];
    for (bad, expected) in cases {
        let log = JsonlLog::from_text(format!("{good}\n\n{bad}\n{good}"));
        for dry_run in [true, false] {
            let result = Replay::new(&runner, &policy)
                .dry_run(dry_run)
                .run(&log, async |_tx: &mut DB::Connection, _| Ok(()))
                .await;
            match result {
                Err(Error::InvalidLogLine {
                    line: 3,
                    expected: what,
                }) => {
                    assert!(what.contains(expected), "{bad}: {what}");
                }
                other => panic!("{bad}: expected line 3 to be refused, got {other:?}"),
            }
        }
    }
    assert_eq!(inbox_count(&store, &v2).await, 0, "nothing applied");

    let missing = JsonlLog::open("/nonexistent/idem/events.jsonl");
    let result = Replay::new(&runner, &policy)
        .run(&missing, async |_tx: &mut DB::Connection, _| Ok(()))
        .await;
    match result {
        Err(e @ Error::LogUnreadable { .. }) => {
            assert!(
                e.to_string().contains("/nonexistent/idem/events.jsonl"),
                "{e}"
            )
        }
        other => panic!("expected an unreadable log: {other:?}"),
    }
}

all_stores!(
    the_log_order_decides_per_entity,
    a_malformed_log_line_names_its_number
);

/// `gc` deletes every consumer's rows past its cutoff, so the gc test runs on a database of its
/// own: in the database the binary shares it would delete other tests' rows.
mod gc_before_the_replay_is_the_limit {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        super::gc_before_the_replay_is_the_limit::<idem_sql::sqlx::Sqlite>(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let store = PgStore::connect(&idem_testkit::pg_database().await)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        super::gc_before_the_replay_is_the_limit(store.clone()).await;
        store.pool().close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        let store = MySqlStore::connect(&idem_testkit::mysql_database().await)
            .await
            .unwrap();
        store.migrate().await.unwrap();
        super::gc_before_the_replay_is_the_limit(store.clone()).await;
        store.pool().close().await;
    }
}
