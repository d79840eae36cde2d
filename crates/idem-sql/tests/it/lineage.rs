//! Consumer lineage (issue 33, part 1; docs/design.md C6): a consumer version that succeeds an
//! earlier one replays the history that one handled and runs none of its effects again, because
//! identical handler code derives identical effect keys through the runner.

use std::collections::BTreeSet;

use idem_core::{EffectKey, Name};
use idem_sql::metric_definitions::EFFECTS_ENQUEUED_TOTAL;
use idem_sql::{EffectLedger, Enqueued, Error, Event, Runner, Store};
use idem_testkit::{AppDb, Value, all_stores, exec};

use crate::provider::{Recorder, drain};
use crate::support::{self, consumer, stripe_key};

/// The projection of the replay test; the other test writes to a table of its own, so that
/// the two never create one table at once (PostgreSQL refuses the second).
const PROJECTION: &str = "CREATE TABLE IF NOT EXISTS lineage_payments (\
     consumer VARCHAR(191) NOT NULL, event_id VARCHAR(191) NOT NULL, \
     account VARCHAR(191) NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (consumer, event_id))";
const INSERT: &str = "INSERT INTO lineage_payments (consumer, event_id, account, amount) \
     VALUES ($1, $2, $3, $4)";
const PROJECTION_B: &str = "CREATE TABLE IF NOT EXISTS lineage_payments_b (\
     consumer VARCHAR(191) NOT NULL, event_id VARCHAR(191) NOT NULL, \
     account VARCHAR(191) NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (consumer, event_id))";
const INSERT_B: &str = "INSERT INTO lineage_payments_b (consumer, event_id, account, amount) \
     VALUES ($1, $2, $3, $4)";

/// The handler code every version runs: records the payment in the projection and enqueues
/// the receipt with `template`, its key from the runner.
async fn handle<DB: AppDb>(
    insert: &'static str,
    runner: &Runner<DB>,
    ledger: &EffectLedger<DB>,
    receipt: &Name,
    n: usize,
    template: &str,
) -> Result<Option<Enqueued>, Error> {
    let event_id = format!("evt_{n}");
    let event = Event::new(stripe_key(&event_id));
    let account = format!("acct_{}", n % 7);
    let request = format!(r#"{{"to":"{account}","template":"{template}"}}"#);
    let consumer = runner.consumer().to_string();
    let outcome = runner
        .run(&event, async |tx| {
            DB::execute(
                tx,
                insert,
                vec![
                    Value::from(consumer.as_str()),
                    Value::from(event_id.as_str()),
                    Value::from(account.as_str()),
                    Value::Int(100 + n as i64),
                ],
            )
            .await?;
            let enqueued = runner
                .enqueue_effect(tx, ledger, &event, receipt, request.as_bytes())
                .await?;
            Ok(enqueued)
        })
        .await?;
    Ok(match outcome {
        idem_sql::Outcome::Applied(enqueued) => Some(enqueued),
        _ => None,
    })
}

/// (account, amount) of `consumer`'s projection for events `evt_0` to `evt_{below - 1}`.
async fn projection<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    below: usize,
) -> Vec<(String, i64)> {
    let mut conn = store.pool().acquire().await.unwrap();
    let pairs = DB::fetch_text_pairs(
        &mut conn,
        "SELECT event_id, account FROM lineage_payments WHERE consumer = $1",
        vec![Value::from(consumer.as_str())],
    )
    .await
    .unwrap();
    let mut rows: Vec<(usize, String)> = pairs
        .into_iter()
        .map(|(id, account)| (id.trim_start_matches("evt_").parse().unwrap(), account))
        .filter(|(n, _)| *n < below)
        .collect();
    rows.sort();
    rows.into_iter()
        .map(|(n, account)| (account, 100 + n as i64))
        .collect()
}

/// 500 events through `billing_v1`, each enqueuing a receipt the effect worker sends to a
/// recording provider; then `billing_v2`, succeeding it with the same handler code, replays
/// the 500 and 100 new ones: the provider saw exactly 600 distinct keys (600 calls), v2's
/// projection equals v1's on the first 500, and v1's keys are today's (`EffectKey::derive`
/// over its own name).
async fn a_successor_replays_history_and_runs_no_effect_again<DB: AppDb>(store: Store<DB>) {
    exec(&store, PROJECTION, vec![]).await;
    let (provider, url) = Recorder::start().await;
    let ledger = store.effects();
    let receipt = Name::new("effect", consumer("receipt").as_str()).unwrap();
    let v1 = consumer("billing_v1");
    let v2 = Name::new("consumer", format!("{v1}_next")).unwrap();

    let first = Runner::new(store.clone(), &v1);
    for n in 0..500 {
        let enqueued = handle(INSERT, &first, &ledger, &receipt, n, "v1")
            .await
            .unwrap();
        assert_eq!(enqueued, Some(Enqueued::Created));
    }
    drain(&store, &receipt, &url).await;
    assert_eq!((provider.calls().len(), provider.distinct()), (500, 500));
    // A consumer without a lineage keeps today's keys exactly: every stored key (and every key
    // the provider saw) is `EffectKey::derive` over its own name.
    let todays = |below: usize| -> BTreeSet<String> {
        (0..below)
            .map(|n| {
                EffectKey::derive(&v1, &stripe_key(&format!("evt_{n}")), &receipt)
                    .as_str()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(provider.keys(), todays(500), "the keys the provider saw");
    assert_eq!(ledger.count_scope(&v1).await.unwrap(), 500);
    for key in todays(500) {
        let stored = ledger.get(&EffectKey::intent(&key).unwrap()).await.unwrap();
        assert!(stored.is_some(), "{key} is not stored");
    }

    let second = Runner::new(store.clone(), &v2).succeeds(&v1);
    let mut completed = 0;
    for n in 0..600 {
        match handle(INSERT, &second, &ledger, &receipt, n, "v1")
            .await
            .unwrap()
        {
            Some(Enqueued::Completed { .. }) => completed += 1,
            Some(Enqueued::Created) => assert!(n >= 500, "evt_{n} was enqueued anew"),
            other => panic!("evt_{n}: {other:?}"),
        }
    }
    assert_eq!(completed, 500);
    drain(&store, &receipt, &url).await;
    assert_eq!((provider.calls().len(), provider.distinct()), (600, 600));
    assert_eq!(provider.keys(), todays(600), "v2 derived under v1's scope");
    assert_eq!(ledger.count_scope(&v1).await.unwrap(), 600);
    assert_eq!(
        ledger.count_scope(&v2).await.unwrap(),
        0,
        "nothing under v2's own name"
    );
    assert_eq!(
        projection(&store, &v2, 500).await,
        projection(&store, &v1, 500).await
    );
    assert_eq!(projection(&store, &v2, 600).await.len(), 600);
}

/// A successor whose request bytes differ (a new receipt template) runs nothing: it gets the
/// stored state, not `EffectConflict`; a consumer without a lineage still gets the conflict.
async fn a_successor_with_other_request_bytes_runs_nothing<DB: AppDb>(store: Store<DB>) {
    support::install_metrics();
    exec(&store, PROJECTION_B, vec![]).await;
    let (provider, url) = Recorder::start().await;
    let ledger = store.effects();
    let receipt = Name::new("effect", consumer("receipt").as_str()).unwrap();
    let v1 = consumer("billing_v1");
    let v2 = Name::new("consumer", format!("{v1}_next")).unwrap();
    let first = Runner::new(store.clone(), &v1);
    for n in 0..3 {
        handle(INSERT_B, &first, &ledger, &receipt, n, "v1")
            .await
            .unwrap();
    }
    drain(&store, &receipt, &url).await;
    let second = Runner::new(store.clone(), &v2).succeeds(&v1);
    for n in 0..3 {
        let enqueued = handle(INSERT_B, &second, &ledger, &receipt, n, "v2-template")
            .await
            .unwrap();
        assert!(
            matches!(enqueued, Some(Enqueued::Completed { .. })),
            "{enqueued:?}"
        );
    }
    drain(&store, &receipt, &url).await;
    assert_eq!(provider.calls().len(), 3, "nothing ran again");
    // The difference is counted (the effect's name is this test's own) and the stored request
    // is still v1's.
    let differs = support::counter(
        EFFECTS_ENQUEUED_TOTAL,
        &[("effect", receipt.as_str()), ("outcome", "request_differs")],
    );
    assert_eq!(differs, 3, "differences counted");
    let key = EffectKey::derive(&v1, &stripe_key("evt_0"), &receipt);
    let stored = ledger.get(&key).await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&stored.request).contains(r#""template":"v1""#),
        "{stored:?}"
    );

    // Without a lineage, another template under the same key is still a conflict.
    let again = Runner::new(store.clone(), &v1);
    let event = Event::new(stripe_key("evt_0"));
    let key = again.effect_key(&event, &receipt).unwrap();
    let mut tx = store.begin().await.unwrap();
    let conflict = ledger.enqueue(&mut tx, &receipt, &key, b"other").await;
    assert!(
        matches!(conflict, Err(Error::EffectConflict { .. })),
        "{conflict:?}"
    );
}

/// A consumer naming itself, a cycle of predecessors and a lineage other than the recorded one
/// are refused; an effect key asked before the lineage is resolved is an error, not a key under
/// the wrong name; `effects_scope` names the scope directly.
async fn lineages_that_cannot_hold_are_refused<DB: AppDb>(store: Store<DB>) {
    let v1 = consumer("orders_v1");
    let v2 = Name::new("consumer", format!("{v1}_b")).unwrap();
    let v3 = Name::new("consumer", format!("{v1}_c")).unwrap();
    let refused = |r: Result<&Name, Error>| match r {
        Err(Error::Lineage { reason, .. }) => reason,
        other => panic!("expected a refusal: {other:?}"),
    };
    let own = Runner::new(store.clone(), &v1).succeeds(&v1);
    assert!(refused(own.effects_scope_name().await).contains("names itself"));

    let event = Event::new(stripe_key("evt_1"));
    let effect = Name::new("effect", "email").unwrap();
    let second = Runner::new(store.clone(), &v2).succeeds(&v1);
    assert!(matches!(
        second.effect_key(&event, &effect),
        Err(Error::Lineage { .. })
    ));
    assert_eq!(second.effects_scope_name().await.unwrap(), &v1);
    assert_eq!(
        second.effect_key(&event, &effect).unwrap(),
        EffectKey::derive(&v1, &event.key, &effect)
    );
    let third = Runner::new(store.clone(), &v3).succeeds(&v2);
    assert_eq!(
        third.effects_scope_name().await.unwrap(),
        &v1,
        "the lineage's scope"
    );

    let cycle = Runner::new(store.clone(), &v1).succeeds(&v3);
    assert!(refused(cycle.effects_scope_name().await).contains("cycle"));
    let other = Name::new("consumer", format!("{v1}_other")).unwrap();
    let changed = Runner::new(store.clone(), &v2).effects_scope(&other);
    assert!(refused(changed.effects_scope_name().await).contains("does not change"));

    let scope = Name::new("consumer", format!("{v1}_scope")).unwrap();
    let named = Runner::new(store.clone(), &consumer("orders_x")).effects_scope(&scope);
    assert_eq!(named.effects_scope_name().await.unwrap(), &scope);
    let plain = Runner::new(store.clone(), &v1);
    assert_eq!(
        plain.effect_key(&event, &effect).unwrap(),
        EffectKey::derive(&v1, &event.key, &effect)
    );
}

all_stores!(
    a_successor_replays_history_and_runs_no_effect_again,
    a_successor_with_other_request_bytes_runs_nothing,
    lineages_that_cannot_hold_are_refused,
);
