//! The SQL store of the Idempotency-Key layer is a consumer in idem's registry (issue 34): named
//! `idempotency_keys` by default or as set, a fresh claim counted as claimed and a replay as a
//! duplicate.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use idem_core::{Name, Ttl};
use idem_idempotency::{
    BodyMode, Claim, DEFAULT_CONSUMER_NAME, Fingerprint, IdempotencyKey, IdempotencyStore,
    Principal, Scope, SqlStore, StoredResponse,
};
use idem_sql::{ConsumerKind, ListOptions};

#[tokio::test]
async fn the_sql_store_is_a_named_consumer_that_counts_its_claims() {
    let (_dir, store) = idem_testkit::sqlite_store().await;
    let _default = SqlStore::new(store.clone());
    let name = Name::new("consumer", "payments_api").unwrap();
    let keys = SqlStore::new(store.clone()).name(&name);
    let fingerprint =
        Fingerprint::of(&Method::POST, &"/p".parse().unwrap(), b"{}", BodyMode::Raw).unwrap();
    let lease = Ttl::new(Duration::from_secs(30)).unwrap();
    let response = StoredResponse::new(StatusCode::CREATED, Vec::new(), Bytes::from_static(b"ok"));
    let (fresh, replays) = (3u64, 2u64);
    for n in 0..fresh {
        let scope = Scope::new(
            Principal::new("alice").unwrap(),
            IdempotencyKey::parse(format!("k{n}").as_bytes())
                .unwrap()
                .unwrap(),
        );
        let Claim::Acquired { token, .. } = keys.claim(&scope, &fingerprint, lease).await.unwrap()
        else {
            panic!("a fresh key is acquired");
        };
        keys.complete(&scope, token, &response).await.unwrap();
        if n < replays {
            let again = keys.claim(&scope, &fingerprint, lease).await.unwrap();
            assert!(matches!(again, Claim::Completed(_)), "{again:?}");
        }
    }
    store.flush_consumer_counts().await.unwrap();
    let options = ListOptions::at(store.now());
    let report = store
        .consumers()
        .show("payments_api", &options)
        .await
        .unwrap();
    assert_eq!(report.kind, ConsumerKind::IdempotencyKey);
    assert_eq!(
        (report.windows[0].claimed, report.windows[0].duplicates),
        (fresh, replays)
    );
    let default = store
        .consumers()
        .show(DEFAULT_CONSUMER_NAME, &options)
        .await
        .unwrap();
    assert_eq!(default.kind, ConsumerKind::IdempotencyKey);
}
