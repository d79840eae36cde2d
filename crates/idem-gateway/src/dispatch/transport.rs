//! The destination seam: every attempt goes through a [`Transport`] and comes back as an
//! [`Attempted`], success, retryable failure or permanent failure, whatever carried it. Claims,
//! the hand-off, entity order, the retry schedule and the outcome writes see only this: HTTP
//! ([`send`](super::send)), NATS JetStream ([`nats`](super::nats)), RabbitMQ
//! ([`rabbitmq`](super::rabbitmq)) and Kafka ([`kafka`](super::kafka)), one module each.
//!
//! A broker destination holds one connection, made at start (so that `idem serve` refuses a
//! server, stream, exchange or topic it cannot reach or find), reconnected by its client when
//! lost, and closed when the dispatcher stops. One publish is bounded by the destination's
//! `timeout`.

use std::sync::Arc;

use idem_core::Timestamp;

use super::attempted::Attempted;
use super::kafka::KafkaTarget;
use super::message::{Message, failed};
use super::nats::NatsTarget;
use super::rabbitmq::RabbitMqTarget;
use super::send;
use crate::config::{Destination, DestinationTarget};
use crate::store::DueDelivery;
use crate::traces::TraceHeaders;

/// Where a destination's attempts go. Cheap to clone.
#[derive(Clone)]
pub(crate) enum Transport {
    /// A POST to the destination's URL with idem's headers and a Standard Webhooks signature.
    Http(send::Endpoint),
    /// A JetStream publish to the destination's subject.
    Nats(Arc<NatsTarget>),
    /// A confirmed publish to the destination's RabbitMQ exchange.
    RabbitMq(Arc<RabbitMqTarget>),
    /// A record produced to the destination's Kafka topic.
    Kafka(Arc<KafkaTarget>),
}

impl Transport {
    /// The transport of `destination`: over `client` for HTTP (nothing is contacted); for a
    /// broker, its connection, with the stream, exchange or topic checked.
    ///
    /// # Errors
    /// Why a broker destination cannot start, naming the server, stream, exchange or topic.
    pub(crate) async fn connect(
        destination: &Destination,
        client: reqwest::Client,
    ) -> Result<Self, String> {
        let url = destination.url.as_str();
        Ok(match &destination.target {
            DestinationTarget::Nats { subject } => Self::Nats(Arc::new(
                NatsTarget::connect(url, subject, destination.timeout).await?,
            )),
            DestinationTarget::RabbitMq {
                exchange,
                routing_key,
            } => Self::RabbitMq(Arc::new(
                RabbitMqTarget::connect(url, exchange, routing_key.as_deref()).await?,
            )),
            DestinationTarget::Kafka { bootstrap, topic } => {
                Self::Kafka(Arc::new(KafkaTarget::connect(bootstrap, topic).await?))
            }
            // Any other kind is HTTP (the enum may grow; the configuration makes no other).
            _ => Self::Http(send::Endpoint::new(client, url)),
        })
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
        if let Self::Http(endpoint) = self {
            return send::attempt(endpoint, destination, delivery, attempt, now, trace).await;
        }
        let message = match Message::of(destination, delivery, attempt, trace) {
            Ok(message) => message,
            Err(unsendable) => return unsendable,
        };
        let published = async {
            match self {
                Self::Nats(nats) => nats.publish(message, now).await,
                Self::RabbitMq(rabbit) => rabbit.publish(message, now).await,
                Self::Kafka(kafka) => kafka.publish(message, now).await,
                // Sent above.
                Self::Http(_) => Attempted::unsendable("not a broker destination".into()),
            }
        };
        match tokio::time::timeout(destination.timeout, published).await {
            Ok(attempted) => attempted,
            Err(_) => failed(&format!(
                "timed out: no confirm from the {} broker within {:?} (timeout)",
                destination.target.kind(),
                destination.timeout
            )),
        }
    }

    /// Closes a broker destination's connection (nothing for HTTP): when its dispatcher stops.
    pub(crate) async fn close(&self) {
        match self {
            Self::Http(_) | Self::Kafka(_) => {}
            Self::Nats(nats) => nats.close().await,
            Self::RabbitMq(rabbit) => rabbit.close().await,
        }
    }
}
