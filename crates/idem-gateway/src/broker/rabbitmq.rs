//! A RabbitMQ source: an existing queue, manual acks, prefetch = `max_in_flight`, read by
//! idem-broker's [`RabbitMqSource`] with the gateway's ingest as its sink. The queue belongs to
//! whoever declared it: a message that could not be stored is held for its delay and requeued
//! ([`RetryVia::Requeue`]), never copied to retry queues the gateway would have to declare.

use std::time::Duration;

use idem_broker::{RabbitMqSource, RetryVia};
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties};
use tokio::sync::watch;

use super::intake::{Intake, RECONNECT_DELAY, pause, until_stopped};
use crate::config::RabbitMqSource as RabbitMqSettings;
use crate::store::GatewayDb;

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected RabbitMQ source.
pub(crate) struct Reader {
    settings: RabbitMqSettings,
    tag: String,
    connection: Connection,
    channel: Channel,
}

impl Reader {
    /// Connects and checks that the queue exists.
    ///
    /// # Errors
    /// The reason, as text naming the server or queue.
    pub(crate) async fn connect(source: &str, settings: RabbitMqSettings) -> Result<Self, String> {
        let (connection, channel) = open(&settings).await?;
        Ok(Self {
            tag: format!("idem-gateway-{source}"),
            settings,
            connection,
            channel,
        })
    }

    /// Takes deliveries until `stopped`, at most `max_in_flight` at once (the prefetch); then
    /// cancels the consumer, finishes those in flight and closes the connection (deliveries
    /// not yet taken go back to the queue). A lost connection is retried every second; the
    /// deliveries of the lost channel are requeued by the broker, their acks fail (logged) and
    /// the copies are acked as duplicates.
    ///
    /// # Errors
    /// Never: the reader keeps connecting until `stopped`.
    pub(crate) async fn run<DB: GatewayDb>(
        mut self,
        intake: Intake<DB>,
        stopped: watch::Receiver<bool>,
    ) -> Result<(), String> {
        let source = intake.source_name().to_string();
        let prefetch = u16::try_from(self.settings.max_in_flight).unwrap_or(u16::MAX);
        loop {
            let reader = RabbitMqSource::new(
                self.channel.clone(),
                &self.settings.queue,
                RetryVia::Requeue,
            )
            .prefetch(prefetch)
            .consumer_tag(self.tag.as_str());
            let mut stop = stopped.clone();
            let ended = reader
                .run(
                    intake.clone(),
                    async move { until_stopped(&mut stop).await },
                )
                .await;
            match ended {
                Ok(()) => break,
                Err(error) => {
                    tracing::warn!(%source, %error, "RabbitMQ consumer failed; connecting again");
                }
            }
            loop {
                if pause(RECONNECT_DELAY, &stopped).await {
                    self.close().await;
                    return Ok(());
                }
                match open(&self.settings).await {
                    Ok((connection, channel)) => {
                        let _ = self.connection.close(200, "reconnecting".into()).await;
                        self.connection = connection;
                        self.channel = channel;
                        break;
                    }
                    Err(error) => tracing::warn!(%source, %error, "cannot consume from RabbitMQ"),
                }
            }
        }
        self.close().await;
        Ok(())
    }

    async fn close(&self) {
        let _ = self
            .channel
            .close(200, "idem gateway stopping".into())
            .await;
        let _ = self
            .connection
            .close(200, "idem gateway stopping".into())
            .await;
    }
}

/// Connects, opens a channel and checks that the queue of `settings` exists.
async fn open(settings: &RabbitMqSettings) -> Result<(Connection, Channel), String> {
    let url = idem_sql::redact_url(settings.url.expose());
    let connection = tokio::time::timeout(
        CONNECT_TIMEOUT,
        Connection::connect(settings.url.expose(), ConnectionProperties::default()),
    )
    .await
    .map_err(|_| format!("cannot connect to RabbitMQ at {url}: no answer within 5s"))?
    .map_err(|e| format!("cannot connect to RabbitMQ at {url}: {e}"))?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| format!("cannot open a RabbitMQ channel at {url}: {e}"))?;
    channel
        .queue_declare(
            settings.queue.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| {
            format!(
                "RabbitMQ queue {:?} cannot be read ({e}); the gateway never declares queues: declare it, or fix `queue`",
                settings.queue
            )
        })?;
    Ok((connection, channel))
}
