//! C9: retention refuses windows shorter than the redelivery horizon, and GC deletes old keys in
//! batches while keeping version rows and live leases.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    Acquire, DedupKey, Entity, Error as RuleError, FencingToken, LeaseKey, ManualClock,
    RetentionPolicy, Timestamp, Ttl, Version, horizon,
};
use idem_sql::{ErrorKind, GcReport, Store};
use idem_testkit::{AppDb, all_stores, query_i64};

use crate::support::{self, consumer, stripe_key};

const DAY: Duration = Duration::from_secs(24 * 3600);

/// The retention test's clock stands in January 1970, far before any other test's time (manual
/// clocks elsewhere start in 2023, the others use the system clock), so that its cutoff can only
/// reach rows this test wrote, even in the PostgreSQL database shared by the whole binary.
const T0: Timestamp = Timestamp(1_000_000_000);

#[test]
fn retention_shorter_than_stripe_horizon_is_refused() {
    let err = RetentionPolicy::new(DAY, horizon::STRIPE).unwrap_err();
    assert_eq!(
        err,
        RuleError::RetentionTooShort {
            retention: DAY,
            horizon: horizon::STRIPE
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("86400") && text.contains("259200"),
        "the message must name both numbers: {text}"
    );
    assert_eq!(idem_sql::Error::from(err).kind(), ErrorKind::InvalidInput);
    assert_eq!(
        RetentionPolicy::new(3 * DAY, horizon::STRIPE)
            .unwrap()
            .keep(),
        3 * DAY
    );
}

async fn lease_rows<DB: AppDb>(store: &Store<DB>, scope: &str) -> Vec<(String, String)> {
    let mut conn = store.pool().acquire().await.unwrap();
    let mut rows = DB::fetch_text_pairs(
        &mut conn,
        "SELECT lease_key, state FROM idem_leases WHERE scope = $1",
        vec![scope.into()],
    )
    .await
    .unwrap();
    rows.sort();
    rows
}

/// Keep 3 days, GC 4 days later in batches of 10: the 25 old inbox keys go, the 5 new ones stay;
/// version rows stay; a live lease stays; completed, released and long-expired leases go.
async fn gc_deletes_old_rows_in_batches<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = consumer("gc");
    let inbox = store.inbox(&consumer);
    let guard = store.version_guard(&consumer);
    let scope = consumer.to_string();
    let leases = store.leases();
    let lease = |k: &str| LeaseKey::new(scope.clone(), k).unwrap();
    let ttl = |d: Duration| Ttl::new(d).unwrap();

    // At T0: 25 processed keys and 3 entity versions.
    let old_keys: Vec<DedupKey> = (0..25)
        .map(|i| stripe_key(&format!("evt_old_{i}")))
        .collect();
    let mut tx = store.begin().await.unwrap();
    for key in &old_keys {
        assert_eq!(
            inbox.claim(&mut tx, key).await.unwrap(),
            idem_sql::Claim::Fresh
        );
    }
    for id in ["sub_1", "sub_2", "sub_3"] {
        guard
            .advance(
                &mut tx,
                &Entity::new("subscription", id).unwrap(),
                &Version::timestamp(1),
                &stripe_key(&format!("evt_v_{id}")),
            )
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();

    // At T0: a lease that stays live past the GC (7 days), one completed, one released, and a
    // running one that expires after 1 hour, long before the cutoff.
    for (k, d) in [
        ("live", 7 * DAY),
        ("completed", DAY),
        ("released", DAY),
        ("expired", Duration::from_secs(3600)),
    ] {
        assert!(matches!(
            leases.acquire(&lease(k), ttl(d)).await.unwrap(),
            Acquire::Acquired {
                token: FencingToken(1),
                ..
            }
        ));
    }
    leases
        .complete(&lease("completed"), FencingToken(1), b"done")
        .await
        .unwrap();
    leases
        .release(&lease("released"), FencingToken(1))
        .await
        .unwrap();

    // Four days later: 5 new keys. Cutoff = now - 3 days = T0 + 1 day.
    clock.advance(4 * DAY);
    let new_keys: Vec<DedupKey> = (0..5)
        .map(|i| stripe_key(&format!("evt_new_{i}")))
        .collect();
    let mut tx = store.begin().await.unwrap();
    for key in &new_keys {
        assert_eq!(
            inbox.claim(&mut tx, key).await.unwrap(),
            idem_sql::Claim::Fresh
        );
    }
    tx.commit().await.unwrap();

    let policy = RetentionPolicy::new(3 * DAY, horizon::STRIPE).unwrap();
    let report = store
        .gc(&policy, NonZeroU32::new(10).unwrap())
        .await
        .unwrap();
    assert_eq!(
        report,
        GcReport {
            inbox: 25,
            leases: 3,
            parked: 0,
            outbox: 0,
            effects: 0,
        }
    );

    assert_eq!(support::inbox_count(&store, &consumer).await, 5);
    for key in &new_keys {
        assert!(support::in_inbox(&store, &consumer, key).await, "{key}");
    }
    for key in &old_keys {
        assert!(!support::in_inbox(&store, &consumer, key).await, "{key}");
    }
    assert_eq!(support::version_rows(&store, &consumer).await, 3);
    assert_eq!(
        lease_rows(&store, &scope).await,
        [("live".to_owned(), "running".to_owned())]
    );
    assert_eq!(
        leases.acquire(&lease("live"), ttl(DAY)).await.unwrap(),
        Acquire::InProgress {
            until: T0.saturating_add(7 * DAY)
        },
        "the live lease survives GC"
    );

    // A second run finds nothing more to delete.
    assert_eq!(
        store
            .gc(&policy, NonZeroU32::new(10).unwrap())
            .await
            .unwrap(),
        GcReport::default()
    );
    let versions = query_i64(
        &store,
        "SELECT version FROM idem_versions WHERE consumer = $1",
        vec![consumer.as_str().into()],
    )
    .await;
    assert_eq!(versions, [1, 1, 1]);
}

all_stores!(gc_deletes_old_rows_in_batches);
