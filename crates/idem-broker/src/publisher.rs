//! The [`Publisher`] trait: what a relay needs from a broker or an HTTP endpoint.

use std::future::Future;
use std::time::Duration;

use idem_sql::OutboxRow;

/// What happened to one message of a batch handed to [`Publisher::publish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// The broker confirmed a new copy (JetStream publish ack, RabbitMQ confirm `basic.ack`,
    /// HTTP 2xx). The relay marks the row published.
    Published,
    /// The broker confirmed the message as a copy of one it already has under the same
    /// message id (JetStream's publish ack with `duplicate: true`). The relay marks the row
    /// published and counts a duplicate.
    Duplicate,
    /// Not now: the destination said the message id is in flight (HTTP 409 for an
    /// `Idempotency-Key` being processed). The relay puts the row off until the later of
    /// `after` and the outbox policy's backoff, and counts an attempt
    /// ([`Outbox::defer`](idem_sql::Outbox::defer)), so that a destination that answers "not
    /// now" forever gets the row parked after the policy's `max_attempts`.
    RetryLater {
        /// Why, for the row's `last_error` and the logs.
        reason: String,
        /// How long the destination asked to wait before the next attempt.
        after: Duration,
    },
    /// The message was not confirmed (refused, unroutable, nacked, timed out, connection
    /// lost). The relay counts an attempt: backoff, then park after the outbox's
    /// `max_attempts`. A message that failed may still have reached the broker (a lost
    /// confirm), which is why every publish carries the row's stable message id.
    Failed {
        /// Why, for the row's `last_error` and the logs.
        reason: String,
    },
    /// The destination could not be reached at all (no connection, and connecting again
    /// failed): nothing about this row is known to be wrong. The relay records nothing for it
    /// (no attempt counted: the row is released when its claim expires, or at once when held
    /// by lock) and backs off as after a failed cycle, so a broker outage never parks rows.
    Unavailable {
        /// Why, for the logs.
        reason: String,
    },
}

/// Publishes batches of outbox rows, each with its row's stable message id (docs/design.md C7):
/// NATS `Nats-Msg-Id`, AMQP `message_id`, HTTP `Idempotency-Key`.
///
/// Implemented by [`JetStreamPublisher`](crate::JetStreamPublisher),
/// [`RabbitMqPublisher`](crate::RabbitMqPublisher) and [`HttpPublisher`](crate::HttpPublisher).
pub trait Publisher: Send + Sync {
    /// Publishes `batch` and waits for the destination's confirmations. Returns one
    /// [`PublishOutcome`] per row, in the order of `batch`. Never fails as a whole: a
    /// connection problem is a [`PublishOutcome::Unavailable`] (destination unreachable) or a
    /// [`PublishOutcome::Failed`] (a confirm lost with it) for each row it affected.
    fn publish(&self, batch: &[OutboxRow]) -> impl Future<Output = Vec<PublishOutcome>> + Send;
}

/// A publisher that could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PublisherError {
    /// RabbitMQ: the connection or the confirm-mode channel could not be opened.
    #[cfg(feature = "rabbitmq")]
    #[error("RabbitMQ: {0}")]
    Amqp(#[from] lapin::Error),
    /// The HTTP client could not be built (for example no TLS backend for an `https` URL).
    #[cfg(feature = "http")]
    #[error("HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// What kind of [`PublisherError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PublisherErrorKind {
    /// The broker could not be reached or refused the channel: try again later.
    Unavailable,
    /// The publisher cannot be built as asked (an HTTP client without a TLS backend for an
    /// `https` URL): fix the setting.
    InvalidConfig,
}

impl PublisherError {
    /// The kind of this error.
    pub fn kind(&self) -> PublisherErrorKind {
        match *self {
            #[cfg(feature = "rabbitmq")]
            Self::Amqp(_) => PublisherErrorKind::Unavailable,
            #[cfg(feature = "http")]
            Self::Http(_) => PublisherErrorKind::InvalidConfig,
        }
    }
}
