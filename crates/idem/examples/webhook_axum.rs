//! A webhook endpoint with axum that applies each event once, however often and in whatever
//! order it arrives.
//!
//! `POST /webhooks/stripe` takes a Stripe-style event and runs it through idem's [`Runner`] on
//! SQLite: in one transaction the inbox claims the event id, the version guard skips an event
//! older than what was applied for its subscription (`created`), and the handler upserts the
//! subscription and records a receipt email as an effect intent. The answer is 200 for applied,
//! duplicate and stale events (a duplicate is a success: the sender must stop retrying), 400 for
//! an event that can never apply (a permanent error) and 500 for any other error, so that the
//! sender retries. An effect worker sends the receipts after the commit.
//!
//! In production, verify the sender's signature on the raw body first (`idem-http`).
//!
//! Run: `cargo run -p idem --example webhook_axum`. It serves on a free port, sends every event
//! twice at the same moment, then an older event of one subscription and a malformed one, and
//! exits non-zero unless each event applied once.

use std::sync::Arc;

use anyhow::ensure;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use idem::{
    CallOutcome, DedupKey, EffectCall, EffectLedger, EffectWorker, Enqueued, Entity, ErrorKind,
    Event, EventId, HandlerError, Name, Runner, SqliteStore, Version, sqlx,
};
use serde::Deserialize;

/// The parts of a Stripe event the endpoint reads.
#[derive(Deserialize)]
struct StripeEvent {
    id: String,
    created: i64,
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    object: serde_json::Value,
}

/// A subscription, as the handler reads it from `data.object`.
#[derive(Deserialize)]
struct Subscription {
    id: String,
    customer: String,
    status: String,
}

struct App {
    runner: Runner<sqlx::Sqlite>,
    effects: EffectLedger<sqlx::Sqlite>,
    stripe: Name,
    send_receipt: Name,
}

async fn stripe_webhook(State(app): State<Arc<App>>, body: Bytes) -> (StatusCode, String) {
    // The envelope gives the dedup key (the event id) and the version (`created`).
    let Ok(event) = serde_json::from_slice::<StripeEvent>(&body) else {
        return (StatusCode::BAD_REQUEST, "not a Stripe event".into());
    };
    let Some(entity) = event.data.object["id"]
        .as_str()
        .and_then(|id| Entity::new("subscription", id).ok())
    else {
        return (StatusCode::BAD_REQUEST, "data.object.id is missing".into());
    };
    let Ok(event_id) = EventId::new(event.id.as_str()) else {
        return (
            StatusCode::BAD_REQUEST,
            "the event id is blank or too long".into(),
        );
    };
    let delivery = Event::new(DedupKey::from_event(&app.stripe, &event_id))
        .with_entity(entity, Version::timestamp(event.created));
    // The runner derives the key under its consumer's effects scope (docs/design.md C6): a
    // later version that succeeds this one derives the same key, so a replay sends nothing again.
    let receipt = match app.runner.effect_key(&delivery, &app.send_receipt) {
        Ok(key) => key,
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };

    // The handler owns what it uses (`async move`): an axum handler's future must be `Send`.
    let (effects, send_receipt) = (app.effects.clone(), app.send_receipt.clone());
    let object = event.data.object;
    let outcome = app
        .runner
        .run(&delivery, async move |tx| {
            // `?` takes any error; this one cannot go away on a retry, so it is permanent.
            let sub = Subscription::deserialize(&object).map_err(HandlerError::permanent)?;
            sqlx::query(
                "INSERT INTO subscriptions (id, customer, status, changes) VALUES ($1, $2, $3, 1) \
                 ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
                 changes = subscriptions.changes + 1",
            )
            .bind(&sub.id)
            .bind(&sub.customer)
            .bind(&sub.status)
            .execute(&mut *tx)
            .await?;
            let email = serde_json::json!({ "to": sub.customer, "status": sub.status });
            let request = serde_json::to_vec(&email)?;
            match effects
                .enqueue(&mut *tx, &send_receipt, &receipt, &request)
                .await?
            {
                // The worker sends it after the commit.
                Enqueued::Created | Enqueued::Pending { .. } => {}
                // Sent (or refused by an operator) before: nothing to send again.
                Enqueued::Completed { .. } | Enqueued::Failed { .. } => {}
            }
            Ok(())
        })
        .await;
    match outcome {
        // Applied, tie, gap, duplicate and stale are all acknowledged.
        Ok(outcome) if outcome.acknowledge() => (StatusCode::OK, outcome.name().into()),
        Ok(outcome) => (StatusCode::SERVICE_UNAVAILABLE, outcome.name().into()),
        Err(e) if e.kind() == ErrorKind::Permanent => (StatusCode::BAD_REQUEST, e.to_string()),
        // Nothing was committed: the sender retries.
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    let store = SqliteStore::connect(&url).await?;
    store.migrate().await?;
    sqlx::query(
        "CREATE TABLE subscriptions (id TEXT PRIMARY KEY, customer TEXT NOT NULL, \
         status TEXT NOT NULL, changes INTEGER NOT NULL)",
    )
    .execute(store.pool())
    .await?;

    let app = Arc::new(App {
        runner: Runner::new(store.clone(), &Name::new("consumer", "billing_v1")?),
        effects: store.effects(),
        stripe: Name::new("source", "stripe")?,
        send_receipt: Name::new("effect", "send_receipt")?,
    });
    let router = Router::new()
        .route("/webhooks/stripe", post(stripe_webhook))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}/webhooks/stripe", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, router).await });

    // This workspace builds reqwest with rustls and no crypto provider of its own; with
    // reqwest's default features this line is not needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let send = async |body: serde_json::Value| -> anyhow::Result<(u16, String)> {
        let response = http.post(&endpoint).json(&body).send().await?;
        Ok((response.status().as_u16(), response.text().await?))
    };
    let event = |id: &str, sub: &str, created: i64, status: &str| {
        serde_json::json!({
            "id": id, "type": "customer.subscription.updated", "created": created,
            "data": { "object": { "id": sub, "customer": format!("cus_{sub}"), "status": status } }
        })
    };

    // Every event twice at the same moment: one copy applies, the other is a duplicate.
    let mut answers = Vec::new();
    for i in 1..=5 {
        let body = event(
            &format!("evt_{i}"),
            &format!("sub_{i}"),
            1_700_000_100,
            "active",
        );
        let (a, b) = tokio::join!(send(body.clone()), send(body));
        answers.extend([a?, b?]);
    }
    // An older event of sub_1 arrives late: stale, acknowledged, not applied.
    answers.push(send(event("evt_0", "sub_1", 1_700_000_000, "incomplete")).await?);
    // An object the handler cannot read: 400, nothing stored.
    let mut broken = event("evt_9", "sub_9", 1_700_000_100, "active");
    broken["data"]["object"]["status"] = serde_json::json!(42);
    let refused = send(broken).await?;

    let mut names: Vec<&str> = answers.iter().map(|(_, name)| name.as_str()).collect();
    names.sort_unstable();
    println!(
        "answers: {names:?}; the malformed event: {} {}",
        refused.0, refused.1
    );

    // After the commits, the worker sends each receipt once, the effect key as idempotency key.
    let worker = EffectWorker::new(store.clone(), |call: EffectCall| async move {
        println!("receipt {} sent", call.key);
        CallOutcome::Succeeded(Vec::new())
    });
    let sent = worker.drain().await?;

    let (subscriptions, changes, active): (i64, i64, i64) =
        sqlx::query_as("SELECT COUNT(*), SUM(changes), SUM(status = 'active') FROM subscriptions")
            .fetch_one(store.pool())
            .await?;
    println!(
        "subscriptions: {subscriptions} ({changes} changes, {active} active); receipts: {}",
        sent.succeeded
    );
    ensure!(
        answers.iter().all(|(status, _)| *status == 200),
        "every delivery is acknowledged"
    );
    ensure!(
        names.iter().filter(|n| **n == "applied").count() == 5,
        "each event applied once"
    );
    ensure!(
        names.iter().filter(|n| **n == "duplicate").count() == 5,
        "each copy a duplicate"
    );
    ensure!(names.contains(&"stale"), "the late, older event is stale");
    ensure!(refused.0 == 400, "a permanent error is a 400");
    ensure!(
        (subscriptions, changes, active) == (5, 5, 5),
        "one change per event"
    );
    ensure!(sent.succeeded == 5, "one receipt per applied event");
    println!("ok: every event applied once");
    Ok(())
}
