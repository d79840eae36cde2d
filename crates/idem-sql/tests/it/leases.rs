//! Fenced leases on a manual clock: takeover after expiry, fencing of the stalled holder,
//! completion records, extend, release, `complete_in` and concurrent acquires.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Acquire, Error as RuleError, FencingToken, LeaseKey, ManualClock, Timestamp, Ttl};
use idem_sql::metric_definitions::LEASE_TAKEOVERS_TOTAL;
use idem_sql::{Error, ErrorKind, Store};
use idem_testkit::{AppDb, all_stores};
use tokio::sync::Barrier;

use crate::support::{self, consumer};

const T0: Timestamp = Timestamp(1_700_000_000_000);

fn ttl(secs: u64) -> Ttl {
    Ttl::new(Duration::from_secs(secs)).unwrap()
}

fn at(secs: i64) -> Timestamp {
    Timestamp(T0.0 + secs * 1000)
}

/// A lease key in a scope no other test uses.
fn lease_key(key: &str) -> LeaseKey {
    LeaseKey::new(consumer("lease_scope").to_string(), key).unwrap()
}

/// The lease's whole row, as text, to see that a refused call changed nothing.
async fn lease_row<DB: AppDb>(store: &Store<DB>, key: &LeaseKey) -> Vec<(String, String)> {
    let mut conn = store.pool().acquire().await.unwrap();
    DB::fetch_text_pairs(
        &mut conn,
        "SELECT state, CONCAT(token, '/', expires_at, '/', updated_at, '/', takeover, '/', \
         CASE WHEN record IS NULL THEN 'null' ELSE CONCAT(record) END) \
         FROM idem_leases WHERE scope = $1 AND lease_key = $2",
        vec![key.scope().into(), key.key().into()],
    )
    .await
    .unwrap()
}

fn assert_fenced(result: Result<(), Error>, token: i64, what: &str) {
    match result {
        Err(Error::Fenced { token: t, .. }) => assert_eq!(t, FencingToken(token), "{what}"),
        other => panic!("{what}: expected Error::Fenced, got {other:?}"),
    }
}

/// A acquires for 30 s and stalls; B at +10 s finds it in progress (nothing changes); C at +31 s
/// takes it over with token 2; A's complete and release at +40 s are fenced; C completes and a
/// later acquire returns C's record.
async fn stalled_holder_is_fenced_after_takeover<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    // The takeover counter has no consumer label: keep the other database's run out of it.
    let _only_us = support::UNLABELED_METRICS.lock().await;
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let leases = store.leases();
    let k1 = lease_key("k1");
    let takeovers0 = support::counter(LEASE_TAKEOVERS_TOTAL, &[]);

    assert_eq!(
        leases.acquire(&k1, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(1),
            expires_at: at(30),
            takeover: false
        },
        "A at t0"
    );

    clock.set(at(10));
    let before = lease_row(&store, &k1).await;
    assert_eq!(
        leases.acquire(&k1, ttl(30)).await.unwrap(),
        Acquire::InProgress { until: at(30) },
        "B at +10 s"
    );
    assert_eq!(lease_row(&store, &k1).await, before, "B changed the lease");

    clock.set(at(31));
    assert_eq!(
        leases.acquire(&k1, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(2),
            expires_at: at(61),
            takeover: true
        },
        "C at +31 s"
    );
    assert_eq!(
        support::counter(LEASE_TAKEOVERS_TOTAL, &[]) - takeovers0,
        1,
        "idem_lease_takeovers_total"
    );

    clock.set(at(40));
    let c_row = lease_row(&store, &k1).await;
    let complete = leases.complete(&k1, FencingToken(1), b"A's response").await;
    assert!(
        complete
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::Fenced)
    );
    assert_fenced(complete, 1, "A completes at +40 s");
    let release = leases.release(&k1, FencingToken(1)).await;
    assert!(
        release
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::Fenced)
    );
    assert_fenced(release, 1, "A releases at +40 s");
    assert_eq!(
        lease_row(&store, &k1).await,
        c_row,
        "A's writes changed C's lease"
    );

    leases
        .complete(&k1, FencingToken(2), b"C's response")
        .await
        .expect("C holds the lease");
    clock.set(at(50));
    assert_eq!(
        leases.acquire(&k1, ttl(30)).await.unwrap(),
        Acquire::Completed {
            record: b"C's response".to_vec()
        }
    );
    // Long after every expiry the completed record still stands, and A stays fenced.
    clock.set(at(3600));
    assert_eq!(
        leases.acquire(&k1, ttl(30)).await.unwrap(),
        Acquire::Completed {
            record: b"C's response".to_vec()
        }
    );
    assert_fenced(
        leases.complete(&k1, FencingToken(1), b"A again").await,
        1,
        "A after completion",
    );
    assert_eq!(
        support::counter(LEASE_TAKEOVERS_TOTAL, &[]) - takeovers0,
        1,
        "no further takeover"
    );
}

/// A zero ttl is refused (it would make every lease expired at once).
#[test]
fn zero_ttl_is_refused() {
    assert!(matches!(
        Ttl::new(Duration::ZERO),
        Err(RuleError::InvalidTtl { .. })
    ));
    assert!(Ttl::new(Duration::from_millis(1)).is_ok());
}

/// `extend` renews a live lease from now, and is refused once the lease has expired.
async fn extend_renews_live_leases_only<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let leases = store.leases();
    let k = lease_key("extend");
    let Acquire::Acquired { token, .. } = leases.acquire(&k, ttl(30)).await.unwrap() else {
        panic!("a free key is acquired");
    };
    assert_eq!(token, FencingToken(1));

    clock.set(at(20));
    assert_eq!(leases.extend(&k, token, ttl(30)).await.unwrap(), at(50));
    clock.set(at(45));
    assert_eq!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::InProgress { until: at(50) },
        "the extension holds others off past the first expiry"
    );
    let wrong = leases.extend(&k, FencingToken(7), ttl(30)).await;
    assert!(wrong.is_err_and(|e| e.kind() == ErrorKind::Fenced));

    clock.set(at(51));
    let late = leases.extend(&k, token, ttl(30)).await;
    assert!(
        matches!(
            late,
            Err(Error::Fenced {
                token: FencingToken(1),
                ..
            })
        ),
        "extend after expiry must be refused, got {late:?}"
    );
}

/// Release, then acquire: the next token (2), never token 1 again; the old token is fenced.
async fn release_then_acquire_gives_next_token<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let leases = store.leases();
    let k = lease_key("release");
    assert!(matches!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(1),
            ..
        }
    ));
    leases.release(&k, FencingToken(1)).await.unwrap();
    clock.set(at(1));
    assert_eq!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(2),
            expires_at: at(31),
            takeover: false
        }
    );
    assert_fenced(
        leases.release(&k, FencingToken(1)).await,
        1,
        "release with the old token",
    );
    assert_fenced(
        leases.complete(&k, FencingToken(1), b"old").await,
        1,
        "complete with the old token",
    );
    leases.release(&k, FencingToken(2)).await.unwrap();
    assert!(matches!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(3),
            ..
        }
    ));
}

/// `complete_in` inside a transaction that rolls back leaves the lease running with its holder.
async fn complete_in_rolled_back_leaves_lease_running<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let leases = store.leases();
    let k = lease_key("complete_in");
    assert!(matches!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(1),
            ..
        }
    ));
    let before = lease_row(&store, &k).await;

    let mut tx = store.begin().await.unwrap();
    leases
        .complete_in(&mut tx, &k, FencingToken(1), b"never committed")
        .await
        .expect("the holder may complete inside its transaction");
    tx.rollback().await.unwrap();

    assert_eq!(lease_row(&store, &k).await, before);
    clock.set(at(5));
    assert_eq!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::InProgress { until: at(30) }
    );
    leases
        .complete(&k, FencingToken(1), b"committed")
        .await
        .expect("the holder still holds it");
    assert_eq!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Completed {
            record: b"committed".to_vec()
        }
    );

    // And committed, `complete_in` stores the record with the transaction.
    let k2 = lease_key("complete_in_commit");
    assert!(matches!(
        leases.acquire(&k2, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(1),
            ..
        }
    ));
    let mut tx = store.begin().await.unwrap();
    leases
        .complete_in(&mut tx, &k2, FencingToken(1), b"in tx")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        leases.acquire(&k2, ttl(30)).await.unwrap(),
        Acquire::Completed {
            record: b"in tx".to_vec()
        }
    );
}

/// 32 tasks acquire one free key at the same moment: exactly one gets it (token 1), the others
/// see it in progress until the winner's expiry.
async fn concurrent_acquire_has_one_winner<DB: AppDb>(store: Store<DB>) {
    const TASKS: usize = 32;
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let k = lease_key("race");
    let barrier = Arc::new(Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (store, k, barrier) = (store.clone(), k.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            store.leases().acquire(&k, ttl(30)).await
        }));
    }
    let (mut acquired, mut in_progress) = (Vec::new(), 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(a @ Acquire::Acquired { .. }) => acquired.push(a),
            Ok(Acquire::InProgress { until }) => {
                assert_eq!(until, at(30));
                in_progress += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        acquired,
        [Acquire::Acquired {
            token: FencingToken(1),
            expires_at: at(30),
            takeover: false
        }]
    );
    assert_eq!(in_progress, TASKS - 1);
}

/// Once completed, a lease takes no more writes from its holder: a second `complete`, a
/// `release` and an `extend` are all fenced, and the first record stands.
async fn completed_lease_refuses_further_writes<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let leases = store.leases();
    let k = lease_key("completed");
    assert!(matches!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Acquired {
            token: FencingToken(1),
            ..
        }
    ));
    leases
        .complete(&k, FencingToken(1), b"first")
        .await
        .unwrap();
    assert_fenced(
        leases.complete(&k, FencingToken(1), b"second").await,
        1,
        "second complete",
    );
    assert_fenced(leases.release(&k, FencingToken(1)).await, 1, "release");
    assert!(
        leases
            .extend(&k, FencingToken(1), ttl(30))
            .await
            .is_err_and(|e| e.kind() == ErrorKind::Fenced)
    );
    clock.set(at(31));
    assert_eq!(
        leases.acquire(&k, ttl(30)).await.unwrap(),
        Acquire::Completed {
            record: b"first".to_vec()
        }
    );
}

/// A key reused for another request (another fingerprint) is a mismatch while the lease is live
/// and once it is completed, and changes nothing; the same request sees in-progress, then the
/// record; after expiry another request may take the lease over.
async fn fingerprint_mismatch_changes_nothing<DB: AppDb>(store: Store<DB>) {
    // It takes a lease over: keep out of the takeover count of the test above.
    let _only_us = support::UNLABELED_METRICS.lock().await;
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let leases = store.leases();
    let (k, done) = (lease_key("fp"), lease_key("fp_done"));
    for key in [&k, &done] {
        assert!(matches!(
            leases
                .acquire_with_fingerprint(key, b"POST /charges {a}", ttl(30))
                .await
                .unwrap(),
            Acquire::Acquired {
                token: FencingToken(1),
                ..
            }
        ));
    }
    leases
        .complete(&done, FencingToken(1), b"201 created")
        .await
        .unwrap();

    clock.set(at(10));
    let before = lease_row(&store, &k).await;
    assert_eq!(
        leases
            .acquire_with_fingerprint(&k, b"POST /charges {b}", ttl(30))
            .await
            .unwrap(),
        Acquire::FingerprintMismatch
    );
    assert_eq!(lease_row(&store, &k).await, before);
    assert_eq!(
        leases
            .acquire_with_fingerprint(&k, b"POST /charges {a}", ttl(30))
            .await
            .unwrap(),
        Acquire::InProgress { until: at(30) }
    );
    assert_eq!(
        leases
            .acquire_with_fingerprint(&done, b"POST /charges {b}", ttl(30))
            .await
            .unwrap(),
        Acquire::FingerprintMismatch
    );
    assert_eq!(
        leases
            .acquire_with_fingerprint(&done, b"POST /charges {a}", ttl(30))
            .await
            .unwrap(),
        Acquire::Completed {
            record: b"201 created".to_vec()
        }
    );

    clock.set(at(31));
    assert_eq!(
        leases
            .acquire_with_fingerprint(&k, b"POST /charges {b}", ttl(30))
            .await
            .unwrap(),
        Acquire::Acquired {
            token: FencingToken(2),
            expires_at: at(61),
            takeover: true
        }
    );
    assert_eq!(
        leases
            .acquire_with_fingerprint(&k, b"POST /charges {a}", ttl(30))
            .await
            .unwrap(),
        Acquire::FingerprintMismatch,
        "the new holder's fingerprint replaced the old one"
    );
}

/// `acquire_in` writes the lease with the caller's transaction: rolled back, the key is free
/// again at token 1; committed with `complete_in`, one commit leaves the record. A second acquire
/// issued while that transaction is open waits for it and then sees the record (no 409-style
/// in-progress answer, since the lease was never visible uncommitted).
async fn acquire_in_commits_with_the_callers_transaction<DB: AppDb>(store: Store<DB>) {
    let leases = store.leases();
    let k = lease_key("acquire_in");

    let mut tx = store.begin().await.unwrap();
    let Acquire::Acquired { token, .. } = leases
        .acquire_in(&mut tx, &k, b"fp", ttl(30))
        .await
        .unwrap()
    else {
        panic!("a free key is acquired inside the transaction");
    };
    assert_eq!(token, FencingToken(1));
    tx.rollback().await.unwrap();
    assert!(
        lease_row(&store, &k).await.is_empty(),
        "rolled back: no lease row"
    );

    let mut tx = store.begin().await.unwrap();
    let Acquire::Acquired { token, .. } = leases
        .acquire_in(&mut tx, &k, b"fp", ttl(30))
        .await
        .unwrap()
    else {
        panic!("the key is free again after the rollback");
    };
    assert_eq!(
        token,
        FencingToken(1),
        "the rolled-back acquisition left no token behind"
    );
    let waiter = {
        let (leases, k) = (leases.clone(), k.clone());
        tokio::spawn(async move { leases.acquire_with_fingerprint(&k, b"fp", ttl(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiter.is_finished(),
        "a second acquire waits for the open transaction"
    );
    leases
        .complete_in(&mut tx, &k, token, b"response")
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        waiter.await.unwrap().unwrap(),
        Acquire::Completed {
            record: b"response".to_vec()
        }
    );
}

all_stores!(
    acquire_in_commits_with_the_callers_transaction,
    completed_lease_refuses_further_writes,
    fingerprint_mismatch_changes_nothing,
    stalled_holder_is_fenced_after_takeover,
    extend_renews_live_leases_only,
    release_then_acquire_gives_next_token,
    complete_in_rolled_back_leaves_lease_running,
    concurrent_acquire_has_one_winner,
);
