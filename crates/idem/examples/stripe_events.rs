//! Applies the Stripe events in `testdata/stripe-events` as a sender that delivers at least once
//! would: every event one to three times, in a shuffled order (events of one object that share a
//! `created` second keep their relative order: no handler can order those without more
//! information, docs/design.md C5). A handler keeps each object's latest status through idem's
//! runner; at the end the state must equal `expected_final_state.json`, or the example exits 1.
//!
//! ```text
//! cargo run -p idem --example stripe_events [-- SEED [SQLITE_URL]]
//! ```
//! SEED (default 42) picks the duplicates and the order. Without a URL the database is a SQLite
//! file in a temporary directory; with one (`sqlite://path/to.db`) the example creates its table
//! `stripe_objects` there and uses the consumer `stripe_example_{seed}`.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use anyhow::{Context, bail};
use idem::{DedupKey, Entity, Event, EventId, Name, Outcome, Runner, SqliteStore, Version, sqlx};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;

const EVENTS: &str = include_str!("../../../testdata/stripe-events/events.jsonl");
const EXPECTED: &str = include_str!("../../../testdata/stripe-events/expected_final_state.json");

/// One Stripe event, as the handler needs it.
struct StripeEvent {
    id: String,
    kind: String,
    created: i64,
    object_type: String,
    object_id: String,
    status: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let seed: u64 = match args.next() {
        Some(s) => s
            .parse()
            .with_context(|| format!("SEED {s:?} is not an unsigned integer"))?,
        None => 42,
    };
    let events = parse_events()?;
    let deliveries = schedule(&events, seed);
    println!(
        "{} Stripe events from testdata/stripe-events, {} deliveries (seed {seed})",
        events.len(),
        deliveries.len()
    );
    let dir = tempfile::tempdir()?;
    let url = match args.next() {
        Some(url) if url.starts_with("sqlite:") => url,
        Some(other) => bail!("SQLITE_URL {other:?} does not start with sqlite:"),
        None => format!("sqlite://{}", dir.path().join("example.db").display()),
    };
    run(
        SqliteStore::connect(&url).await?,
        &events,
        &deliveries,
        seed,
    )
    .await
}

fn parse_events() -> anyhow::Result<Vec<StripeEvent>> {
    EVENTS
        .lines()
        .enumerate()
        .map(|(n, line)| {
            let v: Value = serde_json::from_str(line)
                .with_context(|| format!("events.jsonl line {}", n + 1))?;
            let text = |ptr: &str| {
                v.pointer(ptr)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .with_context(|| format!("events.jsonl line {}: no text at {ptr}", n + 1))
            };
            Ok(StripeEvent {
                id: text("/id")?,
                kind: text("/type")?,
                created: v["created"].as_i64().context("no integer `created`")?,
                object_type: text("/data/object/object")?,
                object_id: text("/data/object/id")?,
                status: v
                    .pointer("/data/object/status")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect()
}

/// Each event 1–3 times, shuffled; then, within each (object, created second), the slots that
/// group's deliveries landed in are refilled in the sender's order.
fn schedule(events: &[StripeEvent], seed: u64) -> Vec<usize> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut deliveries: Vec<usize> = (0..events.len())
        .flat_map(|i| std::iter::repeat_n(i, rng.random_range(1..=3)))
        .collect();
    deliveries.shuffle(&mut rng);
    let mut groups: HashMap<(&str, i64), Vec<usize>> = HashMap::new();
    for (slot, &i) in deliveries.iter().enumerate() {
        groups
            .entry((&events[i].object_id, events[i].created))
            .or_default()
            .push(slot);
    }
    for slots in groups.values() {
        let mut members: Vec<usize> = slots.iter().map(|&s| deliveries[s]).collect();
        members.sort_unstable();
        for (&slot, member) in slots.iter().zip(members) {
            deliveries[slot] = member;
        }
    }
    deliveries
}

async fn run(
    store: SqliteStore,
    events: &[StripeEvent],
    deliveries: &[usize],
    seed: u64,
) -> anyhow::Result<()> {
    store.migrate().await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS stripe_objects (consumer TEXT NOT NULL, id TEXT NOT NULL, \
         status TEXT, event_type TEXT NOT NULL, event_id TEXT NOT NULL, created BIGINT NOT NULL, \
         PRIMARY KEY (consumer, id))",
    )
    .execute(store.pool())
    .await?;
    let consumer = Name::new("consumer", format!("stripe_example_{seed}"))?;
    let runner = Runner::new(store.clone(), &consumer);
    let stripe = Name::new("source", "stripe")?;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut first_stale = None;
    let started = Instant::now();
    for &i in deliveries {
        let e = &events[i];
        let event = Event::new(DedupKey::from_event(&stripe, &EventId::new(e.id.as_str())?))
            .with_entity(
                Entity::new(e.object_type.as_str(), e.object_id.as_str())?,
                Version::timestamp(e.created),
            );
        let consumer_name = consumer.as_str();
        let outcome = runner
            .run(&event, async |tx| {
                sqlx::query(
                    "INSERT INTO stripe_objects (consumer, id, status, event_type, event_id, created) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (consumer, id) DO UPDATE SET \
                     status = excluded.status, event_type = excluded.event_type, \
                     event_id = excluded.event_id, created = excluded.created",
                )
                .bind(consumer_name)
                .bind(&e.object_id)
                .bind(&e.status)
                .bind(&e.kind)
                .bind(&e.id)
                .bind(e.created)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
            .await?;
        *counts.entry(outcome.name()).or_default() += 1;
        if let Outcome::Stale { current, got } = outcome {
            first_stale.get_or_insert(format!(
                "{} for {} ({got}) after {current}",
                e.kind, e.object_id
            ));
        }
    }
    let elapsed = started.elapsed();
    println!("\n{:<12} {:>6}", "outcome", "count");
    for (name, n) in &counts {
        println!("{name:<12} {n:>6}");
    }
    println!(
        "{:<12} {:>6}  ({:.2} s)",
        "deliveries",
        deliveries.len(),
        elapsed.as_secs_f64()
    );
    if let Some(stale) = first_stale {
        println!("first stale event, recorded and not applied: {stale}");
    }

    let rows: Vec<(String, Option<String>, String, String, i64)> = sqlx::query_as(
        "SELECT id, status, event_type, event_id, created FROM stripe_objects WHERE consumer = $1",
    )
    .bind(consumer.to_string())
    .fetch_all(store.pool())
    .await?;
    let expected: Value = serde_json::from_str(EXPECTED)?;
    let expected = expected["objects"]
        .as_object()
        .context("expected_final_state.json: no objects")?;
    let mut mismatches = Vec::new();
    for (id, want) in expected {
        let got = rows.iter().find(|r| &r.0 == id);
        let matches = got.is_some_and(|(_, status, kind, event, created)| {
            want["status"].as_str() == status.as_deref()
                && want["type"].as_str() == Some(kind.as_str())
                && want["event"].as_str() == Some(event.as_str())
                && want["created"].as_i64() == Some(*created)
        });
        if !matches {
            mismatches.push(format!("{id}: expected {want}, got {got:?}"));
        }
    }
    if !mismatches.is_empty() || rows.len() != expected.len() {
        bail!(
            "final state differs from expected_final_state.json ({} objects stored, {} expected):\n{}",
            rows.len(),
            expected.len(),
            mismatches.join("\n")
        );
    }
    println!(
        "\nfinal state matches expected_final_state.json for all {} objects: each event applied once, stale ones dropped",
        expected.len()
    );
    Ok(())
}
