//! Shared parts of the consumer tests: unique names, the application's table of handler side
//! effects, a handler that writes one row per applied event, and waiting helpers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::sync::{Arc, Mutex};

use idem_broker::{DecodeError, Delivery, DeliveryStats, Processor, RetryPolicy};
use idem_core::{DedupKey, Entity, EventId, Name, Version};
use idem_sql::sqlx::Transaction;
use idem_sql::{BoxFuture, Event, Runner, Store};
use idem_testkit::{AppDb, Value};

/// A name unique to this test run: `{prefix}_{pid}_{nanos}_{counter}`.
pub(crate) fn unique(prefix: &str) -> String {
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

/// A consumer name (`{prefix}_v2`, versioned) unique to this run.
pub(crate) fn consumer_name(prefix: &str) -> Name {
    Name::new("consumer", format!("{}_v2", unique(prefix))).expect("valid consumer name")
}

const CREATE_EFFECTS: &str = "CREATE TABLE IF NOT EXISTS consumer_effects (\
     consumer TEXT NOT NULL, event TEXT NOT NULL, delivered BIGINT NOT NULL)";

/// Creates the application's table of handler side effects (one row per applied event). Tests of
/// one process share a PostgreSQL database, so a concurrent CREATE may fail once: tried again.
pub(crate) async fn create_effects_table<DB: AppDb>(store: &Store<DB>) {
    for attempt in 0..5 {
        let mut conn = store.pool().acquire().await.expect("acquire a connection");
        match DB::execute(&mut conn, CREATE_EFFECTS, vec![]).await {
            Ok(_) => return,
            Err(e) if attempt < 4 => {
                drop(conn);
                eprintln!("create consumer_effects, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("create consumer_effects: {e}"),
        }
    }
}

/// Writes the handler's side effect for `event`: one row, in the runner's transaction.
pub(crate) async fn write_effect<DB: AppDb>(
    tx: &mut Transaction<'static, DB>,
    consumer: &str,
    event: &str,
    delivered: u32,
) -> Result<(), idem_sql::Error> {
    write_effect_on::<DB>(tx, consumer, event, delivered).await
}

/// [`write_effect`] on the transaction's connection, as a handler of `idem_sql::handler!` has it.
pub(crate) async fn write_effect_on<DB: AppDb>(
    tx: &mut DB::Connection,
    consumer: &str,
    event: &str,
    delivered: u32,
) -> Result<(), idem_sql::Error> {
    DB::execute(
        tx,
        "INSERT INTO consumer_effects (consumer, event, delivered) VALUES ($1, $2, $3)",
        vec![
            Value::from(consumer),
            Value::from(event),
            Value::from(i64::from(delivered)),
        ],
    )
    .await?;
    Ok(())
}

/// The handler most tests use: one side-effect row per applied event, keyed by message id.
pub(crate) fn effect_handler<DB: AppDb>(
    consumer: Name,
) -> impl for<'t> Fn(
    &'t mut Transaction<'static, DB>,
    &'t Delivery,
) -> BoxFuture<'t, Result<(), idem_sql::Error>>
+ Send
+ Sync
+ 'static {
    move |tx, delivery| {
        let consumer = consumer.clone();
        Box::pin(async move {
            let event = delivery.message_id.clone().unwrap_or_default();
            write_effect(tx, consumer.as_str(), &event, delivery.delivered).await
        })
    }
}

/// How many side-effect rows `consumer` wrote.
pub(crate) async fn effect_rows<DB: AppDb>(store: &Store<DB>, consumer: &Name) -> i64 {
    idem_testkit::query_i64(
        store,
        "SELECT COUNT(*) FROM consumer_effects WHERE consumer = $1",
        vec![Value::from(consumer.as_str())],
    )
    .await[0]
}

/// How many side-effect rows `consumer` wrote for `event`.
pub(crate) async fn effect_rows_for<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    event: &str,
) -> i64 {
    idem_testkit::query_i64(
        store,
        "SELECT COUNT(*) FROM consumer_effects WHERE consumer = $1 AND event = $2",
        vec![Value::from(consumer.as_str()), Value::from(event)],
    )
    .await[0]
}

/// Waits until `done(stats)` holds, up to `limit`.
///
/// # Panics
/// When it does not hold in time, with the counts.
pub(crate) async fn wait_for(
    stats: &DeliveryStats,
    limit: Duration,
    done: impl Fn(&idem_broker::DeliveryCounts) -> bool,
) {
    let start = Instant::now();
    loop {
        let counts = stats.get();
        if done(&counts) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "condition not met within {limit:?}; counts {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Gives a handler closure stored in a variable its higher-ranked signature (closures get one only
/// where the expected type says so).
pub(crate) fn handler_fn<DB, F>(f: F) -> F
where
    DB: idem_sql::Backend,
    F: for<'t> Fn(
            &'t mut Transaction<'static, DB>,
            &'t Delivery,
        ) -> BoxFuture<'t, Result<(), idem_sql::Error>>
        + Send
        + Sync
        + Clone
        + 'static,
{
    f
}

/// Decodes the tests' order events, `{"id":"e1","order":"o1","seq":1}`: keyed by `id` under
/// `source`, about the entity `order` at sequence `seq`.
pub(crate) fn order_event(source: &Name, delivery: &Delivery) -> Result<Event, DecodeError> {
    let body: serde_json::Value =
        serde_json::from_slice(&delivery.payload).map_err(|e| DecodeError::Payload(e.into()))?;
    let text = |name: &str| {
        body.get(name)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
            .ok_or_else(|| DecodeError::Payload(format!("no {name}").into()))
    };
    let seq = body
        .get("seq")
        .and_then(|v| v.as_i64())
        .ok_or_else(|| DecodeError::Payload("no seq".into()))?;
    Ok(
        Event::new(DedupKey::from_event(source, &EventId::new(text("id")?)?)).with_entity(
            Entity::new("order", text("order")?)?,
            Version::sequence(seq),
        ),
    )
}

/// A processor of order events (source `orders`) whose handler always fails event `e1` ("card
/// declined for order o1"), recording each of its deliveries (count, time) in `seen`, and writes
/// one effect row for every other event.
pub(crate) fn fails_on_e1<DB: AppDb>(
    store: &Store<DB>,
    consumer: &Name,
    seen: Arc<Mutex<Vec<(u32, Instant)>>>,
    policy: RetryPolicy,
) -> Processor<DB> {
    let source = Name::new("source", "orders").unwrap();
    let handler = {
        let consumer = consumer.clone();
        handler_fn::<DB, _>(move |tx, delivery| {
            let consumer = consumer.clone();
            let body: serde_json::Value = serde_json::from_slice(&delivery.payload).unwrap();
            let id = body["id"].as_str().unwrap().to_owned();
            if id == "e1" {
                seen.lock()
                    .unwrap()
                    .push((delivery.delivered, Instant::now()));
            }
            let delivered = delivery.delivered;
            Box::pin(async move {
                if id == "e1" {
                    return Err(idem_sql::Error::handler("card declined for order o1"));
                }
                write_effect(tx, consumer.as_str(), &id, delivered).await
            })
        })
    };
    let decode_source = source.clone();
    Processor::new(
        store.clone(),
        Runner::new(store.clone(), consumer),
        source,
        handler,
    )
    .decode(move |d| order_event(&decode_source, d))
    .retry(policy)
}

/// A PostgreSQL handler that writes one effect row per event after a 5 ms pause, recording in
/// `max_open` the most handlers that were running at once.
pub(crate) fn concurrency_probe(
    consumer: &Name,
    max_open: Arc<std::sync::atomic::AtomicUsize>,
) -> impl for<'t> Fn(
    &'t mut Transaction<'static, idem_sql::sqlx::Postgres>,
    &'t Delivery,
) -> BoxFuture<'t, Result<(), idem_sql::Error>>
+ Send
+ Sync
+ Clone
+ 'static {
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let consumer = consumer.clone();
    handler_fn::<idem_sql::sqlx::Postgres, _>(move |tx, delivery| {
        let (consumer, open, max_open) = (consumer.clone(), open.clone(), max_open.clone());
        let body: serde_json::Value = serde_json::from_slice(&delivery.payload).unwrap();
        let id = body["id"].as_str().unwrap().to_owned();
        let delivered = delivery.delivered;
        Box::pin(async move {
            let now = open.fetch_add(1, Ordering::SeqCst) + 1;
            max_open.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            let result = write_effect(tx, consumer.as_str(), &id, delivered).await;
            open.fetch_sub(1, Ordering::SeqCst);
            result
        })
    })
}
