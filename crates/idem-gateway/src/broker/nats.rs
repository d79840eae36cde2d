//! A NATS JetStream source: a durable pull consumer on an existing stream, explicit acks, read
//! by idem-broker's [`JetStreamSource`] with the gateway's ingest as its sink.

use std::time::Duration;

use async_nats::jetstream::consumer::pull::{self};
use async_nats::jetstream::consumer::{AckPolicy, Consumer};
use async_nats::jetstream::{self};
use idem_broker::{ConsumerErrorKind, JetStreamSource};
use tokio::sync::watch;

use super::intake::{Intake, RECONNECT_DELAY, pause, until_stopped};
use crate::config::NatsSource;
use crate::store::GatewayDb;

/// How long connecting to the server may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected NATS source.
pub(crate) struct Reader {
    settings: NatsSource,
    client: async_nats::Client,
    consumer: Consumer<pull::Config>,
}

impl Reader {
    /// Connects, finds the stream, and gets the durable consumer (created when missing).
    ///
    /// # Errors
    /// The reason, as text naming the server, stream or consumer: the server cannot be
    /// reached, the stream does not exist, or the consumer exists with another filter subject
    /// or without explicit acks.
    pub(crate) async fn connect(settings: NatsSource) -> Result<Self, String> {
        let url = idem_sql::redact_url(settings.url.expose());
        let client = async_nats::ConnectOptions::new()
            .name("idem-gateway")
            .connection_timeout(CONNECT_TIMEOUT)
            .connect(settings.url.expose())
            .await
            .map_err(|e| format!("cannot connect to NATS at {url}: {e}"))?;
        let consumer = consumer(&client, &settings).await?;
        Ok(Self {
            settings,
            client,
            consumer,
        })
    }

    /// Pulls and stores messages until `stopped`, at most `max_in_flight` at once, sending
    /// in-progress acks every half of the durable's own `ack_wait`; then finishes those in
    /// flight and flushes their acks. A lost connection is retried every second. A deleted
    /// durable (or stream) stops the reader with its reason: the gateway creates a durable only
    /// at start, since one created later would deliver the stream again from its first message.
    ///
    /// # Errors
    /// The reason the reader stopped before `stopped`: its durable or stream was deleted.
    pub(crate) async fn run<DB: GatewayDb>(
        mut self,
        intake: Intake<DB>,
        stopped: watch::Receiver<bool>,
    ) -> Result<(), String> {
        let source = intake.source_name().to_string();
        let result = loop {
            let source_reader = match JetStreamSource::new(self.consumer.clone()) {
                Ok(reader) => reader.concurrency(self.settings.max_in_flight),
                Err(e) => break Err(e.to_string()),
            };
            let mut stop = stopped.clone();
            let ended = source_reader
                .run(
                    intake.clone(),
                    async move { until_stopped(&mut stop).await },
                )
                .await;
            match ended {
                Ok(()) => break Ok(()),
                Err(e) if e.kind() == ConsumerErrorKind::Deleted => {
                    break Err(format!(
                        "JetStream consumer {:?} on stream {:?} was deleted ({e}); restart the gateway to create it again",
                        self.settings.durable, self.settings.stream
                    ));
                }
                Err(e) => {
                    tracing::warn!(%source, error = %e, "cannot pull from JetStream; trying again");
                    if pause(RECONNECT_DELAY, &stopped).await {
                        break Ok(());
                    }
                    match get_consumer(&self.client, &self.settings).await {
                        Ok(consumer) => self.consumer = consumer,
                        Err(e) => {
                            tracing::warn!(%source, error = %e, "cannot get the JetStream consumer")
                        }
                    }
                }
            }
        };
        // Acks are published without waiting; flush them before the client goes.
        if let Err(error) = self.client.flush().await {
            tracing::warn!(%source, %error, "acks not flushed; those messages come again and are acked as duplicates");
        }
        result
    }
}

/// The existing durable consumer of `settings` again (after a lost connection); never created
/// here.
async fn get_consumer(
    client: &async_nats::Client,
    settings: &NatsSource,
) -> Result<Consumer<pull::Config>, String> {
    let context = jetstream::new(client.clone());
    let stream = context
        .get_stream(&settings.stream)
        .await
        .map_err(|e| format!("JetStream stream {:?} cannot be read: {e}", settings.stream))?;
    stream.get_consumer(&settings.durable).await.map_err(|e| {
        format!(
            "JetStream consumer {:?} cannot be read: {e}",
            settings.durable
        )
    })
}

/// Gets or creates the durable pull consumer of `settings`, checks that it acks explicitly and
/// filters as configured, and returns it (its cached info holds its own `ack_wait`, which the
/// in-progress acks follow). An existing durable keeps its
/// `ack_wait` and `max_ack_pending` (JetStream does not change them on a get): a difference
/// from the configuration is logged at WARN, and the in-progress acks follow the durable's
/// real `ack_wait`, since half the configured one could come after the durable redelivered.
async fn consumer(
    client: &async_nats::Client,
    settings: &NatsSource,
) -> Result<Consumer<pull::Config>, String> {
    let context = jetstream::new(client.clone());
    let stream = context.get_stream(&settings.stream).await.map_err(|e| {
        format!(
            "JetStream stream {:?} cannot be read ({e}); the gateway never creates streams: create it, or fix `stream`",
            settings.stream
        )
    })?;
    let config = pull::Config {
        durable_name: Some(settings.durable.clone()),
        description: Some("idem gateway".into()),
        ack_policy: AckPolicy::Explicit,
        ack_wait: settings.ack_wait,
        // Unlimited: a message the store could not take is retried until it can.
        max_deliver: -1,
        filter_subject: settings.subject.clone().unwrap_or_default(),
        max_ack_pending: i64::try_from(settings.max_in_flight).unwrap_or(i64::MAX),
        ..Default::default()
    };
    let mut consumer = stream
        .get_or_create_consumer(&settings.durable, config)
        .await
        .map_err(|e| {
            format!(
                "JetStream consumer {:?} on stream {:?} cannot be created or read: {e}",
                settings.durable, settings.stream
            )
        })?;
    let info = consumer
        .info()
        .await
        .map_err(|e| format!("JetStream consumer {:?}: {e}", settings.durable))?;
    if info.config.ack_policy != AckPolicy::Explicit {
        return Err(format!(
            "JetStream consumer {:?} exists without explicit acks ({:?}): the gateway acks each message after its commit; delete the consumer or name another `durable`",
            settings.durable, info.config.ack_policy
        ));
    }
    let wanted = settings.subject.clone().unwrap_or_default();
    if info.config.filter_subject != wanted {
        return Err(format!(
            "JetStream consumer {:?} exists with filter subject {:?}, but the source says {:?}: delete the consumer or name another `durable`",
            settings.durable, info.config.filter_subject, wanted
        ));
    }
    let max_ack_pending = i64::try_from(settings.max_in_flight).unwrap_or(i64::MAX);
    if info.config.ack_wait != settings.ack_wait || info.config.max_ack_pending != max_ack_pending {
        tracing::warn!(
            durable = %settings.durable,
            stream = %settings.stream,
            ack_wait = ?info.config.ack_wait,
            configured_ack_wait = ?settings.ack_wait,
            max_ack_pending = info.config.max_ack_pending,
            configured_max_in_flight = settings.max_in_flight,
            "the existing JetStream consumer keeps its own ack_wait and max_ack_pending, not the configured ones; in-progress acks follow its ack_wait (delete the consumer, or edit it, to apply the configuration)"
        );
    }
    Ok(consumer)
}
