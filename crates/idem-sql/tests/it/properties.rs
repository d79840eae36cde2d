//! Seeded properties on both databases: the Stripe corpus shuffled and duplicated ends in the
//! expected state, and the runner's outcomes match an in-memory model built on `idem_core::decide`.
//!
//! Each case draws its deliveries from `StdRng::seed_from_u64(seed)`; a failure names the seed.
//! `IDEM_SEED=<n>` runs that one seed only.

use std::collections::{HashMap, HashSet};

use idem_core::{Advance, DedupKey, Entity, Name, Version, decide};
use idem_sql::{Event, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value as Json;

use crate::support::{self, StateRow, consumer};

/// The seeds of a property: `0..cases`, or only `IDEM_SEED`.
fn seeds(cases: u64) -> Vec<u64> {
    match std::env::var("IDEM_SEED") {
        Ok(s) => vec![s.parse().expect("IDEM_SEED is an integer")],
        Err(_) => (0..cases).collect(),
    }
}

/// One corpus event, reduced to what the handler and the guard use.
#[derive(Debug, Clone)]
struct StripeEvent {
    id: String,
    event_type: String,
    created: i64,
    object_type: String,
    object_id: String,
    status: String,
}

impl StripeEvent {
    fn from_json(e: &Json) -> Self {
        let object = &e["data"]["object"];
        let text = |v: &Json| v.as_str().expect("a string field").to_owned();
        Self {
            id: text(&e["id"]),
            event_type: text(&e["type"]),
            created: e["created"].as_i64().expect("created is an integer"),
            object_type: text(&object["object"]),
            object_id: text(&object["id"]),
            // Customers have no status: stored as the text "null", as expected_final_state's
            // JSON null is read below.
            status: object["status"].as_str().unwrap_or("null").to_owned(),
        }
    }
}

/// The order of one case: each event 1 to 3 times, shuffled, except that the first deliveries
/// of events of one object that share a `created` second keep the sender's relative order
/// (within one second only the sender's order tells which is newer).
fn deliveries(events: &[StripeEvent], rng: &mut StdRng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..events.len())
        .flat_map(|i| std::iter::repeat_n(i, rng.random_range(1..=3)))
        .collect();
    order.shuffle(rng);
    // Within each (object, second) group, give the k-th distinct event met in the shuffled order
    // the group's k-th event in sender order: a relabelling inside the group, so the counts stay
    // random and every first delivery is in sender order.
    let mut groups: HashMap<(&str, i64), Vec<usize>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        groups
            .entry((e.object_id.as_str(), e.created))
            .or_default()
            .push(i);
    }
    let mut relabel: HashMap<usize, usize> = HashMap::new();
    let mut met: HashMap<(&str, i64), usize> = HashMap::new();
    for slot in &mut order {
        let e = &events[*slot];
        let group = (e.object_id.as_str(), e.created);
        let new = *relabel.entry(*slot).or_insert_with(|| {
            let k = met.entry(group).or_default();
            *k += 1;
            groups[&group][*k - 1]
        });
        *slot = new;
    }
    order
}

/// The 159 corpus events, shuffled with duplicates over 24 seeds, through the runner with entity
/// (object type, object id) and version `created`: the handler's end state equals
/// expected_final_state.json for all 67 objects.
async fn shuffled_stripe_corpus_reaches_expected_state<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let events: Vec<StripeEvent> = support::stripe_events()
        .iter()
        .map(StripeEvent::from_json)
        .collect();
    assert_eq!(events.len(), 159);
    let expected = expected_state();
    assert_eq!(expected.len(), 67);
    let stripe = Name::new("source", "stripe").unwrap();

    for seed in seeds(24) {
        let consumer = consumer("shuffle");
        let runner = Runner::new(store.clone(), &consumer);
        let order = deliveries(&events, &mut StdRng::seed_from_u64(seed));
        let mut seen = HashSet::new();
        for &i in &order {
            let e = &events[i];
            let event = Event::new(DedupKey::from_event(
                &stripe,
                &idem_core::EventId::new(e.id.clone()).unwrap(),
            ))
            .with_entity(
                Entity::new(e.object_type.clone(), e.object_id.clone()).unwrap(),
                Version::timestamp(e.created),
            );
            let row = StateRow {
                consumer: consumer.to_string(),
                object_id: e.object_id.clone(),
                status: e.status.clone(),
                event_type: e.event_type.clone(),
                event_id: e.id.clone(),
                created: e.created,
            };
            let outcome = runner
                .run_boxed(&event, |tx| {
                    let row = row.clone();
                    Box::pin(async move { row.write::<DB>(&mut **tx).await })
                })
                .await
                .unwrap_or_else(|err| panic!("seed {seed}: delivery of {} failed: {err}", e.id));
            let first = seen.insert(i);
            assert_eq!(
                outcome == Outcome::Duplicate,
                !first,
                "seed {seed}: {} was {outcome:?} on its {} delivery",
                e.id,
                if first { "first" } else { "repeated" }
            );
        }
        let state = support::state_of(&store, &consumer).await;
        if state != expected {
            let mut diff: Vec<String> = expected
                .iter()
                .filter(|(id, want)| state.get(*id) != Some(want))
                .map(|(id, want)| format!("{id}: want {want:?}, got {:?}", state.get(id)))
                .collect();
            diff.sort();
            panic!(
                "seed {seed} ({} deliveries): end state differs for {} objects:\n{}",
                order.len(),
                diff.len(),
                diff.join("\n")
            );
        }
    }
}

fn expected_state() -> HashMap<String, (i64, String, String, String)> {
    let json = support::stripe_expected_state();
    assert_eq!(
        json["ties"],
        serde_json::json!({}),
        "the corpus has no same-second ties at the end"
    );
    json["objects"]
        .as_object()
        .expect("objects is a map")
        .iter()
        .map(|(id, o)| {
            (
                id.clone(),
                (
                    o["created"].as_i64().unwrap(),
                    o["status"].as_str().unwrap_or("null").to_owned(),
                    o["type"].as_str().unwrap().to_owned(),
                    o["event"].as_str().unwrap().to_owned(),
                ),
            )
        })
        .collect()
}

/// A small event of the model test: an id, an entity and a sequence number.
#[derive(Debug, Clone)]
struct SmallEvent {
    id: String,
    entity: &'static str,
    seq: i64,
}

/// The reference model: the keys seen, and per entity the stored version, as `idem_core::decide`
/// defines them (default gap policy: apply).
#[derive(Default)]
struct Model {
    seen: HashSet<String>,
    versions: HashMap<&'static str, (Version, String)>,
}

impl Model {
    fn deliver(&mut self, e: &SmallEvent) -> Outcome<()> {
        if !self.seen.insert(e.id.clone()) {
            return Outcome::Duplicate;
        }
        let got = Version::sequence(e.seq);
        let current = self.versions.get(e.entity).map(|(v, _)| *v);
        let advance = decide(current.as_ref(), &got).expect("one kind of version");
        if advance.is_applied() {
            self.versions.insert(e.entity, (got, e.id.clone()));
        }
        match advance {
            Advance::Applied { .. } => Outcome::Applied(()),
            Advance::Stale { current } => Outcome::Stale { current, got },
            Advance::Tie { current } => Outcome::Tie { value: (), current },
            Advance::Gap { expected, got } => Outcome::Gap {
                value: (),
                expected,
                got,
            },
        }
    }
}

/// Random deliveries (duplicates, shuffles, skipped and repeated sequence numbers) of a few
/// entities: every outcome and the end state match the model.
async fn runner_matches_reference_model<DB: AppDb>(store: Store<DB>) {
    const ENTITIES: [&str; 3] = ["a", "b", "c"];
    support::app_tables(&store).await;
    for seed in seeds(48) {
        let mut rng = StdRng::seed_from_u64(seed);
        let consumer = consumer("model");
        let runner = Runner::new(store.clone(), &consumer);
        // Events: per entity some sequence numbers in 1..=6, a few with a second event at the same
        // number (a tie), each delivered 1 to 3 times, all shuffled together.
        let mut events = Vec::new();
        for entity in ENTITIES {
            for seq in 1..=6 {
                // Mostly one event per number, some numbers skipped (gaps), a few doubled (ties).
                let copies = match rng.random_range(0..20) {
                    0..=4 => 0,
                    5..=16 => 1,
                    _ => 2,
                };
                for copy in 0..copies {
                    events.push(SmallEvent {
                        id: format!("{entity}-{seq}-{copy}"),
                        entity,
                        seq,
                    });
                }
            }
        }
        let mut order: Vec<&SmallEvent> = events
            .iter()
            .flat_map(|e| std::iter::repeat_n(e, rng.random_range(1..=3)))
            .collect();
        order.shuffle(&mut rng);

        let mut model = Model::default();
        for (n, e) in order.iter().enumerate() {
            let event = Event::new(DedupKey::command(e.id.clone()).unwrap()).with_entity(
                Entity::new("item", e.entity).unwrap(),
                Version::sequence(e.seq),
            );
            let row = StateRow {
                consumer: consumer.to_string(),
                object_id: e.entity.to_owned(),
                status: e.id.clone(),
                event_type: "model".into(),
                event_id: e.id.clone(),
                created: e.seq,
            };
            let got = runner
                .run_boxed(&event, |tx| {
                    let row = row.clone();
                    Box::pin(async move { row.write::<DB>(&mut **tx).await })
                })
                .await
                .unwrap_or_else(|err| panic!("seed {seed}: delivery {n} ({}) failed: {err}", e.id));
            let want = model.deliver(e);
            assert_eq!(
                got, want,
                "seed {seed}: delivery {n} of {} (seq {})",
                e.id, e.seq
            );
        }
        for entity in ENTITIES {
            let want = model.versions.get(entity);
            assert_eq!(
                support::stored_version(&store, &consumer, "item", entity).await,
                want.map(|(v, _)| ("sequence".to_owned(), format!("{}/none", v.primary.get()))),
                "seed {seed}: version of {entity}"
            );
            assert_eq!(
                support::state_status(&store, &consumer, entity).await,
                want.map(|(_, id)| id.clone()),
                "seed {seed}: state of {entity}"
            );
        }
        assert_eq!(
            support::inbox_count(&store, &consumer).await,
            i64::try_from(events.len()).unwrap(),
            "seed {seed}: every distinct event is recorded once"
        );
    }
}

all_stores!(
    shuffled_stripe_corpus_reaches_expected_state,
    runner_matches_reference_model,
);
