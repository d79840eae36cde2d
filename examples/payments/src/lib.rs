//! idem's reference app: a small payments API behind the Idempotency-Key layer, with a Stripe
//! webhook endpoint (signatures checked with idem-http) applied through idem's inbox. See
//! README.md for the endpoints.
//!
//! The same code runs on SQLite and PostgreSQL: the application's statements are written once
//! (with `$N` parameters, which both read alike) behind [`PaymentsDb`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use idem::sqlx::{self, Pool};
use idem::{DedupKey, Entity, Event, EventId, Name, Runner, Store, Version};
use idem_http::verify::Verifier;
use idem_http::verify::stripe::StripeVerifier;
use idem_idempotency::store::sql::SqlBackend;
use idem_idempotency::{IdempotencyLayer, Principal, SqlStore, Tx};
use rand::Rng;
use serde::Deserialize;
use serde_json::{Value, json};

/// A boxed, sendable future (handlers generic over the database are boxed with `Send` spelled
/// out, which the compiler cannot always prove for a generic future by itself).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The Stripe webhook signing secret `cargo run -p payments` uses when none is given: for local
/// tries only (sign test events with it, see README.md); pass the endpoint's real `whsec_…`
/// secret with `--stripe-webhook-secret` anywhere else.
pub const DEMO_STRIPE_SECRET: &str = "whsec_payments_demo_secret";

/// The bearer tokens the app accepts, each naming its user (the principal that scopes
/// Idempotency-Keys).
#[derive(Debug, Clone)]
pub struct Tokens(HashMap<String, Principal>);

impl Tokens {
    /// The built-in users: `alice-token` → alice, `bob-token` → bob.
    pub fn demo() -> Self {
        Self::parse(["alice=alice-token", "bob=bob-token"]).unwrap_or(Self(HashMap::new()))
    }

    /// Tokens from `USER=TOKEN` pairs.
    ///
    /// # Errors
    /// A pair without `=`, or with a blank user or token.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = &'a str>) -> anyhow::Result<Self> {
        let mut tokens = HashMap::new();
        for pair in pairs {
            let Some((user, token)) = pair.split_once('=') else {
                anyhow::bail!("token {pair:?} is not USER=TOKEN");
            };
            if token.trim().is_empty() {
                anyhow::bail!("token {pair:?} has a blank token");
            }
            tokens.insert(token.to_owned(), Principal::new(user)?);
        }
        Ok(Self(tokens))
    }
}

/// A payment as stored and returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payment {
    /// `pay_…`.
    pub id: String,
    /// The user who made it.
    pub owner: String,
    /// In the currency's smallest unit (cents).
    pub amount: i64,
    /// ISO 4217, lowercase.
    pub currency: String,
}

/// The application's statements, the same SQL on SQLite and PostgreSQL.
pub trait PaymentsDb: SqlBackend {
    /// Creates the app's tables if missing.
    fn create_tables(pool: &Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>>;
    /// Inserts a payment.
    fn insert_payment<'c>(
        conn: &'c mut Self::Connection,
        payment: Payment,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>>;
    /// Locks the payment `id` of `owner` until the transaction ends (`SELECT … FOR UPDATE` on
    /// PostgreSQL; on SQLite the transaction already holds the database's one write lock), so
    /// that concurrent refunds of one payment run one after the other; whether it exists.
    fn lock_payment<'c>(
        conn: &'c mut Self::Connection,
        owner: String,
        id: String,
    ) -> BoxFuture<'c, Result<bool, sqlx::Error>>;
    /// The payment `id` of `owner`, with the total refunded so far.
    fn payment<'c>(
        conn: &'c mut Self::Connection,
        owner: String,
        id: String,
    ) -> BoxFuture<'c, Result<Option<(Payment, i64)>, sqlx::Error>>;
    /// Inserts a refund `(id, owner, payment_id, amount)`.
    fn insert_refund<'c>(
        conn: &'c mut Self::Connection,
        row: (String, String, String, i64),
    ) -> BoxFuture<'c, Result<(), sqlx::Error>>;
    /// Inserts a transfer `(id, owner, amount, destination)`.
    fn insert_transfer<'c>(
        conn: &'c mut Self::Connection,
        row: (String, String, i64, String),
    ) -> BoxFuture<'c, Result<(), sqlx::Error>>;
    /// Stores a Stripe object's latest state `(id, type, status, event id, event type, created)`.
    fn upsert_stripe_object<'c>(
        conn: &'c mut Self::Connection,
        row: StripeRow,
    ) -> BoxFuture<'c, Result<(), sqlx::Error>>;
    /// A Stripe object's latest state.
    fn stripe_object<'c>(
        conn: &'c mut Self::Connection,
        id: String,
    ) -> BoxFuture<'c, Result<Option<StripeRow>, sqlx::Error>>;
}

/// A Stripe object's latest state: id, object type, status, event id, event type, created.
pub type StripeRow = (String, String, Option<String>, String, String, i64);

const CREATE: [&str; 4] = [
    "CREATE TABLE IF NOT EXISTS payments (id TEXT PRIMARY KEY, owner TEXT NOT NULL, \
     amount BIGINT NOT NULL, currency TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS refunds (id TEXT PRIMARY KEY, owner TEXT NOT NULL, \
     payment_id TEXT NOT NULL REFERENCES payments (id), amount BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS transfers (id TEXT PRIMARY KEY, owner TEXT NOT NULL, \
     amount BIGINT NOT NULL, destination TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS stripe_objects (id TEXT PRIMARY KEY, object_type TEXT NOT NULL, \
     status TEXT, event_id TEXT NOT NULL, event_type TEXT NOT NULL, created BIGINT NOT NULL)",
];

macro_rules! payments_db {
    ($db:ty, $for_update:literal) => {
        impl PaymentsDb for $db {
            fn create_tables(pool: &Pool<Self>) -> BoxFuture<'_, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    for statement in CREATE {
                        sqlx::query(statement).execute(pool).await?;
                    }
                    Ok(())
                })
            }

            fn insert_payment<'c>(
                conn: &'c mut Self::Connection,
                p: Payment,
            ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO payments (id, owner, amount, currency) VALUES ($1, $2, $3, $4)",
                    )
                    .bind(p.id)
                    .bind(p.owner)
                    .bind(p.amount)
                    .bind(p.currency)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            }

            fn lock_payment<'c>(
                conn: &'c mut Self::Connection,
                owner: String,
                id: String,
            ) -> BoxFuture<'c, Result<bool, sqlx::Error>> {
                Box::pin(async move {
                    let row: Option<(String,)> = sqlx::query_as(concat!(
                        "SELECT id FROM payments WHERE id = $1 AND owner = $2",
                        $for_update
                    ))
                    .bind(id)
                    .bind(owner)
                    .fetch_optional(&mut *conn)
                    .await?;
                    Ok(row.is_some())
                })
            }

            fn payment<'c>(
                conn: &'c mut Self::Connection,
                owner: String,
                id: String,
            ) -> BoxFuture<'c, Result<Option<(Payment, i64)>, sqlx::Error>> {
                Box::pin(async move {
                    let row: Option<(String, String, i64, String, i64)> = sqlx::query_as(
                        "SELECT p.id, p.owner, p.amount, p.currency, \
                         CAST(COALESCE((SELECT SUM(r.amount) FROM refunds r WHERE r.payment_id = p.id), 0) AS BIGINT) \
                         FROM payments p WHERE p.id = $1 AND p.owner = $2",
                    )
                    .bind(id)
                    .bind(owner)
                    .fetch_optional(&mut *conn)
                    .await?;
                    Ok(row.map(|(id, owner, amount, currency, refunded)| {
                        (Payment { id, owner, amount, currency }, refunded)
                    }))
                })
            }

            fn insert_refund<'c>(
                conn: &'c mut Self::Connection,
                row: (String, String, String, i64),
            ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO refunds (id, owner, payment_id, amount) VALUES ($1, $2, $3, $4)",
                    )
                    .bind(row.0)
                    .bind(row.1)
                    .bind(row.2)
                    .bind(row.3)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            }

            fn insert_transfer<'c>(
                conn: &'c mut Self::Connection,
                row: (String, String, i64, String),
            ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO transfers (id, owner, amount, destination) VALUES ($1, $2, $3, $4)",
                    )
                    .bind(row.0)
                    .bind(row.1)
                    .bind(row.2)
                    .bind(row.3)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            }

            fn upsert_stripe_object<'c>(
                conn: &'c mut Self::Connection,
                row: StripeRow,
            ) -> BoxFuture<'c, Result<(), sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO stripe_objects (id, object_type, status, event_id, event_type, created) \
                         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET \
                         status = excluded.status, event_id = excluded.event_id, \
                         event_type = excluded.event_type, created = excluded.created",
                    )
                    .bind(row.0)
                    .bind(row.1)
                    .bind(row.2)
                    .bind(row.3)
                    .bind(row.4)
                    .bind(row.5)
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            }

            fn stripe_object<'c>(
                conn: &'c mut Self::Connection,
                id: String,
            ) -> BoxFuture<'c, Result<Option<StripeRow>, sqlx::Error>> {
                Box::pin(async move {
                    sqlx::query_as(
                        "SELECT id, object_type, status, event_id, event_type, created \
                         FROM stripe_objects WHERE id = $1",
                    )
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await
                })
            }
        }
    };
}

payments_db!(sqlx::Sqlite, "");
payments_db!(sqlx::Postgres, " FOR UPDATE");

/// The app's shared state.
struct App<DB: PaymentsDb> {
    store: Store<DB>,
    runner: Runner<DB>,
    tokens: Tokens,
    stripe: StripeVerifier,
}

/// Builds the app on `store` (migrated for idem's tables; the app's own are created here):
/// the routes in README.md, with the transactional Idempotency-Key layer on the POST routes
/// (a key is required) and bearer-token authentication in front of it; Stripe deliveries are
/// checked with `stripe` (the endpoint's signing secrets) before anything is stored.
///
/// # Errors
/// When idem's migrations or the app's tables cannot be created.
pub async fn app<DB: PaymentsDb>(
    store: Store<DB>,
    tokens: Tokens,
    stripe: StripeVerifier,
) -> anyhow::Result<Router> {
    store.migrate().await?;
    DB::create_tables(store.pool()).await?;
    let runner = Runner::new(store.clone(), &Name::new("consumer", "payments_stripe_v1")?);
    let state = Arc::new(App {
        store: store.clone(),
        runner,
        tokens,
        stripe,
    });
    let api = Router::new()
        .route("/payments", post(create_payment::<DB>))
        .route("/refunds", post(create_refund::<DB>))
        .route("/transfers", post(create_transfer::<DB>))
        // `route_layer`, not `layer`: the layer then wraps these routes only, so an unknown
        // path is a plain 404 (not a 400 for its missing key, nor a stored and replayed 404).
        .route_layer(
            IdempotencyLayer::transactional(SqlStore::new(store)).required_for([Method::POST]),
        )
        .route("/payments/{id}", get(read_payment::<DB>))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            authenticate::<DB>,
        ));
    Ok(Router::new()
        .merge(api)
        .route("/webhooks/stripe", post(stripe_webhook::<DB>))
        .route("/stripe/objects/{id}", get(read_stripe_object::<DB>))
        .with_state(state))
}

/// `Authorization: Bearer TOKEN` → the [`Principal`] extension; anything else is a 401.
fn authenticate<DB: PaymentsDb>(
    State(app): State<Arc<App<DB>>>,
    mut request: Request,
    next: Next,
) -> BoxFuture<'static, Response> {
    let principal = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .and_then(|token| app.tokens.0.get(token))
        .cloned();
    Box::pin(async move {
        match principal {
            Some(principal) => {
                request.extensions_mut().insert(principal);
                next.run(request).await
            }
            None => {
                let mut response = problem(
                    StatusCode::UNAUTHORIZED,
                    "unauthenticated",
                    "send Authorization: Bearer <token> (alice-token or bob-token by default)",
                )
                .into_response();
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
        }
    })
}

/// A refusal or failure, answered as an RFC 9457 problem response.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    slug: &'static str,
    detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({
            "type": format!("/problems/{}", self.slug),
            "title": self.status.canonical_reason().unwrap_or("Error"),
            "status": self.status.as_u16(),
            "detail": self.detail,
        });
        (
            self.status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body.to_string(),
        )
            .into_response()
    }
}

fn problem(status: StatusCode, slug: &'static str, detail: &str) -> ApiError {
    ApiError {
        status,
        slug,
        detail: detail.to_owned(),
    }
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    tracing::error!(error = %e, "request failed");
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the request failed; nothing was recorded, retry with the same Idempotency-Key",
    )
}

fn new_id(prefix: &str) -> String {
    let n: u64 = rand::rng().random();
    format!("{prefix}_{n:016x}")
}

fn json_body<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        problem(
            StatusCode::BAD_REQUEST,
            "invalid-body",
            &format!("the body is not the expected JSON: {e}"),
        )
    })
}

fn positive(amount: i64) -> Result<i64, ApiError> {
    if amount > 0 {
        Ok(amount)
    } else {
        Err(problem(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-amount",
            "amount must be a positive number of cents",
        ))
    }
}

#[derive(Deserialize)]
struct NewPayment {
    amount: i64,
    #[serde(default = "usd")]
    currency: String,
}

fn usd() -> String {
    "usd".to_owned()
}

fn payment_json(p: &Payment, refunded: i64) -> Value {
    json!({"id": p.id, "amount": p.amount, "currency": p.currency, "refunded": refunded})
}

fn create_payment<DB: PaymentsDb>(
    principal: axum::Extension<Principal>,
    tx: Tx<DB>,
    body: Bytes,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let result = async {
            let new: NewPayment = json_body(&body)?;
            let payment = Payment {
                id: new_id("pay"),
                owner: principal.as_str().to_owned(),
                amount: positive(new.amount)?,
                currency: new.currency.to_lowercase(),
            };
            let mut tx = tx.lock().await.map_err(internal)?;
            DB::insert_payment(&mut *tx, payment.clone())
                .await
                .map_err(internal)?;
            Ok::<_, ApiError>(
                (
                    StatusCode::CREATED,
                    [(header::LOCATION, format!("/payments/{}", payment.id))],
                    axum::Json(payment_json(&payment, 0)),
                )
                    .into_response(),
            )
        };
        result.await.unwrap_or_else(IntoResponse::into_response)
    })
}

#[derive(Deserialize)]
struct NewRefund {
    payment_id: String,
    amount: i64,
}

fn create_refund<DB: PaymentsDb>(
    principal: axum::Extension<Principal>,
    tx: Tx<DB>,
    body: Bytes,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let result = async {
            let new: NewRefund = json_body(&body)?;
            let amount = positive(new.amount)?;
            let owner = principal.as_str().to_owned();
            let mut tx = tx.lock().await.map_err(internal)?;
            // Lock the payment first, then read its refunds in a later statement: at READ
            // COMMITTED that read sees every refund committed by whoever held the lock before,
            // so concurrent refunds (other keys) cannot together exceed the payment.
            let exists = DB::lock_payment(&mut *tx, owner.clone(), new.payment_id.clone())
                .await
                .map_err(internal)?;
            let found = if exists {
                DB::payment(&mut *tx, owner.clone(), new.payment_id.clone())
                    .await
                    .map_err(internal)?
            } else {
                None
            };
            let Some((payment, refunded)) = found else {
                return Err(problem(
                    StatusCode::NOT_FOUND,
                    "payment-not-found",
                    "no payment of yours has this id",
                ));
            };
            if refunded + amount > payment.amount {
                return Err(problem(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "refund-exceeds-payment",
                    &format!(
                        "{amount} would exceed the payment's {} (already refunded {refunded})",
                        payment.amount
                    ),
                ));
            }
            let id = new_id("re");
            DB::insert_refund(&mut *tx, (id.clone(), owner, payment.id.clone(), amount))
                .await
                .map_err(internal)?;
            Ok((
                StatusCode::CREATED,
                axum::Json(json!({"id": id, "payment_id": payment.id, "amount": amount})),
            )
                .into_response())
        };
        result.await.unwrap_or_else(IntoResponse::into_response)
    })
}

#[derive(Deserialize)]
struct NewTransfer {
    amount: i64,
    to: String,
}

fn create_transfer<DB: PaymentsDb>(
    principal: axum::Extension<Principal>,
    tx: Tx<DB>,
    body: Bytes,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let result = async {
            let new: NewTransfer = json_body(&body)?;
            let amount = positive(new.amount)?;
            let id = new_id("tr");
            let mut tx = tx.lock().await.map_err(internal)?;
            let row = (
                id.clone(),
                principal.as_str().to_owned(),
                amount,
                new.to.clone(),
            );
            DB::insert_transfer(&mut *tx, row).await.map_err(internal)?;
            Ok::<_, ApiError>(
                (
                    StatusCode::CREATED,
                    axum::Json(json!({"id": id, "amount": amount, "to": new.to})),
                )
                    .into_response(),
            )
        };
        result.await.unwrap_or_else(IntoResponse::into_response)
    })
}

fn read_payment<DB: PaymentsDb>(
    State(app): State<Arc<App<DB>>>,
    principal: axum::Extension<Principal>,
    Path(id): Path<String>,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let result = async {
            let mut conn = app.store.pool().acquire().await.map_err(internal)?;
            match DB::payment(&mut *conn, principal.as_str().to_owned(), id)
                .await
                .map_err(internal)?
            {
                Some((payment, refunded)) => {
                    Ok(axum::Json(payment_json(&payment, refunded)).into_response())
                }
                None => Err(problem(
                    StatusCode::NOT_FOUND,
                    "payment-not-found",
                    "no payment of yours has this id",
                )),
            }
        };
        result.await.unwrap_or_else(IntoResponse::into_response)
    })
}

/// The parts of a Stripe event the app applies.
fn stripe_event(body: &Bytes) -> Result<(Event, StripeRow), String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let text = |ptr: &str| {
        v.pointer(ptr)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("no text at {ptr}"))
    };
    let id = text("/id")?;
    let created = v["created"].as_i64().ok_or("no integer `created`")?;
    let (object_type, object_id) = (text("/data/object/object")?, text("/data/object/id")?);
    let stripe = Name::new("source", "stripe").map_err(|e| e.to_string())?;
    let event_id = EventId::new(id.as_str()).map_err(|e| e.to_string())?;
    let entity =
        Entity::new(object_type.as_str(), object_id.as_str()).map_err(|e| e.to_string())?;
    let event = Event::new(DedupKey::from_event(&stripe, &event_id))
        .with_entity(entity, Version::timestamp(created));
    let status = v
        .pointer("/data/object/status")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((
        event,
        (object_id, object_type, status, id, text("/type")?, created),
    ))
}

/// Applies one Stripe event through idem's runner: the `Stripe-Signature` checked on the raw
/// body first (a missing, bad or stale one is a 400 naming the problem, and nothing is stored:
/// docs/design.md C10), then dedup on the event id and a version guard on the object's `created`; a
/// duplicate or stale event is a 200 (docs/design.md C3, C5).
fn stripe_webhook<DB: PaymentsDb>(
    State(app): State<Arc<App<DB>>>,
    headers: HeaderMap,
    body: Bytes,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        if let Err(e) = app.stripe.verify(&headers, &body, app.store.now()) {
            return problem(
                StatusCode::BAD_REQUEST,
                "invalid-signature",
                &format!("the Stripe-Signature does not verify: {e}"),
            )
            .into_response();
        }
        let (event, row) = match stripe_event(&body) {
            Ok(parsed) => parsed,
            Err(reason) => {
                return problem(StatusCode::BAD_REQUEST, "invalid-stripe-event", &reason)
                    .into_response();
            }
        };
        let outcome = app
            .runner
            .run(&event, async move |tx| {
                DB::upsert_stripe_object(&mut *tx, row.clone()).await?;
                Ok(())
            })
            .await;
        match outcome {
            Ok(outcome) if outcome.acknowledge() => (
                StatusCode::OK,
                [("idem-outcome", outcome.name())],
                axum::Json(json!({"outcome": outcome.name()})),
            )
                .into_response(),
            Ok(outcome) => problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "held-back",
                &format!(
                    "not applied yet ({}); deliver it again later",
                    outcome.name()
                ),
            )
            .into_response(),
            Err(e) => internal(e).into_response(),
        }
    })
}

fn read_stripe_object<DB: PaymentsDb>(
    State(app): State<Arc<App<DB>>>,
    Path(id): Path<String>,
) -> BoxFuture<'static, Response> {
    Box::pin(async move {
        let result = async {
            let mut conn = app.store.pool().acquire().await.map_err(internal)?;
            match DB::stripe_object(&mut *conn, id).await.map_err(internal)? {
                Some((id, object_type, status, event, event_type, created)) => Ok(axum::Json(
                    json!({"id": id, "object": object_type, "status": status, "event": event,
                           "type": event_type, "created": created}),
                )
                .into_response()),
                None => Err(problem(
                    StatusCode::NOT_FOUND,
                    "stripe-object-not-found",
                    "no event about this object was applied",
                )),
            }
        };
        result.await.unwrap_or_else(IntoResponse::into_response)
    })
}
