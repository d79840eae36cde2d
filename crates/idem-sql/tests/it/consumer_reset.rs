//! Resetting a consumer for a rebuild (issue 33, part 4; docs/design.md C9): its inbox keys,
//! version-guard rows, parked markers and Kafka offsets go, in one transaction; its effects,
//! outbox rows, dead letters and lineage row, and every other consumer's rows, stay. A live
//! consumer, the gateway's own and an unknown one are refused with nothing deleted.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Entity, GapPolicy, ManualClock, Name, Timestamp, Ttl, Version};
use idem_sql::{
    DeadLetterRecord, Enqueued, Error, ErrorKind, Event, OutboxMessage, Outcome, PartitionClaim,
    ResetOptions, Runner, Store,
};
use idem_testkit::{AppDb, all_stores, query_i64};

use crate::support::{consumer, stripe_key};

const START: Timestamp = Timestamp(1_800_000_000_000);
const TOPIC: &str = "payments";

/// (inbox, versions, parked, kafka offsets) rows of `consumer`.
async fn cursor_rows<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> [i64; 4] {
    let name = || vec![consumer.as_str().into()];
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
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_parked WHERE consumer = $1",
            name(),
        )
        .await[0],
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_kafka_offsets WHERE consumer = $1",
            name(),
        )
        .await[0],
    ]
}

/// (effects of `effect`, outbox rows to `effect`'s name, dead letters of `consumer`, lineage
/// rows of `consumer`): what a reset never touches.
async fn kept_rows<DB: AppDb>(store: &Store<DB>, effect: &Name, consumer: &Name) -> [i64; 4] {
    let effect_name = || vec![effect.as_str().into()];
    let name = || vec![consumer.as_str().into()];
    [
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_effects WHERE effect = $1",
            effect_name(),
        )
        .await[0],
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_outbox WHERE destination = $1",
            effect_name(),
        )
        .await[0],
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_dead_letters WHERE consumer = $1",
            name(),
        )
        .await[0],
        query_i64(
            store,
            "SELECT COUNT(*) FROM idem_consumer_lineage WHERE consumer = $1",
            name(),
        )
        .await[0],
    ]
}

/// The events every consumer here handles: `evt_0`…`evt_4` on accounts a0 and a1 (sequences
/// 1, 1, 2, 2, 3), `evt_b1` on account b at 1, and `evt_b3` at 3, which the park policy holds.
fn events() -> Vec<Event> {
    let account = |id: &str| Entity::new("account", id).unwrap();
    let mut events: Vec<Event> = (0..5)
        .map(|n| {
            Event::new(stripe_key(&format!("evt_{n}"))).with_entity(
                account(&format!("a{}", n % 2)),
                Version::sequence(n / 2 + 1),
            )
        })
        .collect();
    events.push(Event::new(stripe_key("evt_b1")).with_entity(account("b"), Version::sequence(1)));
    events.push(Event::new(stripe_key("evt_b3")).with_entity(account("b"), Version::sequence(3)));
    events
}

/// Runs `events()` through `runner`; each applied one enqueues a receipt effect and (with
/// `publish`) an outbox message. Returns the outcomes' names and what each enqueue answered.
async fn feed<DB: AppDb>(
    store: &Store<DB>,
    runner: &Runner<DB>,
    effect: &Name,
    publish: bool,
) -> Vec<(&'static str, Option<Enqueued>)> {
    let (ledger, outbox) = (store.effects(), store.outbox());
    let mut seen = Vec::new();
    for event in events() {
        let outcome = runner
            .run(&event, async |tx| {
                let enqueued = runner
                    .enqueue_effect(tx, &ledger, &event, effect, event.key.as_str().as_bytes())
                    .await?;
                if publish {
                    let message = OutboxMessage::new(effect.as_str(), event.key.as_str());
                    outbox.enqueue(tx, &message).await?;
                }
                Ok(enqueued)
            })
            .await
            .unwrap();
        let enqueued = match &outcome {
            Outcome::Applied(e) | Outcome::Gap { value: e, .. } => Some(e.clone()),
            _ => None,
        };
        seen.push((outcome.name(), enqueued));
    }
    seen
}

fn parking<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> Runner<DB> {
    Runner::new(store.clone(), consumer).gap_policy(GapPolicy::Park {
        timeout: Duration::from_secs(3600),
    })
}

/// Takes and releases partition 0 of [`TOPIC`] for `consumer`: its offsets row stays.
async fn kafka_row<DB: AppDb>(store: &Store<DB>, consumer: &Name) {
    let offsets = store.kafka_offsets(consumer);
    let ttl = Ttl::new(Duration::from_secs(300)).unwrap();
    let PartitionClaim::Acquired { fence, .. } =
        offsets.acquire(TOPIC, 0, "m1", ttl).await.unwrap()
    else {
        panic!("partition 0 is free");
    };
    offsets.start_at(&fence, 0).await.unwrap();
    offsets.release(&fence).await.unwrap();
}

fn dead_letter(consumer: &Name) -> DeadLetterRecord {
    DeadLetterRecord {
        consumer: consumer.clone(),
        source: Name::new("source", "stripe").unwrap(),
        event_id: Some("evt_dead".into()),
        dedup_key: Some(stripe_key("evt_dead")),
        entity: None,
        destination: "payments".into(),
        headers: vec![],
        payload: b"{}".to_vec(),
        error: "boom".into(),
        delivery_count: 3,
    }
}

/// A stopped consumer (its last claim more than a minute ago, its lease released) is reset:
/// exactly its 6 inbox keys, 3 version rows, 1 parked marker and 1 offsets row go; a dry run
/// first counts the same and deletes nothing; the other consumer's rows, all 12 effects, 12
/// outbox rows, the dead letter and the lineage row stay. Then the same events run again:
/// applied, not duplicates, and their effects are the stored ones (nothing created).
async fn a_stopped_consumer_is_reset_and_runs_again<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(START);
    let store = store.with_clock(Arc::new(clock.clone()));
    let (target, other) = (consumer("reset_target"), consumer("reset_other"));
    let scope = Name::new("consumer", format!("{target}_scope")).unwrap();
    let effect = Name::new("effect", consumer("reset_receipt").as_str()).unwrap();
    feed(
        &store,
        &parking(&store, &target).effects_scope(&scope),
        &effect,
        true,
    )
    .await;
    feed(&store, &parking(&store, &other), &effect, true).await;
    kafka_row(&store, &target).await;
    kafka_row(&store, &other).await;
    store
        .dead_letters()
        .record(&dead_letter(&target))
        .await
        .unwrap();
    let cursor = [6, 3, 1, 1];
    assert_eq!(cursor_rows(&store, &target).await, cursor);
    assert_eq!(cursor_rows(&store, &other).await, cursor);
    let kept = kept_rows(&store, &effect, &target).await;
    assert_eq!(kept, [12, 12, 1, 1]);

    clock.advance(Duration::from_secs(61));
    let dry = store
        .reset_consumer(&target, &ResetOptions::new().dry_run(true))
        .await
        .unwrap();
    assert!(dry.dry_run);
    assert_eq!(dry.tables(), reported(cursor));
    assert_eq!(dry.last_seen, Some(START));
    assert_eq!(
        cursor_rows(&store, &target).await,
        cursor,
        "a dry run deletes nothing"
    );

    let done = store
        .reset_consumer(&target, &ResetOptions::new())
        .await
        .unwrap();
    assert!(!done.dry_run);
    assert_eq!((done.tables(), done.total()), (reported(cursor), 11));
    assert_eq!(cursor_rows(&store, &target).await, [0, 0, 0, 0]);
    assert_eq!(
        cursor_rows(&store, &other).await,
        cursor,
        "another consumer's rows stay"
    );
    assert_eq!(
        kept_rows(&store, &effect, &target).await,
        kept,
        "effects, outbox, dead letters, lineage stay"
    );
    assert!(
        store
            .kafka_offsets(&target)
            .get(TOPIC, 0)
            .await
            .unwrap()
            .is_none()
    );

    let again = feed(
        &store,
        &parking(&store, &target).effects_scope(&scope),
        &effect,
        false,
    )
    .await;
    let names: Vec<&str> = again.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        [
            "applied",
            "applied",
            "applied",
            "applied",
            "applied",
            "applied",
            "gap_parked"
        ]
    );
    assert!(
        again
            .iter()
            .flat_map(|(_, e)| e)
            .all(|e| matches!(e, Enqueued::Pending { .. })),
        "every effect is the stored one: {again:?}"
    );
    assert_eq!(kept_rows(&store, &effect, &target).await, kept);
    assert_eq!(
        cursor_rows(&store, &target).await,
        [6, 3, 1, 0],
        "read again, no offsets yet"
    );
}

fn reported(rows: [i64; 4]) -> [(&'static str, u64); 4] {
    let names = [
        "idem_inbox",
        "idem_versions",
        "idem_parked",
        "idem_kafka_offsets",
    ];
    std::array::from_fn(|i| (names[i], rows[i] as u64))
}

/// A consumer that claimed 10 s ago is refused; so is one holding a live partition lease,
/// however long ago it last claimed; neither refusal deletes a row.
async fn a_live_consumer_is_refused<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(START);
    let store = store.with_clock(Arc::new(clock.clone()));
    let live = consumer("reset_live");
    let effect = Name::new("effect", consumer("reset_live_fx").as_str()).unwrap();
    feed(&store, &parking(&store, &live), &effect, false).await;
    let before = cursor_rows(&store, &live).await;
    assert_eq!(before, [6, 3, 1, 0]);

    clock.advance(Duration::from_secs(10));
    let refused = store.reset_consumer(&live, &ResetOptions::new()).await;
    match &refused {
        Err(e @ Error::ConsumerLive { reason, .. }) => {
            assert_eq!(e.kind(), ErrorKind::InUse);
            assert!(reason.contains("10000 ms ago"), "{reason}");
        }
        other => panic!("expected ConsumerLive: {other:?}"),
    }
    assert_eq!(cursor_rows(&store, &live).await, before);

    let offsets = store.kafka_offsets(&live);
    let ttl = Ttl::new(Duration::from_secs(600)).unwrap();
    let claim = offsets.acquire(TOPIC, 3, "m1", ttl).await.unwrap();
    assert!(matches!(claim, PartitionClaim::Acquired { .. }));
    clock.advance(Duration::from_secs(300));
    for dry_run in [true, false] {
        let refused = store
            .reset_consumer(&live, &ResetOptions::new().dry_run(dry_run))
            .await;
        match &refused {
            Err(Error::ConsumerLive { reason, .. }) => {
                assert!(reason.contains(&format!("kafka/{live}")), "{reason}");
                assert!(reason.contains("payments/3"), "{reason}");
            }
            other => panic!("expected ConsumerLive: {other:?}"),
        }
    }
    assert_eq!(cursor_rows(&store, &live).await, [6, 3, 1, 1]);
}

/// The gateway's inbox consumer and a protected one are refused naming what to do instead;
/// an unknown name is refused listing the known ones; nothing is deleted.
async fn gateway_protected_and_unknown_consumers_are_refused<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(START);
    let store = store.with_clock(Arc::new(clock.clone()));
    let gateway = Name::new("consumer", "idem-gateway").unwrap();
    match store.reset_consumer(&gateway, &ResetOptions::new()).await {
        Err(e @ Error::ConsumerProtected { .. }) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput);
            assert!(
                e.to_string()
                    .contains("idem replay --source S --since … --rebuild"),
                "{e}"
            );
        }
        other => panic!("expected ConsumerProtected: {other:?}"),
    }
    let known = consumer("reset_known");
    let effect = Name::new("effect", consumer("reset_known_fx").as_str()).unwrap();
    feed(&store, &parking(&store, &known), &effect, false).await;
    clock.advance(Duration::from_secs(120));
    let options = ResetOptions::new().protect(known.as_str(), "route orders guards its versions");
    match store.reset_consumer(&known, &options).await {
        Err(Error::ConsumerProtected { reason, .. }) => {
            assert_eq!(reason, "route orders guards its versions");
        }
        other => panic!("expected ConsumerProtected: {other:?}"),
    }
    let unknown = consumer("reset_nobody");
    for dry_run in [true, false] {
        match store
            .reset_consumer(&unknown, &ResetOptions::new().dry_run(dry_run))
            .await
        {
            Err(e @ Error::UnknownConsumer { .. }) => {
                let Error::UnknownConsumer { known: names, .. } = &e else {
                    unreachable!()
                };
                assert!(names.contains(&known.to_string()), "{names:?}");
                assert!(e.to_string().contains(known.as_str()), "{e}");
            }
            other => panic!("expected UnknownConsumer: {other:?}"),
        }
    }
    assert_eq!(cursor_rows(&store, &known).await, [6, 3, 1, 0]);
}

all_stores!(
    a_stopped_consumer_is_reset_and_runs_again,
    a_live_consumer_is_refused,
    gateway_protected_and_unknown_consumers_are_refused,
);
