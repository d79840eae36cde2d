//! The Kafka offsets store (`idem_sql::KafkaOffsets`) on SQLite and PostgreSQL, on a manual
//! clock: partition leases and their fences, the compare-and-set advance inside the caller's
//! transaction, failure counts, and live members.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Acquire, ManualClock, Name, RetentionPolicy, Timestamp, Ttl};
use idem_sql::{ErrorKind, KafkaOffsets, PartitionClaim, PartitionFence, Store};
use idem_testkit::{AppDb, Value, all_stores, query_i64};

const T0: Timestamp = Timestamp(1_764_000_000_000);
const TOPIC: &str = "orders";

fn ttl(ms: u64) -> Ttl {
    Ttl::new(Duration::from_millis(ms)).expect("a ttl")
}

/// A store on a manual clock at `start`, a fresh consumer's offsets, and the application's
/// table. The PostgreSQL tests of this binary share a database: a concurrent CREATE may fail
/// once, and is tried again.
async fn prepared_at<DB: AppDb>(
    store: Store<DB>,
    start: Timestamp,
) -> (Store<DB>, ManualClock, KafkaOffsets<DB>) {
    let clock = ManualClock::new(start);
    let store = store.with_clock(Arc::new(clock.clone()));
    for attempt in 0..5 {
        let mut conn = store.pool().acquire().await.expect("a connection");
        let created = DB::execute(
            &mut conn,
            "CREATE TABLE IF NOT EXISTS offsets_test_output (consumer TEXT NOT NULL, note TEXT NOT NULL)",
            vec![],
        )
        .await;
        match created {
            Ok(_) => break,
            Err(e) if attempt < 4 => {
                eprintln!("create offsets_test_output, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("create offsets_test_output: {e}"),
        }
    }
    let consumer = Name::new(
        "consumer",
        format!("offsets_{}_{}_v1", std::process::id(), rand_suffix()),
    )
    .expect("a consumer name");
    let offsets = store.kafka_offsets(&consumer);
    (store, clock, offsets)
}

async fn prepared<DB: AppDb>(store: Store<DB>) -> (Store<DB>, ManualClock, KafkaOffsets<DB>) {
    prepared_at(store, T0).await
}

fn rand_suffix() -> u32 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos ^ N.fetch_add(1, Ordering::Relaxed)
}

async fn acquired<DB: AppDb>(
    offsets: &KafkaOffsets<DB>,
    holder: &str,
    ttl_ms: u64,
) -> (PartitionFence, Option<i64>, bool) {
    match offsets
        .acquire(TOPIC, 0, holder, ttl(ttl_ms))
        .await
        .expect("acquire")
    {
        PartitionClaim::Acquired {
            fence,
            next_offset,
            takeover,
            ..
        } => (fence, next_offset, takeover),
        other => panic!("{holder} expected the partition, got {other:?}"),
    }
}

/// Writes an output row and advances `from → to` in one transaction; commits only when the
/// advance was accepted. Returns the advance's result.
async fn write_and_advance<DB: AppDb>(
    store: &Store<DB>,
    offsets: &KafkaOffsets<DB>,
    fence: &PartitionFence,
    note: &str,
    (from, to): (i64, i64),
) -> Result<(), idem_sql::Error> {
    let mut tx = store.begin().await.expect("begin");
    DB::execute(
        &mut *tx,
        "INSERT INTO offsets_test_output (consumer, note) VALUES ($1, $2)",
        vec![Value::from(offsets.consumer().as_str()), Value::from(note)],
    )
    .await
    .expect("write the output");
    offsets.advance_in(&mut tx, fence, from, to).await?;
    tx.commit().await.expect("commit");
    Ok(())
}

async fn notes<DB: AppDb>(store: &Store<DB>, offsets: &KafkaOffsets<DB>, note: &str) -> i64 {
    query_i64(
        store,
        "SELECT COUNT(*) FROM offsets_test_output WHERE consumer = $1 AND note = $2",
        vec![Value::from(offsets.consumer().as_str()), Value::from(note)],
    )
    .await[0]
}

/// A holder whose lease was taken over can neither advance the offset nor, so, commit the
/// output written in the same transaction; nor renew, release or load its fence.
async fn a_taken_over_partition_fences_its_old_holder<DB: AppDb>(store: Store<DB>) {
    let (store, clock, offsets) = prepared(store).await;
    let (a, next, takeover) = acquired(&offsets, "a", 1_000).await;
    assert_eq!(
        (next, takeover),
        (None, false),
        "a fresh partition, not started"
    );
    assert_eq!(
        offsets.acquire(TOPIC, 0, "b", ttl(1_000)).await.unwrap(),
        PartitionClaim::Held {
            until: Timestamp(T0.0 + 1_000)
        }
    );
    assert_eq!(offsets.start_at(&a, 0).await.unwrap(), 0);
    write_and_advance(&store, &offsets, &a, "a-before", (0, 5))
        .await
        .expect("a holds the partition");

    clock.advance(Duration::from_millis(1_500));
    let (b, next, takeover) = acquired(&offsets, "b", 1_000).await;
    assert_eq!(
        (next, takeover),
        (Some(5), true),
        "b resumes where a stored"
    );
    assert_eq!(b.token().0, a.token().0 + 1);

    let refused = write_and_advance(&store, &offsets, &a, "a-zombie", (5, 8)).await;
    assert_eq!(refused.map_err(|e| e.kind()), Err(ErrorKind::Fenced));
    assert_eq!(
        notes(&store, &offsets, "a-zombie").await,
        0,
        "the zombie's output rolled back"
    );
    for kind in [
        offsets
            .renew(&a, ttl(1_000))
            .await
            .map(|_| ())
            .map_err(|e| e.kind()),
        offsets.release(&a).await.map_err(|e| e.kind()),
        offsets.load(&a).await.map(|_| ()).map_err(|e| e.kind()),
    ] {
        assert_eq!(kind, Err(ErrorKind::Fenced));
    }

    write_and_advance(&store, &offsets, &b, "b", (5, 8))
        .await
        .expect("b holds the partition");
    let row = offsets.load(&b).await.unwrap();
    assert_eq!((row.next_offset, row.holder.as_str()), (Some(8), "b"));
    assert_eq!(notes(&store, &offsets, "a-before").await, 1);
}

/// The advance moves only from the stored offset, never back; failures are counted at the
/// stored offset and cleared by the next advance.
async fn the_advance_is_a_compare_and_set<DB: AppDb>(store: Store<DB>) {
    let (store, _clock, offsets) = prepared(store).await;
    let (a, _, _) = acquired(&offsets, "a", 60_000).await;
    assert_eq!(offsets.start_at(&a, 10).await.unwrap(), 10);
    assert_eq!(
        offsets.start_at(&a, 99).await.unwrap(),
        10,
        "the first start stays"
    );
    for (from, to) in [(9, 12), (11, 12), (10, 9)] {
        let refused = write_and_advance(&store, &offsets, &a, "bad", (from, to)).await;
        assert_eq!(
            refused.map_err(|e| e.kind()),
            Err(ErrorKind::Fenced),
            "{from}→{to}"
        );
    }
    assert_eq!(notes(&store, &offsets, "bad").await, 0);
    // Still a's: load tells an outdated view apart from a takeover.
    assert_eq!(offsets.load(&a).await.unwrap().next_offset, Some(10));

    for expected in 1..=2 {
        let mut tx = store.begin().await.unwrap();
        let n = offsets
            .record_failure_in(&mut tx, &a, 10, &format!("boom {expected}"))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(n, expected);
    }
    let row = offsets.get(TOPIC, 0).await.unwrap().unwrap();
    assert_eq!(
        (row.attempts, row.last_error.as_deref()),
        (2, Some("boom 2"))
    );
    write_and_advance(&store, &offsets, &a, "ok", (10, 11))
        .await
        .unwrap();
    let row = offsets.get(TOPIC, 0).await.unwrap().unwrap();
    assert_eq!(
        (row.next_offset, row.attempts, row.last_error),
        (Some(11), 0, None)
    );
    let mut tx = store.begin().await.unwrap();
    let stale = offsets.record_failure_in(&mut tx, &a, 10, "old").await;
    assert_eq!(
        stale.map_err(|e| e.kind()),
        Err(ErrorKind::Fenced),
        "not the stored offset"
    );
}

/// Retention may delete a long-expired partition lease, so that the next holder starts again at
/// token 1, the old holder's token: the member id in the fence still tells them apart.
async fn a_lease_deleted_by_retention_does_not_unfence_an_old_holder<DB: AppDb>(store: Store<DB>) {
    // A day before the other tests' clock, so that this retention run deletes none of their
    // leases (they share the PostgreSQL database).
    let (store, clock, offsets) = prepared_at(store, Timestamp(T0.0 - 86_400_000)).await;
    let (a, _, _) = acquired(&offsets, "a", 1_000).await;
    offsets.start_at(&a, 0).await.unwrap();
    clock.advance(Duration::from_secs(600));
    let policy = RetentionPolicy::new(Duration::from_secs(60), Duration::from_secs(60)).unwrap();
    let gone = store
        .gc(&policy, NonZeroU32::new(100).unwrap())
        .await
        .unwrap();
    assert!(gone.leases >= 1, "the expired lease was deleted: {gone:?}");
    let (b, next, _) = acquired(&offsets, "b", 1_000).await;
    assert_eq!((b.token(), next), (a.token(), Some(0)), "token 1 again");
    let refused = write_and_advance(&store, &offsets, &a, "a-zombie", (0, 3)).await;
    assert_eq!(refused.map_err(|e| e.kind()), Err(ErrorKind::Fenced));
    assert_eq!(notes(&store, &offsets, "a-zombie").await, 0);
    write_and_advance(&store, &offsets, &b, "b", (0, 3))
        .await
        .unwrap();
}

/// Live members are those whose member lease has not expired, sorted by id.
async fn live_members_are_the_unexpired_member_leases<DB: AppDb>(store: Store<DB>) {
    let (store, clock, offsets) = prepared(store).await;
    let leases = store.leases();
    for (member, ms) in [("m2", 1_000), ("m1", 1_000), ("m3", 5_000)] {
        let key = offsets.member_lease(TOPIC, member).unwrap();
        assert!(matches!(
            leases.acquire(&key, ttl(ms)).await.unwrap(),
            Acquire::Acquired { .. }
        ));
    }
    // A partition lease of the same scope is not a member.
    acquired(&offsets, "m1", 1_000).await;
    assert_eq!(
        offsets.live_members(TOPIC).await.unwrap(),
        ["m1", "m2", "m3"]
    );
    assert!(offsets.live_members("other").await.unwrap().is_empty());
    clock.advance(Duration::from_millis(2_000));
    assert_eq!(offsets.live_members(TOPIC).await.unwrap(), ["m3"]);
}

all_stores!(
    a_taken_over_partition_fences_its_old_holder,
    the_advance_is_a_compare_and_set,
    a_lease_deleted_by_retention_does_not_unfence_an_old_holder,
    live_members_are_the_unexpired_member_leases,
);
