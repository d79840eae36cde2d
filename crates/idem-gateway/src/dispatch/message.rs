//! What a broker destination publishes for one attempt: the event's raw body unchanged, the
//! delivery's `webhook-id` as the message id, the entity (or event id) as the key, and as
//! message headers what the HTTP transport sends but the signature: the forwarded headers,
//! `Content-Type`, `Idempotency-Key`, the `Idem-*` headers and the trace context.

use idem_core::Timestamp;
use idem_sql::{MessageId, OutboxRow, OutboxStatus};

use super::attempted::{AttemptResult, Attempted};
use super::send::{
    self, ATTEMPT, EVENT_ID, EVENT_TYPE, IDEMPOTENCY_KEY, REPLAY, SOURCE, VERSION_TIE,
};
use crate::config::Destination;
use crate::model::forwarded::ForwardedHeaders;
use crate::store::DueDelivery;
use crate::traces::TraceHeaders;

/// The most characters of a failure's reason kept as an attempt's excerpt.
const EXCERPT_CHARS: usize = 256;

/// idem's own headers, as the operator reference spells them (a broker's headers are
/// case-sensitive, unlike HTTP's): these names go out in this case, every other header (the
/// forwarded ones, `traceparent`) as it is stored, in lower case.
const SPELLED: [(&str, &str); 8] = [
    (IDEMPOTENCY_KEY, "Idempotency-Key"),
    (EVENT_ID, "Idem-Event-Id"),
    (SOURCE, "Idem-Source"),
    (ATTEMPT, "Idem-Attempt"),
    (EVENT_TYPE, "Idem-Event-Type"),
    (VERSION_TIE, "Idem-Version-Tie"),
    (REPLAY, "Idem-Replay"),
    ("content-type", "Content-Type"),
];

/// One attempt's message, whatever the broker.
pub(super) struct Message {
    /// The delivery's `webhook-id`: `Nats-Msg-Id`, AMQP `message_id`, Kafka `idem-message-id`.
    pub id: String,
    /// The entity (`type:id`) whose order the delivery keeps, else the event id: the Kafka
    /// record key.
    pub key: String,
    /// The event's type, when it has one.
    pub event_type: Option<String>,
    /// The source's name.
    pub source: String,
    /// The raw body, byte for byte as it arrived.
    pub body: Vec<u8>,
    /// The message headers, in order.
    pub headers: Vec<(String, String)>,
}

impl Message {
    /// The message of attempt number `attempt` of `delivery` to `destination`, in the trace of
    /// `trace`.
    ///
    /// # Errors
    /// An [`Attempted::unsendable`] when no attempt can succeed: the raw body was dropped
    /// (`body_retention`) or the stored headers cannot be read.
    pub(super) fn of(
        destination: &Destination,
        delivery: &DueDelivery,
        attempt: i64,
        trace: Option<&TraceHeaders>,
    ) -> Result<Self, Attempted> {
        let Some(body) = delivery.body.0.as_deref().map(<[u8]>::to_vec) else {
            return Err(Attempted::unsendable(
                "the raw body was dropped by body_retention; it cannot be sent".into(),
            ));
        };
        let stored = ForwardedHeaders::from_json(&delivery.headers)
            .map_err(|e| Attempted::unsendable(e.to_string()))?;
        let headers = send::unsigned_headers(delivery, &stored, attempt, trace)
            .map_err(Attempted::unsendable)?;
        let headers = headers
            .iter()
            .map(|(name, value)| {
                let name = SPELLED
                    .iter()
                    .find(|(lower, _)| *lower == name.as_str())
                    .map_or_else(
                        || name.as_str().to_owned(),
                        |(_, spelled)| (*spelled).to_owned(),
                    );
                // Visible ASCII by construction (stored and written headers are checked).
                (name, value.to_str().unwrap_or_default().to_owned())
            })
            .collect();
        Ok(Self {
            id: send::delivery_webhook_id(delivery, destination),
            key: delivery
                .entity
                .clone()
                .unwrap_or_else(|| delivery.event_id.clone()),
            event_type: delivery.event_type.clone(),
            source: delivery.source.clone(),
            body,
            headers,
        })
    }

    /// The message as an outbox row to `destination` (a subject, `exchange/routing_key`), the
    /// form idem-broker's publishers take; `now` stamps it.
    ///
    /// # Errors
    /// An [`Attempted::unsendable`] when the id is no message id (it always is: `msg_` and hex).
    pub(super) fn into_row(
        self,
        destination: String,
        now: Timestamp,
    ) -> Result<OutboxRow, Attempted> {
        let message_id = MessageId::new(self.id)
            .map_err(|e| Attempted::unsendable(format!("message id: {e}")))?;
        Ok(OutboxRow {
            seq: 0,
            message_id,
            destination,
            aggregate: None,
            headers: self.headers,
            payload: self.body,
            status: OutboxStatus::Pending,
            attempts: 0,
            next_attempt_at: now,
            claim: None,
            last_error: None,
            created_at: now,
            published_at: None,
        })
    }
}

/// A publish the broker confirmed, with what the attempts table keeps of it.
pub(super) fn delivered(excerpt: String) -> Attempted {
    Attempted {
        result: AttemptResult::Delivered,
        status: None,
        excerpt,
        retry_after: None,
    }
}

/// A publish that failed for `reason` (refused, unroutable, no stream or topic, unreachable,
/// timed out): retried on the destination's schedule, like an HTTP 5xx.
pub(super) fn failed(reason: &str) -> Attempted {
    Attempted {
        result: AttemptResult::Retryable,
        status: None,
        excerpt: reason.chars().take(EXCERPT_CHARS).collect(),
        retry_after: None,
    }
}
