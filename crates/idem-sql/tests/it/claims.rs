//! C1-C4: concurrent claims of one event, duplicates after commit, and failing handlers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem_core::{DedupKey, Entity, Version};
use idem_sql::metric_definitions::CLAIMS_TOTAL;
use idem_sql::{Claim, ErrorKind, Event, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores};
use tokio::sync::Barrier;

use crate::support::{self, consumer, stripe_key};

const TASKS: usize = 64;

/// 64 deliveries of `evt_A` (charge.succeeded) released at once through `Runner::run`: the
/// handler runs once and writes once; 63 are duplicates; nothing fails; the pool is clean after.
async fn concurrent_deliveries_apply_once<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("concurrent_run");
    let runner = Runner::new(store.clone(), &consumer);
    let event = Event::new(stripe_key("evt_A"));
    let barrier = Arc::new(Barrier::new(TASKS));
    let handler_runs = Arc::new(AtomicUsize::new(0));

    let mut tasks = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let (runner, event, barrier) = (runner.clone(), event.clone(), Arc::clone(&barrier));
        let handler_runs = Arc::clone(&handler_runs);
        let name = consumer.to_string();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            runner
                .run_boxed(&event, |tx| {
                    handler_runs.fetch_add(1, Ordering::SeqCst);
                    let name = name.clone();
                    Box::pin(async move {
                        support::write_effect::<DB>(&mut **tx, &name, "evt_A", "charge.succeeded")
                            .await
                    })
                })
                .await
        }));
    }
    let (mut applied, mut duplicates, mut errors) = (0, 0, Vec::new());
    for task in tasks {
        match task.await.expect("the task did not panic") {
            Ok(Outcome::Applied(())) => applied += 1,
            Ok(Outcome::Duplicate) => duplicates += 1,
            Ok(other) => errors.push(format!("unexpected outcome {other:?}")),
            Err(e) => errors.push(format!("error of kind {:?}: {e}", e.kind())),
        }
    }
    assert_eq!(errors, Vec::<String>::new(), "no delivery may fail");
    assert_eq!((applied, duplicates), (1, TASKS - 1));
    assert_eq!(handler_runs.load(Ordering::SeqCst), 1, "handler runs");
    assert_eq!(support::effects(&store, &consumer, "evt_A").await, 1);
    assert!(support::in_inbox(&store, &consumer, &event.key).await);
    support::assert_pool_reusable(&store).await;
}

/// The same race without the runner: 64 transactions each `begin` + `claim` + `commit`.
async fn concurrent_raw_claims_one_fresh<DB: AppDb>(store: Store<DB>) {
    let consumer = consumer("concurrent_claim");
    let inbox = store.inbox(&consumer);
    let key = stripe_key("evt_A");
    let barrier = Arc::new(Barrier::new(TASKS));
    let mut tasks = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let (store, inbox, key, barrier) = (
            store.clone(),
            inbox.clone(),
            key.clone(),
            Arc::clone(&barrier),
        );
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut tx = store.begin().await?;
            let claim = inbox.claim(&mut tx, &key).await?;
            tx.commit().await?;
            Ok::<_, idem_sql::Error>(claim)
        }));
    }
    let mut claims = Vec::with_capacity(TASKS);
    for task in tasks {
        match task.await.expect("the task did not panic") {
            Ok(claim) => claims.push(claim),
            Err(e) => panic!("a claim failed with kind {:?}: {e}", e.kind()),
        }
    }
    let fresh = claims.iter().filter(|c| **c == Claim::Fresh).count();
    let duplicate = claims.iter().filter(|c| **c == Claim::Duplicate).count();
    assert_eq!((fresh, duplicate), (1, TASKS - 1));
    assert_eq!(support::inbox_count(&store, &consumer).await, 1);
    support::assert_pool_reusable(&store).await;
}

/// A redelivery after the first delivery committed: `Duplicate`, handler not run, counted once
/// as `idem_claims_total{outcome="duplicate"}` (C3), after one `fresh`.
async fn duplicate_after_commit_is_counted<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    support::app_tables(&store).await;
    let consumer = consumer("dup_after_commit");
    let c = consumer.as_str();
    let runner = Runner::new(store.clone(), &consumer);
    let event = Event::new(stripe_key("evt_dup"));
    let handler_runs = AtomicUsize::new(0);
    let fresh = || support::counter(CLAIMS_TOTAL, &[("consumer", c), ("outcome", "fresh")]);
    let dup = || support::counter(CLAIMS_TOTAL, &[("consumer", c), ("outcome", "duplicate")]);
    let (fresh0, dup0) = (fresh(), dup());

    for expected in [Outcome::Applied(()), Outcome::Duplicate] {
        let outcome = runner
            .run_boxed(&event, |tx| {
                handler_runs.fetch_add(1, Ordering::SeqCst);
                let name = c.to_owned();
                Box::pin(async move {
                    support::write_effect::<DB>(&mut **tx, &name, "evt_dup", "first").await
                })
            })
            .await
            .expect("both deliveries succeed");
        assert_eq!(outcome, expected);
        if expected == Outcome::Applied(()) {
            assert_eq!((fresh() - fresh0, dup() - dup0), (1, 0), "after the first");
        }
    }
    assert_eq!(handler_runs.load(Ordering::SeqCst), 1);
    assert_eq!(support::effects(&store, &consumer, "evt_dup").await, 1);
    assert_eq!(
        (fresh() - fresh0, dup() - dup0),
        (1, 1),
        "after the duplicate"
    );
}

/// A handler that fails after its claim: the error is of kind `Handler`, nothing committed (its
/// row and the inbox key are absent), and the next delivery is fresh and applied (C4).
async fn failing_handler_rolls_back<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("handler_fails");
    let c = consumer.as_str();
    let runner = Runner::new(store.clone(), &consumer);
    let event = Event::new(stripe_key("evt_boom")).with_entity(
        Entity::new("charge", "ch_boom").unwrap(),
        Version::timestamp(1_700_000_100),
    );

    let err = runner
        .run_boxed(&event, |tx| {
            let name = c.to_owned();
            Box::pin(async move {
                support::write_effect::<DB>(&mut **tx, &name, "evt_boom", "before boom").await?;
                Err::<(), _>(idem_sql::Error::handler("boom"))
            })
        })
        .await
        .expect_err("the handler failed");
    assert_eq!(err.kind(), ErrorKind::Handler, "{err}");
    assert!(err.is_retryable());
    assert_eq!(support::effects(&store, &consumer, "evt_boom").await, 0);
    assert!(!support::in_inbox(&store, &consumer, &event.key).await);
    assert_eq!(
        support::stored_version(&store, &consumer, "charge", "ch_boom").await,
        None,
        "the version guard's write rolled back with the claim"
    );

    let outcome = runner
        .run_boxed(&event, |tx| {
            let name = c.to_owned();
            Box::pin(async move {
                support::write_effect::<DB>(&mut **tx, &name, "evt_boom", "retry").await
            })
        })
        .await
        .expect("the retry succeeds");
    assert_eq!(outcome, Outcome::Applied(()));
    assert_eq!(support::effects(&store, &consumer, "evt_boom").await, 1);
    assert!(support::in_inbox(&store, &consumer, &event.key).await);
    assert_eq!(
        support::stored_version(&store, &consumer, "charge", "ch_boom").await,
        Some(("timestamp".into(), "1700000100/none".into()))
    );
    support::assert_pool_reusable(&store).await;
}

/// A handler that panics after writing: the task's JoinError reports the panic, nothing was
/// committed, the pool is not poisoned, and the next delivery runs and is applied.
async fn panicking_handler_rolls_back<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("handler_panics");
    let runner = Runner::new(store.clone(), &consumer);
    let event = Event::new(stripe_key("evt_panic"));

    let task = {
        let (runner, event, name) = (runner.clone(), event.clone(), consumer.to_string());
        tokio::spawn(async move {
            runner
                .run_boxed(&event, |tx| {
                    let name = name.clone();
                    Box::pin(async move {
                        support::write_effect::<DB>(&mut **tx, &name, "evt_panic", "written")
                            .await?;
                        panic_in_handler()
                    })
                })
                .await
        })
    };
    let joined = task.await;
    assert!(
        joined.as_ref().is_err_and(|e| e.is_panic()),
        "the task must end in the handler's panic, got {joined:?}"
    );
    assert_eq!(support::effects(&store, &consumer, "evt_panic").await, 0);
    assert!(!support::in_inbox(&store, &consumer, &event.key).await);
    support::assert_pool_reusable(&store).await;

    let c = consumer.as_str();
    let outcome = runner
        .run_boxed(&event, |tx| {
            let name = c.to_owned();
            Box::pin(async move {
                support::write_effect::<DB>(&mut **tx, &name, "evt_panic", "retry").await
            })
        })
        .await
        .expect("the next delivery succeeds");
    assert_eq!(outcome, Outcome::Applied(()));
    assert_eq!(support::effects(&store, &consumer, "evt_panic").await, 1);
}

/// The panic of `panicking_handler_rolls_back`, typed as a handler's result.
fn panic_in_handler() -> Result<(), idem_sql::Error> {
    panic!("handler panics after its write (expected by this test)")
}

/// With the opt-in pre-check, 64 concurrent deliveries still apply once (while the first is in
/// flight the read finds nothing and the claim decides), and a later redelivery is a duplicate
/// answered without a transaction.
async fn precheck_keeps_claims_exclusive<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    support::app_tables(&store).await;
    let consumer = consumer("precheck");
    let runner = Runner::new(store.clone(), &consumer).duplicate_precheck(true);
    let event = Event::new(stripe_key("evt_pre"));
    let barrier = Arc::new(Barrier::new(TASKS));
    let handler_runs = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let (runner, event, barrier) = (runner.clone(), event.clone(), Arc::clone(&barrier));
        let (handler_runs, name) = (Arc::clone(&handler_runs), consumer.to_string());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            runner
                .run_boxed(&event, |tx| {
                    handler_runs.fetch_add(1, Ordering::SeqCst);
                    let name = name.clone();
                    Box::pin(async move {
                        support::write_effect::<DB>(&mut **tx, &name, "evt_pre", "precheck").await
                    })
                })
                .await
        }));
    }
    let mut applied = 0;
    for task in tasks {
        match task.await.unwrap().unwrap() {
            Outcome::Applied(()) => applied += 1,
            Outcome::Duplicate => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((applied, handler_runs.load(Ordering::SeqCst)), (1, 1));
    assert_eq!(support::effects(&store, &consumer, "evt_pre").await, 1);
    let duplicates = || {
        support::counter(
            CLAIMS_TOTAL,
            &[("consumer", consumer.as_str()), ("outcome", "duplicate")],
        )
    };
    let before = duplicates();
    assert_eq!(
        runner
            .run_boxed(&event, |_tx| Box::pin(async { Ok(()) }))
            .await
            .unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(duplicates() - before, 1);
}

all_stores!(
    precheck_keeps_claims_exclusive,
    concurrent_deliveries_apply_once,
    concurrent_raw_claims_one_fresh,
    duplicate_after_commit_is_counted,
    failing_handler_rolls_back,
    panicking_handler_rolls_back,
);

/// The pool check used above must catch a connection left inside a transaction, which sqlx does
/// not know about (a raw BEGIN).
async fn pool_probe_sees_open_transactions<DB: AppDb>(store: Store<DB>) {
    let mut conn = store.pool().acquire().await.unwrap();
    support::connection_is_clean::<DB>(&mut conn)
        .await
        .expect("a fresh connection is clean");
    DB::execute(&mut conn, "BEGIN", vec![]).await.unwrap();
    assert!(
        support::connection_is_clean::<DB>(&mut conn).await.is_err(),
        "the probe missed an open transaction"
    );
    DB::execute(&mut conn, "ROLLBACK", vec![]).await.unwrap();
    support::connection_is_clean::<DB>(&mut conn)
        .await
        .expect("clean again after ROLLBACK");
}

all_stores!(pool_probe_sees_open_transactions);

/// C1: a second claim of a key held by an open transaction waits (PostgreSQL: on the key;
/// SQLite: at BEGIN IMMEDIATE); when the first rolls back, the second is fresh.
async fn waiting_claim_proceeds_after_rollback<DB: AppDb>(store: Store<DB>) {
    let consumer = consumer("claim_rollback");
    let inbox = store.inbox(&consumer);
    let key = stripe_key("evt_rollback");
    let mut first = store.begin().await.unwrap();
    assert_eq!(inbox.claim(&mut first, &key).await.unwrap(), Claim::Fresh);

    let second = {
        let (store, inbox, key) = (store.clone(), inbox.clone(), key.clone());
        tokio::spawn(async move {
            let mut tx = store.begin().await?;
            let claim = inbox.claim(&mut tx, &key).await?;
            tx.commit().await?;
            Ok::<_, idem_sql::Error>(claim)
        })
    };
    // Not a synchronisation: the second must still be waiting however long this takes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !second.is_finished(),
        "the second claim finished while the first transaction held the key"
    );
    first.rollback().await.unwrap();
    assert_eq!(second.await.unwrap().unwrap(), Claim::Fresh);

    let mut third = store.begin().await.unwrap();
    assert_eq!(
        inbox.claim(&mut third, &key).await.unwrap(),
        Claim::Duplicate
    );
    third.rollback().await.unwrap();
}

/// `claim_many`: one result per input key in input order; a key listed twice is fresh at its
/// first place only; keys already processed are duplicates; counted per outcome.
async fn claim_many_answers_in_input_order<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    let consumer = consumer("claim_many");
    let c = consumer.as_str();
    let inbox = store.inbox(&consumer);
    let (k1, k2, k3) = (
        stripe_key("evt_m1"),
        stripe_key("evt_m2"),
        stripe_key("evt_m3"),
    );

    let mut tx = store.begin().await.unwrap();
    assert_eq!(inbox.claim(&mut tx, &k1).await.unwrap(), Claim::Fresh);
    tx.commit().await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let claims = inbox
        .claim_many(&mut tx, &[k2.clone(), k1.clone(), k3.clone(), k2.clone()])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        claims,
        [
            Claim::Fresh,
            Claim::Duplicate,
            Claim::Fresh,
            Claim::Duplicate
        ]
    );
    assert_eq!(support::inbox_count(&store, &consumer).await, 3);
    assert_eq!(
        support::counter(CLAIMS_TOTAL, &[("consumer", c), ("outcome", "fresh")]),
        3
    );
    assert_eq!(
        support::counter(CLAIMS_TOTAL, &[("consumer", c), ("outcome", "duplicate")]),
        2
    );
    // A rolled-back batch leaves nothing behind.
    let mut tx = store.begin().await.unwrap();
    let k4 = stripe_key("evt_m4");
    assert_eq!(
        inbox
            .claim_many(&mut tx, std::slice::from_ref(&k4))
            .await
            .unwrap(),
        [Claim::Fresh]
    );
    tx.rollback().await.unwrap();
    assert!(!support::in_inbox(&store, &consumer, &k4).await);
}

/// Concurrent batches over the same 200 keys in different orders: no deadlock, no error, each key
/// fresh in exactly one batch.
async fn concurrent_overlapping_batches_claim_each_key_once<DB: AppDb>(store: Store<DB>) {
    const BATCHES: usize = 8;
    let consumer = consumer("claim_many_race");
    let inbox = store.inbox(&consumer);
    let keys: Vec<DedupKey> = (0..200).map(|i| stripe_key(&format!("evt_b{i}"))).collect();
    let barrier = Arc::new(Barrier::new(BATCHES));
    let mut tasks = Vec::new();
    for b in 0..BATCHES {
        let (store, inbox, barrier) = (store.clone(), inbox.clone(), Arc::clone(&barrier));
        let mut batch = keys.clone();
        // A different order per batch: reversed, or rotated.
        if b % 2 == 1 {
            batch.reverse();
        }
        batch.rotate_left(b * 25);
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut tx = store.begin().await?;
            let claims = inbox.claim_many(&mut tx, &batch).await?;
            tx.commit().await?;
            Ok::<_, idem_sql::Error>(batch.into_iter().zip(claims).collect::<Vec<_>>())
        }));
    }
    let mut fresh: std::collections::HashMap<DedupKey, usize> = Default::default();
    for task in tasks {
        let claims = task
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("a batch failed with kind {:?}: {e}", e.kind()));
        for (key, claim) in claims {
            if claim == Claim::Fresh {
                *fresh.entry(key).or_default() += 1;
            }
        }
    }
    assert_eq!(fresh.len(), keys.len(), "every key was fresh in some batch");
    assert!(fresh.values().all(|n| *n == 1), "a key was fresh twice");
    assert_eq!(support::inbox_count(&store, &consumer).await, 200);
}

/// C1 on PostgreSQL: idem's transactions run at READ COMMITTED even when the server's default
/// is SERIALIZABLE (where concurrent claims would fail with 40001), and 32 concurrent deliveries
/// still give one applied and 31 duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_claims_use_read_committed_over_a_serializable_default() {
    use idem_sql::sqlx::postgres::PgPoolOptions;

    let pool = PgPoolOptions::new()
        .max_connections(16)
        .after_connect(|conn, _| {
            Box::pin(async move {
                idem_sql::sqlx::query("SET default_transaction_isolation = 'serializable'")
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect(&idem_testkit::pg_url().await)
        .await
        .unwrap();
    let store = idem_sql::PgStore::from_pool(pool);
    store.migrate().await.unwrap();

    let mut conn = store.pool().acquire().await.unwrap();
    let default: String = idem_sql::sqlx::query_scalar("SHOW transaction_isolation")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(default, "serializable", "the pool's default, outside idem");
    drop(conn);
    let mut tx = store.begin().await.unwrap();
    let level: String = idem_sql::sqlx::query_scalar("SHOW transaction_isolation")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    assert_eq!(level, "read committed");
    tx.rollback().await.unwrap();

    let consumer = consumer("pg_serializable_default");
    // max_attempts(1): a conflict must not be hidden by the runner's retries.
    let runner = Runner::new(store.clone(), &consumer).max_attempts(1);
    let barrier = Arc::new(Barrier::new(32));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (runner, barrier) = (runner.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            runner
                .run_boxed(&Event::new(stripe_key("evt_A")), |_tx| {
                    Box::pin(async { Ok(()) })
                })
                .await
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(
            task.await
                .unwrap()
                .map(|o| o.name())
                .map_err(|e| e.to_string()),
        );
    }
    let applied = outcomes.iter().filter(|o| **o == Ok("applied")).count();
    let duplicates = outcomes.iter().filter(|o| **o == Ok("duplicate")).count();
    assert_eq!((applied, duplicates), (1, 31), "{outcomes:?}");
}

all_stores!(
    waiting_claim_proceeds_after_rollback,
    claim_many_answers_in_input_order,
    concurrent_overlapping_batches_claim_each_key_once,
);
