//! The store contract, called directly, on every store: only the owner's token can complete or
//! release a claim; refused requests never change it; one winner among concurrent claims.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use idem_core::{FencingToken, Ttl};
use idem_idempotency::{
    BodyMode, Claim, Fingerprint, IdempotencyKey, IdempotencyStore, Scope, StoreError,
    StoredResponse,
};

use crate::support::{Env, all_stores};

all_stores!(
    refused_requests_never_change_the_owners_claim,
    an_expired_holder_cannot_complete_its_successors_claim,
    a_released_claim_is_taken_with_a_greater_token,
    of_concurrent_claims_exactly_one_wins,
);

fn fp(body: &str) -> Fingerprint {
    Fingerprint::of(
        &Method::POST,
        &"/payments".parse().unwrap(),
        body.as_bytes(),
        BodyMode::Raw,
    )
    .unwrap()
}

fn scope(env: &Env, principal: &str, key: &str) -> Scope {
    Scope::new(
        env.principal(principal),
        IdempotencyKey::parse(key.as_bytes()).unwrap().unwrap(),
    )
}

fn response(body: &'static str) -> StoredResponse {
    StoredResponse::new(
        StatusCode::CREATED,
        Vec::new(),
        Bytes::from_static(body.as_bytes()),
    )
}

fn lease(secs: u64) -> Ttl {
    Ttl::new(Duration::from_secs(secs)).unwrap()
}

async fn acquired(store: &dyn IdempotencyStore, scope: &Scope, fp: &Fingerprint) -> FencingToken {
    match store.claim(scope, fp, lease(30)).await.unwrap() {
        Claim::Acquired { token, .. } => token,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// A request rejected as in progress (or for a fingerprint mismatch) never modifies or deletes
/// the owner's record; only the owner's token can complete or release it.
async fn refused_requests_never_change_the_owners_claim(env: Env) {
    let store = env.store.as_ref();
    let k = scope(&env, "alice", "K");
    let (mine, other) = (fp("{\"amt\":10}"), fp("{\"amt\":1000}"));
    let token = acquired(store, &k, &mine).await;

    assert_eq!(
        store.claim(&k, &other, lease(30)).await.unwrap(),
        Claim::Mismatch
    );
    assert!(matches!(
        store.claim(&k, &mine, lease(30)).await.unwrap(),
        Claim::InProgress { .. }
    ));
    let intruder = FencingToken(token.0 + 1);
    assert!(matches!(
        store.release(&k, intruder).await,
        Err(StoreError::Fenced)
    ));
    assert!(matches!(
        store.complete(&k, intruder, &response("intruder")).await,
        Err(StoreError::Fenced)
    ));
    // Still the owner's, still running.
    assert!(matches!(
        store.claim(&k, &mine, lease(30)).await.unwrap(),
        Claim::InProgress { .. }
    ));

    store.complete(&k, token, &response("owner")).await.unwrap();
    assert_eq!(
        store.claim(&k, &mine, lease(30)).await.unwrap(),
        Claim::Completed(response("owner"))
    );
    assert_eq!(
        store.claim(&k, &other, lease(30)).await.unwrap(),
        Claim::Mismatch
    );
    // A completed claim cannot be released or completed again, even by its owner.
    assert!(matches!(
        store.release(&k, token).await,
        Err(StoreError::Fenced)
    ));
    assert!(matches!(
        store.complete(&k, token, &response("again")).await,
        Err(StoreError::Fenced)
    ));
    assert_eq!(
        store.claim(&k, &mine, lease(30)).await.unwrap(),
        Claim::Completed(response("owner"))
    );
    // Another principal with the same key has its own scope.
    let bob = scope(&env, "bob", "K");
    acquired(store, &bob, &other).await;
}

/// A holder whose lease expired is taken over; its completion is then refused by the token.
async fn an_expired_holder_cannot_complete_its_successors_claim(env: Env) {
    let store = env.store.as_ref();
    let k = scope(&env, "alice", "K");
    let f = fp("{}");
    let Claim::Acquired { token: first, .. } = store.claim(&k, &f, lease(1)).await.unwrap() else {
        panic!("fresh scope")
    };
    env.clock.advance(Duration::from_secs(2));
    let second = acquired(store, &k, &f).await;
    assert!(second > first, "{second} > {first}");
    assert!(matches!(
        store.complete(&k, first, &response("stale")).await,
        Err(StoreError::Fenced)
    ));
    assert!(matches!(
        store.release(&k, first).await,
        Err(StoreError::Fenced)
    ));
    store
        .complete(&k, second, &response("successor"))
        .await
        .unwrap();
    assert_eq!(
        store.claim(&k, &f, lease(1)).await.unwrap(),
        Claim::Completed(response("successor"))
    );
}

/// A release frees the claim at once, for any fingerprint, and the next token is greater.
async fn a_released_claim_is_taken_with_a_greater_token(env: Env) {
    let store = env.store.as_ref();
    let k = scope(&env, "alice", "K");
    let first = acquired(store, &k, &fp("a")).await;
    store.release(&k, first).await.unwrap();
    let second = acquired(store, &k, &fp("b")).await;
    assert_eq!(second.0, first.0 + 1);
    assert!(matches!(
        store.release(&k, first).await,
        Err(StoreError::Fenced)
    ));
    store.release(&k, second).await.unwrap();
    let third = acquired(store, &k, &fp("b")).await;
    assert_eq!(third.0, second.0 + 1);
}

/// 16 concurrent claims of one free scope: one Acquired, 15 InProgress.
async fn of_concurrent_claims_exactly_one_wins(env: Env) {
    let k = Arc::new(scope(&env, "alice", "K"));
    let f = fp("{}");
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, k) = (Arc::clone(&env.store), Arc::clone(&k));
            tokio::spawn(async move { store.claim(&k, &f, lease(30)).await.unwrap() })
        })
        .collect();
    let mut acquired = 0;
    for task in tasks {
        match task.await.unwrap() {
            Claim::Acquired { .. } => acquired += 1,
            Claim::InProgress { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(acquired, 1);
}
