//! The reference handlers `idem verify` is tested against: four Stripe webhook endpoints behind
//! HTTP, each with its own SQLite database, one correct and three with a classic bug.
//!
//! | path | handler | bug, and the mode that finds it |
//! |---|---|---|
//! | `/a/…` | [`Flavor::Correct`]: idem inbox + version guard through [`idem::Runner`], ledger rows keyed by event id | none |
//! | `/b/…` | [`Flavor::Increment`]: adds `data.object.amount` to a balance on every delivery | duplicate |
//! | `/c/…` | [`Flavor::CheckThenInsert`]: `SELECT` "seen?", waits 50 ms, then inserts, outside one transaction | concurrent |
//! | `/d/…` | [`Flavor::LastWriteWins`]: stores whichever status arrives last | shuffle, replay-later |
//!
//! Two more, `/e/…` and `/f/…`, are one consumer shipping a new version, for `idem verify
//! --modes rebuild --successor …` ([`lineage`]): (e) succeeds its earlier version and sends no
//! receipt again; (f) derives its receipts' keys from its versioned name and sends every one
//! again.
//!
//! Each flavor serves `POST /{x}/webhook` (Stripe-signed when a secret is set: 400 otherwise),
//! `POST /{x}/reset` (empties its tables) and `GET /{x}/state` (its state as JSON), so that
//! `--reset 'curl -sf -X POST http://…/b/reset' --state 'curl -sf http://…/b/state'` work.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use idem::{DedupKey, Entity, Event, EventId, Name, Runner, SqliteStore, Timestamp, Version, sqlx};
use idem_http::verify::Verifier;
use idem_http::verify::stripe::StripeVerifier;
use serde_json::{Value, json};

pub mod lineage;

/// Why the handlers could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// A database could not be opened or set up.
    #[error("reference handler database: {0}")]
    Store(#[from] idem::Error),
    /// A table could not be created.
    #[error("reference handler schema: {0}")]
    Schema(#[from] sqlx::Error),
    /// The Stripe secret is not a `whsec_…` secret.
    #[error("reference handler secret: {0}")]
    Secret(String),
    /// The listener could not be bound or served.
    #[error("reference handler listener: {0}")]
    Io(#[from] std::io::Error),
}

/// The four handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flavor {
    /// (a) Correct.
    Correct,
    /// (b) Increments a balance on every delivery.
    Increment,
    /// (c) Check, wait 50 ms, insert; no transaction, no unique key.
    CheckThenInsert,
    /// (d) The last status to arrive wins.
    LastWriteWins,
}

impl Flavor {
    /// All four, in path order.
    pub const ALL: [Flavor; 4] = [
        Flavor::Correct,
        Flavor::Increment,
        Flavor::CheckThenInsert,
        Flavor::LastWriteWins,
    ];

    /// The URL path segment: `a`, `b`, `c` or `d`.
    pub fn path(self) -> &'static str {
        match self {
            Flavor::Correct => "a",
            Flavor::Increment => "b",
            Flavor::CheckThenInsert => "c",
            Flavor::LastWriteWins => "d",
        }
    }

    fn schema(self) -> &'static [&'static str] {
        match self {
            Flavor::Correct => &[
                "CREATE TABLE IF NOT EXISTS objects (id TEXT PRIMARY KEY, status TEXT, event_id TEXT NOT NULL, created BIGINT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS ledger (event_id TEXT PRIMARY KEY, object_id TEXT NOT NULL, amount BIGINT NOT NULL)",
            ],
            Flavor::Increment => &[
                "CREATE TABLE IF NOT EXISTS balances (object_id TEXT PRIMARY KEY, total BIGINT NOT NULL)",
            ],
            Flavor::CheckThenInsert => &[
                "CREATE TABLE IF NOT EXISTS seen (event_id TEXT NOT NULL)",
                "CREATE TABLE IF NOT EXISTS ledger (event_id TEXT NOT NULL, object_id TEXT NOT NULL)",
            ],
            Flavor::LastWriteWins => &[
                "CREATE TABLE IF NOT EXISTS objects (id TEXT PRIMARY KEY, status TEXT, event_id TEXT NOT NULL)",
            ],
        }
    }

    fn reset_statements(self) -> &'static [&'static str] {
        match self {
            Flavor::Correct => &[
                "DELETE FROM objects",
                "DELETE FROM ledger",
                "DELETE FROM idem_inbox",
                "DELETE FROM idem_versions",
            ],
            Flavor::Increment => &["DELETE FROM balances"],
            Flavor::CheckThenInsert => &["DELETE FROM seen", "DELETE FROM ledger"],
            Flavor::LastWriteWins => &["DELETE FROM objects"],
        }
    }
}

struct App {
    stores: [SqliteStore; 4],
    status: Runner<idem::sqlx::Sqlite>,
    ledger: Runner<idem::sqlx::Sqlite>,
    source: Name,
    verifier: Option<StripeVerifier>,
}

/// The router of the four handlers, with their databases `a.db` … `d.db` in `dir` (created and
/// migrated), and of the two [`lineage`] handlers (`e.db`, `f.db`). With `secret` (`whsec_…`), unsigned or badly signed deliveries get 400.
///
/// # Errors
/// [`HandlerError::Store`] / [`HandlerError::Schema`] when a database cannot be set up,
/// [`HandlerError::Secret`] for a secret that is not `whsec_…`.
pub async fn router(dir: &Path, secret: Option<&str>) -> Result<Router, HandlerError> {
    let mut stores = Vec::with_capacity(4);
    for flavor in Flavor::ALL {
        let url = format!(
            "sqlite://{}",
            dir.join(format!("{}.db", flavor.path())).display()
        );
        let store = SqliteStore::connect(&url).await?;
        store.migrate().await?;
        for statement in flavor.schema() {
            sqlx::query(*statement).execute(store.pool()).await?;
        }
        stores.push(store);
    }
    let stores: [SqliteStore; 4] = stores
        .try_into()
        .map_err(|_| HandlerError::Secret("internal: not four stores".into()))?;
    let verifier = secret
        .map(|s| StripeVerifier::new([s]).map_err(|e| HandlerError::Secret(e.to_string())))
        .transpose()?;
    let name = |what, value: &str| Name::new(what, value).map_err(idem::Error::from);
    let app = App {
        status: Runner::new(stores[0].clone(), &name("consumer", "reference_status")?),
        ledger: Runner::new(stores[0].clone(), &name("consumer", "reference_ledger")?),
        source: name("source", "stripe")?,
        stores,
        verifier,
    };
    Ok(Router::new()
        .route("/{flavor}/webhook", post(webhook))
        .route("/{flavor}/reset", post(reset))
        .route("/{flavor}/state", get(state))
        .with_state(Arc::new(app))
        .merge(lineage::router(dir).await?))
}

/// Serves the handlers on `listener` in a background task; returns its address.
///
/// # Errors
/// As [`router`], and [`HandlerError::Io`] when the listener has no local address.
pub async fn spawn(
    dir: &Path,
    secret: Option<&str>,
    listener: tokio::net::TcpListener,
) -> Result<SocketAddr, HandlerError> {
    let router = router(dir, secret).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(addr)
}

fn flavor_of(path: &str) -> Option<(usize, Flavor)> {
    Flavor::ALL
        .into_iter()
        .enumerate()
        .find(|(_, f)| f.path() == path)
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (status, message.to_string()).into_response()
}

struct StripeEvent {
    id: String,
    created: i64,
    object_type: String,
    object_id: String,
    status: Option<String>,
    amount: Option<i64>,
}

fn parse(body: &[u8]) -> Option<StripeEvent> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let text = |p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_owned);
    Some(StripeEvent {
        id: text("/id")?,
        created: v.get("created")?.as_i64()?,
        object_type: text("/data/object/object")?,
        object_id: text("/data/object/id")?,
        status: text("/data/object/status"),
        amount: v.pointer("/data/object/amount").and_then(Value::as_i64),
    })
}

async fn webhook(
    State(app): State<Arc<App>>,
    UrlPath(flavor): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some((index, flavor)) = flavor_of(&flavor) else {
        return error(StatusCode::NOT_FOUND, "no such handler: use a, b, c or d");
    };
    if let Some(verifier) = &app.verifier {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        if let Err(e) = verifier.verify(&headers, &body, Timestamp(now)) {
            return error(StatusCode::BAD_REQUEST, e);
        }
    }
    let Some(event) = parse(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "not a Stripe event with id, created and data.object.{id,object}",
        );
    };
    let store = &app.stores[index];
    let result = match flavor {
        Flavor::Correct => return correct(&app, event).await,
        Flavor::Increment => match event.amount {
            Some(amount) => sqlx::query(
                "INSERT INTO balances (object_id, total) VALUES ($1, $2) \
                 ON CONFLICT (object_id) DO UPDATE SET total = total + excluded.total",
            )
            .bind(&event.object_id)
            .bind(amount)
            .execute(store.pool())
            .await
            .map(drop),
            None => Ok(()),
        },
        Flavor::CheckThenInsert => check_then_insert(store, &event).await,
        Flavor::LastWriteWins => sqlx::query(
            "INSERT INTO objects (id, status, event_id) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET status = excluded.status, event_id = excluded.event_id",
        )
        .bind(&event.object_id)
        .bind(&event.status)
        .bind(&event.id)
        .execute(store.pool())
        .await
        .map(drop),
    };
    match result {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// The bug: the check and the insert are two statements with a pause between, in no
/// transaction and with no unique key, so two copies at once both pass the check.
async fn check_then_insert(store: &SqliteStore, event: &StripeEvent) -> Result<(), sqlx::Error> {
    let seen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM seen WHERE event_id = $1")
        .bind(&event.id)
        .fetch_one(store.pool())
        .await?;
    if seen > 0 {
        return Ok(());
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    sqlx::query("INSERT INTO seen (event_id) VALUES ($1)")
        .bind(&event.id)
        .execute(store.pool())
        .await?;
    sqlx::query("INSERT INTO ledger (event_id, object_id) VALUES ($1, $2)")
        .bind(&event.id)
        .bind(&event.object_id)
        .execute(store.pool())
        .await?;
    Ok(())
}

/// Two consumers of one event, each exactly once: the ledger (every event with an amount,
/// keyed by event id, whatever its order) and the object's status (version-guarded: stale
/// events are recorded, not applied; ties are applied in arrival order).
async fn correct(app: &App, event: StripeEvent) -> Response {
    let id = match EventId::new(event.id.as_str()) {
        Ok(id) => id,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let entity = match Entity::new(event.object_type.as_str(), event.object_id.as_str()) {
        Ok(entity) => entity,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let key = DedupKey::from_event(&app.source, &id);
    // Each handler owns what it uses (`async move`): this handler's future must be `Send`.
    let (event_id, object_id, amount) = (event.id.clone(), event.object_id.clone(), event.amount);
    let ledger = app
        .ledger
        .run(&Event::new(key.clone()), async move |tx| {
            if let Some(amount) = amount {
                sqlx::query("INSERT INTO ledger (event_id, object_id, amount) VALUES ($1, $2, $3)")
                    .bind(&event_id)
                    .bind(&object_id)
                    .bind(amount)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok(())
        })
        .await;
    let status = match ledger {
        Ok(ledger) => app
            .status
            .run(
                &Event::new(key).with_entity(entity, Version::timestamp(event.created)),
                async move |tx| {
                    sqlx::query(
                        "INSERT INTO objects (id, status, event_id, created) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (id) DO UPDATE SET status = excluded.status, \
                         event_id = excluded.event_id, created = excluded.created",
                    )
                    .bind(&event.object_id)
                    .bind(&event.status)
                    .bind(&event.id)
                    .bind(event.created)
                    .execute(&mut *tx)
                    .await?;
                    Ok(())
                },
            )
            .await
            .map(|status| (ledger.name(), status.name())),
        Err(e) => Err(e),
    };
    match status {
        Ok((ledger, status)) => {
            let duplicate = ledger == "duplicate" && status == "duplicate";
            (
                StatusCode::OK,
                [("idem-duplicate", if duplicate { "true" } else { "false" })],
                status,
            )
                .into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn reset(State(app): State<Arc<App>>, UrlPath(flavor): UrlPath<String>) -> Response {
    let Some((index, flavor)) = flavor_of(&flavor) else {
        return error(StatusCode::NOT_FOUND, "no such handler: use a, b, c or d");
    };
    for statement in flavor.reset_statements() {
        if let Err(e) = sqlx::query(*statement)
            .execute(app.stores[index].pool())
            .await
        {
            return error(StatusCode::INTERNAL_SERVER_ERROR, e);
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn state(State(app): State<Arc<App>>, UrlPath(flavor): UrlPath<String>) -> Response {
    let Some((index, flavor)) = flavor_of(&flavor) else {
        return error(StatusCode::NOT_FOUND, "no such handler: use a, b, c or d");
    };
    match snapshot(&app.stores[index], flavor).await {
        Ok(value) => axum::Json(value).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn snapshot(store: &SqliteStore, flavor: Flavor) -> Result<Value, sqlx::Error> {
    let pool = store.pool();
    Ok(match flavor {
        Flavor::Correct => {
            let objects: Vec<(String, Option<String>, String, i64)> =
                sqlx::query_as("SELECT id, status, event_id, created FROM objects ORDER BY id")
                    .fetch_all(pool)
                    .await?;
            let ledger: Vec<(String, String, i64)> =
                sqlx::query_as("SELECT event_id, object_id, amount FROM ledger ORDER BY event_id")
                    .fetch_all(pool)
                    .await?;
            json!({
                "objects": objects.into_iter().map(|(id, status, event, created)| {
                    (id, json!({"status": status, "event": event, "created": created}))
                }).collect::<BTreeMap<_, _>>(),
                "ledger": ledger.into_iter().map(|(event, object, amount)| {
                    (event, json!({"object": object, "amount": amount}))
                }).collect::<BTreeMap<_, _>>(),
            })
        }
        Flavor::Increment => {
            let rows: Vec<(String, i64)> =
                sqlx::query_as("SELECT object_id, total FROM balances ORDER BY object_id")
                    .fetch_all(pool)
                    .await?;
            json!({ "balances": rows.into_iter().collect::<BTreeMap<_, _>>() })
        }
        Flavor::CheckThenInsert => {
            let rows: Vec<(String, i64)> = sqlx::query_as(
                "SELECT event_id, COUNT(*) FROM ledger GROUP BY event_id ORDER BY event_id",
            )
            .fetch_all(pool)
            .await?;
            json!({ "ledger_rows": rows.into_iter().collect::<BTreeMap<_, _>>() })
        }
        Flavor::LastWriteWins => {
            let rows: Vec<(String, Option<String>, String)> =
                sqlx::query_as("SELECT id, status, event_id FROM objects ORDER BY id")
                    .fetch_all(pool)
                    .await?;
            json!({
                "objects": rows.into_iter().map(|(id, status, event)| {
                    (id, json!({"status": status, "event": event}))
                }).collect::<BTreeMap<_, _>>(),
            })
        }
    })
}
