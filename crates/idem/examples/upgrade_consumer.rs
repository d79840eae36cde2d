//! End to end on the embedded store: a NATS JetStream consumer (`billing_v2`) upgrades accounts
//! exactly once per event and, in the same transaction, records a receipt email as an effect and
//! an `account.upgraded` message in the outbox. An effect worker sends the emails through a local
//! mail server that fails its first calls; a relay publishes the outbox to JetStream with each
//! row's message id.
//!
//! Every event is published twice, the copies after the stream's duplicate window (so JetStream
//! stores them again and only the inbox stands between them and a second upgrade).
//!
//! Needs NATS with JetStream on 127.0.0.1:4222 (`nats-server -js`), or `NATS_URL`.
//! Run: `cargo run -p idem --example upgrade_consumer`. Exits non-zero unless every
//! account was upgraded once, one email was sent per event and one message published per event.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use async_nats::jetstream::{self, consumer::pull::Config as PullConfig, stream};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use idem::broker::{Delivery, JetStreamConsumer, JetStreamPublisher, Processor, Relay};
use idem::{
    Backoff, CallOutcome, DedupKey, EffectCall, EffectWorker, Enqueued, Entity, Event, EventId,
    HandlerError, Name, OutboxMessage, Runner, SqliteStore, WorkerReport, handler, sqlx,
};
use tokio::sync::Mutex;

const EVENTS: usize = 10;
/// The mail server answers 503 to this many calls before it starts sending.
const MAIL_FAILURES: u32 = 3;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        SqliteStore::connect(&format!("sqlite://{}", dir.path().join("app.db").display())).await?;
    store.migrate().await?;
    sqlx::query("CREATE TABLE accounts (id TEXT PRIMARY KEY, plan TEXT NOT NULL, upgrades INTEGER NOT NULL)")
        .execute(store.pool())
        .await?;

    let mail = MailServer::start().await?;

    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "127.0.0.1:4222".into());
    let client = async_nats::connect(&url)
        .await
        .with_context(|| format!("NATS with JetStream must run on {url} (nats-server -js)"))?;
    let js = jetstream::new(client);
    let run = std::process::id();
    let events_subject = format!("idem.example.{run}.events");
    let upgraded_subject = format!("idem.example.{run}.upgraded");
    let streams = [
        format!("IDEM_EXAMPLE_EVENTS_{run}"),
        format!("IDEM_EXAMPLE_UPGRADED_{run}"),
    ];
    js.create_stream(stream::Config {
        name: streams[0].clone(),
        subjects: vec![events_subject.clone()],
        // Short, so the second copies below are stored again, as after a replay.
        duplicate_window: Duration::from_millis(100),
        ..Default::default()
    })
    .await?;
    js.create_stream(stream::Config {
        name: streams[1].clone(),
        subjects: vec![upgraded_subject.clone()],
        ..Default::default()
    })
    .await?;
    let result = run_example(
        &store,
        &js,
        &mail,
        &events_subject,
        &upgraded_subject,
        &streams,
    )
    .await;
    for name in &streams {
        js.delete_stream(name).await.ok();
    }
    result
}

async fn run_example(
    store: &SqliteStore,
    js: &jetstream::Context,
    mail: &MailServer,
    events_subject: &str,
    upgraded_subject: &str,
    streams: &[String; 2],
) -> anyhow::Result<()> {
    // 1. Every event twice, the copies after the duplicate window.
    for copy in 0..2 {
        for i in 1..=EVENTS {
            let body = serde_json::json!({ "id": format!("evt_{i}"), "account": format!("acct_{i}"), "plan": "pro" });
            js.send_publish(
                events_subject.to_owned(),
                jetstream::message::PublishMessage::build()
                    .payload(body.to_string().into())
                    .message_id(format!("evt_{i}")),
            )
            .await?
            .await?;
        }
        if copy == 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // 2. The consumer: state, effect intent and outbox row in one transaction, then ack. The
    // handler owns what it uses (`async move`): the consumer runs it on tasks of its own.
    let consumer = Name::new("consumer", "billing_v2")?;
    let source = Name::new("source", "accounts")?;
    let send_receipt = Name::new("effect", "send_receipt")?;
    let (effects, outbox) = (store.effects(), store.outbox());
    // Effect keys come from the runner: a later version that succeeds this one
    // (`Runner::new(store, &billing_v3).succeeds(&billing_v2)`) derives the same keys with this
    // same code, so replaying history through it sends no email twice.
    let runner = Runner::new(store.clone(), &consumer);
    let (keys, handler_source) = (runner.clone(), source.clone());
    let upgraded = upgraded_subject.to_owned();
    let processor = Processor::new(
        store.clone(),
        runner,
        source,
        handler!(async move |tx, delivery: &Delivery| {
            // A body that is not JSON never will be: dead-lettered at once, not retried.
            let event: serde_json::Value =
                serde_json::from_slice(&delivery.payload).map_err(HandlerError::permanent)?;
            let (id, account, plan) = (
                event["id"].as_str().unwrap_or_default(),
                event["account"].as_str().unwrap_or_default(),
                event["plan"].as_str().unwrap_or_default(),
            );
            sqlx::query(
                "INSERT INTO accounts (id, plan, upgrades) VALUES ($1, $2, 1) \
                 ON CONFLICT (id) DO UPDATE SET plan = $2, upgrades = accounts.upgrades + 1",
            )
            .bind(account)
            .bind(plan)
            .execute(&mut *tx)
            .await?;
            let key = DedupKey::from_event(&handler_source, &EventId::new(id)?);
            let request =
                serde_json::json!({ "to": account, "template": "upgraded", "plan": plan });
            let effect_key = keys.effect_key(&Event::new(key), &send_receipt)?;
            let request = serde_json::to_vec(&request)?;
            match effects
                .enqueue(&mut *tx, &send_receipt, &effect_key, &request)
                .await?
            {
                // The effect worker sends it after the commit.
                Enqueued::Created | Enqueued::Pending { .. } => {}
                // A replay of this event finds the email sent (or refused) before: no second one.
                Enqueued::Completed { .. } | Enqueued::Failed { .. } => {}
            }
            let message = OutboxMessage::new(upgraded.as_str(), event.to_string())
                .with_aggregate(Entity::new("account", account)?);
            outbox.enqueue(&mut *tx, &message).await?;
            Ok(())
        }),
    );
    let stats = processor.stats();
    let pull = js
        .get_stream(&streams[0])
        .await?
        .create_consumer(PullConfig {
            durable_name: Some("billing_v2".into()),
            ..Default::default()
        })
        .await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let consumer_task = tokio::spawn(JetStreamConsumer::new(pull, processor)?.concurrency(4).run(
        async {
            stopped.await.ok();
        },
    ));
    wait_until("the consumer to settle 20 deliveries", || {
        let c = stats.get();
        c.applied + c.duplicate >= 2 * EVENTS as u64
    })
    .await?;
    stop.send(()).ok();
    consumer_task.await??;
    let counts = stats.get();
    // Acknowledged after each commit: nothing is left for JetStream to redeliver.
    let info = js
        .get_stream(&streams[0])
        .await?
        .get_consumer::<PullConfig>("billing_v2")
        .await
        .map_err(|e| anyhow::anyhow!("reading consumer billing_v2: {e}"))?
        .info()
        .await?
        .clone();
    let unacked = info.num_ack_pending + info.num_pending as usize;

    // 3. The effect worker sends the emails, with the effect key as Idempotency-Key. This
    // workspace builds reqwest with rustls and no crypto provider of its own; with reqwest's
    // default features the first line is not needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let mail_url = format!("{}/send", mail.url);
    let worker = EffectWorker::new(store.clone(), move |call: EffectCall| {
        let (http, url) = (http.clone(), mail_url.clone());
        async move {
            match http
                .post(url)
                .header("Idempotency-Key", call.key.as_str())
                .body(call.request)
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => {
                    CallOutcome::Succeeded(r.bytes().await.map(|b| b.to_vec()).unwrap_or_default())
                }
                Ok(r) => CallOutcome::Failed {
                    retryable: r.status().is_server_error(),
                    reason: format!("mail server answered {}", r.status()),
                },
                Err(e) => CallOutcome::Unknown {
                    reason: e.to_string(),
                },
            }
        }
    })
    .backoff(Backoff::exponential(
        Duration::from_millis(20),
        Duration::from_millis(200),
    ));
    // `drain` runs until nothing is due; failed calls wait for their backoff, so drain again.
    let mut emails = WorkerReport::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    while emails.succeeded < EVENTS as u64 {
        ensure!(
            Instant::now() < deadline,
            "emails not all sent after 30 s: {emails:?}"
        );
        let report = worker.drain().await?;
        emails.succeeded += report.succeeded;
        emails.failed += report.failed;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // 4. The relay publishes the outbox with each row's message id.
    let relay = Relay::new(store.outbox(), JetStreamPublisher::new(js.clone()));
    let mut published = 0;
    while published < EVENTS as u64 {
        let report = relay.run_once().await?;
        ensure!(
            report.claimed > 0,
            "the outbox ran dry after {published} messages"
        );
        published += report.published;
    }
    let on_stream = js
        .get_stream(&streams[1])
        .await?
        .info()
        .await?
        .state
        .messages;

    // 5. Exactly once, end to end.
    let (accounts, upgrades): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COALESCE(SUM(upgrades), 0) FROM accounts WHERE plan = 'pro'",
    )
    .fetch_one(store.pool())
    .await?;
    let sent = mail.sent.lock().await.len();
    let calls = mail.calls.load(Ordering::SeqCst);
    println!(
        "deliveries: {} applied, {} duplicates, {unacked} left unacknowledged",
        counts.applied, counts.duplicate
    );
    println!("accounts upgraded: {accounts} (upgrades {upgrades})");
    println!(
        "emails: {sent} sent in {calls} calls ({} failed first)",
        emails.failed
    );
    println!("outbox: {published} published, {on_stream} on the stream");
    let expected = EVENTS as i64;
    if (counts.applied, counts.duplicate) != (EVENTS as u64, EVENTS as u64)
        || (accounts, upgrades) != (expected, expected)
        || unacked != 0
        || sent != EVENTS
        // One successful call per email plus the refused ones: no email was sent twice.
        || calls != EVENTS as u32 + MAIL_FAILURES
        || on_stream != EVENTS as u64
    {
        bail!("expected {EVENTS} of each: not exactly once");
    }
    println!("ok: every event applied once, one email and one message each");
    Ok(())
}

/// A mail server that honours `Idempotency-Key` (the same key sends once) and answers 503 to its
/// first [`MAIL_FAILURES`] calls.
struct MailServer {
    url: String,
    calls: Arc<AtomicU32>,
    sent: Arc<Mutex<HashMap<String, Vec<u8>>>>,
}

impl MailServer {
    async fn start() -> anyhow::Result<Self> {
        let calls = Arc::new(AtomicU32::new(0));
        let sent = Arc::new(Mutex::new(HashMap::new()));
        let app = axum::Router::new()
            .route("/send", axum::routing::post(send))
            .with_state((Arc::clone(&calls), Arc::clone(&sent)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(Self { url, calls, sent })
    }
}

type MailState = (Arc<AtomicU32>, Arc<Mutex<HashMap<String, Vec<u8>>>>);

async fn send(
    State((calls, sent)): State<MailState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, String) {
    if calls.fetch_add(1, Ordering::SeqCst) < MAIL_FAILURES {
        return (StatusCode::SERVICE_UNAVAILABLE, "try again".into());
    }
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return (
            StatusCode::BAD_REQUEST,
            "Idempotency-Key is required".into(),
        );
    };
    let mut sent = sent.lock().await;
    sent.entry(key.to_owned()).or_insert_with(|| body.to_vec());
    (StatusCode::OK, format!("{{\"message\":\"{key}\"}}"))
}

async fn wait_until(what: &str, done: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
