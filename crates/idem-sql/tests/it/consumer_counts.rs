//! Counts ride in the consumer's own commits (issue 34): a duplicate's count appears only with
//! the next commit that carries a flush (or an explicit flush), and a commit that fails keeps
//! the counts it carried for the next flush — none lost, none counted twice.

use std::sync::Arc;
use std::time::Duration;

use idem_core::{ManualClock, Name};
use idem_sql::{Error, Event, ListOptions, Outcome, Runner, Store};
use idem_testkit::{AppDb, Value, both_stores, exec};

use crate::support::{consumer, stripe_key};

/// (claimed, duplicates) of `name` over the last hour, as flushed.
async fn flushed<DB: AppDb>(store: &Store<DB>, name: &Name) -> (u64, u64) {
    let report = store
        .consumers()
        .show(name.as_str(), &ListOptions::at(store.now()))
        .await
        .unwrap();
    (report.windows[0].claimed, report.windows[0].duplicates)
}

/// Runs `event`; the handler inserts a child row whose parent is `parent` (a deferred foreign
/// key: a missing parent fails the commit itself, after the flush's statements ran).
async fn run<DB: AppDb>(
    runner: &Runner<DB>,
    event: &Event,
    parent: &str,
) -> Result<Outcome<()>, Error> {
    let child = event.key.to_string();
    runner
        .run(event, async |tx| {
            DB::execute(
                tx,
                "INSERT INTO counted_child (id, parent) VALUES ($1, $2)",
                vec![Value::from(child.as_str()), Value::from(parent)],
            )
            .await?;
            Ok(())
        })
        .await
}

async fn counts_ride_in_commits_and_survive_a_failed_one<DB: AppDb>(store: Store<DB>) {
    exec(
        &store,
        "CREATE TABLE IF NOT EXISTS counted_parent (id VARCHAR(255) PRIMARY KEY)",
        vec![],
    )
    .await;
    exec(
        &store,
        "CREATE TABLE IF NOT EXISTS counted_child (id VARCHAR(255) PRIMARY KEY, \
         parent VARCHAR(255) NOT NULL REFERENCES counted_parent (id) \
         DEFERRABLE INITIALLY DEFERRED)",
        vec![],
    )
    .await;
    let name = consumer("counted");
    let parent = name.to_string();
    exec(
        &store,
        "INSERT INTO counted_parent (id) VALUES ($1)",
        vec![Value::from(parent.as_str())],
    )
    .await;
    let clock = ManualClock::new(store.now());
    let store = store
        .with_clock(Arc::new(clock.clone()))
        .counts_flush_interval(Duration::from_secs(5));
    let runner = Runner::new(store.clone(), &name);
    let first = Event::new(stripe_key(&format!("{name}_1")));

    // The first commit carries the registration; its own count comes after it.
    assert!(matches!(
        run(&runner, &first, &parent).await,
        Ok(Outcome::Applied(()))
    ));
    assert_eq!(flushed(&store, &name).await, (0, 0));
    // Duplicates within the flush interval write nothing.
    for _ in 0..2 {
        assert_eq!(
            run(&runner, &first, &parent).await.unwrap(),
            Outcome::Duplicate
        );
    }
    assert_eq!(flushed(&store, &name).await, (0, 0));

    // A flush is due: it rides in the next commit, which fails (its child has no parent).
    clock.advance(Duration::from_secs(5));
    let orphan = Event::new(stripe_key(&format!("{name}_orphan")));
    let failed = run(&runner, &orphan, "no such parent").await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(flushed(&store, &name).await, (0, 0), "nothing committed");

    // The next due flush (here a duplicate's, in its own transaction) writes them once.
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        run(&runner, &first, &parent).await.unwrap(),
        Outcome::Duplicate
    );
    assert_eq!(flushed(&store, &name).await, (1, 3));

    // Within the interval nothing more is written until an explicit flush.
    let second = Event::new(stripe_key(&format!("{name}_2")));
    assert!(matches!(
        run(&runner, &second, &parent).await,
        Ok(Outcome::Applied(()))
    ));
    assert_eq!(flushed(&store, &name).await, (1, 3));
    store.flush_consumer_counts().await.unwrap();
    assert_eq!(flushed(&store, &name).await, (2, 3));
}

// MySQL has no deferred foreign keys: a commit cannot be made to fail there this way.
both_stores!(counts_ride_in_commits_and_survive_a_failed_one);
