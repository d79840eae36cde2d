//! What kind of consumer a registry row is.

use std::fmt;
use std::str::FromStr;

use crate::Error;

/// What kind of consumer a name in the registry (`idem_consumers`) belongs to.
///
/// Stored and serialized as [`as_str`](Self::as_str) (`runner`, `jetstream`, …); parsed back
/// with [`FromStr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConsumerKind {
    /// A [`Runner`](crate::Runner) of the application's own (the least specific kind).
    Runner,
    /// idem-broker's NATS JetStream consumer.
    Jetstream,
    /// idem-broker's RabbitMQ consumer.
    Rabbitmq,
    /// idem-broker's Kafka consumer.
    Kafka,
    /// A gateway's webhook (or broker) source.
    GatewaySource,
    /// A gateway's destination.
    GatewayDestination,
    /// An [`EffectWorker`](crate::EffectWorker).
    EffectWorker,
    /// An outbox relay.
    Relay,
    /// The Idempotency-Key layer (crate idem-idempotency).
    IdempotencyKey,
    /// An effects scope of a consumer lineage that is no consumer's own name (back-filled from
    /// `idem_consumer_lineage`).
    Lineage,
}

impl ConsumerKind {
    /// Every kind, in the order of the enum.
    pub const ALL: [ConsumerKind; 10] = [
        Self::Runner,
        Self::Jetstream,
        Self::Rabbitmq,
        Self::Kafka,
        Self::GatewaySource,
        Self::GatewayDestination,
        Self::EffectWorker,
        Self::Relay,
        Self::IdempotencyKey,
        Self::Lineage,
    ];

    /// The stored name: `runner`, `jetstream`, `rabbitmq`, `kafka`, `gateway_source`,
    /// `gateway_destination`, `effect_worker`, `relay`, `idempotency_key` or `lineage`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Runner => "runner",
            Self::Jetstream => "jetstream",
            Self::Rabbitmq => "rabbitmq",
            Self::Kafka => "kafka",
            Self::GatewaySource => "gateway_source",
            Self::GatewayDestination => "gateway_destination",
            Self::EffectWorker => "effect_worker",
            Self::Relay => "relay",
            Self::IdempotencyKey => "idempotency_key",
            Self::Lineage => "lineage",
        }
    }

    /// Whether a registration of `self` replaces a registered `other` for the same name: any
    /// kind replaces [`ConsumerKind::Runner`] (a JetStream consumer's runner is a JetStream
    /// consumer), nothing else is replaced.
    pub(crate) fn overrides(self, other: ConsumerKind) -> bool {
        other == Self::Runner && self != Self::Runner
    }
}

impl fmt::Display for ConsumerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ConsumerKind {
    type Err = Error;

    /// Parses a stored name ([`as_str`](ConsumerKind::as_str)).
    ///
    /// # Errors
    /// [`Error::UnknownConsumerKind`] ([`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)) naming the text and the kinds
    /// expected.
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| Error::UnknownConsumerKind {
                found: s.to_owned(),
                expected: Self::ALL.map(Self::as_str).join(", "),
            })
    }
}
