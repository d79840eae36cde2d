//! Publishing outbox rows to NATS JetStream with `Nats-Msg-Id`.

use std::str::FromStr;

use async_nats::jetstream::{self, context::PublishAckFuture, message::PublishMessage};
use async_nats::{HeaderMap, HeaderName};
use bytes::Bytes;
use idem_sql::OutboxRow;

use crate::publisher::{PublishOutcome, Publisher};

/// The header JetStream deduplicates on.
const NATS_MSG_ID: &str = "Nats-Msg-Id";

/// Publishes outbox rows to NATS JetStream: the row's destination is the subject, the row's
/// message id goes in the `Nats-Msg-Id` header, and the row's headers go along as NATS headers.
///
/// A stream drops a message whose `Nats-Msg-Id` it has seen within its duplicate window
/// (`duplicate_window`, 2 minutes by default) and answers with a publish ack whose
/// `duplicate` flag is set, counted as [`PublishOutcome::Duplicate`]; see
/// <https://docs.nats.io/using-nats/developer/develop_jetstream/model_deep_dive#message-deduplication>.
/// A copy republished after the window is stored again: JetStream's deduplication is an
/// optimisation, and the consumer's inbox (idem's claim on the message id) remains the
/// guarantee of one effect per message.
///
/// The destination must be a literal subject: tokens separated by `.`, none empty, without
/// whitespace or control characters and without the wildcards `*` and `>` (NATS subject naming,
/// <https://docs.nats.io/nats-concepts/subjects#characters-allowed-and-recommended-for-subject-names>).
/// A row with another destination is [`PublishOutcome::Failed`] without being sent: a publish to
/// `orders.>` is not a message to every `orders` subject, and the server may still take it.
///
/// A batch is pipelined: every message is sent before any ack is awaited, then the acks are
/// collected in order. The context's ack timeout (5 s unless set with
/// `ContextBuilder::timeout`) bounds each wait.
#[derive(Debug, Clone)]
pub struct JetStreamPublisher {
    context: jetstream::Context,
}

impl JetStreamPublisher {
    /// A publisher on `context` (`async_nats::jetstream::new(client)`). The streams that take
    /// the relay's subjects must exist; a subject no stream takes fails with "no stream found"
    /// (no responders).
    pub fn new(context: jetstream::Context) -> Self {
        Self { context }
    }

    async fn send(&self, row: &OutboxRow) -> Result<PublishAckFuture, String> {
        literal_subject(&row.destination)?;
        let mut headers = HeaderMap::new();
        for (name, value) in &row.headers {
            if name.eq_ignore_ascii_case(NATS_MSG_ID) {
                continue;
            }
            // Checked here too (enqueue checks them): async-nats panics on a bad name, and a
            // line break in a value would break the protocol.
            let name = HeaderName::from_str(name)
                .map_err(|e| format!("header name {name:?} cannot be sent to NATS: {e}"))?;
            if value.chars().any(char::is_control) {
                return Err(format!("header {name} has a control character"));
            }
            headers.append(name, value.as_str());
        }
        let message = PublishMessage::build()
            .payload(Bytes::copy_from_slice(&row.payload))
            .headers(headers)
            .message_id(row.message_id.as_str());
        self.context
            .send_publish(row.destination.clone(), message)
            .await
            .map_err(|e| format!("publish to {}: {e}", row.destination))
    }
}

/// Checks that `subject` is a literal NATS subject to publish to (see [`JetStreamPublisher`]):
/// dot-separated tokens, none empty, no whitespace or control character, no wildcard.
///
/// # Errors
/// What is wrong with it, naming it.
pub fn literal_subject(subject: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("subject {subject:?} cannot be published to: {why}"));
    if subject.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return refuse("it has whitespace or a control character");
    }
    if subject.contains(['*', '>']) {
        return refuse("it has a wildcard ('*' or '>'); publish to a literal subject");
    }
    if subject.split('.').any(str::is_empty) {
        return refuse("it has an empty token (empty, a leading or trailing '.', or '..')");
    }
    Ok(())
}

impl Publisher for JetStreamPublisher {
    async fn publish(&self, batch: &[OutboxRow]) -> Vec<PublishOutcome> {
        let mut pending = Vec::with_capacity(batch.len());
        for row in batch {
            pending.push(self.send(row).await);
        }
        let mut outcomes = Vec::with_capacity(batch.len());
        for (row, sent) in batch.iter().zip(pending) {
            let outcome = match sent {
                Err(reason) => PublishOutcome::Failed { reason },
                Ok(ack) => match ack.await {
                    Ok(ack) if ack.duplicate => PublishOutcome::Duplicate,
                    Ok(_) => PublishOutcome::Published,
                    Err(e) => PublishOutcome::Failed {
                        reason: format!("publish ack for {}: {e}", row.destination),
                    },
                },
            };
            outcomes.push(outcome);
        }
        outcomes
    }
}
