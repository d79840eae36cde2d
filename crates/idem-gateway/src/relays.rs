//! Outbox relays run by `idem serve`: each `[[relay]]` publishes the `idem_outbox` rows of its
//! database with [`idem_broker::Relay`] (claim by status, publish with the row's stable message
//! id, mark by id after the target confirmed, back off, park), until shutdown.
//!
//! A relay stops between cycles, never inside one, so the rows a target confirmed are marked
//! before the gateway exits.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use idem_broker::{
    HttpPublisher, JetStreamPublisher, KafkaPublisher, Publisher, RabbitMqPublisher, Relay,
};
use idem_sql::OutboxPolicy;
use idem_sql::{AnyStore, Backend, PoolOptions, Store};
use tokio::sync::watch;

use crate::Error;

use crate::config::{OutboxRelay, RelayTarget};
use crate::tls::TlsSettings;

/// How long connecting to the target or the database may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The first wait after an idle or failed cycle (or `poll_interval`, if shorter).
const MIN_WAIT: Duration = Duration::from_millis(10);
/// Connections of a relay's database pool: two batches in flight (each holding one on
/// PostgreSQL) and one more to claim or record beside them.
const POOL_SIZE: u32 = 3;
/// The backoff of failed publishes: 1 s doubling up to 5 min (the outbox's default).
const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// The longest backoff of a failed publish.
const BACKOFF_MAX: Duration = Duration::from_secs(300);

/// A relay ready to run: its future runs cycles until `stopped`.
pub(crate) type Running = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Connects relay `settings` (its database, whose `idem_outbox` table must exist, and its NATS,
/// RabbitMQ or Kafka target; an HTTP target is first reached by the first publish) and returns the
/// loop to spawn. At start, so that a wrong URL stops the gateway with a
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
    // The application's database: never created here, its idem_outbox table checked at start.
    let options = PoolOptions::default()
        .max_connections(POOL_SIZE)
        .acquire_timeout(CONNECT_TIMEOUT);
    let store = AnyStore::open_existing(url, "idem_outbox", options)
        .await
        .map_err(|e| match e {
            idem_sql::Error::MissingTable { url, table } => fail(format!(
                "no {table} table at {url}: the application creates it with idem's Store::migrate"
            )),
            other => fail(format!("cannot open the database: {other}")),
        })?;
    match store {
        AnyStore::Sqlite(store) => with_store(settings, store, stopped).await,
        AnyStore::Postgres(store) => with_store(settings, store, stopped).await,
        AnyStore::MySql(store) => with_store(settings, store, stopped).await,
        _ => Err("database_url is not sqlite://, postgres:// or mysql://".to_owned()),
    }
    .map_err(fail)
}

async fn with_store<DB: Backend>(
    settings: &OutboxRelay,
    store: Store<DB>,
    stopped: watch::Receiver<bool>,
) -> Result<Running, String> {
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
        RelayTarget::Kafka { brokers } => {
            // Key = the row's aggregate, header idem-message-id = its message id, acks = all
            // (rskafka's produce requests): see `KafkaPublisher`.
            let client = idem_broker::kafka_connect(brokers)
                .await
                .map_err(|e| format!("cannot connect to Kafka at {target_url}: {e}"))?;
            let publisher = KafkaPublisher::new(std::sync::Arc::new(client));
            Box::pin(run(
                settings.clone(),
                relay(settings, outbox, publisher),
                stopped,
            ))
        }
        RelayTarget::Http { url, timeout, tls } => {
            let builder = tls.as_ref().map_or_else(
                crate::tls::default_client_builder,
                TlsSettings::client_builder,
            );
            let client = builder
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

/// Runs the relay until `stopped`, with [`Relay::run`]: cycles back to back while rows are due,
/// else a wait from [`MIN_WAIT`] (or `poll_interval`, if shorter) doubling up to
/// `poll_interval`. Failed cycles (the database) are logged and counted by the relay
/// (`idem_relay_errors_total`), and waited on like idle ones.
async fn run<DB: Backend, P: Publisher + 'static>(
    settings: OutboxRelay,
    relay: Relay<DB, P>,
    mut stopped: watch::Receiver<bool>,
) {
    let relay = relay
        .name(settings.name.to_string())
        .waits(MIN_WAIT.min(settings.poll_interval), settings.poll_interval);
    relay
        .run(async move {
            // A closed channel means the gateway is gone: stop as well.
            let _ = stopped.wait_for(|stop| *stop).await;
        })
        .await;
}
