//! C5: gaps in dense sequences under each `GapPolicy`, events without an entity, and mixed
//! version kinds.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{Entity, GapPolicy, ManualClock, Name, Timestamp, Version};
use idem_sql::metric_definitions::{GAP_SIZE, GAPS_TOTAL};
use idem_sql::{ErrorKind, Event, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores};

use crate::support::{self, consumer};

/// The start of the manual clocks here: well after the retention test's clock, whose cutoff must
/// never reach rows of other tests in the shared PostgreSQL database.
const T0: Timestamp = Timestamp(1_700_000_000_000);

fn order_event(consumer: &Name, seq: i64) -> Event {
    Event::new(
        idem_core::DedupKey::command(format!("{consumer}-order-{seq}")).expect("valid command id"),
    )
    .with_entity(Entity::new("order", "o_1").unwrap(), Version::sequence(seq))
}

/// Delivers sequence number `seq` of order `o_1`; the handler records one effect per delivery it
/// runs, named after the sequence number.
async fn deliver<DB: AppDb>(runner: &Runner<DB>, seq: i64) -> Result<Outcome<()>, idem_sql::Error> {
    let name = runner.consumer().to_string();
    runner
        .run_boxed(&order_event(runner.consumer(), seq), |tx| {
            let name = name.clone();
            Box::pin(async move {
                support::write_effect::<DB>(&mut **tx, &name, &format!("seq-{seq}"), "applied")
                    .await
            })
        })
        .await
}

async fn effects_of<DB: AppDb>(store: &Store<DB>, consumer: &Name, seq: i64) -> i64 {
    support::effects(store, consumer, &format!("seq-{seq}")).await
}

/// Default policy (apply): 1, 2, 5 → 5 is `Gap { expected: 3, got: 5 }` and applied; the gap is
/// counted and its size (2) recorded.
async fn gap_is_applied_and_reported<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    support::app_tables(&store).await;
    let consumer = consumer("gap_apply");
    let runner = Runner::new(store.clone(), &consumer);
    let labels = [("consumer", consumer.as_str())];
    let gaps0 = support::counter(GAPS_TOTAL, &labels);

    assert_eq!(deliver(&runner, 1).await.unwrap(), Outcome::Applied(()));
    assert_eq!(deliver(&runner, 2).await.unwrap(), Outcome::Applied(()));
    assert_eq!(
        deliver(&runner, 5).await.unwrap(),
        Outcome::Gap {
            value: (),
            expected: 3,
            got: 5
        }
    );
    assert_eq!(effects_of(&store, &consumer, 5).await, 1);
    assert_eq!(
        support::stored_version(&store, &consumer, "order", "o_1").await,
        Some(("sequence".into(), "5/none".into()))
    );
    assert_eq!(support::counter(GAPS_TOTAL, &labels) - gaps0, 1);
    assert_eq!(support::histogram(GAP_SIZE, &labels), [2.0]);
    // A late 3 is now older than the stored 5.
    assert_eq!(
        deliver(&runner, 3).await.unwrap(),
        Outcome::Stale {
            current: Version::sequence(5),
            got: Version::sequence(3)
        }
    );
}

/// `GapPolicy::Reject`: 5 after 1, 2 is refused with nothing committed (a redelivery is refused
/// again, not a duplicate); once 3 and 4 arrive, 5 is applied.
async fn gap_reject_commits_nothing<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("gap_reject");
    let runner = Runner::new(store.clone(), &consumer).gap_policy(GapPolicy::Reject);
    let rejected = Outcome::GapRejected {
        expected: 3,
        got: 5,
    };

    assert_eq!(deliver(&runner, 1).await.unwrap(), Outcome::Applied(()));
    assert_eq!(deliver(&runner, 2).await.unwrap(), Outcome::Applied(()));
    let first = deliver(&runner, 5).await.unwrap();
    assert_eq!(first, rejected);
    assert!(!first.acknowledge(), "a rejected gap is not acknowledged");
    assert!(
        !support::in_inbox(&store, &consumer, &order_event(&consumer, 5).key).await,
        "the claim of a rejected event is rolled back"
    );
    assert_eq!(effects_of(&store, &consumer, 5).await, 0);
    assert_eq!(
        support::stored_version(&store, &consumer, "order", "o_1").await,
        Some(("sequence".into(), "2/none".into()))
    );
    assert_eq!(deliver(&runner, 5).await.unwrap(), rejected, "redelivery");

    assert_eq!(deliver(&runner, 3).await.unwrap(), Outcome::Applied(()));
    assert_eq!(deliver(&runner, 4).await.unwrap(), Outcome::Applied(()));
    assert_eq!(deliver(&runner, 5).await.unwrap(), Outcome::Applied(()));
    assert_eq!(effects_of(&store, &consumer, 5).await, 1);
    assert_eq!(
        support::stored_version(&store, &consumer, "order", "o_1").await,
        Some(("sequence".into(), "5/none".into()))
    );
}

/// `GapPolicy::Park { 30 s }` on a manual clock: 5 is parked until first sight + 30 s, a
/// redelivery at +10 s keeps the same `until`, and at +31 s it is applied as a gap.
async fn gap_park_holds_until_timeout<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = consumer("gap_park");
    let runner = Runner::new(store.clone(), &consumer).gap_policy(GapPolicy::Park {
        timeout: Duration::from_secs(30),
    });
    let parked = Outcome::GapParked {
        expected: 3,
        got: 5,
        until: Timestamp(T0.0 + 30_000),
    };

    assert_eq!(deliver(&runner, 1).await.unwrap(), Outcome::Applied(()));
    assert_eq!(deliver(&runner, 2).await.unwrap(), Outcome::Applied(()));
    let first = deliver(&runner, 5).await.unwrap();
    assert_eq!(first, parked);
    assert!(!first.acknowledge());
    assert_eq!(effects_of(&store, &consumer, 5).await, 0);
    assert!(!support::in_inbox(&store, &consumer, &order_event(&consumer, 5).key).await);

    clock.advance(Duration::from_secs(10));
    assert_eq!(deliver(&runner, 5).await.unwrap(), parked, "at +10 s");
    assert_eq!(effects_of(&store, &consumer, 5).await, 0);

    clock.advance(Duration::from_secs(21));
    assert_eq!(
        deliver(&runner, 5).await.unwrap(),
        Outcome::Gap {
            value: (),
            expected: 3,
            got: 5
        },
        "at +31 s"
    );
    assert_eq!(effects_of(&store, &consumer, 5).await, 1);
    assert_eq!(deliver(&runner, 5).await.unwrap(), Outcome::Duplicate);
}

/// Under `Park`, a gap that fills before the timeout lets the held event through as applied.
async fn gap_park_releases_when_filled<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = consumer("gap_park_fill");
    let runner = Runner::new(store.clone(), &consumer).gap_policy(GapPolicy::Park {
        timeout: Duration::from_secs(30),
    });
    assert_eq!(deliver(&runner, 1).await.unwrap(), Outcome::Applied(()));
    assert!(matches!(
        deliver(&runner, 3).await.unwrap(),
        Outcome::GapParked {
            expected: 2,
            got: 3,
            ..
        }
    ));
    clock.advance(Duration::from_secs(5));
    assert_eq!(deliver(&runner, 2).await.unwrap(), Outcome::Applied(()));
    assert_eq!(deliver(&runner, 3).await.unwrap(), Outcome::Applied(()));
}

/// Events without an entity skip the version guard: always applied, no version row, whatever
/// an entity's state is.
async fn events_without_entity_skip_the_guard<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("no_entity");
    let runner = Runner::new(store.clone(), &consumer);
    let c = consumer.to_string();
    for id in ["evt_plain_1", "evt_plain_2", "evt_plain_3"] {
        let outcome = runner
            .run_boxed(&Event::new(support::stripe_key(id)), |tx| {
                let c = c.clone();
                Box::pin(async move { support::write_effect::<DB>(&mut **tx, &c, id, "x").await })
            })
            .await
            .unwrap();
        assert_eq!(outcome, Outcome::Applied(()), "{id}");
    }
    assert_eq!(support::version_rows(&store, &consumer).await, 0);
    // With an entity at sequence 7 stored, an entity-less event is still simply applied.
    assert_eq!(deliver(&runner, 7).await.unwrap(), Outcome::Applied(()));
    let outcome = runner
        .run_boxed(&Event::new(support::stripe_key("evt_plain_4")), |_tx| {
            Box::pin(async { Ok(()) })
        })
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Applied(()));
    assert_eq!(support::version_rows(&store, &consumer).await, 1);
    assert_eq!(support::inbox_count(&store, &consumer).await, 5);
}

/// One entity with a sequence, then a timestamp: an error of kind `InvalidInput`, nothing
/// committed, the stored version unchanged.
async fn mixed_version_kinds_are_invalid<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("mixed_kinds");
    let runner = Runner::new(store.clone(), &consumer);
    assert_eq!(deliver(&runner, 1).await.unwrap(), Outcome::Applied(()));

    let event = Event::new(support::stripe_key("evt_ts")).with_entity(
        Entity::new("order", "o_1").unwrap(),
        Version::timestamp(1_700_000_000),
    );
    let c = consumer.to_string();
    let err = runner
        .run_boxed(&event, |tx| {
            let c = c.clone();
            Box::pin(async move { support::write_effect::<DB>(&mut **tx, &c, "evt_ts", "x").await })
        })
        .await
        .expect_err("mixed version kinds");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    assert!(!err.is_retryable());
    assert_eq!(support::effects(&store, &consumer, "evt_ts").await, 0);
    assert!(!support::in_inbox(&store, &consumer, &event.key).await);
    assert_eq!(
        support::stored_version(&store, &consumer, "order", "o_1").await,
        Some(("sequence".into(), "1/none".into()))
    );
}

/// The widest possible gap, i64::MIN then i64::MAX: reported with its size, no overflow.
async fn extreme_sequences_do_not_overflow<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    let consumer = consumer("extreme_seq");
    let runner = Runner::new(store.clone(), &consumer);
    let entity = Entity::new("account", "acc_extreme").unwrap();
    let deliver = |id: &'static str, seq: i64| {
        let event =
            Event::new(support::stripe_key(id)).with_entity(entity.clone(), Version::sequence(seq));
        let runner = runner.clone();
        async move {
            runner
                .run_boxed(&event, |_tx| Box::pin(async { Ok(()) }))
                .await
                .unwrap()
        }
    };
    assert_eq!(deliver("evt_min", i64::MIN).await, Outcome::Applied(()));
    assert_eq!(
        deliver("evt_max", i64::MAX).await,
        Outcome::Gap {
            value: (),
            expected: i64::MIN + 1,
            got: i64::MAX
        }
    );
    let sizes = support::histogram(GAP_SIZE, &[("consumer", consumer.as_str())]);
    assert_eq!(sizes, vec![i64::MAX.abs_diff(i64::MIN + 1) as f64]);
}

all_stores!(
    extreme_sequences_do_not_overflow,
    gap_is_applied_and_reported,
    gap_reject_commits_nothing,
    gap_park_holds_until_timeout,
    gap_park_releases_when_filled,
    events_without_entity_skip_the_guard,
    mixed_version_kinds_are_invalid,
);
