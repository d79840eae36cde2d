//! A NATS JetStream source: a durable pull consumer on an existing stream, explicit acks.

use std::time::Duration;

use async_nats::jetstream::consumer::pull::{self, MessagesErrorKind};
use async_nats::jetstream::consumer::{AckPolicy, Consumer};
use async_nats::jetstream::{self, AckKind};
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{Intake, Message, RECONNECT_DELAY, Verdict, pause, retry_delay, until_stopped};
use crate::config::NatsSource;
use crate::fields::NATS_SUBJECT;
use crate::store::GatewayDb;

/// How long connecting to the server may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The most messages one pull request asks for.
const MAX_PULL_BATCH: usize = 200;

/// A connected NATS source.
pub(crate) struct Reader {
    settings: NatsSource,
    client: async_nats::Client,
    consumer: Consumer<pull::Config>,
    /// The consumer's own `ack_wait`: the configured one when the gateway created it, an
    /// existing durable's otherwise. The in-progress acks follow it.
    ack_wait: Duration,
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
        let (consumer, ack_wait) = consumer(&client, &settings).await?;
        Ok(Self {
            settings,
            client,
            consumer,
            ack_wait,
        })
    }

    /// Pulls and takes messages until `stopped`, at most `max_in_flight` at once; then
    /// finishes those in flight and flushes their acks.
    pub(crate) async fn run<DB: GatewayDb>(
        mut self,
        intake: Intake<DB>,
        stopped: watch::Receiver<bool>,
    ) {
        let source = intake.source_name().to_string();
        let mut in_flight = JoinSet::new();
        // Waited on in the loop below, while `stopped` itself is lent to the tasks.
        let mut stop = stopped.clone();
        'connect: while !*stopped.borrow() {
            let messages = self
                .consumer
                .stream()
                .max_messages_per_batch(self.settings.max_in_flight.min(MAX_PULL_BATCH))
                .messages()
                .await;
            let mut messages = match messages {
                Ok(messages) => messages,
                Err(error) => {
                    tracing::warn!(%source, %error, "cannot pull from JetStream; trying again");
                    if pause(RECONNECT_DELAY, &stopped).await {
                        break;
                    }
                    self.reconnect(&source).await;
                    continue;
                }
            };
            loop {
                tokio::select! {
                    () = until_stopped(&mut stop) => break 'connect,
                    Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                    next = messages.next(), if in_flight.len() < self.settings.max_in_flight => {
                        match next {
                            Some(Ok(message)) => {
                                in_flight.spawn(take(
                                    intake.clone(),
                                    message,
                                    self.ack_wait,
                                    stopped.clone(),
                                ));
                            }
                            Some(Err(error)) => {
                                let fatal = matches!(
                                    error.kind(),
                                    MessagesErrorKind::ConsumerDeleted
                                        | MessagesErrorKind::PushBasedConsumer
                                        | MessagesErrorKind::RequestLimitExceeded
                                );
                                tracing::warn!(%source, %error, "JetStream pull failed");
                                if fatal {
                                    if pause(RECONNECT_DELAY, &stopped).await {
                                        break 'connect;
                                    }
                                    self.reconnect(&source).await;
                                    continue 'connect;
                                }
                            }
                            None => continue 'connect,
                        }
                    }
                }
            }
        }
        while in_flight.join_next().await.is_some() {}
        // Acks are published without waiting; flush them before the client goes.
        if let Err(error) = self.client.flush().await {
            tracing::warn!(%source, %error, "acks not flushed; those messages come again and are acked as duplicates");
        }
    }

    /// Gets the consumer again (it was deleted, or the server restarted), logging a failure:
    /// the next round of the read loop tries again.
    async fn reconnect(&mut self, source: &str) {
        match consumer(&self.client, &self.settings).await {
            Ok((consumer, ack_wait)) => {
                self.consumer = consumer;
                self.ack_wait = ack_wait;
            }
            Err(error) => tracing::warn!(%source, %error, "cannot get the JetStream consumer"),
        }
    }
}

/// Gets or creates the durable pull consumer of `settings`, checks that it acks explicitly and
/// filters as configured, and returns it with its own `ack_wait`. An existing durable keeps its
/// `ack_wait` and `max_ack_pending` (JetStream does not change them on a get): a difference
/// from the configuration is logged at WARN, and the in-progress acks follow the durable's
/// real `ack_wait`, since half the configured one could come after the durable redelivered.
async fn consumer(
    client: &async_nats::Client,
    settings: &NatsSource,
) -> Result<(Consumer<pull::Config>, Duration), String> {
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
    let ack_wait = info.config.ack_wait;
    Ok((consumer, ack_wait))
}

/// The headers of `message` as HTTP headers, with its subject as [`NATS_SUBJECT`]. Headers
/// whose name or value HTTP cannot carry are left out (an id read from one is then missing,
/// which is reported as such).
fn headers(message: &async_nats::Message) -> HeaderMap {
    let mut map = HeaderMap::new();
    if let Some(headers) = &message.headers {
        for (name, values) in headers.iter() {
            let Ok(name) = HeaderName::from_bytes(name.to_string().as_bytes()) else {
                continue;
            };
            for value in values {
                if let Ok(value) = HeaderValue::from_str(value.as_str()) {
                    map.append(name.clone(), value);
                }
            }
        }
    }
    if let Ok(subject) = HeaderValue::from_str(message.subject.as_str()) {
        map.insert(HeaderName::from_static(NATS_SUBJECT), subject);
    }
    map
}

/// Takes one message and acks, NAKs or terminates it. While the commit is awaited, sends an
/// in-progress ack every half `ack_wait` (the consumer's own), so that a slow commit causes no
/// redelivery.
async fn take<DB: GatewayDb>(
    intake: Intake<DB>,
    message: jetstream::Message,
    ack_wait: Duration,
    stopped: watch::Receiver<bool>,
) {
    let (position, delivered) = match message.info() {
        Ok(info) => (
            format!("stream {} sequence {}", info.stream, info.stream_sequence),
            u64::try_from(info.delivered).unwrap_or(1),
        ),
        Err(_) => (format!("subject {}", message.subject), 1),
    };
    let taken = Message {
        headers: headers(&message),
        body: message.payload.clone(),
        origin: message.subject.to_string(),
        position,
        delivered,
    };
    let verdict = {
        let take = intake.take(&taken);
        tokio::pin!(take);
        // At least 1 ms: `interval` panics on a zero period (JetStream's own floor is 1 ms).
        let half = (ack_wait / 2).max(Duration::from_millis(1));
        let mut progress = tokio::time::interval_at(tokio::time::Instant::now() + half, half);
        loop {
            tokio::select! {
                verdict = &mut take => break verdict,
                _ = progress.tick() => {
                    let _ = message.ack_with(AckKind::Progress).await;
                }
            }
        }
    };
    let source = intake.source_name();
    let acked = match verdict {
        Verdict::Ack(_) => message.ack().await,
        Verdict::Reject => message.ack_with(AckKind::Term).await,
        Verdict::Retry => {
            // On shutdown, hand it back at once: another gateway may take it.
            let delay = if *stopped.borrow() {
                Duration::ZERO
            } else {
                retry_delay(delivered)
            };
            message.ack_with(AckKind::Nak(Some(delay))).await
        }
    };
    if let Err(error) = acked {
        // Stored already: the redelivered copy is acked as a duplicate.
        tracing::warn!(%source, position = %taken.position, %error, "ack to JetStream failed; the message comes again");
    }
}
