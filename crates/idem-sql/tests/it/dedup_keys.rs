//! Dedup keys are a function of the event id only: real Stripe events, mutated in every field
//! but `id`, keep their key (also at another time, through the runner); different ids differ.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use idem_core::{DedupKey, EventId, ManualClock, Name, Timestamp};
use idem_sql::{Event, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores};
use proptest::prelude::*;
use serde_json::{Value as Json, json};

use crate::support::{self, consumer};

fn events() -> &'static [Json] {
    static EVENTS: OnceLock<Vec<Json>> = OnceLock::new();
    EVENTS.get_or_init(|| {
        let events = support::stripe_events();
        assert_eq!(events.len(), 159, "the corpus holds 159 events");
        events
    })
}

/// The key the application builds for a Stripe delivery: source `stripe`, the event's `id`.
fn key_of(event: &Json) -> DedupKey {
    let id = event["id"].as_str().expect("every Stripe event has an id");
    DedupKey::from_event(
        &Name::new("source", "stripe").unwrap(),
        &EventId::new(id).unwrap(),
    )
}

/// What a redelivery or a replay may change: everything but the id.
#[derive(Debug, Clone)]
struct Mutation {
    status: Option<String>,
    pending_webhooks: u32,
    request: Option<(String, Option<String>)>,
    created: i64,
    livemode: bool,
    api_version: String,
    extra: (String, i64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    (
        proptest::option::of("[a-z_]{1,16}"),
        any::<u32>(),
        proptest::option::of(("req_[A-Za-z0-9]{14}", proptest::option::of("[ -~]{1,24}"))),
        1_600_000_000i64..1_800_000_000,
        any::<bool>(),
        "20[0-9]{2}-[01][0-9]-[0-3][0-9]",
        ("[a-z_]{1,12}", any::<i64>()),
    )
        .prop_map(
            |(status, pending_webhooks, request, created, livemode, api_version, extra)| Mutation {
                status,
                pending_webhooks,
                request,
                created,
                livemode,
                api_version,
                extra,
            },
        )
}

fn mutate(event: &Json, m: &Mutation) -> Json {
    let mut e = event.clone();
    e["data"]["object"]["status"] = m.status.clone().map_or(Json::Null, Json::String);
    e["pending_webhooks"] = json!(m.pending_webhooks);
    e["request"] = match &m.request {
        Some((id, key)) => json!({"id": id, "idempotency_key": key}),
        None => Json::Null,
    };
    e["created"] = json!(m.created);
    e["livemode"] = json!(m.livemode);
    e["api_version"] = json!(m.api_version);
    // A field the sender added later; never the id.
    if m.extra.0 != "id" {
        e[m.extra.0.as_str()] = json!(m.extra.1);
    }
    e
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A mutated copy of an event, keyed later (another clock time), has the same key as the
    /// original, and that key is `stripe:{id}`.
    #[test]
    fn key_ignores_everything_but_the_id(
        index in 0..159usize,
        m in mutation(),
        later_ms in 0u64..(400 * 24 * 3600 * 1000),
    ) {
        let original = &events()[index];
        let clock = ManualClock::new(Timestamp(1_700_000_000_000));
        let first = key_of(original);
        clock.advance(Duration::from_millis(later_ms));
        let mutated = mutate(original, &m);
        prop_assert_ne!(&mutated, original);
        prop_assert_eq!(&key_of(&mutated), &first);
        prop_assert_eq!(first.as_str(), format!("stripe:{}", original["id"].as_str().unwrap()));
    }

    /// Events with different ids have different keys, whatever else they share.
    #[test]
    fn different_ids_give_different_keys(
        a in 0..159usize,
        b in 0..159usize,
        m in mutation(),
        suffix in "[A-Za-z0-9]{1,4}",
    ) {
        let (ea, eb) = (&events()[a], &events()[b]);
        prop_assert_eq!(key_of(ea) == key_of(eb), a == b);
        // The same payload under another id: another event.
        let mut renamed = mutate(ea, &m);
        renamed["id"] = json!(format!("{}{suffix}", ea["id"].as_str().unwrap()));
        prop_assert_ne!(key_of(&renamed), key_of(ea));
    }
}

/// Every event id in the corpus is distinct, so its 159 keys are too.
#[test]
fn corpus_keys_are_distinct() {
    let keys: std::collections::HashSet<DedupKey> = events().iter().map(key_of).collect();
    assert_eq!(keys.len(), 159);
}

/// End to end: each of 20 corpus events is delivered, then a mutated copy of it an hour later;
/// the copy is a duplicate and its handler never runs.
async fn mutated_redelivery_is_a_duplicate<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let clock = ManualClock::new(Timestamp(1_700_000_000_000));
    let store = store.with_clock(Arc::new(clock.clone()));
    let consumer = consumer("mutated_redelivery");
    let runner = Runner::new(store.clone(), &consumer);
    let c = consumer.to_string();
    let m = Mutation {
        status: Some("changed".into()),
        pending_webhooks: 9,
        request: Some(("req_replayedreplay".into(), None)),
        created: 1_750_000_000,
        livemode: true,
        api_version: "2024-06-20".into(),
        extra: ("replay".into(), 1),
    };
    for (i, event) in events().iter().step_by(8).enumerate() {
        for (delivery, expected) in [(event.clone(), true), (mutate(event, &m), false)] {
            let id = delivery["id"].as_str().unwrap().to_owned();
            let outcome = runner
                .run_boxed(&Event::new(key_of(&delivery)), |tx| {
                    let (c, id) = (c.clone(), id.clone());
                    Box::pin(async move {
                        support::write_effect::<DB>(&mut **tx, &c, &id, "applied").await
                    })
                })
                .await
                .unwrap();
            let want = if expected {
                Outcome::Applied(())
            } else {
                Outcome::Duplicate
            };
            assert_eq!(outcome, want, "event {i} ({id})");
            clock.advance(Duration::from_secs(3600));
        }
        let id = event["id"].as_str().unwrap();
        assert_eq!(support::effects(&store, &consumer, id).await, 1, "{id}");
    }
}

all_stores!(mutated_redelivery_is_a_duplicate);
