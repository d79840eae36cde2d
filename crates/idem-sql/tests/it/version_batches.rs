//! C5 in batches: `VersionGuard::advance_many` decides each event as `advance` would one at a
//! time, and concurrent batches over shared entities neither deadlock nor lose a version.

use std::sync::Arc;

use idem_core::{Advance, DedupKey, Entity, Version};
use idem_sql::{ErrorKind, Proposed, Store};
use idem_testkit::{AppDb, all_stores};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Barrier;

use crate::support::{self, consumer, stripe_key};

fn sub(id: &str) -> Entity {
    Entity::new("subscription", id).unwrap()
}

/// A batch whose expected decisions are worked out by hand from the rule of C5.
async fn one_batch_decides_each_event_in_order<DB: AppDb>(store: Store<DB>) {
    let name = consumer("batch_rule");
    let guard = store.version_guard(&name);
    let (a, b) = (sub("sub_a"), sub("sub_b"));
    let keys: Vec<DedupKey> = (1..=7).map(|n| stripe_key(&format!("evt_{n}"))).collect();
    let (v3, v5, v7) = (
        Version::timestamp(3),
        Version::timestamp(5),
        Version::timestamp(7),
    );
    let seq = Version::sequence(1);
    let events = [
        Proposed {
            entity: &a,
            version: &v5,
            key: &keys[0],
        }, // first of a: applied
        Proposed {
            entity: &a,
            version: &v3,
            key: &keys[1],
        }, // older: stale
        Proposed {
            entity: &a,
            version: &v5,
            key: &keys[2],
        }, // same version, other event: tie
        Proposed {
            entity: &a,
            version: &v7,
            key: &keys[3],
        }, // newer: applied over 5
        Proposed {
            entity: &b,
            version: &v3,
            key: &keys[4],
        }, // first of b: applied
        Proposed {
            entity: &b,
            version: &seq,
            key: &keys[5],
        }, // other kind: refused
        Proposed {
            entity: &a,
            version: &v7,
            key: &keys[3],
        }, // the event that set 7: stale
    ];
    let mut tx = store.begin().await.unwrap();
    let results = guard.advance_many(&mut tx, &events).await.unwrap();
    tx.commit().await.unwrap();

    let decided: Vec<Result<Advance, ErrorKind>> = results
        .into_iter()
        .map(|r| r.map_err(|e| e.kind()))
        .collect();
    assert_eq!(
        decided,
        vec![
            Ok(Advance::Applied { previous: None }),
            Ok(Advance::Stale { current: v5 }),
            Ok(Advance::Tie { current: v5 }),
            Ok(Advance::Applied { previous: Some(v5) }),
            Ok(Advance::Applied { previous: None }),
            Err(ErrorKind::InvalidInput),
            Ok(Advance::Stale { current: v7 }),
        ]
    );
    assert_eq!(
        support::stored_version(&store, &name, "subscription", "sub_a").await,
        Some(("timestamp".into(), "7/none".into()))
    );
    assert_eq!(
        support::stored_version(&store, &name, "subscription", "sub_b").await,
        Some(("timestamp".into(), "3/none".into()))
    );

    // The next batch starts from what the first committed.
    let mut tx = store.begin().await.unwrap();
    let again = guard
        .advance_many(
            &mut tx,
            &[
                Proposed {
                    entity: &a,
                    version: &v5,
                    key: &keys[6],
                },
                Proposed {
                    entity: &b,
                    version: &v7,
                    key: &keys[6],
                },
            ],
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let again: Vec<Advance> = again.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        again,
        vec![
            Advance::Stale { current: v7 },
            Advance::Applied { previous: Some(v3) },
        ]
    );
}

/// A random event: entity, version (timestamps with an occasional sequence, so some are of the
/// other kind; secondary values sometimes) and key (some repeated).
fn random_events(rng: &mut StdRng, count: usize) -> Vec<(Entity, Version, DedupKey)> {
    (0..count)
        .map(|_| {
            let entity = sub(&format!("sub_{}", rng.random_range(0..6)));
            let primary = rng.random_range(1..8);
            let mut version = if rng.random_bool(0.05) {
                Version::sequence(primary)
            } else {
                Version::timestamp(primary)
            };
            if rng.random_bool(0.3) {
                version = version.with_secondary(rng.random_range(0..3));
            }
            let key = stripe_key(&format!("evt_{}", rng.random_range(0..40)));
            (entity, version, key)
        })
        .collect()
}

/// The reference: `advance` one event at a time, each in its own transaction, under one
/// consumer; batches of random sizes under another. Every decision and every stored row agree.
async fn batches_decide_as_one_at_a_time<DB: AppDb>(store: Store<DB>) {
    for seed in 0..6_u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let events = random_events(&mut rng, 120);
        let one = consumer(&format!("one_{seed}"));
        let many = consumer(&format!("many_{seed}"));
        let (one_guard, many_guard) = (store.version_guard(&one), store.version_guard(&many));

        let mut expected = Vec::new();
        for (entity, version, key) in &events {
            let mut tx = store.begin().await.unwrap();
            let advance = one_guard.advance(&mut tx, entity, version, key).await;
            tx.commit().await.unwrap();
            expected.push(advance.map_err(|e| e.kind()));
        }

        let mut got = Vec::new();
        let mut rest = events.as_slice();
        while !rest.is_empty() {
            let size = rng.random_range(1..=rest.len().min(30));
            let (batch, later) = rest.split_at(size);
            rest = later;
            let proposed: Vec<Proposed<'_>> = batch
                .iter()
                .map(|(entity, version, key)| Proposed {
                    entity,
                    version,
                    key,
                })
                .collect();
            let mut tx = store.begin().await.unwrap();
            let results = many_guard.advance_many(&mut tx, &proposed).await.unwrap();
            tx.commit().await.unwrap();
            got.extend(results.into_iter().map(|r| r.map_err(|e| e.kind())));
        }
        assert_eq!(got, expected, "seed {seed}");
        for n in 0..6 {
            let id = format!("sub_{n}");
            assert_eq!(
                support::stored_version(&store, &many, "subscription", &id).await,
                support::stored_version(&store, &one, "subscription", &id).await,
                "seed {seed}, {id}"
            );
        }
    }
}

/// Eight transactions at once, each a batch over the same twelve entities in its own order:
/// none fails (no deadlock), and each entity ends at the highest version any batch proposed.
async fn concurrent_batches_share_entities<DB: AppDb>(store: Store<DB>) {
    const TASKS: u64 = 8;
    const ROUNDS: u64 = 5;
    let name = consumer("concurrent_batches");
    let barrier = Arc::new(Barrier::new(TASKS as usize));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let (store, name, barrier) = (store.clone(), name.clone(), Arc::clone(&barrier));
        tasks.push(tokio::spawn(async move {
            let guard = store.version_guard(&name);
            let mut rng = StdRng::seed_from_u64(task);
            for round in 0..ROUNDS {
                // Versions rise with the round; each task proposes its own within a round.
                let mut events: Vec<(Entity, Version, DedupKey)> = (0..12)
                    .map(|n| {
                        let version = Version::timestamp((round * TASKS + task) as i64);
                        let key = stripe_key(&format!("evt_{task}_{round}_{n}"));
                        (sub(&format!("sub_{n}")), version, key)
                    })
                    .collect();
                // Each batch in an order of its own: the guard must lock in key order itself.
                for i in (1..events.len()).rev() {
                    events.swap(i, rng.random_range(0..=i));
                }
                let proposed: Vec<Proposed<'_>> = events
                    .iter()
                    .map(|(entity, version, key)| Proposed {
                        entity,
                        version,
                        key,
                    })
                    .collect();
                barrier.wait().await;
                let mut tx = store.begin().await.unwrap();
                let results = guard.advance_many(&mut tx, &proposed).await.unwrap();
                tx.commit().await.unwrap();
                assert!(results.iter().all(Result::is_ok), "{results:?}");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let highest = (ROUNDS - 1) * TASKS + (TASKS - 1);
    for n in 0..12 {
        assert_eq!(
            support::stored_version(&store, &name, "subscription", &format!("sub_{n}")).await,
            Some(("timestamp".into(), format!("{highest}/none")))
        );
    }
}

all_stores!(
    one_batch_decides_each_event_in_order,
    batches_decide_as_one_at_a_time,
    concurrent_batches_share_entities,
);
