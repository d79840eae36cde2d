//! The destination seam: every attempt goes through a [`Transport`] and comes back as an
//! [`Attempted`], success, retryable failure or permanent failure, whatever carried it. Claims,
//! the hand-off, entity order, the retry schedule and the outcome writes see only this; HTTP
//! ([`send`](super::send)) is today's one transport, and a broker destination (NATS, RabbitMQ,
//! Kafka) is one more variant here and a module of its own.

use std::time::Duration;

use idem_core::Timestamp;

use super::send;
use crate::config::Destination;
use crate::store::DueDelivery;
use crate::traces::TraceHeaders;

/// How one attempt ended, whatever the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptResult {
    /// The destination took the event (HTTP: 2xx).
    Delivered,
    /// It failed, and another attempt may succeed: retried on the schedule.
    Retryable,
    /// It failed, and no attempt can succeed (HTTP: a 4xx that is not "not now", or a delivery
    /// that cannot be sent): a dead letter at once.
    Permanent,
}

/// How an attempt went: its result, with what the attempts table records of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempted {
    /// Delivered, or failed for now or for good.
    pub result: AttemptResult,
    /// The transport's status code when it has one (HTTP: the status); `None` when no answer
    /// came (timeout, refused connection) or the transport has none.
    pub status: Option<u16>,
    /// The start of the answer, or why it failed.
    pub excerpt: String,
    /// How long the destination asked to wait before the next attempt (HTTP: `Retry-After` of
    /// a 429 or 503, in whole seconds), where the transport has such a thing.
    pub retry_after: Option<Duration>,
}

impl Attempted {
    /// A delivery that cannot be sent, for `reason`: no attempt can succeed.
    pub(crate) fn unsendable(reason: String) -> Self {
        Self {
            result: AttemptResult::Permanent,
            status: None,
            excerpt: reason,
            retry_after: None,
        }
    }
}

/// Where a destination's attempts go. Cheap to clone.
#[derive(Clone)]
pub(crate) enum Transport {
    /// A POST to the destination's URL with idem's headers and a Standard Webhooks signature.
    Http(send::Endpoint),
}

impl Transport {
    /// The transport of `destination`, over `client` for HTTP.
    pub(crate) fn of(destination: &Destination, client: reqwest::Client) -> Self {
        Self::Http(send::Endpoint::new(client, &destination.url))
    }

    /// Sends attempt number `attempt` of `delivery` to `destination` at `now`, in the trace of
    /// `trace`.
    pub(crate) async fn attempt(
        &self,
        destination: &Destination,
        delivery: &DueDelivery,
        attempt: i64,
        now: Timestamp,
        trace: Option<&TraceHeaders>,
    ) -> Attempted {
        match self {
            Self::Http(endpoint) => {
                send::attempt(endpoint, destination, delivery, attempt, now, trace).await
            }
        }
    }
}
