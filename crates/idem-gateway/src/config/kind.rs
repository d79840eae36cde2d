//! The senders the gateway knows how to verify and read.

use std::fmt;
use std::time::Duration;

use idem_core::horizon;

/// A Kafka source's `redelivery_horizon` without the key: 7 days, Kafka's default topic
/// retention (`log.retention.hours = 168`, <https://kafka.apache.org/documentation/#brokerconfigs_log.retention.hours>).
pub const DEFAULT_KAFKA_REDELIVERY_HORIZON: Duration = Duration::from_secs(7 * 24 * 3600);

/// The senders the gateway knows how to verify and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceKind {
    /// Stripe: `Stripe-Signature`, event id `$.id`, entity `data.object`, version `$.created`.
    Stripe,
    /// GitHub: `X-Hub-Signature-256`, event id `X-GitHub-Delivery`, type `X-GitHub-Event`.
    GitHub,
    /// Shopify: `X-Shopify-Hmac-Sha256`, event id `X-Shopify-Event-Id` (else
    /// `X-Shopify-Webhook-Id`), type `X-Shopify-Topic`.
    Shopify,
    /// Standard Webhooks: `webhook-signature` (v1, v1a), event id `webhook-id`, type `$.type`.
    StandardWebhooks,
    /// A shared-secret HMAC of the body in a configured header; fields as configured.
    Generic,
    /// NATS JetStream messages from a stream (no signature: the broker's own authentication
    /// stands for it); event id `Nats-Msg-Id`, type the message's subject.
    Nats,
    /// RabbitMQ messages from a queue (no signature); event id the AMQP `message_id`
    /// property, type the AMQP `type` property, else the routing key.
    RabbitMq,
    /// Kafka records from a topic (no signature), read through idem leases with the partition
    /// offsets stored in the ingest commit; event id the `idem-message-id` header (else the
    /// record's `{topic}/{partition}@{offset}`), type the topic.
    Kafka,
}

impl SourceKind {
    /// The sender's headers of this kind kept with each event and forwarded with it, beyond
    /// those its fields read (docs/gateway.md "Headers sent to a destination"): what a receiving
    /// application reads to tell which hook, installation or shop sent it. Never a signature,
    /// credential, cookie or connection header. Lower case; Shopify's in both the `X-` and the
    /// unprefixed form it sends.
    pub fn sender_headers(self) -> &'static [&'static str] {
        match self {
            Self::GitHub => &[
                "x-github-hook-id",
                "x-github-hook-installation-target-id",
                "x-github-hook-installation-target-type",
                "x-github-event",
                "x-github-delivery",
            ],
            Self::Shopify => &[
                "x-shopify-shop-domain",
                "shopify-shop-domain",
                "x-shopify-topic",
                "shopify-topic",
                "x-shopify-api-version",
                "shopify-api-version",
            ],
            _ => &[],
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "stripe" => Self::Stripe,
            "github" => Self::GitHub,
            "shopify" => Self::Shopify,
            "standard-webhooks" => Self::StandardWebhooks,
            "generic" => Self::Generic,
            "nats" => Self::Nats,
            "rabbitmq" => Self::RabbitMq,
            "kafka" => Self::Kafka,
            _ => return None,
        })
    }

    /// The kind as written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::GitHub => "github",
            Self::Shopify => "shopify",
            Self::StandardWebhooks => "standard-webhooks",
            Self::Generic => "generic",
            Self::Nats => "nats",
            Self::RabbitMq => "rabbitmq",
            Self::Kafka => "kafka",
        }
    }

    /// How long after the first delivery this sender may deliver an event again: the shortest
    /// retention allowed. Generic senders are held to 3 days, like the named ones; so are
    /// brokers, whose horizon is really the stream's or queue's own retention (a JetStream
    /// consumer reset to an older sequence delivers every message again): keep `retention`
    /// at least that long. A Kafka source's horizon is its `redelivery_horizon` (default
    /// [`DEFAULT_KAFKA_REDELIVERY_HORIZON`], Kafka's default `retention.ms`); this is that default.
    pub fn redelivery_horizon(self) -> Duration {
        match self {
            Self::Stripe => horizon::STRIPE,
            Self::GitHub => horizon::GITHUB,
            Self::Shopify => horizon::SHOPIFY,
            Self::StandardWebhooks | Self::Generic | Self::Nats | Self::RabbitMq => {
                horizon::STANDARD_WEBHOOKS
            }
            Self::Kafka => DEFAULT_KAFKA_REDELIVERY_HORIZON,
        }
    }

    /// Whether messages of this kind come from a broker (`nats`, `rabbitmq`, `kafka`) rather
    /// than `POST /webhooks/{source}`.
    pub fn is_broker(self) -> bool {
        matches!(self, Self::Nats | Self::RabbitMq | Self::Kafka)
    }
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
