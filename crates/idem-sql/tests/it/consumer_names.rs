//! The effect worker and the outbox relay have names in the consumer registry (issue 34): a
//! default, or one set with a builder; they register their kinds and their rounds update their
//! last seen.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{ManualClock, Name};
use idem_sql::{
    CallOutcome, ConsumerKind, DEFAULT_EFFECT_WORKER_NAME, DEFAULT_OUTBOX_RELAY_NAME, EffectCall,
    EffectWorker, ListOptions, Store,
};
use idem_testkit::{AppDb, all_stores};

use crate::support::consumer;

async fn workers_and_relays_are_registered_under_their_names<DB: AppDb>(store: Store<DB>) {
    let clock = ManualClock::new(store.now());
    let store = store.with_clock(Arc::new(clock.clone()));
    let (worker_name, relay_name) = (consumer("sender"), consumer("publisher"));
    // An effect name of its own: the worker claims nothing another test enqueued.
    let effect = Name::new("effect", consumer("nothing").as_str()).unwrap();
    let provider = |_: EffectCall| async { CallOutcome::Succeeded(Vec::new()) };
    let worker = EffectWorker::new(store.clone(), provider)
        .name(&worker_name)
        .effects([effect]);
    let outbox = store.outbox().relay_name(&relay_name);
    let started = store.now();

    clock.advance(Duration::from_secs(30));
    worker.run_once().await.unwrap();
    // A claim of no rows: the relay ran, and took nothing another test enqueued.
    outbox.claim(0, Duration::from_secs(1)).await.unwrap();
    store
        .outbox()
        .claim(0, Duration::from_secs(1))
        .await
        .unwrap();
    store.flush_consumer_counts().await.unwrap();

    let show = async |name: &str| {
        store
            .consumers()
            .show(name, &ListOptions::at(store.now()))
            .await
            .unwrap()
    };
    let worker_report = show(worker_name.as_str()).await;
    assert_eq!(worker_report.kind, ConsumerKind::EffectWorker);
    assert_eq!(worker_report.first_seen, started);
    assert_eq!(
        worker_report.last_seen,
        started.saturating_add(Duration::from_secs(30))
    );
    let relay_report = show(relay_name.as_str()).await;
    assert_eq!(relay_report.kind, ConsumerKind::Relay);
    assert_eq!(relay_report.last_seen, worker_report.last_seen);
    // The defaults, registered by `EffectWorker::new` and by the claim of an unnamed outbox,
    // are known by their kinds.
    assert_eq!(
        show(DEFAULT_EFFECT_WORKER_NAME).await.kind,
        ConsumerKind::EffectWorker
    );
    assert_eq!(
        show(DEFAULT_OUTBOX_RELAY_NAME).await.kind,
        ConsumerKind::Relay
    );
    let unknown = store
        .consumers()
        .show("no_such_consumer", &ListOptions::at(store.now()))
        .await
        .unwrap_err();
    assert!(
        unknown.to_string().contains(worker_name.as_str()),
        "the known names are listed: {unknown}"
    );
}

all_stores!(workers_and_relays_are_registered_under_their_names);
