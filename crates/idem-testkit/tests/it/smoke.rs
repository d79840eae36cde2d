use idem::{Claim, DedupKey, EventId, Name, Store};
use idem_testkit::{AppDb, both_stores};

async fn claim_then_duplicate<DB: AppDb>(store: Store<DB>) {
    let consumer = Name::new("consumer", "smoke_v1").unwrap();
    let key = DedupKey::from_event(
        &Name::new("source", "stripe").unwrap(),
        &EventId::new("evt_smoke").unwrap(),
    );
    let inbox = store.inbox(&consumer);
    let mut tx = store.begin().await.unwrap();
    assert_eq!(inbox.claim(&mut tx, &key).await.unwrap(), Claim::Fresh);
    tx.commit().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    assert_eq!(inbox.claim(&mut tx, &key).await.unwrap(), Claim::Duplicate);
}

both_stores!(claim_then_duplicate);
