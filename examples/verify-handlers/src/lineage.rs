//! Two handlers of a consumer that ships a new version (`payments_v1`, then `payments_v2`), for
//! `idem verify --modes rebuild`: each records a payment in its version's projection and a
//! receipt as an effect, which an effect worker sends to a provider that records every
//! idempotency key it receives.
//!
//! | path | handler | under `rebuild` |
//! |---|---|---|
//! | `/e/…` | [`Keys::Lineage`]: the new version succeeds the old one ([`Runner::succeeds`]) and enqueues through the runner ([`Runner::enqueue_effect`]) | matched: the replay sends no receipt again |
//! | `/f/…` | [`Keys::VersionName`]: derives the receipt's key from its own, versioned name | diverged: every receipt is sent again under a new key |
//!
//! Each serves `POST /{e,f}/webhook`, `POST /{e,f}/reset` (empties its tables and goes back to
//! `payments_v1`), `POST /{e,f}/successor` (moves to the next version, keeping its state) and
//! `GET /{e,f}/state`: it first runs the effect worker until nothing is due, then prints the
//! current version's projection and the keys the provider received, so that
//! `--successor 'curl -sf -X POST http://…/e/successor'` works.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use idem::{
    CallOutcome, DedupKey, EffectCall, EffectKey, EffectWorker, Enqueued, Event, EventId, Name,
    Runner, SqliteStore, sqlx,
};
use serde_json::{Value, json};

use crate::HandlerError;

/// How a handler derives its receipt's effect key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Keys {
    /// (e) Correct: from the runner, under the lineage's scope.
    Lineage,
    /// (f) The bug: `EffectKey::derive(payments_vN, …)`, a new key in every version.
    VersionName,
}

const SCHEMA: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS payments (consumer TEXT NOT NULL, event_id TEXT NOT NULL, object_id TEXT NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (consumer, event_id))",
    "CREATE TABLE IF NOT EXISTS provider_keys (key TEXT PRIMARY KEY, calls BIGINT NOT NULL)",
];

const RESET: [&str; 6] = [
    "DELETE FROM payments",
    "DELETE FROM provider_keys",
    "DELETE FROM idem_inbox",
    "DELETE FROM idem_versions",
    "DELETE FROM idem_effects",
    "DELETE FROM idem_consumer_lineage",
];

struct Handler {
    keys: Keys,
    store: SqliteStore,
    version: AtomicU32,
    source: Name,
    receipt: Name,
}

impl Handler {
    fn consumer(version: u32) -> Result<Name, idem::Error> {
        Ok(Name::new("consumer", format!("payments_v{version}"))?)
    }

    /// The runner of the current version; from `payments_v2` on, with [`Keys::Lineage`], it
    /// succeeds the version before.
    fn runner(&self) -> Result<Runner<sqlx::Sqlite>, idem::Error> {
        let version = self.version.load(Ordering::SeqCst);
        let runner = Runner::new(self.store.clone(), &Self::consumer(version)?);
        Ok(match self.keys {
            Keys::Lineage if version > 1 => runner.succeeds(&Self::consumer(version - 1)?),
            _ => runner,
        })
    }
}

/// The router of `/e` and `/f`, with their databases `e.db` and `f.db` in `dir`.
///
/// # Errors
/// [`HandlerError::Store`] / [`HandlerError::Schema`] when a database cannot be set up.
pub(crate) async fn router(dir: &Path) -> Result<Router, HandlerError> {
    let mut router = Router::new();
    for (path, keys) in [("e", Keys::Lineage), ("f", Keys::VersionName)] {
        let url = format!("sqlite://{}", dir.join(format!("{path}.db")).display());
        let store = SqliteStore::connect(&url).await?;
        store.migrate().await?;
        for statement in SCHEMA {
            sqlx::query(statement).execute(store.pool()).await?;
        }
        let handler = Arc::new(Handler {
            keys,
            store,
            version: AtomicU32::new(1),
            source: Name::new("source", "stripe").map_err(idem::Error::from)?,
            receipt: Name::new("effect", "send_receipt").map_err(idem::Error::from)?,
        });
        router = router.merge(
            Router::new()
                .route(&format!("/{path}/webhook"), post(webhook))
                .route(&format!("/{path}/reset"), post(reset))
                .route(&format!("/{path}/successor"), post(successor))
                .route(&format!("/{path}/state"), get(state))
                .with_state(handler),
        );
    }
    Ok(router)
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (status, message.to_string()).into_response()
}

/// Records the payment in the current version's projection and its receipt as an effect, in
/// one transaction with the claim.
async fn webhook(State(handler): State<Arc<Handler>>, body: Bytes) -> Response {
    let Some(payment) = crate::parse(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "not a Stripe event with id, created and data.object.{id,object}",
        );
    };
    let id = match EventId::new(payment.id.as_str()) {
        Ok(id) => id,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let runner = match handler.runner() {
        Ok(runner) => runner,
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    let event = Event::new(DedupKey::from_event(&handler.source, &id));
    // The handler owns what it uses (`async move`): the webhook's future must be `Send`.
    let runner = Arc::new(runner);
    let (ledger, receipt, keys) = (
        handler.store.effects(),
        handler.receipt.clone(),
        handler.keys,
    );
    let consumer = runner.consumer().to_string();
    let request = json!({"to": payment.object_id, "event": payment.id}).to_string();
    let (event_id, object_id, amount) = (payment.id, payment.object_id, payment.amount);
    let (for_handler, event_for_handler) = (Arc::clone(&runner), event.clone());
    let outcome = runner
        .run(&event, async move |tx| {
            let Some(amount) = amount else {
                return Ok(());
            };
            sqlx::query(
                "INSERT INTO payments (consumer, event_id, object_id, amount) VALUES ($1, $2, $3, $4)",
            )
            .bind(&consumer)
            .bind(&event_id)
            .bind(&object_id)
            .bind(amount)
            .execute(&mut *tx)
            .await?;
            let event = &event_for_handler;
            // New (sent after the commit) or decided before (sent already, or on its way):
            // either way the handler has nothing more to do.
            let _: Enqueued = match keys {
                Keys::Lineage => {
                    for_handler
                        .enqueue_effect(tx, &ledger, event, &receipt, request.as_bytes())
                        .await?
                }
                Keys::VersionName => {
                    let key = EffectKey::derive(for_handler.consumer(), &event.key, &receipt);
                    ledger
                        .enqueue(tx, &receipt, &key, request.as_bytes())
                        .await?
                }
            };
            Ok(())
        })
        .await;
    match outcome {
        Ok(outcome) => (StatusCode::OK, outcome.name()).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn reset(State(handler): State<Arc<Handler>>) -> Response {
    for statement in RESET {
        if let Err(e) = sqlx::query(statement).execute(handler.store.pool()).await {
            return error(StatusCode::INTERNAL_SERVER_ERROR, e);
        }
    }
    handler.version.store(1, Ordering::SeqCst);
    StatusCode::NO_CONTENT.into_response()
}

async fn successor(State(handler): State<Arc<Handler>>) -> Response {
    let version = handler.version.fetch_add(1, Ordering::SeqCst) + 1;
    (StatusCode::OK, format!("payments_v{version}")).into_response()
}

/// Sends every due receipt (the provider records its key), then prints the current version's
/// payments and the provider's keys.
async fn state(State(handler): State<Arc<Handler>>) -> Response {
    match snapshot(&handler).await {
        Ok(value) => axum::Json(value).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn snapshot(handler: &Handler) -> Result<Value, idem::Error> {
    let pool = handler.store.pool().clone();
    let worker = EffectWorker::new(handler.store.clone(), move |call: EffectCall| {
        let pool = pool.clone();
        async move {
            // The provider: it keeps every idempotency key it was called with.
            match sqlx::query(
                "INSERT INTO provider_keys (key, calls) VALUES ($1, 1) \
                 ON CONFLICT (key) DO UPDATE SET calls = calls + 1",
            )
            .bind(call.key.as_str())
            .execute(&pool)
            .await
            {
                Ok(_) => CallOutcome::Succeeded(b"sent".to_vec()),
                Err(e) => CallOutcome::Failed {
                    retryable: true,
                    reason: e.to_string(),
                },
            }
        }
    });
    worker.drain().await?;
    let version = handler.version.load(Ordering::SeqCst);
    let consumer = Handler::consumer(version)?.to_string();
    let payments: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT event_id, object_id, amount FROM payments WHERE consumer = $1 ORDER BY event_id",
    )
    .bind(&consumer)
    .fetch_all(handler.store.pool())
    .await
    .map_err(idem::Error::from)?;
    let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM provider_keys ORDER BY key")
        .fetch_all(handler.store.pool())
        .await
        .map_err(idem::Error::from)?;
    Ok(json!({
        "payments": payments.into_iter().map(|(event, object, amount)| {
            (event, json!({"object": object, "amount": amount}))
        }).collect::<BTreeMap<_, _>>(),
        "provider_keys": keys,
    }))
}
