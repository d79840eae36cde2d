//! Outbox relays against the real NATS JetStream (127.0.0.1:4222), RabbitMQ (127.0.0.1:5672)
//! and a local HTTP server, on SQLite, PostgreSQL and MySQL (MariaDB) stores.
//!
//! The PostgreSQL and MySQL tests of this binary share one database each (idem-testkit makes one
//! per test process) and relays claim any due row, so every test holds [`OUTBOX_LOCK`] and starts
//! from an empty `idem_outbox`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer, stream};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use futures_util::{FutureExt, StreamExt};
use idem_broker::{
    HttpPublisher, JetStreamPublisher, PublishOutcome, Publisher, RabbitMqPublisher, Relay,
    RelayError, RelayReport,
};
use idem_core::{DedupKey, Entity, EventId, ManualClock, Name, Timestamp};
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{
    Error, ErrorKind, Event, MessageId, Outbox, OutboxMessage, OutboxPolicy, OutboxRow,
    OutboxStatus, Outcome, Runner, Store,
};
use idem_testkit::{AppDb, all_stores, exec, query_i64};
use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};

const NATS_URL: &str = "127.0.0.1:4222";
const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const T0: Timestamp = Timestamp(1_764_000_000_000);

/// One outbox test at a time in this process (see the module docs).
static OUTBOX_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A name no other test or run uses: `prefix_{pid}_{nanos}_{n}`.
fn unique(prefix: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .subsec_nanos();
    format!(
        "{prefix}_{}_{nanos}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The store on a manual clock at [`T0`], with an empty outbox.
async fn prepared<DB: AppDb>(store: Store<DB>) -> (Store<DB>, ManualClock) {
    let clock = ManualClock::new(T0);
    let store = store.with_clock(Arc::new(clock.clone()));
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    (store, clock)
}

async fn enqueue<DB: AppDb>(outbox: &Outbox<DB>, message: OutboxMessage) -> MessageId {
    let mut tx = outbox.store().begin().await.unwrap();
    let id = outbox.enqueue(&mut tx, &message).await.unwrap();
    tx.commit().await.unwrap();
    id
}

fn id(s: &str) -> MessageId {
    MessageId::new(s).unwrap()
}

fn entity(kind: &str, id: &str) -> Entity {
    Entity::new(kind, id).unwrap()
}

async fn status<DB: AppDb>(outbox: &Outbox<DB>, message_id: &MessageId) -> Option<OutboxStatus> {
    outbox.get(message_id).await.unwrap().map(|r| r.status)
}

// ---------------------------------------------------------------------------------------------
// Enqueue: only with the transaction (C2).

async fn rows_commit_only_with_their_transaction<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, _clock) = prepared(store).await;
    let outbox = store.outbox();
    exec(
        &store,
        "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(255) PRIMARY KEY)",
        vec![],
    )
    .await;
    exec(&store, "DELETE FROM orders", vec![]).await;

    // The handler fails after writing the order and its message: neither exists.
    let mut tx = store.begin().await.unwrap();
    DB::execute(&mut *tx, "INSERT INTO orders (id) VALUES ('o-1')", vec![])
        .await
        .unwrap();
    let rolled_back = outbox
        .enqueue(
            &mut tx,
            &OutboxMessage::new("orders.created", "o-1").with_message_id(id("order-o-1-created")),
        )
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(outbox.get(&rolled_back).await.unwrap(), None);
    assert_eq!(
        query_i64(&store, "SELECT COUNT(*) FROM orders", vec![]).await,
        [0]
    );
    assert!(
        outbox
            .claim(10, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty()
    );

    // The retry commits both, once.
    let mut tx = store.begin().await.unwrap();
    DB::execute(&mut *tx, "INSERT INTO orders (id) VALUES ('o-1')", vec![])
        .await
        .unwrap();
    let committed = outbox
        .enqueue(
            &mut tx,
            &OutboxMessage::new("orders.created", "o-1")
                .with_message_id(id("order-o-1-created"))
                .with_header("content-type", "text/plain"),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(committed, id("order-o-1-created"));
    let row = outbox.get(&committed).await.unwrap().unwrap();
    assert_eq!(row.status, OutboxStatus::Pending);
    assert_eq!(row.payload, b"o-1");
    assert_eq!(row.headers, [("content-type".into(), "text/plain".into())]);
    assert_eq!(row.created_at, T0);

    // The same message id again is refused, not dropped.
    let mut tx = store.begin().await.unwrap();
    let again = outbox
        .enqueue(
            &mut tx,
            &OutboxMessage::new("orders.created", "other").with_message_id(committed.clone()),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(again, Error::DuplicateMessageId { ref message_id } if *message_id == committed)
    );
    assert_eq!(again.kind(), ErrorKind::InvalidInput);
    // Bad input is refused before any write.
    let bad = outbox
        .enqueue(
            &mut tx,
            &OutboxMessage::new("orders.created", "x").with_header("bad name", "v"),
        )
        .await
        .unwrap_err();
    assert!(matches!(bad, Error::InvalidOutboxMessage { .. }), "{bad}");
    let blank = outbox
        .enqueue(&mut tx, &OutboxMessage::new(" ", "x"))
        .await
        .unwrap_err();
    assert!(
        matches!(blank, Error::InvalidOutboxMessage { .. }),
        "{blank}"
    );
    drop(tx);
    assert!(MessageId::new("has space").is_err());
    assert!(MessageId::new("").is_err());
    assert!(MessageId::new("x".repeat(256)).is_err());

    // Generated ids are UUID v7 strings, distinct per message.
    let a = enqueue(&outbox, OutboxMessage::new("orders.created", "a")).await;
    let b = enqueue(&outbox, OutboxMessage::new("orders.created", "b")).await;
    assert_ne!(a, b);
    for generated in [&a, &b] {
        let s = generated.as_str();
        assert_eq!(s.len(), 36, "{s}");
        assert_eq!(&s[14..15], "7", "version 7: {s}");
    }
}

all_stores!(rows_commit_only_with_their_transaction);

// ---------------------------------------------------------------------------------------------
// The issue's scenario: the broker confirms O1, marking it fails, the next cycle republishes it.

/// Statements that make the UPDATE marking `mid-1` published fail, and undo that.
trait Faults: AppDb {
    const BREAK_MARKING: &'static [&'static str];
    const REPAIR_MARKING: &'static [&'static str];
}

impl Faults for Sqlite {
    const BREAK_MARKING: &'static [&'static str] = &[
        "CREATE TRIGGER idem_test_fail_mark BEFORE UPDATE ON idem_outbox \
         WHEN NEW.status = 'published' AND OLD.message_id = 'mid-1' \
         BEGIN SELECT RAISE(ABORT, 'injected failure: marking mid-1 published'); END",
    ];
    const REPAIR_MARKING: &'static [&'static str] = &["DROP TRIGGER idem_test_fail_mark"];
}

impl Faults for Postgres {
    const BREAK_MARKING: &'static [&'static str] = &[
        "CREATE OR REPLACE FUNCTION idem_test_fail_mark() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'injected failure: marking % published', OLD.message_id; END $$",
        "CREATE TRIGGER idem_test_fail_mark BEFORE UPDATE ON idem_outbox FOR EACH ROW \
         WHEN (NEW.status = 'published' AND OLD.message_id = 'mid-1') \
         EXECUTE FUNCTION idem_test_fail_mark()",
    ];
    const REPAIR_MARKING: &'static [&'static str] =
        &["DROP TRIGGER idem_test_fail_mark ON idem_outbox"];
}

impl Faults for MySql {
    const BREAK_MARKING: &'static [&'static str] = &[
        "CREATE TRIGGER idem_test_fail_mark BEFORE UPDATE ON idem_outbox FOR EACH ROW \
         BEGIN \
           IF NEW.status = 'published' AND OLD.message_id = 'mid-1' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected failure: marking mid-1 published'; \
           END IF; \
         END",
    ];
    const REPAIR_MARKING: &'static [&'static str] = &["DROP TRIGGER idem_test_fail_mark"];
}

async fn jetstream() -> jetstream::Context {
    jetstream::new(
        async_nats::connect(NATS_URL)
            .await
            .expect("connect to NATS"),
    )
}

/// A stream of its own taking `{name}.>`, with `window` as its duplicate window (the server's
/// default, 2 minutes, when `None`).
async fn new_stream(js: &jetstream::Context, window: Option<Duration>) -> (String, stream::Stream) {
    idem_testkit::nats::keep_account_store(js).await;
    let name = unique("idem_relay");
    let stream = js
        .create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.>")],
            duplicate_window: window.unwrap_or_default(),
            max_age: Duration::from_secs(600),
            ..Default::default()
        })
        .await
        .expect("create stream");
    (name, stream)
}

/// What the downstream consumer did with every message of the stream.
#[derive(Debug, Default, PartialEq, Eq)]
struct Downstream {
    messages: usize,
    applied: usize,
    duplicates: usize,
}

/// A downstream idem consumer fed from `stream`: one [`Runner`] run per message, keyed by the
/// message's `Nats-Msg-Id`, whose handler records the application in `downstream_applied`.
async fn consume_all<DB: AppDb>(store: &Store<DB>, stream: &stream::Stream) -> Downstream {
    exec(
        store,
        "CREATE TABLE IF NOT EXISTS downstream_applied (message_id TEXT NOT NULL)",
        vec![],
    )
    .await;
    let consumer = stream
        .create_consumer(consumer::pull::Config {
            ack_policy: consumer::AckPolicy::Explicit,
            ..Default::default()
        })
        .await
        .expect("create consumer");
    let runner = Runner::new(
        store.clone(),
        &Name::new("consumer", unique("downstream")).unwrap(),
    );
    let source = Name::new("source", "outbox").unwrap();
    let mut seen = Downstream::default();
    let mut batch = consumer
        .fetch()
        .max_messages(100)
        .expires(Duration::from_secs(1))
        .messages()
        .await
        .expect("fetch");
    while let Some(message) = batch.next().await {
        let message = message.expect("message");
        seen.messages += 1;
        let msg_id = message
            .headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .map(|v| v.as_str().to_owned())
            .expect("every relayed message carries Nats-Msg-Id");
        let key = DedupKey::from_event(&source, &EventId::new(msg_id.clone()).unwrap());
        let outcome = runner
            .run_boxed(&Event::new(key), |tx| {
                let msg_id = msg_id.clone();
                Box::pin(async move {
                    DB::execute(
                        &mut **tx,
                        "INSERT INTO downstream_applied (message_id) VALUES ($1)",
                        vec![msg_id.into()],
                    )
                    .await?;
                    Ok(())
                })
            })
            .await
            .expect("downstream run");
        match outcome {
            Outcome::Applied(()) => seen.applied += 1,
            Outcome::Duplicate => seen.duplicates += 1,
            other => panic!("unexpected outcome {other:?}"),
        }
        message.ack().await.expect("ack");
    }
    seen
}

/// O1 (`mid-1`) is published and confirmed, marking it fails, the next cycle publishes it again.
/// Returns the second cycle's report and what the downstream consumer saw.
async fn republish_after_failed_mark<DB: Faults>(
    store: &Store<DB>,
    clock: &ManualClock,
    window: Option<Duration>,
) -> (RelayReport, Downstream) {
    let js = jetstream().await;
    let (name, mut stream) = new_stream(&js, window).await;
    exec(store, "DELETE FROM idem_outbox", vec![]).await;
    let outbox = store.outbox();
    let o1 = enqueue(
        &outbox,
        OutboxMessage::new(format!("{name}.orders"), r#"{"order":"50266"}"#)
            .with_message_id(id("mid-1")),
    )
    .await;
    let relay = Relay::new(outbox.clone(), JetStreamPublisher::new(js.clone()))
        .claim_ttl(Duration::from_secs(30));

    for sql in DB::BREAK_MARKING {
        exec(store, sql, vec![]).await;
    }
    let failed = relay.run_once().await;
    for sql in DB::REPAIR_MARKING {
        exec(store, sql, vec![]).await;
    }
    let Err(RelayError::Store(e)) = failed else {
        panic!("marking mid-1 should have failed: {failed:?}");
    };
    assert!(e.to_string().contains("injected failure"), "{e}");
    assert_eq!(
        stream.info().await.unwrap().state.messages,
        1,
        "the broker confirmed O1 before the marking failed"
    );
    assert_eq!(status(&outbox, &o1).await, Some(OutboxStatus::Pending));

    // Nothing happens while the first cycle's claim lasts; after it, the next cycle takes O1.
    assert_eq!(relay.run_once().await.unwrap(), RelayReport::default());
    clock.advance(Duration::from_secs(31));
    if let Some(window) = window {
        tokio::time::sleep(window + Duration::from_millis(500)).await;
    }
    let report = relay.run_once().await.unwrap();
    assert_eq!(status(&outbox, &o1).await, Some(OutboxStatus::Published));
    let downstream = consume_all(store, &stream).await;
    assert_eq!(
        query_i64(
            store,
            "SELECT COUNT(*) FROM downstream_applied WHERE message_id = 'mid-1'",
            vec![]
        )
        .await,
        [1],
        "O1 applied downstream exactly once"
    );
    exec(store, "DELETE FROM downstream_applied", vec![]).await;
    js.delete_stream(&name).await.expect("delete stream");
    (report, downstream)
}

async fn republished_message_is_a_jetstream_duplicate_and_applied_once<DB: Faults>(
    store: Store<DB>,
) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;

    // Within the stream's duplicate window (2 min by default): the publish ack says duplicate
    // and the stream keeps one copy.
    let (report, downstream) = republish_after_failed_mark(&store, &clock, None).await;
    assert_eq!(
        report,
        RelayReport {
            claimed: 1,
            duplicates: 1,
            ..RelayReport::default()
        }
    );
    assert_eq!(
        downstream,
        Downstream {
            messages: 1,
            applied: 1,
            duplicates: 0
        }
    );

    // Past the window (1 s here) the stream stores the copy again: the consumer's inbox applies
    // O1 once and counts one duplicate.
    let (report, downstream) =
        republish_after_failed_mark(&store, &clock, Some(Duration::from_secs(1))).await;
    assert_eq!(
        report,
        RelayReport {
            claimed: 1,
            published: 1,
            ..RelayReport::default()
        }
    );
    assert_eq!(
        downstream,
        Downstream {
            messages: 2,
            applied: 1,
            duplicates: 1
        }
    );
}

mod republished_message_is_a_jetstream_duplicate_and_applied_once {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        super::republished_message_is_a_jetstream_duplicate_and_applied_once(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let store = idem_testkit::pg_store().await;
        super::republished_message_is_a_jetstream_duplicate_and_applied_once(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        let store = idem_testkit::mysql_store().await;
        super::republished_message_is_a_jetstream_duplicate_and_applied_once(store).await;
    }
}

// ---------------------------------------------------------------------------------------------
// A local HTTP destination: records every request, answers what the test sets per path.

#[derive(Debug, Clone)]
struct Received {
    path: String,
    key: Option<String>,
    body: Vec<u8>,
    header: Option<String>,
}

/// A status, with a `Retry-After` value or none.
type Answer = (StatusCode, Option<&'static str>);

#[derive(Clone, Default)]
struct Destination {
    received: Arc<Mutex<Vec<Received>>>,
    /// Status answered per path (200 when absent), with an optional Retry-After.
    answers: Arc<Mutex<HashMap<String, Answer>>>,
}

impl Destination {
    async fn serve(&self) -> String {
        async fn handle(
            State(d): State<Destination>,
            uri: Uri,
            headers: HeaderMap,
            body: axum::body::Bytes,
        ) -> axum::response::Response {
            let path = uri.path().to_owned();
            let text = |name: &str| {
                headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned)
            };
            d.received.lock().unwrap().push(Received {
                path: path.clone(),
                key: text("idempotency-key"),
                body: body.to_vec(),
                header: text("x-order"),
            });
            let answer = d.answers.lock().unwrap().get(&path).copied();
            match answer {
                Some((status, Some(retry_after))) => {
                    (status, [("retry-after", retry_after)]).into_response()
                }
                Some((status, None)) => status.into_response(),
                None => StatusCode::OK.into_response(),
            }
        }
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(self.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    fn answer(&self, path: &str, status: StatusCode, retry_after: Option<&'static str>) {
        self.answers
            .lock()
            .unwrap()
            .insert(path.to_owned(), (status, retry_after));
    }

    fn heal(&self, path: &str) {
        self.answers.lock().unwrap().remove(path);
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Failures: backoff, deferral, park after N, requeue.

async fn failing_destination_backs_off_parks_and_requeue_publishes<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;
    let policy = OutboxPolicy {
        max_attempts: 4,
        backoff_base: Duration::from_secs(2),
        backoff_max: Duration::from_secs(60),
    };
    let outbox = store.outbox().with_policy(policy);
    let dest = Destination::default();
    let base = dest.serve().await;
    let relay = Relay::new(outbox.clone(), HttpPublisher::new(base).unwrap());
    dest.answer("/mail", StatusCode::SERVICE_UNAVAILABLE, None);
    let mail = enqueue(&outbox, OutboxMessage::new("/mail", "receipt")).await;

    // 503: failed, backing off 2 s; 409: deferred by its Retry-After (7 s, more than the 4 s
    // backoff), an attempt too; 422: failed, backing off 8 s; parked at the fourth attempt.
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.failed, report.parked), (1, 0));
    let row = outbox.get(&mail).await.unwrap().unwrap();
    assert_eq!(row.attempts, 1);
    assert_eq!(
        row.next_attempt_at,
        T0.saturating_add(Duration::from_secs(2))
    );
    assert!(
        row.last_error.as_deref().unwrap().contains("503"),
        "{row:?}"
    );
    assert_eq!(relay.run_once().await.unwrap().claimed, 0, "backing off");

    clock.advance(Duration::from_secs(2));
    // 409: the receiver has the key in flight; deferred by its Retry-After, counted as an
    // attempt (a receiver answering 409 forever must not keep the row forever).
    dest.answer("/mail", StatusCode::CONFLICT, Some("7"));
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.deferred, report.failed), (1, 0));
    let row = outbox.get(&mail).await.unwrap().unwrap();
    assert_eq!(row.attempts, 2, "a 409 counts as an attempt");
    assert_eq!(
        row.next_attempt_at,
        T0.saturating_add(Duration::from_secs(2 + 7))
    );

    clock.advance(Duration::from_secs(7));
    dest.answer("/mail", StatusCode::UNPROCESSABLE_ENTITY, None);
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.failed, report.parked), (1, 0));
    let row = outbox.get(&mail).await.unwrap().unwrap();
    assert_eq!(row.attempts, 3);
    assert_eq!(
        row.next_attempt_at,
        T0.saturating_add(Duration::from_secs(9 + 8))
    );

    clock.advance(Duration::from_secs(8));
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.failed, report.parked), (0, 1));
    assert_eq!(status(&outbox, &mail).await, Some(OutboxStatus::Parked));
    clock.advance(Duration::from_secs(3600));
    assert_eq!(
        relay.run_once().await.unwrap().claimed,
        0,
        "a parked row stays put"
    );
    let parked = outbox.list(OutboxStatus::Parked, 10).await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].message_id, mail);
    assert_eq!(parked[0].attempts, 4);

    // Retention never deletes parked rows.
    let policy = idem_core::RetentionPolicy::new(
        Duration::from_secs(3 * 86_400),
        idem_core::horizon::STRIPE,
    )
    .unwrap();
    clock.advance(Duration::from_secs(30 * 86_400));
    let gc = store
        .gc(&policy, std::num::NonZeroU32::new(10).unwrap())
        .await
        .unwrap();
    assert_eq!(gc.outbox, 0);
    assert_eq!(status(&outbox, &mail).await, Some(OutboxStatus::Parked));

    // The operator fixes the receiver and requeues: published once, with the same key.
    dest.heal("/mail");
    assert!(outbox.requeue(&mail).await.unwrap());
    assert!(!outbox.requeue(&mail).await.unwrap(), "no longer parked");
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.published, 1);
    assert_eq!(status(&outbox, &mail).await, Some(OutboxStatus::Published));
    let received = dest.received();
    assert_eq!(received.len(), 5, "503, 409, 422, 422, 200");
    assert!(
        received
            .iter()
            .all(|r| r.key.as_deref() == Some(mail.as_str()) && r.body == b"receipt"),
        "every attempt carries the same Idempotency-Key"
    );

    // Published rows are deleted once older than the retention; younger ones are kept.
    let young = enqueue(&outbox, OutboxMessage::new("/mail", "young")).await;
    relay.run_once().await.unwrap();
    clock.advance(Duration::from_secs(86_400));
    let gc = store
        .gc(&policy, std::num::NonZeroU32::new(1).unwrap())
        .await
        .unwrap();
    assert_eq!(gc.outbox, 0, "both published less than 3 days ago");
    clock.advance(Duration::from_secs(2 * 86_400 + 1));
    let gc = store
        .gc(&policy, std::num::NonZeroU32::new(1).unwrap())
        .await
        .unwrap();
    assert_eq!(gc.outbox, 2);
    assert_eq!(outbox.get(&mail).await.unwrap(), None);
    assert_eq!(outbox.get(&young).await.unwrap(), None);
}

all_stores!(failing_destination_backs_off_parks_and_requeue_publishes);

/// A 3xx is a failed publish (the doc of `HttpPublisher`), not followed: a 302 whose
/// `Location` answers 200 would otherwise have turned the POST into a bodiless GET and marked
/// the row published though the receiver never got the message.
async fn a_redirect_is_a_failed_publish_not_followed<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, _clock) = prepared(store).await;
    let outbox = store.outbox();
    let destination = idem_testkit::redirecting::Redirecting::start("/mail").await;
    let relay = Relay::new(
        outbox.clone(),
        HttpPublisher::new(format!("http://{}", destination.addr)).unwrap(),
    );
    let mail = enqueue(&outbox, OutboxMessage::new("/mail", "receipt")).await;
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.published, report.failed), (0, 1));
    let row = outbox.get(&mail).await.unwrap().unwrap();
    assert!(
        row.last_error.as_deref().unwrap().contains("302"),
        "{row:?}"
    );
    assert_eq!(status(&outbox, &mail).await, Some(OutboxStatus::Pending));
    assert_eq!(destination.followed(), 0, "the redirect was followed");
}

all_stores!(a_redirect_is_a_failed_publish_not_followed);

// ---------------------------------------------------------------------------------------------
// Order per aggregate; a parked row holds back its aggregate only; expired claims come back.

async fn order_is_per_aggregate_and_a_parked_row_blocks_only_its_aggregate<DB: AppDb>(
    store: Store<DB>,
) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: 1,
        ..OutboxPolicy::default()
    });
    let dest = Destination::default();
    let base = dest.serve().await;
    let relay = Relay::new(outbox.clone(), HttpPublisher::new(base).unwrap());
    let order_a = entity("order", "A");
    let order_b = entity("order", "B");
    let msg = |path: &str, body: &str, agg: Option<&Entity>| {
        let m = OutboxMessage::new(path, body.to_owned()).with_header("x-order", body);
        match agg {
            Some(e) => m.with_aggregate(e.clone()),
            None => m,
        }
    };
    let a1 = enqueue(&outbox, msg("/a-first", "a1", Some(&order_a))).await;
    let a2 = enqueue(&outbox, msg("/a", "a2", Some(&order_a))).await;
    let a3 = enqueue(&outbox, msg("/a", "a3", Some(&order_a))).await;
    let b1 = enqueue(&outbox, msg("/b", "b1", Some(&order_b))).await;
    let b2 = enqueue(&outbox, msg("/b", "b2", Some(&order_b))).await;
    let u1 = enqueue(&outbox, msg("/u", "u1", None)).await;
    let u2 = enqueue(&outbox, msg("/u", "u2", None)).await;

    // Only the head of each aggregate is claimable; unordered rows all are.
    let claimed = outbox.claim(100, Duration::from_secs(30)).await.unwrap();
    let ids: Vec<&MessageId> = claimed.iter().map(|r| &r.message_id).collect();
    assert_eq!(ids, [&a1, &b1, &u1, &u2]);
    assert_eq!(claimed[0].aggregate, Some(order_a.clone()));
    // The claim is held: nothing else is due, not even a3 or b2, and a relay that stops here
    // (a crash) leaves them claimed until the ttl passes.
    assert!(
        outbox
            .claim(100, Duration::from_secs(30))
            .await
            .unwrap()
            .is_empty()
    );
    clock.advance(Duration::from_secs(31));

    // The receiver refuses a1; with max_attempts 1 it parks at once.
    dest.answer("/a-first", StatusCode::BAD_REQUEST, None);
    let mut totals = RelayReport::default();
    for _ in 0..5 {
        let r = relay.run_once().await.unwrap();
        totals.claimed += r.claimed;
        totals.published += r.published;
        totals.parked += r.parked;
    }
    assert_eq!(totals.parked, 1);
    assert_eq!(
        totals.published, 4,
        "b1, b2, u1, u2 (a crashed relay's rows came back)"
    );
    assert_eq!(status(&outbox, &a1).await, Some(OutboxStatus::Parked));
    assert_eq!(status(&outbox, &a2).await, Some(OutboxStatus::Pending));
    assert_eq!(status(&outbox, &a3).await, Some(OutboxStatus::Pending));
    assert_eq!(status(&outbox, &b2).await, Some(OutboxStatus::Published));

    // Requeued and accepted: A's rows follow in order.
    dest.heal("/a-first");
    assert!(outbox.requeue(&a1).await.unwrap());
    for _ in 0..5 {
        relay.run_once().await.unwrap();
    }
    let bodies: Vec<String> = dest
        .received()
        .into_iter()
        .filter(|r| r.path != "/u")
        .filter_map(|r| r.header)
        .collect();
    let of = |prefix: char| -> Vec<&str> {
        bodies
            .iter()
            .map(String::as_str)
            .filter(|b| b.starts_with(prefix))
            .collect()
    };
    assert_eq!(
        of('a'),
        ["a1", "a1", "a2", "a3"],
        "a1 refused, then A in order"
    );
    assert_eq!(of('b'), ["b1", "b2"]);
    for id in [&a1, &a2, &a3, &u1, &u2, &b1] {
        assert_eq!(
            status(&outbox, id).await,
            Some(OutboxStatus::Published),
            "{id}"
        );
    }

    // A discarded parked row unblocks its aggregate without being published.
    let c1 = enqueue(
        &outbox,
        msg("/c-refused", "c1", Some(&entity("order", "C"))),
    )
    .await;
    let c2 = enqueue(&outbox, msg("/c", "c2", Some(&entity("order", "C")))).await;
    dest.answer("/c-refused", StatusCode::BAD_REQUEST, None);
    assert_eq!(relay.run_once().await.unwrap().parked, 1);
    assert_eq!(
        relay.run_once().await.unwrap().claimed,
        0,
        "c2 waits behind parked c1"
    );
    assert!(outbox.discard(&c1).await.unwrap());
    assert_eq!(relay.run_once().await.unwrap().published, 1);
    assert_eq!(status(&outbox, &c2).await, Some(OutboxStatus::Published));
    assert_eq!(outbox.get(&c1).await.unwrap(), None);
}

all_stores!(order_is_per_aggregate_and_a_parked_row_blocks_only_its_aggregate);

// ---------------------------------------------------------------------------------------------
// drain: overlapping cycles (claim next, publish current, record previous) keep every rule.

/// 5 aggregates × 12 rows plus 30 unordered rows, drained in batches of 4 while the next batch
/// is claimed during each publish: every row is published exactly once and each aggregate in
/// its order; a destination path that fails leaves its row pending for the backoff, counted once.
async fn drain_overlaps_cycles_and_keeps_order_and_once<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, _clock) = prepared(store).await;
    let outbox = store.outbox();
    const AGGREGATES: usize = 5;
    const PER_AGGREGATE: usize = 12;
    let mut tx = store.begin().await.unwrap();
    for seq in 0..PER_AGGREGATE {
        for agg in 0..AGGREGATES {
            let order = format!("{agg}:{seq}");
            let message = OutboxMessage::new("/ordered", order.clone())
                .with_aggregate(entity("account", &format!("acc-{agg}")))
                .with_header("x-order", order);
            outbox.enqueue(&mut tx, &message).await.unwrap();
            if seq % 2 == 0 {
                let message = OutboxMessage::new("/unordered", format!("u{agg}:{seq}"));
                outbox.enqueue(&mut tx, &message).await.unwrap();
            }
        }
    }
    outbox
        .enqueue(
            &mut tx,
            &OutboxMessage::new("/down", "x").with_message_id(id("down-1")),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let total = AGGREGATES * PER_AGGREGATE + AGGREGATES * PER_AGGREGATE / 2;
    let dest = Destination::default();
    dest.answer("/down", StatusCode::SERVICE_UNAVAILABLE, None);
    let relay = Relay::new(
        outbox.clone(),
        HttpPublisher::new(dest.serve().await).unwrap(),
    )
    .batch_size(4);

    let report = relay.drain().await.unwrap();

    assert_eq!(report.published, total as u64, "{report:?}");
    assert_eq!((report.failed, report.parked), (1, 0), "{report:?}");
    assert_eq!(
        status(&outbox, &id("down-1")).await,
        Some(OutboxStatus::Pending)
    );
    let received: Vec<Received> = dest
        .received()
        .into_iter()
        .filter(|r| r.path != "/down")
        .collect();
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for r in &received {
        *per_key.entry(r.key.clone().unwrap()).or_default() += 1;
    }
    assert_eq!(per_key.len(), total, "every row reached the receiver");
    assert!(
        per_key.values().all(|&n| n == 1),
        "no row was published twice"
    );
    let mut next = [0usize; AGGREGATES];
    for r in received.iter().filter(|r| r.path == "/ordered") {
        let (agg, seq) = r.header.as_deref().unwrap().split_once(':').unwrap();
        let (agg, seq): (usize, usize) = (agg.parse().unwrap(), seq.parse().unwrap());
        assert_eq!(seq, next[agg], "aggregate acc-{agg} out of order");
        next[agg] += 1;
    }
    assert_eq!(next, [PER_AGGREGATE; AGGREGATES]);
    assert_eq!(
        relay.drain().await.unwrap().claimed,
        0,
        "nothing due: the failed row backs off"
    );
}

all_stores!(drain_overlaps_cycles_and_keeps_order_and_once);

/// Ending the sessions that hold `idem_outbox` rows locked, as when their process is killed.
trait Sessions: AppDb {
    /// Ends every other session that holds rows of `store`'s `idem_outbox` locked (there must be
    /// `expected`) and waits until they are gone.
    fn end_lock_holders(store: &Store<Self>, expected: usize) -> impl Future<Output = ()> + Send;
}

impl Sessions for Postgres {
    async fn end_lock_holders(store: &Store<Self>, expected: usize) {
        let pool = store.pool();
        let holders: Vec<i32> = idem_sql::sqlx::query_scalar(
            "SELECT DISTINCT pid FROM pg_locks \
             WHERE relation = 'idem_outbox'::regclass AND pid <> pg_backend_pid()",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(
            holders.len(),
            expected,
            "each batch holds its rows in its own session"
        );
        for pid in &holders {
            idem_sql::sqlx::query("SELECT pg_terminate_backend($1)")
                .bind(pid)
                .execute(pool)
                .await
                .unwrap();
        }
        // A terminated backend releases its locks as it exits; wait until both have.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let alive: i64 = idem_sql::sqlx::query_scalar(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY($1)",
            )
            .bind(&holders)
            .fetch_one(pool)
            .await
            .unwrap();
            if alive == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "backends {holders:?} did not exit"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The store is on a database of its own (see the MySQL test), so every session in it with an
/// open transaction that locked rows is one of the batches.
impl Sessions for MySql {
    async fn end_lock_holders(store: &Store<Self>, expected: usize) {
        let pool = store.pool();
        let holders: Vec<u64> = idem_sql::sqlx::query_scalar(
            "SELECT t.trx_mysql_thread_id FROM information_schema.INNODB_TRX t \
             JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
             WHERE p.DB = DATABASE() AND t.trx_rows_locked > 0 \
               AND t.trx_mysql_thread_id <> CONNECTION_ID()",
        )
        .fetch_all(pool)
        .await
        .unwrap();
        assert_eq!(
            holders.len(),
            expected,
            "each batch holds its rows in its own session"
        );
        for id in &holders {
            idem_sql::sqlx::raw_sql(idem_sql::sqlx::AssertSqlSafe(format!(
                "KILL CONNECTION {id}"
            )))
            .execute(pool)
            .await
            .unwrap();
        }
        // A killed session rolls back and releases its locks as it ends; wait until both have.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let alive: i64 = idem_sql::sqlx::query_scalar(
                "SELECT COUNT(*) FROM information_schema.INNODB_TRX t \
                 JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id \
                 WHERE p.DB = DATABASE() AND t.trx_mysql_thread_id <> CONNECTION_ID()",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            if alive == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "sessions {holders:?} did not end"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Databases that lock rows (PostgreSQL, MySQL) hold a batch by row locks: another relay skips
/// the locked rows, and a relay that dies (its transaction dropped uncommitted) leaves every row
/// due again at once, not published.
async fn locked_rows_are_skipped_by_other_relays_and_released_by_a_dead_one<DB: Sessions>(
    store: Store<DB>,
) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, _clock) = prepared(store).await;
    let outbox = store.outbox();
    assert!(outbox.locks_rows());
    for i in 0..10 {
        enqueue(
            &outbox,
            OutboxMessage::new("/x", "p").with_message_id(id(&format!("lk-{i}"))),
        )
        .await;
    }
    let (first, held) = outbox.lock_due(6).await.unwrap();
    let (second, rest) = outbox.lock_due(10).await.unwrap();
    let ids = |rows: &[OutboxRow]| {
        rows.iter()
            .map(|r| r.message_id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(&held),
        (0..6).map(|i| format!("lk-{i}")).collect::<Vec<_>>()
    );
    assert_eq!(
        ids(&rest),
        (6..10).map(|i| format!("lk-{i}")).collect::<Vec<_>>()
    );
    // Both relays die before recording anything: their sessions end, as when the process is
    // killed or its connection drops. (Dropping a batch only queues its rollback, which the
    // pool runs later: the rows would be due again soon, not at once.)
    DB::end_lock_holders(&store, 2).await;
    let (_again, rows) = outbox.lock_due(10).await.unwrap();
    assert_eq!(rows.len(), 10, "every row is due again");
    drop((first, second));
    assert!(
        rows.iter()
            .all(|r| r.status == OutboxStatus::Pending && r.attempts == 0)
    );
}

mod locked_rows_are_skipped_by_other_relays_and_released_by_a_dead_one {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let store = idem_testkit::pg_store().await;
        super::locked_rows_are_skipped_by_other_relays_and_released_by_a_dead_one(store).await;
    }

    /// On a database of its own: the sessions to end are found by their database.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql() {
        let url = idem_testkit::mysql_database().await;
        let store = idem_testkit::outbox::app_store::<idem_sql::sqlx::MySql>(&url).await;
        super::locked_rows_are_skipped_by_other_relays_and_released_by_a_dead_one(store).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Several relays on one PostgreSQL or MySQL: each row published exactly once; order per aggregate.

async fn four_relays_publish_each_row_exactly_once<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    let outbox = store.outbox();
    const AGGREGATES: usize = 25;
    const PER_AGGREGATE: usize = 20;
    const UNORDERED: usize = 500;
    let total = AGGREGATES * PER_AGGREGATE + UNORDERED;
    // Written in many transactions, interleaving aggregates.
    for chunk in 0..(total / 50) {
        let mut tx = store.begin().await.unwrap();
        for i in 0..50 {
            let n = chunk * 50 + i;
            let message = if n % 2 == 0 && n / 2 < AGGREGATES * PER_AGGREGATE {
                let k = n / 2;
                let (agg, seq) = (k % AGGREGATES, k / AGGREGATES);
                OutboxMessage::new("/ordered", format!("{agg}:{seq}"))
                    .with_aggregate(entity("account", &format!("acc-{agg}")))
                    .with_header("x-order", format!("{agg}:{seq}"))
            } else {
                OutboxMessage::new("/unordered", format!("u{n}"))
            };
            outbox.enqueue(&mut tx, &message).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let dest = Destination::default();
    let base = dest.serve().await;

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut relays = Vec::new();
    for _ in 0..4 {
        let relay = Relay::new(outbox.clone(), HttpPublisher::new(base.clone()).unwrap())
            .batch_size(40)
            .waits(Duration::from_millis(5), Duration::from_millis(50));
        let mut stopped = stopped.clone();
        relays.push(tokio::spawn(async move {
            relay
                .run(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await
        }));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let pending = query_i64(
            &store,
            "SELECT COUNT(*) FROM idem_outbox WHERE status <> 'published'",
            vec![],
        )
        .await[0];
        if pending == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{pending} rows left"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(true).unwrap();
    let mut totals = RelayReport::default();
    let mut busy_relays = 0;
    for relay in relays {
        let report = relay.await.unwrap();
        if report.published > 0 {
            busy_relays += 1;
        }
        totals.published += report.published;
        totals.failed += report.failed;
    }
    assert_eq!(totals.published, total as u64);
    assert_eq!(totals.failed, 0);
    assert!(busy_relays >= 2, "the relays shared the work");

    let received = dest.received();
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for r in &received {
        *per_key.entry(r.key.clone().unwrap()).or_default() += 1;
    }
    assert_eq!(per_key.len(), total, "every row reached the receiver");
    assert!(
        per_key.values().all(|&n| n == 1),
        "no row was published twice: {:?}",
        per_key.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let mut next = [0usize; AGGREGATES];
    for r in received.iter().filter(|r| r.path == "/ordered") {
        let (agg, seq) = r.header.as_deref().unwrap().split_once(':').unwrap();
        let (agg, seq): (usize, usize) = (agg.parse().unwrap(), seq.parse().unwrap());
        assert_eq!(seq, next[agg], "aggregate acc-{agg} out of order");
        next[agg] += 1;
    }
    assert!(next.iter().all(|&n| n == PER_AGGREGATE));
}

mod four_relays_publish_each_row_exactly_once {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        super::four_relays_publish_each_row_exactly_once(idem_testkit::pg_store().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        super::four_relays_publish_each_row_exactly_once(idem_testkit::mysql_store().await).await;
    }
}

/// A row with a lower sequence number that commits later is still published: relays select by
/// status, never by "sequence greater than the last one seen". (Not SQLite: there the open
/// transaction holds the database's one write lock, and the relay waits for it.)
async fn a_row_committed_late_with_a_lower_seq_is_still_published<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    let outbox = store.outbox();
    let dest = Destination::default();
    let base = dest.serve().await;
    let relay = Relay::new(outbox.clone(), HttpPublisher::new(base).unwrap());

    let mut slow = store.begin().await.unwrap();
    let early = outbox
        .enqueue(
            &mut slow,
            &OutboxMessage::new("/x", "early seq, late commit"),
        )
        .await
        .unwrap();
    let late = enqueue(&outbox, OutboxMessage::new("/x", "late seq, early commit")).await;
    assert_eq!(relay.run_once().await.unwrap().published, 1);
    slow.commit().await.unwrap();
    let early_row = outbox.get(&early).await.unwrap().unwrap();
    let late_row = outbox.get(&late).await.unwrap().unwrap();
    assert!(early_row.seq < late_row.seq);
    assert_eq!(early_row.status, OutboxStatus::Pending);
    assert_eq!(relay.run_once().await.unwrap().published, 1);
    assert_eq!(status(&outbox, &early).await, Some(OutboxStatus::Published));
    let keys: Vec<String> = dest.received().into_iter().filter_map(|r| r.key).collect();
    assert_eq!(keys, [late.to_string(), early.to_string()]);
}

mod a_row_committed_late_with_a_lower_seq_is_still_published {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let store = idem_testkit::pg_store().await;
        super::a_row_committed_late_with_a_lower_seq_is_still_published(store).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mysql() {
        let store = idem_testkit::mysql_store().await;
        super::a_row_committed_late_with_a_lower_seq_is_still_published(store).await;
    }
}

// ---------------------------------------------------------------------------------------------
// RabbitMQ: publisher confirms, message_id, persistent delivery.

async fn rabbitmq_confirms_with_message_id_and_persistence<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, _clock) = prepared(store).await;
    let queue = unique("idem_relay");
    cleaning_up(
        confirms_with_message_id_and_persistence(store, queue.clone()),
        delete_queues(&[queue.as_str()]),
    )
    .await;
}

/// The body of [`rabbitmq_confirms_with_message_id_and_persistence`], on `queue`.
async fn confirms_with_message_id_and_persistence<DB: AppDb>(store: Store<DB>, queue: String) {
    let outbox = store.outbox();
    let connection = lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    let channel = connection.create_channel().await.unwrap();
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let publisher = RabbitMqPublisher::connect(AMQP_URL).await.unwrap();
    let relay = Relay::new(outbox.clone(), publisher);

    let ids = [
        enqueue(
            &outbox,
            OutboxMessage::new(queue.clone(), "m1")
                .with_message_id(id("mid-r1"))
                .with_header("x-order", "50266"),
        )
        .await,
        enqueue(
            &outbox,
            OutboxMessage::new(format!("amq.direct/{queue}-unbound"), "m2")
                .with_message_id(id("mid-r2")),
        )
        .await,
    ];
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.claimed, 2);
    assert_eq!(report.published, 1, "{report:?}");
    assert_eq!(report.failed, 1, "unroutable: {report:?}");
    assert_eq!(
        status(&outbox, &ids[0]).await,
        Some(OutboxStatus::Published)
    );
    let unroutable = outbox.get(&ids[1]).await.unwrap().unwrap();
    assert_eq!(unroutable.status, OutboxStatus::Pending);
    assert!(
        unroutable.last_error.unwrap().contains("returned"),
        "the broker returned it"
    );

    let got = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("the confirmed message is in the queue");
    let properties = &got.delivery.properties;
    assert_eq!(
        properties.message_id().as_ref().map(|s| s.as_str()),
        Some("mid-r1")
    );
    assert_eq!(*properties.delivery_mode(), Some(2), "persistent");
    assert_eq!(got.delivery.data, b"m1");
    let header = properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("x-order").cloned());
    assert!(
        matches!(header, Some(AMQPValue::LongString(ref s)) if s.to_string() == "50266"),
        "{header:?}"
    );

    // A publish to an exchange that does not exist fails, and the broker closes the channel
    // (AMQP 404); the publisher opens a new one for the next batch.
    exec(
        &store,
        "DELETE FROM idem_outbox WHERE status = 'pending'",
        vec![],
    )
    .await;
    let lost = enqueue(
        &outbox,
        OutboxMessage::new(format!("{}/{queue}", unique("no_such_exchange")), "m3"),
    )
    .await;
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.failed, 1, "{report:?}");
    let reason = outbox
        .get(&lost)
        .await
        .unwrap()
        .unwrap()
        .last_error
        .unwrap();
    assert!(
        reason.contains("404") || reason.contains("NOT_FOUND"),
        "{reason}"
    );
    exec(
        &store,
        "DELETE FROM idem_outbox WHERE status = 'pending'",
        vec![],
    )
    .await;
    let again = enqueue(&outbox, OutboxMessage::new(queue.clone(), "m4")).await;
    let report = relay.run_once().await.unwrap();
    assert_eq!(report.published, 1, "{report:?}");
    assert_eq!(status(&outbox, &again).await, Some(OutboxStatus::Published));
    let got = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("m4");
    assert_eq!(
        got.delivery
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.as_str()),
        Some(again.as_str())
    );
}

all_stores!(rabbitmq_confirms_with_message_id_and_persistence);

// ---------------------------------------------------------------------------------------------
// The publisher contract on its own: JetStream's duplicate flag, one outcome per row.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jetstream_publisher_reports_duplicates_and_missing_streams() {
    let _lock = OUTBOX_LOCK.lock().await;
    let (_dir, store) = idem_testkit::sqlite_store().await;
    let (store, _clock) = prepared(store).await;
    let outbox = store.outbox();
    let js = jetstream().await;
    let (name, stream) = new_stream(&js, None).await;
    cleaning_up(
        reports_duplicates_and_missing_streams(&outbox, &js, &name, stream),
        delete_stream(&name),
    )
    .await;
}

/// The body of [`jetstream_publisher_reports_duplicates_and_missing_streams`].
async fn reports_duplicates_and_missing_streams(
    outbox: &Outbox<Sqlite>,
    js: &jetstream::Context,
    name: &str,
    mut stream: stream::Stream,
) {
    for (mid, subject) in [
        ("j-1", format!("{name}.a")),
        ("j-2", format!("{name}.b")),
        ("j-3", unique("no_stream_takes_this")),
    ] {
        enqueue(
            outbox,
            OutboxMessage::new(subject, mid).with_message_id(id(mid)),
        )
        .await;
    }
    let rows = outbox.claim(10, Duration::from_secs(30)).await.unwrap();
    let publisher = JetStreamPublisher::new(js.clone());
    let first = publisher.publish(&rows).await;
    assert_eq!(
        first[..2],
        [PublishOutcome::Published, PublishOutcome::Published]
    );
    assert!(
        matches!(&first[2], PublishOutcome::Failed { reason } if reason.contains("no stream")),
        "{first:?}"
    );
    let second = publisher.publish(&rows[..2]).await;
    assert_eq!(
        second,
        [PublishOutcome::Duplicate, PublishOutcome::Duplicate]
    );
    assert_eq!(stream.info().await.unwrap().state.messages, 2);
}

// ---------------------------------------------------------------------------------------------
// Review findings: 409 loops, zero claim leases, channel-closing rows, wildcard subjects.

/// Runs `body`, then `cleanup` whether `body` panicked or not (then the panic goes on), so that
/// a failing test does not leave its queues or streams on the broker.
async fn cleaning_up(body: impl Future<Output = ()>, cleanup: impl Future<Output = ()>) {
    let result = std::panic::AssertUnwindSafe(body).catch_unwind().await;
    cleanup.await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Declares the durable queue `queue` on a connection of its own; returns the connection (keep
/// it alive) and a channel on it.
async fn declare_queue(queue: &str) -> (lapin::Connection, lapin::Channel) {
    let connection = lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    let channel = connection.create_channel().await.unwrap();
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.into(), durable, FieldTable::default())
        .await
        .unwrap();
    (connection, channel)
}

/// How many messages `queue` holds (a passive declare).
async fn queue_depth(channel: &lapin::Channel, queue: &str) -> u32 {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .unwrap()
        .message_count()
}

/// Deletes `queues` on a connection of its own (the test's channel may be closed).
async fn delete_queues(queues: &[&str]) {
    let connection = lapin::Connection::connect(AMQP_URL, lapin::ConnectionProperties::default())
        .await
        .expect("connect to RabbitMQ");
    let channel = connection.create_channel().await.unwrap();
    for queue in queues {
        channel
            .queue_delete((*queue).into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

/// Deletes the stream `name` if it exists.
async fn delete_stream(name: &str) {
    let _ = jetstream().await.delete_stream(name).await;
}

/// A receiver answering 409 forever: each answer counts as an attempt and waits its Retry-After
/// clamped to 1 s .. 1 h, or the policy's backoff when longer; the row parks after the policy's
/// 4 attempts, after exactly 4 POSTs.
async fn a_receiver_answering_409_forever_parks_the_row<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: 4,
        backoff_base: Duration::from_millis(500),
        backoff_max: Duration::from_secs(60),
    });
    let dest = Destination::default();
    let relay = Relay::new(
        outbox.clone(),
        HttpPublisher::new(dest.serve().await).unwrap(),
    );
    let busy = enqueue(&outbox, OutboxMessage::new("/busy", "x")).await;
    let mut now = T0;
    // (Retry-After, expected wait): 0 s is raised to 1 s (above the 0.5 s backoff); 100000 s is
    // lowered to 1 h; 1 s is below the third attempt's 2 s backoff, which wins.
    for (attempt, (retry_after, wait)) in [("0", 1), ("100000", 3600), ("1", 2)]
        .into_iter()
        .enumerate()
    {
        dest.answer("/busy", StatusCode::CONFLICT, Some(retry_after));
        let report = relay.run_once().await.unwrap();
        assert_eq!((report.deferred, report.parked), (1, 0), "{report:?}");
        let row = outbox.get(&busy).await.unwrap().unwrap();
        assert_eq!(row.attempts, attempt as u32 + 1, "a 409 counts");
        now = now.saturating_add(Duration::from_secs(wait));
        assert_eq!(row.next_attempt_at, now, "Retry-After {retry_after}");
        assert_eq!(
            relay.run_once().await.unwrap().claimed,
            0,
            "not due before the wait"
        );
        clock.advance(Duration::from_secs(wait));
    }
    let report = relay.run_once().await.unwrap();
    assert_eq!((report.deferred, report.parked), (0, 1), "{report:?}");
    let row = outbox.get(&busy).await.unwrap().unwrap();
    assert_eq!((row.status, row.attempts), (OutboxStatus::Parked, 4));
    clock.advance(Duration::from_secs(86_400));
    assert_eq!(relay.run_once().await.unwrap().claimed, 0);
    assert_eq!(dest.received().len(), 4, "one POST per attempt");
}

all_stores!(a_receiver_answering_409_forever_parks_the_row);

/// The finding: `Retry-After: 0` made 3,288 POSTs in 6 s. On the real clock, `run` against a
/// receiver answering 409 with `Retry-After: 0` for 2.5 s POSTs at most once per second (at 0 s,
/// 1 s and 2 s), and every deferral is counted.
async fn retry_after_zero_is_not_a_hot_loop<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: 100,
        backoff_base: Duration::from_millis(10),
        backoff_max: Duration::from_millis(10),
    });
    let dest = Destination::default();
    dest.answer("/busy", StatusCode::CONFLICT, Some("0"));
    let relay = Relay::new(
        outbox.clone(),
        HttpPublisher::new(dest.serve().await).unwrap(),
    )
    .waits(Duration::from_millis(10), Duration::from_millis(100));
    enqueue(&outbox, OutboxMessage::new("/busy", "x")).await;
    let totals = relay
        .run(tokio::time::sleep(Duration::from_millis(2500)))
        .await;
    let posts = dest.received().len() as u64;
    assert!((2..=3).contains(&posts), "{posts} POSTs in 2.5 s");
    assert_eq!(totals.deferred, posts, "{totals:?}");
    exec(&store, "DELETE FROM idem_outbox", vec![]).await;
}

all_stores!(retry_after_zero_is_not_a_hot_loop);

/// The finding: with `claim_ttl(Duration::ZERO)` two relays calling `run_once` at once published
/// every row twice. The lease is raised to 1 s: each of the 10 rows is published once.
async fn a_zero_claim_ttl_still_publishes_each_row_once<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, _clock) = prepared(store).await;
    let outbox = store.outbox();
    for i in 0..10 {
        enqueue(
            &outbox,
            OutboxMessage::new("/x", "p").with_message_id(id(&format!("ttl-{i}"))),
        )
        .await;
    }
    let dest = Destination::default();
    let base = dest.serve().await;
    let relay = || {
        Relay::new(outbox.clone(), HttpPublisher::new(base.clone()).unwrap())
            .claim_ttl(Duration::ZERO)
    };
    let (a, b) = (relay(), relay());
    let (ra, rb) = tokio::join!(a.run_once(), b.run_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.published + rb.published, 10, "{ra:?} {rb:?}");
    let mut per_key: HashMap<String, usize> = HashMap::new();
    for r in dest.received() {
        *per_key.entry(r.key.unwrap()).or_default() += 1;
    }
    assert_eq!(per_key.len(), 10);
    assert!(
        per_key.values().all(|&n| n == 1),
        "no row was published twice: {per_key:?}"
    );
}

all_stores!(a_zero_claim_ttl_still_publishes_each_row_once);

/// The finding: one row to an exchange that does not exist (the broker closes the channel) made
/// the other rows of its batch fail with "invalid channel state: Closed" until they parked. With
/// max_attempts 2 and two cycles: the 3 good rows are in their queue, only `bad-ex` is parked.
async fn an_unroutable_row_does_not_fail_its_batch<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;
    let queue = unique("idem_relay");
    cleaning_up(
        async {
            let outbox = store.outbox().with_policy(OutboxPolicy {
                max_attempts: 2,
                ..OutboxPolicy::default()
            });
            let (_connection, channel) = declare_queue(&queue).await;
            let bad = enqueue(
                &outbox,
                OutboxMessage::new(format!("{}/rk", unique("nosuchexchange")), "bad")
                    .with_message_id(id("bad-ex")),
            )
            .await;
            let mut good = Vec::new();
            for i in 0..3 {
                good.push(
                    enqueue(
                        &outbox,
                        OutboxMessage::new(queue.clone(), format!("good-{i}")),
                    )
                    .await,
                );
            }
            let relay = Relay::new(
                outbox.clone(),
                RabbitMqPublisher::connect(AMQP_URL).await.unwrap(),
            );
            let first = relay.run_once().await.unwrap();
            assert_eq!(
                (first.published, first.failed, first.parked),
                (3, 1, 0),
                "{first:?}"
            );
            clock.advance(Duration::from_secs(60));
            let second = relay.run_once().await.unwrap();
            assert_eq!(
                (second.claimed, second.parked),
                (1, 1),
                "only bad-ex is left: {second:?}"
            );
            let parked: Vec<MessageId> = outbox
                .list(OutboxStatus::Parked, 10)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.message_id)
                .collect();
            assert_eq!(parked, std::slice::from_ref(&bad));
            let reason = outbox.get(&bad).await.unwrap().unwrap().last_error.unwrap();
            assert!(
                reason.contains("404") || reason.contains("NOT_FOUND"),
                "{reason}"
            );
            for g in &good {
                let row = outbox.get(g).await.unwrap().unwrap();
                assert_eq!((row.status, row.attempts), (OutboxStatus::Published, 0));
            }
            let depth = queue_depth(&channel, &queue).await;
            assert_eq!(depth, 3, "the queue holds the 3 good rows");
        },
        delete_queues(&[queue.as_str()]),
    )
    .await;
}

all_stores!(an_unroutable_row_does_not_fail_its_batch);

/// The connection to RabbitMQ drops (a broker restart, a network blip): the next cycle connects
/// again and publishes. While RabbitMQ cannot be reached at all, rows are unavailable: no attempt
/// is counted, nothing is parked, and they go out once it is back.
async fn a_lost_rabbitmq_connection_is_opened_again_and_an_outage_parks_nothing<DB: AppDb>(
    store: Store<DB>,
) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;
    let queue = unique("idem_relay_reconnect");
    cleaning_up(
        async {
            let outbox = store.outbox().with_policy(OutboxPolicy {
                max_attempts: 1,
                ..OutboxPolicy::default()
            });
            let (_connection, channel) = declare_queue(&queue).await;
            let proxy = idem_testkit::tcp_proxy::TcpProxy::start("127.0.0.1:5672").await;
            let via_proxy = format!("amqp://guest:guest@{}/%2f", proxy.addr);
            let relay = Relay::new(
                outbox.clone(),
                RabbitMqPublisher::connect(&via_proxy).await.unwrap(),
            );
            enqueue(&outbox, OutboxMessage::new(queue.clone(), "1")).await;
            assert_eq!(relay.run_once().await.unwrap().published, 1);

            proxy.drop_connections();
            tokio::time::sleep(Duration::from_millis(500)).await;
            let second = enqueue(&outbox, OutboxMessage::new(queue.clone(), "2")).await;
            let report = relay.run_once().await.unwrap();
            assert_eq!(
                (report.published, report.failed, report.parked),
                (1, 0, 0),
                "{report:?}"
            );
            assert_eq!(
                status(&outbox, &second).await,
                Some(OutboxStatus::Published)
            );

            proxy.cut();
            tokio::time::sleep(Duration::from_millis(500)).await;
            let third = enqueue(&outbox, OutboxMessage::new(queue.clone(), "3")).await;
            let report = relay.run_once().await.unwrap();
            assert_eq!(
                (report.unavailable, report.failed, report.parked),
                (1, 0, 0),
                "{report:?}"
            );
            let row = outbox.get(&third).await.unwrap().unwrap();
            assert_eq!(
                (row.status, row.attempts),
                (OutboxStatus::Pending, 0),
                "no attempt counted"
            );

            // RabbitMQ is back (a relay on a working connection): the row goes out.
            clock.advance(Duration::from_secs(120)); // past the claim
            let healthy = Relay::new(
                outbox.clone(),
                RabbitMqPublisher::connect(AMQP_URL).await.unwrap(),
            );
            assert_eq!(healthy.run_once().await.unwrap().published, 1);
            let depth = queue_depth(&channel, &queue).await;
            assert_eq!(depth, 3, "each row reached the queue once");
        },
        delete_queues(&[queue.as_str()]),
    )
    .await;
}

all_stores!(a_lost_rabbitmq_connection_is_opened_again_and_an_outage_parks_nothing);

/// An HTTP receiver that is down (nothing listens): the rows are unavailable, not failed; after
/// many cycles, even with one allowed attempt, nothing is parked, and they go out once it is up.
async fn a_receiver_that_is_down_parks_nothing<DB: AppDb>(store: Store<DB>) {
    let _lock = OUTBOX_LOCK.lock().await;
    let (store, clock) = prepared(store).await;
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: 1,
        ..OutboxPolicy::default()
    });
    let row = enqueue(&outbox, OutboxMessage::new("/hooks", "x")).await;
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = Relay::new(
        outbox.clone(),
        HttpPublisher::new(format!("http://127.0.0.1:{port}")).unwrap(),
    );
    for _ in 0..3 {
        let report = down.run_once().await.unwrap();
        assert_eq!(
            (report.unavailable, report.failed, report.parked),
            (1, 0, 0),
            "{report:?}"
        );
        clock.advance(Duration::from_secs(120)); // past the claim
    }
    let pending = outbox.get(&row).await.unwrap().unwrap();
    assert_eq!(
        (pending.status, pending.attempts),
        (OutboxStatus::Pending, 0)
    );
    let dest = Destination::default();
    let up = Relay::new(
        outbox.clone(),
        HttpPublisher::new(dest.serve().await).unwrap(),
    );
    assert_eq!(up.run_once().await.unwrap().published, 1);
    assert_eq!(dest.received().len(), 1);
}

all_stores!(a_receiver_that_is_down_parks_nothing);

/// The finding: a row to `relayout.>` was accepted and marked published. Wildcards, whitespace
/// and empty tokens are refused before sending; the literal subject next to them is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jetstream_refuses_subjects_that_are_not_literal() {
    let _lock = OUTBOX_LOCK.lock().await;
    let (_dir, store) = idem_testkit::sqlite_store().await;
    let (store, _clock) = prepared(store).await;
    let js = jetstream().await;
    let (name, mut stream) = new_stream(&js, None).await;
    cleaning_up(
        async {
            let outbox = store.outbox();
            let bad = [
                format!("{name}.>"),
                format!("{name}.*"),
                format!("{name}.a*"),
                format!("{name}.a b"),
                format!("{name}..x"),
                format!("{name}."),
            ];
            let mut ids = Vec::new();
            for subject in &bad {
                ids.push(enqueue(&outbox, OutboxMessage::new(subject.clone(), "x")).await);
            }
            let ok = enqueue(&outbox, OutboxMessage::new(format!("{name}.ok"), "x")).await;
            let relay = Relay::new(outbox.clone(), JetStreamPublisher::new(js.clone()));
            let report = relay.run_once().await.unwrap();
            assert_eq!((report.published, report.failed), (1, 6), "{report:?}");
            assert_eq!(status(&outbox, &ok).await, Some(OutboxStatus::Published));
            for (subject, id) in bad.iter().zip(&ids) {
                let row = outbox.get(id).await.unwrap().unwrap();
                assert_eq!(row.status, OutboxStatus::Pending, "{subject}");
                let reason = row.last_error.unwrap();
                assert!(reason.contains("cannot be published to"), "{reason}");
            }
            assert_eq!(
                stream.info().await.unwrap().state.messages,
                1,
                "only the literal subject reached the stream"
            );
        },
        delete_stream(&name),
    )
    .await;
}
