//! The destination seam: every attempt goes through a [`Transport`] and comes back as an
//! [`Attempted`], success, retryable failure or permanent failure, whatever carried it. Claims,
//! the hand-off, entity order, the retry schedule and the outcome writes see only this; HTTP
//! ([`send`](super::send)) is today's one transport, and a broker destination (NATS, RabbitMQ,
//! Kafka) is one more variant here and a module of its own.

use idem_core::Timestamp;

use super::attempted::Attempted;
use super::send;
use crate::config::Destination;
use crate::store::DueDelivery;
use crate::traces::TraceHeaders;

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
