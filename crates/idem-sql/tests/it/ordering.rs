//! C5: versions through the runner: stale Stripe events, ties, and concurrent versions of one
//! entity.

use std::sync::Arc;

use idem_core::{Entity, Version};
use idem_sql::metric_definitions::{STALE_TOTAL, TIES_TOTAL};
use idem_sql::{Event, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use tokio::sync::Barrier;

use crate::support::{self, StateRow, consumer, stripe_key};

/// One Stripe subscription event, applied by a handler that keeps the subscription's status.
struct SubEvent {
    id: &'static str,
    event_type: &'static str,
    created: i64,
    secondary: Option<i64>,
    status: &'static str,
}

impl SubEvent {
    fn event(&self, sub: &str) -> Event {
        let mut version = Version::timestamp(self.created);
        if let Some(s) = self.secondary {
            version = version.with_secondary(s);
        }
        Event::new(stripe_key(self.id))
            .with_entity(Entity::new("subscription", sub).unwrap(), version)
    }

    async fn deliver<DB: AppDb>(
        &self,
        runner: &Runner<DB>,
        sub: &str,
    ) -> Result<Outcome<()>, idem_sql::Error> {
        let row = StateRow {
            consumer: runner.consumer().to_string(),
            object_id: sub.to_owned(),
            status: self.status.to_owned(),
            event_type: self.event_type.to_owned(),
            event_id: self.id.to_owned(),
            created: self.created,
        };
        runner
            .run_boxed(&self.event(sub), |tx| {
                let row = row.clone();
                Box::pin(async move { row.write::<DB>(&mut **tx).await })
            })
            .await
    }
}

const UPDATED: SubEvent = SubEvent {
    id: "evt_sub_updated",
    event_type: "customer.subscription.updated",
    created: 1_623_979_266,
    secondary: None,
    status: "active",
};

const CREATED: SubEvent = SubEvent {
    id: "evt_sub_created",
    event_type: "customer.subscription.created",
    created: 1_623_979_265,
    secondary: None,
    status: "incomplete",
};

/// `customer.subscription.updated` (1623979266, active) arrives before
/// `customer.subscription.created` (1623979265, incomplete): the late one is stale, recorded as
/// processed (its redelivery is a duplicate) and counted, and the state stays `active`.
async fn stripe_updated_before_created_is_stale<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    support::app_tables(&store).await;
    let consumer = consumer("stripe_order");
    let runner = Runner::new(store.clone(), &consumer);
    let stale = || support::counter(STALE_TOTAL, &[("consumer", consumer.as_str())]);
    let stale0 = stale();

    assert_eq!(
        UPDATED.deliver(&runner, "sub_1").await.unwrap(),
        Outcome::Applied(())
    );
    assert_eq!(
        CREATED.deliver(&runner, "sub_1").await.unwrap(),
        Outcome::Stale {
            current: Version::timestamp(1_623_979_266),
            got: Version::timestamp(1_623_979_265),
        }
    );
    assert_eq!(
        support::state_status(&store, &consumer, "sub_1")
            .await
            .as_deref(),
        Some("active")
    );
    assert_eq!(stale() - stale0, 1, "idem_stale_events_total");
    assert!(support::in_inbox(&store, &consumer, &stripe_key(CREATED.id)).await);
    assert_eq!(
        CREATED.deliver(&runner, "sub_1").await.unwrap(),
        Outcome::Duplicate,
        "a stale event is recorded as processed"
    );
    assert_eq!(stale() - stale0, 1, "a duplicate is not stale again");
    assert_eq!(
        support::stored_version(&store, &consumer, "subscription", "sub_1").await,
        Some(("timestamp".into(), "1623979266/none".into()))
    );
}

/// Two events of one subscription in the same second with different statuses: the second is a
/// tie (applied, reported, never stale); with secondary values the higher one wins and a lower
/// one is stale.
async fn same_second_is_a_tie_unless_secondary_decides<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    support::app_tables(&store).await;
    let consumer = consumer("stripe_tie");
    let runner = Runner::new(store.clone(), &consumer);
    let ties = || support::counter(TIES_TOTAL, &[("consumer", consumer.as_str())]);
    let ties0 = ties();
    let t = 1_700_000_170;
    let event = |id, status, secondary| SubEvent {
        id,
        event_type: "customer.subscription.updated",
        created: t,
        secondary,
        status,
    };

    // Without secondary values.
    let first = event("evt_tie_1", "incomplete", None);
    let second = event("evt_tie_2", "active", None);
    assert_eq!(
        first.deliver(&runner, "sub_tie").await.unwrap(),
        Outcome::Applied(())
    );
    assert_eq!(
        second.deliver(&runner, "sub_tie").await.unwrap(),
        Outcome::Tie {
            value: (),
            current: Version::timestamp(t)
        }
    );
    assert_eq!(
        support::state_status(&store, &consumer, "sub_tie")
            .await
            .as_deref(),
        Some("active")
    );
    assert_eq!(ties() - ties0, 1, "idem_version_ties_total");

    // With secondary values: 5, then 7 (applied), then 6 (stale against 7).
    let s5 = event("evt_sec_5", "incomplete", Some(5));
    let s7 = event("evt_sec_7", "active", Some(7));
    let s6 = event("evt_sec_6", "past_due", Some(6));
    assert_eq!(
        s5.deliver(&runner, "sub_sec").await.unwrap(),
        Outcome::Applied(())
    );
    assert_eq!(
        s7.deliver(&runner, "sub_sec").await.unwrap(),
        Outcome::Applied(())
    );
    assert_eq!(
        s6.deliver(&runner, "sub_sec").await.unwrap(),
        Outcome::Stale {
            current: Version::timestamp(t).with_secondary(7),
            got: Version::timestamp(t).with_secondary(6),
        }
    );
    assert_eq!(
        support::state_status(&store, &consumer, "sub_sec")
            .await
            .as_deref(),
        Some("active")
    );
    assert_eq!(
        support::stored_version(&store, &consumer, "subscription", "sub_sec").await,
        Some(("timestamp".into(), format!("{t}/7")))
    );
    assert_eq!(ties() - ties0, 1, "decided by secondary values: no tie");
}

/// 32 tasks apply versions 1..=32 of one entity concurrently, in a random order: the entity ends
/// at version 32 with the state written for 32; no delivery fails (conflicts are retried).
async fn concurrent_versions_end_at_the_newest<DB: AppDb>(store: Store<DB>) {
    const N: i64 = 32;
    support::app_tables(&store).await;
    let consumer = consumer("concurrent_versions");
    // Arc: see claims.rs (Runner is not Clone for either database).
    let runner = Runner::new(store.clone(), &consumer);
    let mut versions: Vec<i64> = (1..=N).collect();
    versions.shuffle(&mut StdRng::seed_from_u64(0x1de3));
    let barrier = Arc::new(Barrier::new(versions.len()));

    let mut tasks = Vec::new();
    for v in versions {
        let (runner, barrier) = (runner.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            let row = StateRow {
                consumer: runner.consumer().to_string(),
                object_id: "sub_race".into(),
                status: format!("v{v}"),
                event_type: "customer.subscription.updated".into(),
                event_id: format!("evt_v{v}"),
                created: v,
            };
            let event = Event::new(stripe_key(&row.event_id)).with_entity(
                Entity::new("subscription", "sub_race").unwrap(),
                Version::timestamp(v),
            );
            barrier.wait().await;
            let outcome = runner
                .run_boxed(&event, |tx| {
                    let row = row.clone();
                    Box::pin(async move { row.write::<DB>(&mut **tx).await })
                })
                .await;
            (v, outcome)
        }));
    }
    let mut applied = 0;
    for task in tasks {
        let (v, outcome) = task.await.expect("no task panicked");
        match outcome {
            Ok(Outcome::Applied(())) => applied += 1,
            Ok(Outcome::Stale { current, got }) => {
                assert_eq!(got, Version::timestamp(v));
                assert!(current.primary.get() > v, "stale {v} against {current}");
            }
            other => panic!("version {v}: unexpected {other:?}"),
        }
    }
    assert!(applied >= 1);
    assert_eq!(
        support::stored_version(&store, &consumer, "subscription", "sub_race").await,
        Some(("timestamp".into(), format!("{N}/none")))
    );
    assert_eq!(
        support::state_status(&store, &consumer, "sub_race")
            .await
            .as_deref(),
        Some(format!("v{N}").as_str())
    );
    assert_eq!(support::inbox_count(&store, &consumer).await, N);
}

/// A tie without a secondary value keeps the stored one: 100/5 applied, 100/none a tie, then
/// 100/3 is stale against 5 (as `decide` says without the middle event), and the state stays
/// the tie's.
async fn tie_without_secondary_keeps_the_stored_one<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("tie_keeps_secondary");
    let runner = Runner::new(store.clone(), &consumer);
    let t = 1_700_000_100;
    let event = |id, status, secondary| SubEvent {
        id,
        event_type: "customer.subscription.updated",
        created: t,
        secondary,
        status,
    };
    let with_5 = Version::timestamp(t).with_secondary(5);
    assert_eq!(
        event("evt_ks_5", "incomplete", Some(5))
            .deliver(&runner, "sub_ks")
            .await
            .unwrap(),
        Outcome::Applied(())
    );
    assert_eq!(
        event("evt_ks_none", "active", None)
            .deliver(&runner, "sub_ks")
            .await
            .unwrap(),
        Outcome::Tie {
            value: (),
            current: with_5
        }
    );
    assert_eq!(
        event("evt_ks_3", "past_due", Some(3))
            .deliver(&runner, "sub_ks")
            .await
            .unwrap(),
        Outcome::Stale {
            current: with_5,
            got: Version::timestamp(t).with_secondary(3)
        }
    );
    assert_eq!(
        support::state_status(&store, &consumer, "sub_ks")
            .await
            .as_deref(),
        Some("active")
    );
}

/// Retention deleted the inbox key of the entity's newest event (simulated by deleting the
/// row); a replay of that event months later is stale, not a tie: its handler does not run again.
async fn replay_after_retention_is_not_applied_twice<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("replay_after_gc");
    let runner = Runner::new(store.clone(), &consumer);
    assert_eq!(
        UPDATED.deliver(&runner, "sub_gc").await.unwrap(),
        Outcome::Applied(())
    );
    let deleted = idem_testkit::exec(
        &store,
        "DELETE FROM idem_inbox WHERE consumer = $1",
        vec![consumer.as_str().into()],
    )
    .await;
    assert_eq!(deleted, 1);
    let current = Version::timestamp(UPDATED.created);
    assert_eq!(
        UPDATED.deliver(&runner, "sub_gc").await.unwrap(),
        Outcome::Stale {
            current,
            got: current
        }
    );
    assert_eq!(support::effects(&store, &consumer, UPDATED.id).await, 0);
    assert_eq!(
        support::state_of(&store, &consumer).await.len(),
        1,
        "the state row is the first delivery's, written once"
    );
}

all_stores!(
    tie_without_secondary_keeps_the_stored_one,
    replay_after_retention_is_not_applied_twice,
    stripe_updated_before_created_is_stale,
    same_second_is_a_tie_unless_secondary_decides,
    concurrent_versions_end_at_the_newest,
);
