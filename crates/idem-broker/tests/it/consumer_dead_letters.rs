//! The dead-letter table behind the consumers (`Store::dead_letters`) on both stores: one row per
//! (consumer, dedup key) however often it is recorded, list/get/delete, and retention never
//! deleting a dead letter (docs/design.md C9).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{
    DedupKey, Entity, EventId, ManualClock, Name, RetentionPolicy, Timestamp, horizon,
};
use idem_sql::{DeadLetterRecord, Store};
use idem_testkit::{AppDb, all_stores};

/// January 1970, before any other test's time, so that GC's cutoff reaches only this test's rows
/// in a database other tests of this binary may share.
const T0: Timestamp = Timestamp(1_000_000_000);
const DAY: Duration = Duration::from_secs(24 * 3600);

fn letter(consumer: &Name, event: &str, error: &str, delivery_count: u32) -> DeadLetterRecord {
    let source = Name::new("source", "orders").unwrap();
    DeadLetterRecord {
        consumer: consumer.clone(),
        source: source.clone(),
        event_id: Some(format!("msg-{event}")),
        dedup_key: Some(DedupKey::from_event(&source, &EventId::new(event).unwrap())),
        entity: Some(Entity::new("order", "o1").unwrap()),
        destination: "orders.created".into(),
        headers: vec![("Nats-Msg-Id".into(), format!("msg-{event}"))],
        payload: b"{\"id\":1}".to_vec(),
        error: error.into(),
        delivery_count,
    }
}

fn unique_consumer(prefix: &str) -> Name {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    Name::new("consumer", format!("{prefix}_{nanos}_v2")).unwrap()
}

all_stores!(recording_one_event_twice_keeps_one_row);
async fn recording_one_event_twice_keeps_one_row<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = unique_consumer("dl_twice");
    let dead = store.dead_letters();

    let first = dead
        .record(&letter(&consumer, "e1", "card declined", 5))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(60));
    // The same event again (a redelivery after a lost TERM failed once more).
    let second = dead
        .record(&letter(&consumer, "e1", "card expired", 6))
        .await
        .unwrap();
    assert_eq!(first, second, "one row per (consumer, dedup key)");

    let rows = dead.list(&consumer, 10).await.unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row.error, "card expired");
    assert_eq!(row.delivery_count, 6);
    assert_eq!(row.first_failed_at, T0);
    assert_eq!(row.last_failed_at, Timestamp(T0.as_millis() + 60_000));
    assert_eq!(row.dedup_key.as_deref(), Some("orders:e1"));
    assert_eq!(row.event_id.as_deref(), Some("msg-e1"));
    assert_eq!(
        row.headers,
        vec![("Nats-Msg-Id".to_owned(), "msg-e1".to_owned())]
    );
    assert_eq!(row.payload, b"{\"id\":1}");

    // Another consumer's dead letter of the same event is its own row.
    let other = unique_consumer("dl_other");
    let third = dead
        .record(&letter(&other, "e1", "timeout", 5))
        .await
        .unwrap();
    assert_ne!(third, first);
    assert_eq!(dead.list(&consumer, 10).await.unwrap().len(), 1);
}

all_stores!(undecodable_messages_get_a_row_each_and_list_get_delete_work);
async fn undecodable_messages_get_a_row_each_and_list_get_delete_work<DB: AppDb>(store: Store<DB>) {
    let consumer = unique_consumer("dl_list");
    let dead = store.dead_letters();
    let undecodable = |n: u8| DeadLetterRecord {
        event_id: None,
        dedup_key: None,
        entity: None,
        payload: vec![0xff, n],
        ..letter(&consumer, "x", "the message has no message id", 1)
    };
    let a = dead.record(&undecodable(1)).await.unwrap();
    let b = dead.record(&undecodable(2)).await.unwrap();
    let c = dead
        .record(&letter(&consumer, "e9", "boom", 3))
        .await
        .unwrap();
    assert_ne!(a, b, "no dedup key: never merged");

    let ids: Vec<i64> = dead
        .list(&consumer, 10)
        .await
        .unwrap()
        .iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(ids, vec![a, b, c], "oldest first");
    let first_two: Vec<i64> = dead
        .list(&consumer, 2)
        .await
        .unwrap()
        .iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(first_two, vec![a, b]);

    let got = dead.get(b).await.unwrap().expect("row b");
    assert_eq!((got.dedup_key, got.payload), (None, vec![0xff, 2]));
    assert!(dead.delete(b).await.unwrap());
    assert!(!dead.delete(b).await.unwrap(), "already deleted");
    assert!(dead.get(b).await.unwrap().is_none());
    assert_eq!(dead.list(&consumer, 10).await.unwrap().len(), 2);
}

all_stores!(retention_never_deletes_dead_letters);
async fn retention_never_deletes_dead_letters<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = unique_consumer("dl_gc");
    let id = store
        .dead_letters()
        .record(&letter(&consumer, "e1", "boom", 5))
        .await
        .unwrap();
    // Far past any retention: a year later, keeping 3 days.
    clock.advance(365 * DAY);
    let policy = RetentionPolicy::new(3 * DAY, horizon::STRIPE).unwrap();
    store
        .gc(&policy, NonZeroU32::new(100).unwrap())
        .await
        .unwrap();
    assert!(
        store.dead_letters().get(id).await.unwrap().is_some(),
        "dead letters wait for an operator"
    );
}
