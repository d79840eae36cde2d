//! A NATS JetStream pull consumer as a source of deliveries: bounded pulls, in-progress acks
//! while the sink works, and the settlement its sink decides, after the store was written.
//!
//! JetStream behaviour this relies on (NATS docs: "Consumers",
//! <https://docs.nats.io/nats-concepts/jetstream/consumers> (AckWait, MaxDeliver), and the
//! JetStream wire API reference, "Acknowledging Messages",
//! <https://docs.nats.io/reference/reference-protocols/nats_api_reference>):
//! - with `AckPolicy::Explicit`, a message not acknowledged within the consumer's **ack_wait** is
//!   delivered again (to this or another client of the same durable consumer);
//! - **`AckKind::Progress`** (`+WPI`, "work in progress") resets the ack_wait timer of a message,
//!   so a handler that runs longer than ack_wait is not redelivered while it runs;
//! - **`AckKind::Nak(Some(delay))`** (`-NAK {"delay": ns}`) asks for a redelivery after `delay`;
//! - **`AckKind::Term`** (`+TERM`) stops redelivery of a message without processing it;
//! - every delivery carries its **delivered count** in the reply subject (`info().delivered`).
//!
//! Set the JetStream consumer's own `max_deliver` to `-1` (unlimited, the default) or above the
//! [`RetryPolicy`](crate::RetryPolicy)'s N: at N a [`Processor`](crate::Processor) records the
//! dead letter and its source sends TERM, and a server-side limit at or below N would stop
//! redelivering before that.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::context::ConsumerInfoErrorKind;
use async_nats::jetstream::{AckKind, Message};
use futures_util::StreamExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::{ConsumerError, Delivery, Settle, Sink};

/// The `broker` label of JetStream deliveries.
pub(crate) const BROKER: &str = "jetstream";

/// How long one pull request waits for messages before it is renewed (an idle consumer sends one
/// request per this period).
const PULL_EXPIRY: Duration = Duration::from_secs(5);

/// How long past [`PULL_EXPIRY`] a pull may stay unanswered before the source checks that its
/// consumer still exists.
const PULL_GRACE: Duration = Duration::from_secs(1);

/// A durable JetStream pull consumer (explicit acks) as a source: it pulls as many messages as
/// it has free slots, hands each to a [`Sink`], sends in-progress acks while the sink works, and
/// settles each message as the sink decides ([`Settle`]).
pub struct JetStreamSource {
    pull: PullConsumer,
    concurrency: usize,
    progress_interval: Option<Duration>,
}

impl fmt::Debug for JetStreamSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JetStreamSource")
            .field("consumer", &self.pull.cached_info().name)
            .field("concurrency", &self.concurrency)
            .field("progress_interval", &self.progress_interval)
            .finish()
    }
}

impl JetStreamSource {
    /// A source reading `pull` (a durable pull consumer with `AckPolicy::Explicit`, the default),
    /// one message at a time, sending in-progress acks every half of the consumer's ack_wait
    /// (read from `pull`'s cached info).
    ///
    /// # Errors
    /// [`ConsumerError::InvalidConfig`] when `pull`'s ack policy is not explicit (acknowledging
    /// after commit needs one acknowledgement per message).
    pub fn new(pull: PullConsumer) -> Result<Self, ConsumerError> {
        let config = &pull.cached_info().config;
        if config.ack_policy != async_nats::jetstream::consumer::AckPolicy::Explicit {
            return Err(ConsumerError::InvalidConfig(format!(
                "JetStream consumer {} has ack policy {:?}; explicit acks are needed",
                pull.cached_info().name,
                config.ack_policy
            )));
        }
        let progress_interval = Some(config.ack_wait / 2).filter(|d| !d.is_zero());
        Ok(Self {
            pull,
            concurrency: 1,
            progress_interval,
        })
    }

    /// Sets how many messages are worked on at once; at least 1. The source pulls only as many
    /// messages as it has free slots, so none waits in a client buffer while its ack_wait runs
    /// out.
    pub fn concurrency(self, concurrency: usize) -> Self {
        Self {
            concurrency: concurrency.max(1),
            ..self
        }
    }

    /// Sets the period of in-progress acks (`AckKind::Progress`) sent while the sink works, or
    /// `None` to send none (a sink slower than ack_wait then gets its message redelivered; the
    /// copy is a duplicate once the first is stored). Default: half the consumer's ack_wait.
    ///
    /// # Errors
    /// [`ConsumerError::InvalidConfig`] when the interval is zero or not below the consumer's
    /// ack_wait (the ack_wait would run out between two progress acks).
    pub fn progress_interval(self, interval: Option<Duration>) -> Result<Self, ConsumerError> {
        let ack_wait = self.pull.cached_info().config.ack_wait;
        if let Some(every) = interval
            && (every.is_zero() || every >= ack_wait)
        {
            return Err(ConsumerError::InvalidConfig(format!(
                "in-progress ack interval {every:?} must be above zero and below ack_wait {ack_wait:?}"
            )));
        }
        Ok(Self {
            progress_interval: interval,
            ..self
        })
    }

    /// Pulls and hands messages to `sink` until `shutdown` completes or a pull fails. On
    /// shutdown it stops pulling, lets the sink finish the messages in flight and settles them,
    /// then returns `Ok(())`. A message the server was sending to the pull request that shutdown
    /// cut short is not handed over; JetStream redelivers it after ack_wait.
    ///
    /// # Errors
    /// [`ConsumerError::Deleted`] when the durable consumer or its stream was deleted (a pull
    /// answered with an error or not answered 1 s past its 5 s expiry, and the consumer's info
    /// then "not found"), within about 6 s of the deletion: the source stops rather than
    /// recreating a durable that would start again from the stream's first message.
    /// [`ConsumerError::Pull`] when a pull request cannot be made (connection closed). Either way
    /// the messages in flight are finished first. Other errors ending a pull are logged as
    /// warnings and the source pulls again. Messages not acknowledged are redelivered by
    /// JetStream after ack_wait; run a source again to go on.
    pub async fn run<K, S>(self, sink: K, shutdown: S) -> Result<(), ConsumerError>
    where
        K: Sink,
        S: Future<Output = ()> + Send,
    {
        let slots = Arc::new(Semaphore::new(self.concurrency));
        let mut in_flight = JoinSet::new();
        tokio::pin!(shutdown);
        let result = loop {
            // Reserve every free slot (at least one) and pull that many messages.
            let first = tokio::select! {
                permit = Arc::clone(&slots).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break Ok(()),
                },
                () = &mut shutdown => break Ok(()),
            };
            let mut permits = vec![first];
            while let Ok(permit) = Arc::clone(&slots).try_acquire_owned() {
                permits.push(permit);
            }
            let batch = self
                .pull
                .batch()
                .max_messages(permits.len())
                .expires(PULL_EXPIRY)
                .messages()
                .await;
            let mut batch = match batch {
                Ok(batch) => batch,
                // A pull refused because the consumer is gone is a deletion, not an outage.
                Err(e) => match self.deleted().await {
                    Some(gone) => break Err(gone),
                    None => break Err(ConsumerError::Pull(Box::new(e))),
                },
            };
            // A live consumer ends each pull by PULL_EXPIRY (status 408); one deleted before the
            // pull reached it does not answer at all.
            let silent = tokio::time::sleep(PULL_EXPIRY + PULL_GRACE);
            tokio::pin!(silent);
            // Ok(true): shut down; Ok(false): pull again; Err: stop with that error.
            let stop = loop {
                let next = tokio::select! {
                    next = batch.next() => next,
                    () = &mut shutdown => break Ok(true),
                    () = &mut silent => match self.deleted().await {
                        Some(gone) => break Err(gone),
                        None => break Ok(false),
                    },
                };
                match next {
                    Some(Ok(message)) => {
                        let Some(permit) = permits.pop() else {
                            // More than was asked for: hand it back for another delivery now
                            // rather than after its ack_wait.
                            if let Err(e) = message.ack_with(AckKind::Nak(None)).await {
                                sink.ack_failed(BROKER, &e);
                            }
                            break Ok(false);
                        };
                        in_flight.spawn(handle(
                            sink.clone(),
                            message,
                            self.progress_interval,
                            permit,
                        ));
                    }
                    Some(Err(e)) => {
                        // A consumer deleted while the pull waits answers it with a status (409
                        // "Consumer Deleted"): its info tells that apart from a passing error.
                        if let Some(gone) = self.deleted().await {
                            break Err(gone);
                        }
                        tracing::warn!(consumer = %self.pull.cached_info().name, error = %e, "JetStream pull batch ended with an error; pulling again");
                        break Ok(false);
                    }
                    None => break Ok(false),
                }
                // Reap finished tasks so the set does not grow on a long batch.
                while in_flight.try_join_next().is_some() {}
            };
            drop(permits);
            match stop {
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(e) => break Err(e),
            }
        };
        while in_flight.join_next().await.is_some() {}
        result
    }

    /// [`ConsumerError::Deleted`] when the server says the durable consumer or its stream does
    /// not exist (any other answer, a timeout included, is not taken as a deletion).
    async fn deleted(&self) -> Option<ConsumerError> {
        let gone = self.pull.get_info().await.err().filter(|e| {
            matches!(
                e.kind(),
                ConsumerInfoErrorKind::NotFound | ConsumerInfoErrorKind::StreamNotFound
            )
        })?;
        tracing::error!(consumer = %self.pull.cached_info().name, error = %gone, "JetStream consumer or stream deleted; stopping");
        Some(ConsumerError::Deleted(Box::new(gone)))
    }
}

/// Hands one message to `sink` with in-progress acks while it works, then settles it.
async fn handle<K: Sink>(
    sink: K,
    message: Message,
    progress_interval: Option<Duration>,
    _permit: OwnedSemaphorePermit,
) {
    let delivery = Arc::new(delivery_of(&message));
    if let Ok(info) = message.info() {
        sink.report_lag(info.pending);
    }
    let work = sink.take(Arc::clone(&delivery), BROKER);
    let settle = match progress_interval {
        None => work.await,
        Some(every) => {
            tokio::pin!(work);
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            loop {
                tokio::select! {
                    settle = &mut work => break settle,
                    _ = ticks.tick() => {
                        if let Err(e) = message.ack_with(AckKind::Progress).await {
                            sink.ack_failed(BROKER, &e);
                        }
                    }
                }
            }
        }
    };
    let kind = match settle {
        Settle::Ack => AckKind::Ack,
        Settle::Retry { delay } => AckKind::Nak(Some(delay)),
        Settle::Reject => AckKind::Term,
    };
    if let Err(e) = message.ack_with(kind).await {
        sink.ack_failed(BROKER, &e);
    }
}

/// The broker-neutral view of a JetStream message.
fn delivery_of(message: &Message) -> Delivery {
    let mut headers = Vec::new();
    if let Some(map) = &message.headers {
        for (name, values) in map.iter() {
            for value in values {
                headers.push((name.to_string(), value.as_str().to_owned()));
            }
        }
    }
    let message_id = message
        .headers
        .as_ref()
        .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
        .map(|v| v.as_str().to_owned());
    // A message without JetStream metadata cannot come from a pull consumer; count it as a
    // first delivery rather than refusing it.
    let (delivered, position) = match message.info() {
        Ok(info) => (
            u32::try_from(info.delivered).unwrap_or(u32::MAX),
            format!("stream {} sequence {}", info.stream, info.stream_sequence),
        ),
        Err(_) => (1, format!("subject {}", message.subject)),
    };
    Delivery {
        destination: message.subject.to_string(),
        message_id,
        headers,
        payload: message.payload.clone(),
        delivered,
        message_type: None,
        routing_key: None,
        content_type: None,
        position,
    }
}
