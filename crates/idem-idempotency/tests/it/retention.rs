//! Expiry: SQL records deleted by `SqlStore::gc` in batches; Redis records by TTL, with the token
//! counter outliving them.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use idem_core::{Acquire, LeaseKey, ManualClock, RetentionPolicy, Timestamp, Ttl};
use idem_idempotency::{
    BodyMode, Claim, DEFAULT_RETENTION, Fingerprint, IdempotencyKey, IdempotencyStore, Principal,
    RedisStore, Scope, SqlStore, StoredResponse,
};
use idem_sql::Store;
use idem_testkit::AppDb;
use redis::AsyncCommands;

use crate::support::{REDIS_URL, unique_prefix};

mod gc_deletes_old_records_in_batches_and_nothing_else {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        super::gc_deletes_old_records_in_batches_and_nothing_else(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::gc_deletes_old_records_in_batches_and_nothing_else(idem_testkit::pg_store().await)
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql() {
        let store = idem_testkit::mysql_store().await;
        super::gc_deletes_old_records_in_batches_and_nothing_else(store).await;
    }
}

fn fp() -> Fingerprint {
    Fingerprint::of(&Method::POST, &"/p".parse().unwrap(), b"{}", BodyMode::Raw).unwrap()
}

fn scope(principal: &str, key: &str) -> Scope {
    Scope::new(
        Principal::new(principal).unwrap(),
        IdempotencyKey::parse(key.as_bytes()).unwrap().unwrap(),
    )
}

fn record() -> StoredResponse {
    StoredResponse::new(StatusCode::CREATED, Vec::new(), Bytes::from_static(b"done"))
}

fn lease() -> Ttl {
    Ttl::new(Duration::from_secs(30)).unwrap()
}

async fn token(store: &dyn IdempotencyStore, scope: &Scope) -> idem_core::FencingToken {
    match store.claim(scope, &fp(), lease()).await.unwrap() {
        Claim::Acquired { token, .. } => token,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// Records older than the retention go, in batches; a live claim and other users' leases stay.
/// The test's clock stands in 2001, so that on PostgreSQL's and MySQL's shared test databases
/// only this test's rows are old enough to be deleted.
async fn gc_deletes_old_records_in_batches_and_nothing_else<
    DB: AppDb + idem_idempotency::store::sql::SqlBackend,
>(
    store: Store<DB>,
) {
    let clock = ManualClock::new(Timestamp(978_307_200_000));
    let store = store.with_clock(Arc::new(clock.clone()));
    let sql = SqlStore::new(store.clone());
    let ns = unique_prefix();
    let completed: Vec<Scope> = (0..3).map(|i| scope(&ns, &format!("done-{i}"))).collect();
    for s in &completed {
        let t = token(&sql, s).await;
        sql.complete(s, t, &record()).await.unwrap();
    }
    let expired = scope(&ns, "crashed");
    token(&sql, &expired).await;
    let other = LeaseKey::new(format!("effects-{ns}"), "k").unwrap();
    let Acquire::Acquired { token: t, .. } = store.leases().acquire(&other, lease()).await.unwrap()
    else {
        panic!("fresh lease")
    };
    store.leases().complete(&other, t, b"effect").await.unwrap();

    clock.advance(DEFAULT_RETENTION - Duration::from_secs(1));
    assert_eq!(
        sql.gc(NonZeroU32::new(2).unwrap()).await.unwrap(),
        0,
        "too early"
    );

    clock.advance(Duration::from_secs(3600));
    let live = scope(&ns, "live");
    token(&sql, &live).await;
    assert_eq!(sql.gc(NonZeroU32::new(2).unwrap()).await.unwrap(), 4);

    assert!(matches!(
        sql.claim(&live, &fp(), lease()).await.unwrap(),
        Claim::InProgress { .. }
    ));
    assert!(matches!(
        sql.claim(&completed[0], &fp(), lease()).await.unwrap(),
        Claim::Acquired { .. }
    ));
    assert_eq!(
        store.leases().acquire(&other, lease()).await.unwrap(),
        Acquire::Completed {
            record: b"effect".to_vec()
        }
    );

    // A shorter retention, from a policy checked against the clients' retry window.
    let policy =
        RetentionPolicy::new(Duration::from_secs(3600), Duration::from_secs(1800)).unwrap();
    let short = SqlStore::new(store.clone()).retention(&policy);
    clock.advance(Duration::from_secs(7200));
    assert_eq!(
        short.gc(NonZeroU32::new(100).unwrap()).await.unwrap(),
        2,
        "the claims of live and done-0, expired for over an hour"
    );
}

/// Redis: a completed record expires after the retention (PEXPIRE); a release deletes the record
/// but keeps the token counter, which always outlives the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_records_expire_by_ttl_and_the_token_counter_outlives_them() {
    let retention = Duration::from_secs(600);
    let store = RedisStore::connect(REDIS_URL, unique_prefix())
        .await
        .unwrap()
        .retention(&RetentionPolicy::new(retention, Duration::ZERO).unwrap());
    let mut redis = redis::Client::open(REDIS_URL)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let s = scope("alice", "K");
    let (rec, tok) = store.key_names(&s);

    let first = token(&store, &s).await;
    store.release(&s, first).await.unwrap();
    let exists: bool = redis.exists(&rec).await.unwrap();
    assert!(!exists, "a released record is deleted");
    let counter: i64 = redis.get(&tok).await.unwrap();
    assert_eq!(counter, first.0);

    let second = token(&store, &s).await;
    assert_eq!(second.0, first.0 + 1);
    store.complete(&s, second, &record()).await.unwrap();
    let rec_ttl: i64 = redis.pttl(&rec).await.unwrap();
    let tok_ttl: i64 = redis.pttl(&tok).await.unwrap();
    assert!(rec_ttl > 0 && rec_ttl <= 600_000, "record ttl {rec_ttl} ms");
    assert!(
        tok_ttl > rec_ttl,
        "counter ttl {tok_ttl} ms ≤ record ttl {rec_ttl} ms"
    );

    // The record expires: the next claim gets a token no earlier holder had.
    let _: () = redis.del(&rec).await.unwrap();
    let third = token(&store, &s).await;
    assert_eq!(third.0, second.0 + 1);
    assert!(matches!(
        store.complete(&s, second, &record()).await,
        Err(idem_idempotency::StoreError::Fenced)
    ));
    let fields: Vec<String> = redis.hkeys(&rec).await.unwrap();
    for field in [
        "principal",
        "key",
        "state",
        "token",
        "fingerprint",
        "expires_at",
    ] {
        assert!(fields.iter().any(|f| f == field), "{field} in {fields:?}");
    }
}
