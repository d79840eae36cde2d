//! The consumer registry (issue 34): three library consumers on one database — `billing_v1`
//! succeeded mid-run by `billing_v2`, `mailer` with duplicates and stale events, `shipping`
//! stopped for good with a pending effect and parked outbox rows — are listed with exactly the
//! counts the test sent, flagged superseded and orphaned, and filtered by first seen.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Entity, ManualClock, Name, Version};
use idem_sql::{
    ConsumerFlag, ConsumerKind, ConsumerReport, Event, ListOptions, OutboxMessage, Outcome, Runner,
    Store,
};
use idem_testkit::{AppDb, Value, all_stores, exec};

use crate::support::{consumer, stripe_key};

/// What one consumer was sent: events applied, delivered again, stale.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sent {
    claimed: u64,
    duplicates: u64,
    stale: u64,
}

/// Runs `ids` through `runner` with a handler that writes nothing; tallies the outcomes.
async fn send<DB: AppDb>(runner: &Runner<DB>, events: &[Event], sent: &mut Sent) {
    for event in events {
        match runner.run(event, async |_tx| Ok(())).await.unwrap() {
            Outcome::Applied(()) | Outcome::Tie { .. } | Outcome::Gap { .. } => sent.claimed += 1,
            Outcome::Duplicate => sent.duplicates += 1,
            Outcome::Stale { .. } => sent.stale += 1,
            other => panic!("unexpected outcome {other:?}"),
        }
    }
}

/// `n` events of `prefix` without an entity.
fn plain(prefix: &str, range: std::ops::Range<usize>) -> Vec<Event> {
    range
        .map(|n| Event::new(stripe_key(&format!("{prefix}_{n}"))))
        .collect()
}

/// The report of `name` in `reports`.
fn of<'a>(reports: &'a [ConsumerReport], name: &Name) -> &'a ConsumerReport {
    reports
        .iter()
        .find(|r| r.name == name.as_str())
        .unwrap_or_else(|| panic!("{name} is not listed"))
}

/// (claimed, duplicates, stale) of a report's window `i`.
fn counts(report: &ConsumerReport, i: usize) -> Sent {
    let w = &report.windows[i];
    Sent {
        claimed: w.claimed,
        duplicates: w.duplicates,
        stale: w.stale,
    }
}

async fn three_consumers_are_listed_with_their_counts_and_flags<DB: AppDb>(store: Store<DB>) {
    let t0 = store.now();
    let clock = ManualClock::new(t0);
    let store = store.with_clock(Arc::new(clock.clone()));
    let (v1, v2) = (consumer("billing_v1"), consumer("billing_v2"));
    let (mailer, shipping) = (consumer("mailer"), consumer("shipping"));

    // t0: billing_v1 and mailer start.
    let billing_v1 = Runner::new(store.clone(), &v1);
    let mailer_runner = Runner::new(store.clone(), &mailer);
    let mut sent_v1 = Sent::default();
    let history = plain(v1.as_str(), 0..7);
    send(&billing_v1, &history, &mut sent_v1).await;
    let entity = Entity::new("order", format!("{mailer}_o")).unwrap();
    let mut mail: Vec<Event> = (1..=4)
        .map(|v| {
            Event::new(stripe_key(&format!("{mailer}_{v}")))
                .with_entity(entity.clone(), Version::sequence(v))
        })
        .collect();
    // Two deliveries again, then one older than the entity's version 4.
    mail.push(mail[0].clone());
    mail.push(mail[2].clone());
    mail.push(
        Event::new(stripe_key(&format!("{mailer}_late")))
            .with_entity(entity.clone(), Version::sequence(2)),
    );
    let mut sent_mailer = Sent::default();
    send(&mailer_runner, &mail, &mut sent_mailer).await;

    // A minute later billing_v2 takes over (history again, then new events); shipping starts.
    clock.advance(Duration::from_secs(60));
    let since = store.now();
    let billing_v2 = Runner::new(store.clone(), &v2).succeeds(&v1);
    let mut sent_v2 = Sent::default();
    send(&billing_v2, &history, &mut sent_v2).await;
    send(&billing_v2, &plain(v1.as_str(), 7..10), &mut sent_v2).await;
    send(&billing_v2, &history[..2], &mut sent_v2).await;
    let shipped = ship(&store, &shipping).await;

    store.flush_consumer_counts().await.unwrap();
    let now = store.now();
    let reports = store.consumers().list(&ListOptions::at(now)).await.unwrap();
    for (name, sent) in [
        (&v1, sent_v1),
        (&v2, sent_v2),
        (&mailer, sent_mailer),
        (&shipping, shipped),
    ] {
        let report = of(&reports, name);
        for window in 0..3 {
            assert_eq!(counts(report, window), sent, "{name}, window {window}");
        }
        assert_eq!(report.kind, ConsumerKind::Runner, "{name}");
        assert!(report.first_seen_exact, "{name}");
    }
    assert_eq!(
        sent_mailer,
        Sent {
            claimed: 4,
            duplicates: 2,
            stale: 1
        }
    );
    assert_eq!(of(&reports, &mailer).windows[0].repeat_rate, 2.0 / 7.0);
    assert_eq!(of(&reports, &v1).first_seen, t0);
    assert_eq!(of(&reports, &v1).last_seen, t0);
    assert_eq!(of(&reports, &v2).first_seen, since);
    assert_eq!(of(&reports, &v2).last_seen, now);
    assert_eq!(of(&reports, &v1).successor.as_deref(), Some(v2.as_str()));
    assert_eq!(
        of(&reports, &v1).flags,
        [ConsumerFlag::Superseded { by: v2.to_string() }]
    );
    let shipping_report = of(&reports, &shipping);
    assert_eq!(
        shipping_report.effects_by_status,
        BTreeMap::from([("pending".to_owned(), shipped.claimed)])
    );
    assert_eq!(
        shipping_report.outbox_by_status,
        BTreeMap::from([("parked".to_owned(), 2 * shipped.claimed)])
    );
    assert_eq!(shipping_report.holds.pending_effects, shipped.claimed);
    assert_eq!(shipping_report.holds.open_outbox, 2 * shipped.claimed);
    assert!(of(&reports, &mailer).effects_by_status.is_empty());
    for name in [&v2, &mailer, &shipping] {
        assert_eq!(of(&reports, name).flags, [], "{name}");
    }

    // Eight days on, nothing ran since: shipping, holding work, is an orphan; billing_v1 has a
    // successor and mailer holds nothing.
    let later = now.saturating_add(Duration::from_secs(8 * 24 * 3600));
    let reports = store
        .consumers()
        .list(&ListOptions::at(later))
        .await
        .unwrap();
    assert_eq!(
        of(&reports, &shipping).flags,
        [ConsumerFlag::Orphaned { days_unseen: 8 }]
    );
    assert_eq!(
        of(&reports, &v1).flags,
        [ConsumerFlag::Superseded { by: v2.to_string() }]
    );
    assert_eq!(of(&reports, &mailer).flags, []);
    assert_eq!(of(&reports, &mailer).windows[1].claimed, 0, "out of 24 h");
    assert_eq!(
        counts(of(&reports, &mailer), 2),
        sent_mailer,
        "within 30 days"
    );

    // `since` lists the consumers first seen at or after it.
    let listed = store
        .consumers()
        .list(&ListOptions::at(now).since(since))
        .await
        .unwrap();
    let ours: Vec<&str> = listed
        .iter()
        .map(|r| r.name.as_str())
        .filter(|n| {
            [&v1, &v2, &mailer, &shipping]
                .iter()
                .any(|c| c.as_str() == *n)
        })
        .collect();
    let mut expected = vec![v2.as_str(), shipping.as_str()];
    expected.sort();
    assert_eq!(ours, expected);
}

/// `shipping` handles 3 events, each enqueuing a receipt effect (no worker runs: it stays
/// pending) and two outbox messages (parked afterwards, as a relay that gave up leaves them);
/// then it stops for good. Returns what was sent.
async fn ship<DB: AppDb>(store: &Store<DB>, shipping: &Name) -> Sent {
    let runner = Runner::new(store.clone(), shipping);
    let (ledger, outbox) = (store.effects(), store.outbox());
    let effect = Name::new("effect", "label").unwrap();
    let mut sent = Sent::default();
    for event in plain(shipping.as_str(), 0..3) {
        let outcome = runner
            .run(&event, async |tx| {
                let _ = runner
                    .enqueue_effect(tx, &ledger, &event, &effect, b"{}")
                    .await?;
                for part in ["a", "b"] {
                    let message = OutboxMessage::new(format!("{shipping}.{part}"), "{}");
                    runner.enqueue_outbox(tx, &outbox, &message).await?;
                }
                Ok(())
            })
            .await
            .unwrap();
        assert!(matches!(outcome, Outcome::Applied(())));
        sent.claimed += 1;
    }
    exec(
        store,
        "UPDATE idem_outbox SET status = 'parked' WHERE consumer = $1",
        vec![Value::from(shipping.as_str())],
    )
    .await;
    sent
}

all_stores!(three_consumers_are_listed_with_their_counts_and_flags);
