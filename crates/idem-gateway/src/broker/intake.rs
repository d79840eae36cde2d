//! What every broker reader shares: the [`Intake`] that stores a message through ingest's
//! group commit and says what to tell the broker ([`Verdict`]), the redelivery delays, and the
//! pauses a reader waits out until the server stops. The readers import this, never
//! `broker/mod.rs`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use idem_broker::{Delivery, Settle, Sink};
use idem_core::{Backoff, DedupKey, EventId, Name};
use idem_sql::DeadLetterRecord;
use tokio::sync::{mpsc, watch};

use crate::config::Source;
use crate::gateway::{Gateway, INBOX_CONSUMER};
use crate::ingest::answer::Answer;
use crate::ingest::unit::{Incoming, Pending};
use crate::metric_definitions::{BROKER_REJECTED_TOTAL, INGEST_DURATION_SECONDS, INGEST_TOTAL};
use crate::model::fields::{
    AMQP_MESSAGE_ID, AMQP_ROUTING_KEY, AMQP_TYPE, NATS_MSG_ID, NATS_SUBJECT,
};
use crate::store::GatewayDb;

/// The delay before a message that could not be stored is delivered again: 1 s, doubled per
/// delivery, at most 60 s.
const RETRY_BACKOFF: Backoff =
    Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60));
/// The pause before connecting again after a broker connection or consumer failed.
pub(crate) const RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// The delay before delivery number `delivered + 1` of a message whose delivery number
/// `delivered` (1, 2, …) could not be stored.
pub(crate) fn retry_delay(delivered: u64) -> Duration {
    RETRY_BACKOFF.delay(u32::try_from(delivered).unwrap_or(u32::MAX))
}

/// What to tell the broker about one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Stored now or before (C3): acknowledge.
    Ack(Answer),
    /// Never an event, and recorded as a dead letter: terminate (NATS) or reject without
    /// requeue (RabbitMQ).
    Reject,
    /// Not stored: deliver again after a delay.
    Retry,
}

/// One message as a broker delivered it, as the gateway's fields read it.
struct Message {
    /// Its headers, with the pseudo-headers of its properties (which win over application
    /// headers of the same name).
    headers: HeaderMap,
    body: Bytes,
    /// The subject (NATS) or queue (RabbitMQ) it came from, for the dead letter.
    origin: String,
    /// Where it sits in the broker, for log lines (`stream ORDERS sequence 12`).
    position: String,
    /// The broker's delivery count, this delivery included (1 when the broker does not say).
    delivered: u64,
}

impl Message {
    /// `delivery` with its broker properties as pseudo-headers: [`NATS_SUBJECT`] on JetStream;
    /// [`AMQP_MESSAGE_ID`], [`AMQP_TYPE`], [`AMQP_ROUTING_KEY`] and `content-type` on RabbitMQ.
    /// Headers HTTP cannot carry are left out (an id read from one is then missing, which is
    /// reported as such).
    fn of(delivery: &Delivery, broker: &str) -> Self {
        let mut headers = HeaderMap::new();
        for (name, value) in &delivery.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                headers.append(name, value);
            }
        }
        let mut set = |name: &'static str, value: Option<&str>| {
            if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
                headers.insert(HeaderName::from_static(name), value);
            }
        };
        if broker == "jetstream" {
            set(NATS_SUBJECT, Some(&delivery.destination));
        } else {
            set(AMQP_MESSAGE_ID, delivery.message_id.as_deref());
            set(AMQP_TYPE, delivery.message_type.as_deref());
            set(AMQP_ROUTING_KEY, delivery.routing_key.as_deref());
            set("content-type", delivery.content_type.as_deref());
        }
        Self {
            headers,
            body: delivery.payload.clone(),
            origin: delivery.destination.clone(),
            position: delivery.position.clone(),
            delivered: u64::from(delivery.delivered),
        }
    }
}

/// What a broker source's reader needs to store messages: the gateway, its group-commit queue
/// and the source. It is the sink of idem-broker's [`JetStreamSource`](idem_broker::JetStreamSource)
/// and [`RabbitMqSource`](idem_broker::RabbitMqSource).
pub(crate) struct Intake<DB: GatewayDb> {
    pub(super) gateway: Gateway<DB>,
    pub(super) queue: Option<mpsc::Sender<Pending>>,
    pub(super) index: usize,
    /// The source's settings, as they were when the reader started (a reload refuses any
    /// change to a broker source).
    pub(super) source: Arc<Source>,
    /// Turns true at shutdown: a message that could not be stored is then handed back at once.
    stopped: watch::Receiver<bool>,
}

impl<DB: GatewayDb> Intake<DB> {
    /// The intake of source `index` of `gateway`, submitting to `queue` (none: each message
    /// commits alone) until `stopped`.
    pub(super) fn new(
        gateway: Gateway<DB>,
        queue: Option<mpsc::Sender<Pending>>,
        index: usize,
        stopped: watch::Receiver<bool>,
    ) -> Self {
        let source = Arc::new(gateway.wiring().source(index).clone());
        Self {
            gateway,
            queue,
            index,
            source,
            stopped,
        }
    }
}

impl<DB: GatewayDb> Clone for Intake<DB> {
    fn clone(&self) -> Self {
        Self {
            gateway: self.gateway.clone(),
            queue: self.queue.clone(),
            index: self.index,
            source: Arc::clone(&self.source),
            stopped: self.stopped.clone(),
        }
    }
}

impl<DB: GatewayDb> Sink for Intake<DB> {
    async fn take(&self, delivery: Arc<Delivery>, broker: &'static str) -> Settle {
        let message = Message::of(&delivery, broker);
        match Intake::take(self, &message).await {
            Verdict::Ack(_) => Settle::Ack,
            Verdict::Reject => Settle::Reject,
            // On shutdown, hand it back at once: another gateway may take it.
            Verdict::Retry if *self.stopped.borrow() => Settle::Retry {
                delay: Duration::ZERO,
            },
            Verdict::Retry => Settle::Retry {
                delay: retry_delay(message.delivered),
            },
        }
    }

    fn ack_failed(&self, broker: &'static str, error: &dyn fmt::Display) {
        // Stored already, or not at all: the redelivered copy is acked as a duplicate, or
        // stored then.
        tracing::warn!(source = %self.source_name(), broker, %error, "ack to the broker failed; the message comes again");
    }
}

impl<DB: GatewayDb> Intake<DB> {
    /// The source's name, for logs.
    pub(super) fn source_name(&self) -> &Name {
        &self.source.name
    }

    /// Reads the event of `message`, commits it, and says what to tell the broker.
    async fn take(&self, message: &Message) -> Verdict {
        let started = Instant::now();
        let source = &*self.source;
        let limit = self.gateway.config().max_body_bytes;
        let extracted = if message.body.len() > limit {
            Err((
                "body-too-large",
                format!(
                    "the body is {} bytes, more than max_body_bytes = {limit}; the dead letter keeps its first {limit} bytes",
                    message.body.len()
                ),
            ))
        } else {
            source
                .fields
                .extract(&message.headers, &message.body)
                .map_err(|e| (e.code(), e.to_string()))
        };
        let (verdict, status) = match extracted {
            Ok(event) => {
                let incoming = Incoming {
                    source: self.index,
                    key: DedupKey::from_event(&source.dedup_scope, &event.event_id),
                    event,
                    body: message.body.clone(),
                    received_at: self.gateway.now().as_millis(),
                    // Broker messages are not traced at ingest.
                    trace: None,
                    span: tracing::Span::none(),
                    filtered: Vec::new(),
                };
                match crate::ingest::submit(&self.gateway, self.queue.as_ref(), incoming).await {
                    Ok(Answer::Accepted) => (Verdict::Ack(Answer::Accepted), "accepted"),
                    Ok(Answer::Duplicate) => (Verdict::Ack(Answer::Duplicate), "duplicate"),
                    // The batch's error was logged once; each message is retried on its own.
                    Err(_) => (Verdict::Retry, "unavailable"),
                }
            }
            Err((reason, detail)) => (self.reject(message, reason, detail).await, "rejected"),
        };
        let source = self.source_name().to_string();
        metrics::counter!(INGEST_TOTAL, "source" => source.clone(), "status" => status)
            .increment(1);
        metrics::histogram!(INGEST_DURATION_SECONDS, "source" => source)
            .record(started.elapsed().as_secs_f64());
        verdict
    }

    /// Records `message` as a dead letter, logs and counts it: [`Verdict::Reject`]; or, when the
    /// row cannot be written, [`Verdict::Retry`] (never dropped unrecorded). The stored payload
    /// is at most `max_body_bytes` long (an oversize body is cut there, its length in the
    /// error), so a broker cannot write more into the database than a webhook can.
    async fn reject(&self, message: &Message, reason: &'static str, detail: String) -> Verdict {
        let source = self.source_name();
        let kept = message.body.len().min(self.gateway.config().max_body_bytes);
        let headers: Vec<(String, String)> = message
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect();
        let event_id = message
            .headers
            .get(id_header(self.source.kind))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Keyed as the inbox keys events, so a copy of the message that arrives again (a
        // publisher's retry) updates its row instead of adding one; a message without a usable
        // id cannot be told from another, so it gets a row each time.
        let dedup_key = event_id
            .as_deref()
            .and_then(|id| EventId::new(id).ok())
            .map(|id| DedupKey::from_event(&self.source.dedup_scope, &id));
        let letter = DeadLetterRecord {
            consumer: Name::new("consumer", INBOX_CONSUMER).expect("a valid name"),
            source: source.clone(),
            event_id,
            dedup_key,
            entity: None,
            destination: message.origin.clone(),
            headers,
            payload: message.body[..kept].to_vec(),
            error: format!("{reason}: {detail}"),
            delivery_count: u32::try_from(message.delivered).unwrap_or(u32::MAX),
        };
        match self.gateway.store().dead_letters().record(&letter).await {
            Ok(id) => {
                tracing::warn!(
                    %source, position = %message.position, reason, %detail, dead_letter = id,
                    "broker message is not an event; kept as a dead letter and not delivered again"
                );
                metrics::counter!(BROKER_REJECTED_TOTAL, "source" => source.to_string(), "reason" => reason)
                    .increment(1);
                Verdict::Reject
            }
            Err(error) => {
                tracing::error!(
                    %source, position = %message.position, reason, %detail, %error,
                    "broker message is not an event, and its dead letter cannot be written; delivered again later"
                );
                Verdict::Retry
            }
        }
    }
}

/// The header a broker kind's event id is read from by default, for dead letters (Kafka writes
/// its own).
fn id_header(kind: crate::SourceKind) -> &'static str {
    if kind == crate::SourceKind::RabbitMq {
        AMQP_MESSAGE_ID
    } else {
        NATS_MSG_ID
    }
}

/// Waits `delay`, or less if `stopped` turns true first. Returns whether it was stopped.
pub(crate) async fn pause(delay: Duration, stopped: &watch::Receiver<bool>) -> bool {
    let mut stop = stopped.clone();
    tokio::select! {
        () = tokio::time::sleep(delay) => {}
        () = until_stopped(&mut stop) => {}
    }
    *stopped.borrow()
}

/// Returns once `stop` turns true (or its sender is gone, which only happens at shutdown).
pub(crate) async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is dropped here, never held across an await.
    let _ = stop.wait_for(|stop| *stop).await.map(|_| ());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_up_to_a_minute() {
        let delays: Vec<u64> = [1, 2, 3, 4, 7, 8, 1000, u64::MAX]
            .into_iter()
            .map(|n| retry_delay(n).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 60, 60, 60, 60]);
        assert_eq!(retry_delay(0), Duration::from_secs(1));
    }
}
