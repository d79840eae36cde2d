//! Outbox relays run by `idem serve`: each `[[relay]]` publishes the `idem_outbox` rows of its
//! database with [`idem_broker::Relay`] (claim by status, publish with the row's stable message
//! id, mark by id after the target confirmed, back off, park), until shutdown.
//!
//! A relay stops between cycles, never inside one, so the rows a target confirmed are marked
//! before the gateway exits.

use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use idem::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
use idem::sqlx::{Postgres, Sqlite};
use idem::{Backend, Store};
use idem_broker::{
    HttpPublisher, JetStreamPublisher, Publisher, RabbitMqPublisher, Relay, RelayReport,
};
use idem_sql::{OutboxPolicy, OutboxStatus};
use tokio::sync::watch;

use crate::Error;
use crate::broker::pause;
use crate::config::{OutboxRelay, RelayTarget, redact_url};
use crate::metric_definitions::{RELAY_ERRORS_TOTAL, RELAY_TOTAL};
use crate::store::DatabaseKind;

/// How long connecting to the target or the database may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The first wait after an idle or failed cycle (or `poll_interval`, if shorter).
const MIN_WAIT: Duration = Duration::from_millis(10);
/// Connections of a relay's database pool: one cycle uses one at a time.
const POOL_SIZE: u32 = 2;
/// The backoff of failed publishes: 1 s doubling up to 5 min (the outbox's default).
const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest backoff of a failed publish.
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// A relay ready to run: its future runs cycles until `stopped`.
pub(crate) type Running = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Connects relay `settings` (its database, whose `idem_outbox` table must exist, and its
/// target) and returns the loop to spawn. At start, so that a wrong URL stops the gateway with a
/// message naming the relay.
///
/// # Errors
/// [`Error::Relay`] naming the relay and what failed.
pub(crate) async fn connect(
    settings: &OutboxRelay,
    stopped: watch::Receiver<bool>,
) -> Result<Running, Error> {
    let fail = |reason: String| Error::Relay {
        relay: settings.name.to_string(),
        reason,
    };
    let url = settings.database_url.expose();
    match DatabaseKind::of(url) {
        Some(DatabaseKind::Sqlite) => {
            // The application's database: never created here. Settings as idem's own store
            // sets them: a mark is on disk before the cycle goes on, and a relay waits for the
            // application's writers instead of failing.
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|e| fail(format!("database_url is not a SQLite URL: {e}")))?
                .create_if_missing(false)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(CONNECT_TIMEOUT);
            let pool = idem::sqlx::pool::PoolOptions::<Sqlite>::new()
                .max_connections(POOL_SIZE)
                .acquire_timeout(CONNECT_TIMEOUT)
                .connect_with(options)
                .await
                .map_err(|e| {
                    fail(format!(
                        "cannot open the database at {}: {e}",
                        redact_url(url)
                    ))
                })?;
            with_store(settings, Store::<Sqlite>::from_pool(pool), stopped)
                .await
                .map_err(fail)
        }
        Some(DatabaseKind::Postgres) => {
            let store = tokio::time::timeout(
                CONNECT_TIMEOUT,
                Store::<Postgres>::connect_with(url, POOL_SIZE),
            )
            .await
            .map_err(|_| fail(format!("no answer from {} within 5s", redact_url(url))))?
            .map_err(|e| {
                fail(format!(
                    "cannot open the database at {}: {e}",
                    redact_url(url)
                ))
            })?;
            with_store(settings, store, stopped).await.map_err(fail)
        }
        None => Err(fail(
            "database_url is neither sqlite:// nor postgres://".into(),
        )),
    }
}

async fn with_store<DB: Backend>(
    settings: &OutboxRelay,
    store: Store<DB>,
    stopped: watch::Receiver<bool>,
) -> Result<Running, String> {
    let url = redact_url(settings.database_url.expose());
    // Any read of the table says whether it is there.
    store
        .outbox()
        .list(OutboxStatus::Parked, 1)
        .await
        .map_err(|e| {
            format!(
                "no idem_outbox table at {url} ({e}): the application creates it with idem's Store::migrate"
            )
        })?;
    let outbox = store.outbox().with_policy(OutboxPolicy {
        max_attempts: settings.max_attempts,
        backoff_base: BACKOFF_BASE,
        backoff_max: BACKOFF_MAX,
    });
    let target_url = settings.target.display_url();
    Ok(match &settings.target {
        RelayTarget::Nats { url } => {
            let client = async_nats::ConnectOptions::new()
                .name("idem-gateway relay")
                .connection_timeout(CONNECT_TIMEOUT)
                .connect(url.expose())
                .await
                .map_err(|e| format!("cannot connect to NATS at {target_url}: {e}"))?;
            let publisher = JetStreamPublisher::new(async_nats::jetstream::new(client));
            Box::pin(run(
                settings.clone(),
                relay(settings, outbox, publisher),
                stopped,
            ))
        }
        RelayTarget::RabbitMq { url } => {
            let publisher =
                tokio::time::timeout(CONNECT_TIMEOUT, RabbitMqPublisher::connect(url.expose()))
                    .await
                    .map_err(|_| format!("no answer from RabbitMQ at {target_url} within 5s"))?
                    .map_err(|e| format!("cannot connect to RabbitMQ at {target_url}: {e}"))?;
            Box::pin(run(
                settings.clone(),
                relay(settings, outbox, publisher),
                stopped,
            ))
        }
        RelayTarget::Http { url, timeout } => {
            let client = reqwest::Client::builder()
                .timeout(*timeout)
                .build()
                .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
            let publisher = HttpPublisher::with_client(client, url.clone());
            Box::pin(run(
                settings.clone(),
                relay(settings, outbox, publisher),
                stopped,
            ))
        }
    })
}

fn relay<DB: Backend, P: Publisher>(
    settings: &OutboxRelay,
    outbox: idem_sql::Outbox<DB>,
    publisher: P,
) -> Relay<DB, P> {
    Relay::new(outbox, publisher)
        .batch_size(settings.batch_size)
        .claim_ttl(settings.claim_ttl)
}

/// Runs cycles until `stopped`: after a cycle that claimed rows at once, else after a wait
/// from [`MIN_WAIT`] doubling up to `poll_interval`. A failed cycle (the database) is logged,
/// counted in [`RELAY_ERRORS_TOTAL`] and waited on like an idle one.
async fn run<DB: Backend, P: Publisher + 'static>(
    settings: OutboxRelay,
    relay: Relay<DB, P>,
    stopped: watch::Receiver<bool>,
) {
    let name = settings.name.to_string();
    let first_wait = MIN_WAIT.min(settings.poll_interval);
    let mut wait = first_wait;
    loop {
        if *stopped.borrow() {
            return;
        }
        // A cycle is never cut short: what the target confirmed is marked before stopping.
        let pause_for = match relay.run_once().await {
            Ok(report) => {
                record(&name, &report);
                if report.claimed > 0 {
                    wait = first_wait;
                    Duration::ZERO
                } else {
                    back_off(&mut wait, settings.poll_interval)
                }
            }
            Err(error) => {
                tracing::warn!(relay = %name, %error, "outbox relay cycle failed; trying again");
                metrics::counter!(RELAY_ERRORS_TOTAL, "relay" => name.clone()).increment(1);
                back_off(&mut wait, settings.poll_interval)
            }
        };
        if pause_for.is_zero() {
            // Busy: the next cycle at once, after the stop check at the top.
            tokio::task::yield_now().await;
        } else if pause(pause_for, &stopped).await {
            return;
        }
    }
}

/// The wait to take now; doubles `wait` for next time, up to `max`.
fn back_off(wait: &mut Duration, max: Duration) -> Duration {
    let now = *wait;
    *wait = wait.saturating_mul(2).min(max);
    now
}

fn record(relay: &str, report: &RelayReport) {
    for (outcome, n) in [
        ("published", report.published),
        ("duplicate", report.duplicates),
        ("failed", report.failed),
        ("parked", report.parked),
        ("deferred", report.deferred),
    ] {
        if n > 0 {
            metrics::counter!(RELAY_TOTAL, "relay" => relay.to_owned(), "outcome" => outcome)
                .increment(n);
        }
    }
}
