//! Keys and ids compare byte for byte on every store: ids that differ only in case or in a
//! trailing space are different events, entities, leases, effects and messages. (MySQL's and
//! MariaDB's default collations are case-insensitive and ignore trailing spaces: under them
//! `evt_A`, `evt_a` and `evt_a ` would share one inbox row, and two of the three events would be
//! lost as "duplicates".)

use idem_core::{Acquire, EffectKey, Entity, LeaseKey, Name, Ttl, Version};
use idem_sql::{Enqueued, Event, MessageId, OutboxMessage, Outcome, Runner, Store};
use idem_testkit::{AppDb, all_stores};

use crate::support::{self, consumer, stripe_key};

/// Ids that differ only in case or in a trailing space.
const IDS: [&str; 3] = ["evt_A", "evt_a", "evt_a "];

/// Three events, each about its own entity (`sub_A`, `sub_a`, `sub_a `): each is applied once
/// (its handler writes one row), each is stored as its own entity's first version, and each
/// redelivery is a duplicate.
async fn ids_differing_in_case_or_trailing_space_are_different_events<DB: AppDb>(store: Store<DB>) {
    support::app_tables(&store).await;
    let consumer = consumer("byte_keys");
    let runner = Runner::new(store.clone(), &consumer);
    let event = |id: &str| {
        let entity = Entity::new("subscription", id.replace("evt", "sub")).unwrap();
        Event::new(stripe_key(id)).with_entity(entity, Version::sequence(1))
    };
    for round in ["first", "redelivery"] {
        for id in IDS {
            let name = consumer.to_string();
            let outcome = runner
                .run(&event(id), async |tx| {
                    Ok(support::write_effect::<DB>(&mut *tx, &name, id, "applied").await?)
                })
                .await
                .unwrap();
            let expected = match round {
                "first" => Outcome::Applied(()),
                _ => Outcome::Duplicate,
            };
            assert_eq!(outcome, expected, "{round} delivery of {id:?}");
        }
    }
    assert_eq!(support::inbox_count(&store, &consumer).await, 3);
    assert_eq!(support::version_rows(&store, &consumer).await, 3);
    for id in IDS {
        assert!(
            support::in_inbox(&store, &consumer, &stripe_key(id)).await,
            "{id:?}"
        );
    }
}

/// Leases on keys that differ only in case or in a trailing space are three leases, each
/// acquired with token 1.
async fn lease_keys_differing_in_case_or_trailing_space_are_different_leases<DB: AppDb>(
    store: Store<DB>,
) {
    let scope = consumer("byte_lease").to_string();
    let ttl = Ttl::new(std::time::Duration::from_secs(30)).unwrap();
    for key in ["K", "k", "k "] {
        let acquired = store
            .leases()
            .acquire(&LeaseKey::new(scope.as_str(), key).unwrap(), ttl)
            .await
            .unwrap();
        assert!(
            matches!(acquired, Acquire::Acquired { token, takeover: false, .. } if token.0 == 1),
            "{key:?}: {acquired:?}"
        );
    }
}

/// Effect keys and outbox message ids that differ only in case are two effects and two
/// messages (both are printable ASCII without a trailing space, by their own rules).
async fn effect_keys_and_message_ids_differing_in_case_are_different<DB: AppDb>(store: Store<DB>) {
    let effect = Name::new("effect", consumer("byte_effect").as_str()).unwrap();
    let prefix = effect.to_string();
    let mut tx = store.begin().await.unwrap();
    for key in [format!("{prefix}:A"), format!("{prefix}:a")] {
        let enqueued = store
            .effects()
            .enqueue(&mut tx, &effect, &EffectKey::intent(&key).unwrap(), b"same")
            .await
            .unwrap();
        assert_eq!(enqueued, Enqueued::Created, "{key}");
    }
    for id in [format!("{prefix}-M"), format!("{prefix}-m")] {
        let message = OutboxMessage::new("orders.created", "{}")
            .with_message_id(MessageId::new(id.as_str()).unwrap());
        let stored = store.outbox().enqueue(&mut tx, &message).await;
        assert_eq!(stored.unwrap().as_str(), id);
    }
    tx.commit().await.unwrap();
}

all_stores!(
    ids_differing_in_case_or_trailing_space_are_different_events,
    lease_keys_differing_in_case_or_trailing_space_are_different_leases,
    effect_keys_and_message_ids_differing_in_case_are_different,
);
