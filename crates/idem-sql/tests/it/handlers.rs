//! Handlers as a library user writes them: async closures given to `Runner::run` that pass one
//! transaction (`&mut *tx`) to their own SQL and to idem's writes, `?` on any error, permanent
//! errors, one handler generic over the store (`DB: Sql`), `handler!` for boxed handlers, and an
//! effect worker drained in a test; on SQLite, PostgreSQL and MariaDB.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Backoff, DedupKey, EffectKey, EventId, ManualClock, Name, Timestamp};
use idem_sql::sqlx::{self, Connection};
use idem_sql::{
    Applied, CallOutcome, EffectCall, EffectStatus, EffectWorker, Enqueued, Error, ErrorKind,
    Event, HandlerError, OutboxMessage, OutboxStatus, Outcome, Runner, Sql, Store,
};
use idem_testkit::{AppDb, all_stores};

use crate::support::{app_tables, consumer, effects, in_inbox, stripe_key, write_effect};

all_stores!(
    one_transaction_for_the_handlers_sql_and_idems_writes,
    any_error_converts_and_leaves_nothing,
    a_permanent_error_is_not_retryable,
    idem_and_sqlx_errors_keep_their_kind_inside_a_handler,
    writes_on_a_connection_without_a_transaction_are_refused,
    drain_runs_every_due_effect_and_leaves_the_rest,
    an_async_closure_boxed_by_the_macro_runs_as_the_apply_hook,
);

/// A handler that borrows what it uses (no clone, no `Box::pin`), passes `&mut *tx` to the
/// application's statement and to the effect ledger and outbox, and handles `Enqueued`: one
/// delivery applies all three, the second is a duplicate that writes none.
async fn one_transaction_for_the_handlers_sql_and_idems_writes<DB: AppDb>(store: Store<DB>) {
    app_tables(&store).await;
    let consumer = consumer("handlers_tx");
    let runner = Runner::new(store.clone(), &consumer);
    let (ledger, outbox) = (store.effects(), store.outbox());
    let send_receipt = Name::new("effect", consumer.as_str()).unwrap();
    let event = Event::new(stripe_key(&format!("evt_tx_{consumer}")));
    let key = EffectKey::derive(&consumer, &event.key, &send_receipt);
    let destination = format!("{consumer}.upgraded");
    let mut created = Vec::new();
    for _ in 0..2 {
        let outcome = runner
            .run(&event, async |tx| {
                write_effect::<DB>(&mut *tx, consumer.as_str(), "evt_tx", "upgraded").await?;
                let enqueued = ledger.enqueue(&mut *tx, &send_receipt, &key, b"{}").await?;
                outbox
                    .enqueue(&mut *tx, &OutboxMessage::new(destination.as_str(), "{}"))
                    .await?;
                created.push(enqueued.is_created());
                Ok(enqueued)
            })
            .await
            .unwrap();
        if let Outcome::Applied(enqueued) = &outcome {
            assert_eq!(*enqueued, Enqueued::Created);
        }
    }
    assert_eq!(
        created,
        [true],
        "the handler ran once, for the fresh delivery"
    );
    assert_eq!(effects(&store, &consumer, "evt_tx").await, 1);
    assert_eq!(
        ledger.get(&key).await.unwrap().map(|e| e.status),
        Some(EffectStatus::Pending)
    );
    let pending = outbox.list(OutboxStatus::Pending, 1_000).await.unwrap();
    let ours = pending.iter().filter(|r| r.destination == destination);
    assert_eq!(ours.count(), 1);
}

/// `?` on a `serde_json::Error` after a write: the run fails with a retryable handler error,
/// the write and the claim are rolled back, and the next delivery runs the handler again.
async fn any_error_converts_and_leaves_nothing<DB: AppDb>(store: Store<DB>) {
    app_tables(&store).await;
    let consumer = consumer("handlers_question_mark");
    let runner = Runner::new(store.clone(), &consumer);
    let event = Event::new(stripe_key(&format!("evt_json_{consumer}")));
    let mut payload: &[u8] = b"{not json";
    let err = runner
        .run(&event, async |tx| {
            write_effect::<DB>(&mut *tx, consumer.as_str(), "evt_json", "before").await?;
            let body: serde_json::Value = serde_json::from_slice(payload)?;
            Ok(body)
        })
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Handler, "{err}");
    assert!(err.is_retryable());
    assert!(matches!(&err, Error::Handler(inner) if inner.is::<serde_json::Error>()));
    assert_eq!(effects(&store, &consumer, "evt_json").await, 0);
    assert!(!in_inbox(&store, &consumer, &event.key).await);

    payload = br#"{"id": "evt_json"}"#;
    let outcome = runner
        .run(&event, async |tx| {
            write_effect::<DB>(&mut *tx, consumer.as_str(), "evt_json", "after").await?;
            let body: serde_json::Value = serde_json::from_slice(payload)?;
            Ok(body["id"].as_str().map(str::to_owned))
        })
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Applied(Some("evt_json".to_owned())));
    assert_eq!(effects(&store, &consumer, "evt_json").await, 1);
}

/// `HandlerError::permanent`: `Error::Permanent`, kind `Permanent`, not retryable, nothing
/// committed; a later delivery still runs (it is the caller who dead-letters it).
async fn a_permanent_error_is_not_retryable<DB: AppDb>(store: Store<DB>) {
    app_tables(&store).await;
    let consumer = consumer("handlers_permanent");
    let runner = Runner::new(store.clone(), &consumer);
    let event = Event::new(stripe_key(&format!("evt_perm_{consumer}")));
    let mut runs = 0;
    let err = runner
        .run(&event, async |tx| {
            runs += 1;
            write_effect::<DB>(&mut *tx, consumer.as_str(), "evt_perm", "x").await?;
            let amount: Result<i64, _> = "12.5".parse();
            amount.map_err(HandlerError::permanent)
        })
        .await
        .unwrap_err();
    assert_eq!(runs, 1, "a permanent error is not retried by the runner");
    assert_eq!(err.kind(), ErrorKind::Permanent, "{err}");
    assert!(!err.is_retryable());
    assert!(matches!(err, Error::Permanent(_)));
    assert_eq!(effects(&store, &consumer, "evt_perm").await, 0);
    assert!(!in_inbox(&store, &consumer, &event.key).await);
}

/// An idem error returned with `?` inside a handler keeps its variant (an effect key reused
/// for another request is `EffectConflict`, invalid input), and a bad statement is
/// `Error::Database`: the conversion does not turn them into handler errors.
async fn idem_and_sqlx_errors_keep_their_kind_inside_a_handler<DB: AppDb>(store: Store<DB>) {
    let consumer = consumer("handlers_kinds");
    let runner = Runner::new(store.clone(), &consumer);
    let ledger = store.effects();
    let charge = Name::new("effect", consumer.as_str()).unwrap();
    let key = EffectKey::intent(&format!("charge:{consumer}")).unwrap();
    let first = Event::new(stripe_key(&format!("evt_k1_{consumer}")));
    let outcome = runner
        .run(&first, async |tx| {
            let _ = ledger.enqueue(&mut *tx, &charge, &key, b"100").await?;
            Ok(())
        })
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Applied(()));
    let second = Event::new(stripe_key(&format!("evt_k2_{consumer}")));
    let err = runner
        .run(&second, async |tx| {
            let _ = ledger.enqueue(&mut *tx, &charge, &key, b"250").await?;
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::EffectConflict { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);

    let err = runner
        .run(&second, async |tx| {
            DB::execute(&mut *tx, "SELECT no_such_column FROM idem_inbox", vec![]).await?;
            Ok(())
        })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Database(_)), "{err}");
    assert!(!in_inbox(&store, &consumer, &second.key).await);
}

/// idem's writes take a connection, as sqlx does; one without an open transaction would commit
/// on its own, apart from the writes it belongs with, and is refused with nothing written.
async fn writes_on_a_connection_without_a_transaction_are_refused<DB: AppDb>(store: Store<DB>) {
    let consumer = consumer("handlers_no_tx");
    let effect = Name::new("effect", consumer.as_str()).unwrap();
    let key = EffectKey::intent(&format!("intent:{consumer}")).unwrap();
    let mut conn = store.pool().acquire().await.unwrap();
    assert!(!conn.is_in_transaction());
    let refused = [
        store
            .effects()
            .enqueue(&mut *conn, &effect, &key, b"{}")
            .await
            .map(drop),
        store
            .outbox()
            .enqueue(&mut *conn, &OutboxMessage::new("x", "{}"))
            .await
            .map(drop),
        store
            .inbox(&consumer)
            .claim(&mut *conn, &stripe_key("evt_no_tx"))
            .await
            .map(drop),
    ];
    for result in refused {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::NoTransaction { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
    drop(conn);
    assert_eq!(store.effects().get(&key).await.unwrap(), None);
    let inbox = store.inbox(&consumer);
    assert!(!inbox.is_claimed(&stripe_key("evt_no_tx")).await.unwrap());
}

/// Three effects, one of whose provider calls fails once: `drain` runs rounds until nothing is
/// due (two succeeded, the failed one waits for its backoff); after the clock passes the
/// backoff, a second drain sends it.
async fn drain_runs_every_due_effect_and_leaves_the_rest<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(Timestamp(2_000_000_000_000));
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = consumer("handlers_drain");
    let effect = Name::new("effect", consumer.as_str()).unwrap();
    let keys: Vec<EffectKey> = (0..3)
        .map(|i| EffectKey::intent(&format!("mail:{consumer}:{i}")).unwrap())
        .collect();
    let mut tx = store.begin().await.unwrap();
    for key in &keys {
        let enqueued = store
            .effects()
            .enqueue(&mut *tx, &effect, key, b"hi")
            .await
            .unwrap();
        assert!(enqueued.is_created());
    }
    tx.commit().await.unwrap();
    let flaky = keys[2].clone();
    let failed_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let worker = EffectWorker::new(store.clone(), move |call: EffectCall| {
        let (flaky, failed_once) = (flaky.clone(), Arc::clone(&failed_once));
        async move {
            if call.key == flaky && !failed_once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                CallOutcome::Failed {
                    reason: "503 from the mail provider".into(),
                    retryable: true,
                }
            } else {
                CallOutcome::Succeeded(b"sent".to_vec())
            }
        }
    })
    .effects([effect.clone()])
    .backoff(Backoff::exponential(
        Duration::from_secs(1),
        Duration::from_secs(60),
    ));

    let report = worker.drain().await.unwrap();
    assert_eq!((report.claimed, report.succeeded, report.failed), (3, 2, 1));
    let status = async |key: &EffectKey| store.effects().get(key).await.unwrap().unwrap().status;
    assert_eq!(status(&keys[0]).await, EffectStatus::Succeeded);
    assert_eq!(status(&keys[2]).await, EffectStatus::Pending);
    assert_eq!(worker.drain().await.unwrap().claimed, 0, "not due yet");

    clock.advance(Duration::from_secs(2));
    let report = worker.drain().await.unwrap();
    assert_eq!((report.claimed, report.succeeded), (1, 1));
    assert_eq!(status(&keys[2]).await, EffectStatus::Succeeded);
}

/// `handler!` turns an async closure (owning its captures, borrowing them per run) into the
/// boxed apply hook; the worker runs it on its own tasks, in the transaction that stores the
/// provider's answer.
async fn an_async_closure_boxed_by_the_macro_runs_as_the_apply_hook<DB: AppDb>(store: Store<DB>) {
    app_tables(&store).await;
    let consumer = consumer("handlers_macro");
    let effect = Name::new("effect", consumer.as_str()).unwrap();
    let key = EffectKey::intent(&format!("apply:{consumer}")).unwrap();
    let mut tx = store.begin().await.unwrap();
    let _ = store
        .effects()
        .enqueue(&mut *tx, &effect, &key, b"req")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let note = String::from("applied");
    let owner = consumer.to_string();
    let worker = EffectWorker::new(store.clone(), |_call: EffectCall| async move {
        CallOutcome::Succeeded(b"ok".to_vec())
    })
    .effects([effect])
    .apply(idem_sql::handler!(async move |tx, applied: &Applied| {
        let event = String::from_utf8(applied.outcome.clone())?;
        write_effect::<DB>(&mut *tx, &owner, &event, &note).await?;
        Ok(())
    }));
    // The worker's rounds run on other tasks: the boxed hook is Send.
    let report = tokio::spawn(async move { worker.drain().await })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.succeeded, 1);
    assert_eq!(effects(&store, &consumer, "ok").await, 1);
}

/// The application's write, once for every store: no sqlx bound but `DB: Sql`.
async fn upsert_subscription<DB: Sql>(
    tx: &mut DB::Connection,
    id: &str,
    status: &str,
    created: i64,
) -> Result<(i64, Option<String>), sqlx::Error> {
    sqlx::query(
        "INSERT INTO sql_bound_subscriptions (id, status, created, note) VALUES ($1, $2, $3, NULL) \
         ON CONFLICT (id) DO UPDATE SET status = excluded.status, created = excluded.created",
    )
    .bind(id)
    .bind(status)
    .bind(created)
    .execute(&mut *tx)
    .await?;
    sqlx::query_as("SELECT created, note FROM sql_bound_subscriptions WHERE id = $1")
        .bind(id.to_owned())
        .fetch_one(&mut *tx)
        .await
}

/// One handler generic over the store, spawned (so its future is `Send` with the generic
/// store), on SQLite and on PostgreSQL.
async fn generic_handler_runs_on_the_store<DB: Sql>(store: Store<DB>) {
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS sql_bound_subscriptions \
         (id TEXT PRIMARY KEY, status TEXT NOT NULL, created BIGINT NOT NULL, note TEXT)",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let consumer = consumer("handlers_generic");
    let runner = Runner::new(store.clone(), &consumer);
    let id = format!("sub_{consumer}");
    let event = Event::new(DedupKey::from_event(
        &Name::new("source", "stripe").unwrap(),
        &EventId::new(format!("evt_{consumer}")).unwrap(),
    ));
    let outcome = tokio::spawn(async move {
        runner
            .run(&event, async move |tx| {
                Ok(upsert_subscription::<DB>(tx, &id, "active", 1_623_979_266).await?)
            })
            .await
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(outcome, Outcome::Applied((1_623_979_266, None)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_handler_runs_on_sqlite() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    generic_handler_runs_on_the_store(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_handler_runs_on_postgres() {
    generic_handler_runs_on_the_store(idem_testkit::pg_store().await).await;
}
