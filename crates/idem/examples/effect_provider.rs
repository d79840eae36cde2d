//! An effect with a real provider call: a charge that happens once per order, however many
//! times it is asked for.
//!
//! The handler of an `order.placed` event records the charge as an effect intent under a
//! business intent key, `charge:{order}`, in the transaction that applies the event. After the
//! commit an [`EffectWorker`] calls the payment provider (here a small HTTP server in this
//! process, which answers 503 to its first call) with that key as the `Idempotency-Key` header,
//! retries the 503 with the same key, and stores the provider's answer. When a second code path
//! (a customer pressing "pay" again) asks for the same charge, `enqueue` returns the stored
//! answer (`Enqueued::Completed`) instead of charging again.
//!
//! Run: `cargo run -p idem --example effect_provider`. Exits non-zero unless every order was
//! charged exactly once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::ensure;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use idem::{
    Backoff, CallOutcome, DedupKey, EffectCall, EffectKey, EffectWorker, Enqueued, Event, EventId,
    Name, Runner, SqliteStore, sqlx,
};

/// The provider's charges by idempotency key, and how many calls it answered.
#[derive(Default)]
struct Provider {
    charges: HashMap<String, String>,
    calls: u32,
}

/// `POST /charges`: 503 to the first call; afterwards one charge per `Idempotency-Key`, the same
/// answer to every call with that key (as Stripe does).
async fn charge(
    State(provider): State<Arc<Mutex<Provider>>>,
    headers: HeaderMap,
) -> (StatusCode, String) {
    let mut provider = provider.lock().expect("not poisoned");
    provider.calls += 1;
    if provider.calls == 1 {
        return (StatusCode::SERVICE_UNAVAILABLE, "try again".into());
    }
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return (
            StatusCode::BAD_REQUEST,
            "Idempotency-Key is required".into(),
        );
    };
    let next = format!("ch_{}", provider.charges.len() + 1);
    let id = provider.charges.entry(key.to_owned()).or_insert(next);
    (StatusCode::OK, id.clone())
}

/// The worker's call to the provider: the effect key is the idempotency key, on every attempt.
async fn call_provider(http: &reqwest::Client, url: &str, call: EffectCall) -> CallOutcome {
    let sent = http
        .post(url)
        .header("Idempotency-Key", call.key.as_str())
        .body(call.request)
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    match sent {
        Ok(r) if r.status().is_success() => match r.bytes().await {
            Ok(body) => CallOutcome::Succeeded(body.to_vec()),
            Err(e) => CallOutcome::Unknown {
                reason: e.to_string(),
            },
        },
        Ok(r) => CallOutcome::Failed {
            retryable: r.status().is_server_error() || r.status() == StatusCode::TOO_MANY_REQUESTS,
            reason: format!("the provider answered {}", r.status()),
        },
        // The request may have reached the provider: unknown, tried again with the same key.
        Err(e) => CallOutcome::Unknown {
            reason: e.to_string(),
        },
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::connect(&format!(
        "sqlite://{}",
        dir.path().join("shop.db").display()
    ))
    .await?;
    store.migrate().await?;
    sqlx::query("CREATE TABLE orders (id TEXT PRIMARY KEY, amount BIGINT NOT NULL, charge TEXT)")
        .execute(store.pool())
        .await?;

    let provider = Arc::new(Mutex::new(Provider::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/charges", listener.local_addr()?);
    let routes = Router::new()
        .route("/charges", post(charge))
        .with_state(Arc::clone(&provider));
    tokio::spawn(async move { axum::serve(listener, routes).await });

    // 1. `order.placed` events: the order row and the charge intent in one transaction.
    let runner = Runner::new(store.clone(), &Name::new("consumer", "checkout_v1")?);
    let (effects, charge_effect) = (store.effects(), Name::new("effect", "charge")?);
    let shop = Name::new("source", "shop")?;
    for (order, amount) in [("o1", 1_500), ("o2", 990), ("o3", 4_200)] {
        let event = Event::new(DedupKey::from_event(
            &shop,
            &EventId::new(format!("placed_{order}"))?,
        ));
        let key = EffectKey::intent(&format!("charge:{order}"))?;
        let outcome = runner
            .run(&event, async |tx| {
                sqlx::query("INSERT INTO orders (id, amount) VALUES ($1, $2)")
                    .bind(order)
                    .bind(amount)
                    .execute(&mut *tx)
                    .await?;
                let request =
                    serde_json::to_vec(&serde_json::json!({ "order": order, "amount": amount }))?;
                match effects
                    .enqueue(&mut *tx, &charge_effect, &key, &request)
                    .await?
                {
                    Enqueued::Created | Enqueued::Pending { .. } => {} // charged after the commit
                    Enqueued::Completed { .. } | Enqueued::Failed { .. } => {} // decided before
                }
                Ok(())
            })
            .await?;
        ensure!(
            outcome.name() == "applied",
            "order {order}: {}",
            outcome.name()
        );
    }

    // 2. The worker calls the provider; its 503 is retried with the same key after the backoff.
    // This workspace builds reqwest with rustls and no crypto provider of its own; with
    // reqwest's default features this line is not needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let worker = EffectWorker::new(store.clone(), move |call: EffectCall| {
        let (http, url) = (http.clone(), url.clone());
        async move { call_provider(&http, &url, call).await }
    })
    .backoff(Backoff::exponential(
        Duration::from_millis(50),
        Duration::from_secs(1),
    ));
    let mut charged = 0;
    for _ in 0..50 {
        charged += worker.drain().await?.succeeded;
        if charged == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await; // the 503'd charge waits its backoff
    }

    // 3. "Pay" pressed again for o2: the same intent key, in another event's handler.
    let again = Event::new(DedupKey::from_event(&shop, &EventId::new("pay_again_o2")?));
    let key = EffectKey::intent("charge:o2")?;
    let request = serde_json::to_vec(&serde_json::json!({ "order": "o2", "amount": 990 }))?;
    let charge_id = runner
        .run(&again, async |tx| {
            let charge = match effects
                .enqueue(&mut *tx, &charge_effect, &key, &request)
                .await?
            {
                // Charged before: the provider's answer, stored; no second call.
                Enqueued::Completed { outcome } => Some(String::from_utf8(outcome)?),
                Enqueued::Created | Enqueued::Pending { .. } | Enqueued::Failed { .. } => None,
            };
            sqlx::query("UPDATE orders SET charge = $1 WHERE id = 'o2'")
                .bind(&charge)
                .execute(&mut *tx)
                .await?;
            Ok(charge)
        })
        .await?;
    let calls_before = provider.lock().expect("not poisoned").calls;
    let after_replay = worker.drain().await?;

    let provider = provider.lock().expect("not poisoned");
    println!(
        "charges: {} in {} calls; o2's charge, read back by the second code path: {charge_id:?}",
        provider.charges.len(),
        provider.calls
    );
    ensure!(charged == 3, "three orders charged, not {charged}");
    ensure!(provider.charges.len() == 3, "one charge per order");
    ensure!(
        provider.calls == 4,
        "three charges and the one 503, no second charge"
    );
    ensure!(
        matches!(charge_id, idem::Outcome::Applied(Some(ref id)) if id.starts_with("ch_")),
        "the second path reads the stored charge"
    );
    ensure!(
        after_replay.claimed == 0 && provider.calls == calls_before,
        "no call for the replay"
    );
    println!("ok: every order charged exactly once");
    Ok(())
}
