//! What a `[[destination]]` forwards to: `kind = "http"` (the default: a POST to `url`), or a
//! broker, `"nats"` (a JetStream subject), `"rabbitmq"` (an exchange) or `"kafka"` (a topic),
//! with the keys of its kind; a key of another kind is refused, naming it.
//!
//! The checks here need no connection, so `idem check-config` makes them; `idem serve` also
//! connects at start and refuses a stream, exchange or topic that does not exist.

use idem_core::Name;
use idem_http::verify;
use idem_sql::redact_url as redact;

use super::broker::{DEFAULT_AMQP_URL, DEFAULT_NATS_URL, bootstrap_brokers, legal_topic};
use super::error::ConfigError;
use super::raw::RawDestination;
use super::secret::{Secret, SecretLookup, SecretRef};

/// The longest AMQP exchange name and routing key, in bytes (AMQP short strings).
const AMQP_SHORT_STRING: usize = 255;

/// Where a destination's events go, with the keys of its `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DestinationTarget {
    /// `kind = "http"`: each event is POSTed to the destination's `url`, signed.
    Http,
    /// `kind = "nats"`: each event is published to a JetStream stream on `subject`, with
    /// `Nats-Msg-Id` = the delivery's `webhook-id`. A stream must take the subject.
    Nats {
        /// The literal subject published to (`subject`, required).
        subject: String,
    },
    /// `kind = "rabbitmq"`: each event is published to `exchange` with publisher confirms,
    /// `mandatory`, with AMQP `message_id` = the delivery's `webhook-id`. The exchange must
    /// exist.
    RabbitMq {
        /// The exchange (`exchange`, required).
        exchange: String,
        /// The routing key (`routing_key`); `None`: the event's type, or the source's name for
        /// an event without one.
        routing_key: Option<String>,
    },
    /// `kind = "kafka"`: each event is a record of `topic`, keyed by its entity (`type:id`),
    /// else its event id, with header `idem-message-id` = the delivery's `webhook-id`. The
    /// topic must exist.
    Kafka {
        /// The bootstrap brokers, `host:port` each (`bootstrap`, required, comma-separated).
        bootstrap: Vec<String>,
        /// The topic (`topic`, required).
        topic: String,
    },
}

impl DestinationTarget {
    /// `http`, `nats`, `rabbitmq` or `kafka`, as written in `kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Nats { .. } => "nats",
            Self::RabbitMq { .. } => "rabbitmq",
            Self::Kafka { .. } => "kafka",
        }
    }

    /// Whether events are published to a broker rather than POSTed.
    pub fn is_broker(&self) -> bool {
        !matches!(self, Self::Http)
    }

    /// Where on the server events go, for `idem check-config` and `idem destination list`:
    /// `subject orders.created`, `exchange events (routing key: the event type)`,
    /// `topic orders`; empty for HTTP (the URL says it all).
    pub fn describe(&self) -> String {
        match self {
            Self::Http => String::new(),
            Self::Nats { subject } => format!("subject {subject}"),
            Self::RabbitMq {
                exchange,
                routing_key,
            } => match routing_key {
                Some(key) => format!("exchange {exchange} (routing key {key})"),
                None => format!("exchange {exchange} (routing key: the event type)"),
            },
            Self::Kafka { topic, .. } => format!("topic {topic}"),
        }
    }
}

/// A destination's kind, as parsed from `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Http,
    Nats,
    RabbitMq,
    Kafka,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Nats => "nats",
            Self::RabbitMq => "rabbitmq",
            Self::Kafka => "kafka",
        }
    }
}

/// The target of `raw` and the URL the destination keeps ([`Destination::url`]: the HTTP URL,
/// the NATS or AMQP server URL, or the Kafka bootstrap brokers joined by `,`), after refusing
/// the keys its kind does not take. `field(key)` names a key in an error.
///
/// # Errors
/// [`ConfigError::BadValue`] naming `kind` when it is unknown, a key of another kind when one
/// is set, or a required key of this kind when it is missing or malformed.
///
/// [`Destination::url`]: super::Destination::url
pub(super) fn build(
    raw: &RawDestination,
    field: &dyn Fn(&str) -> String,
) -> Result<(DestinationTarget, String), ConfigError> {
    let kind = match raw.kind.as_deref().unwrap_or("http") {
        "http" => Kind::Http,
        "nats" => Kind::Nats,
        "rabbitmq" => Kind::RabbitMq,
        "kafka" => Kind::Kafka,
        other => {
            return Err(ConfigError::BadValue {
                field: field("kind"),
                value: other.into(),
                expected: "\"http\" (the default), \"nats\", \"rabbitmq\" or \"kafka\"".into(),
            });
        }
    };
    refuse_foreign_keys(raw, kind, field)?;
    let required = |key: &str, value: &Option<String>, expected: &str| match value {
        Some(v) if !v.trim().is_empty() => Ok(v.clone()),
        _ => Err(ConfigError::BadValue {
            field: field(key),
            value: value.clone().unwrap_or_default(),
            expected: expected.into(),
        }),
    };
    Ok(match kind {
        Kind::Http => {
            let url = required("url", &raw.url, "an http:// or https:// URL")?;
            (DestinationTarget::Http, url)
        }
        Kind::Nats => {
            let url = server_url(raw, field, DEFAULT_NATS_URL, &["nats://", "tls://"])?;
            let subject = required(
                "subject",
                &raw.subject,
                "the literal subject events are published to, such as \"orders.events\" (a JetStream stream must take it)",
            )?;
            literal_subject(&subject, field)?;
            (DestinationTarget::Nats { subject }, url)
        }
        Kind::RabbitMq => {
            let url = server_url(raw, field, DEFAULT_AMQP_URL, &["amqp://", "amqps://"])?;
            let exchange = required(
                "exchange",
                &raw.exchange,
                "the name of an existing exchange, such as \"events\"",
            )?;
            if exchange.len() > AMQP_SHORT_STRING || exchange.contains('/') {
                return Err(ConfigError::BadValue {
                    field: field("exchange"),
                    value: exchange,
                    expected: "an exchange name of at most 255 bytes, without '/'".into(),
                });
            }
            if let Some(key) = raw.routing_key.as_ref()
                && key.len() > AMQP_SHORT_STRING
            {
                return Err(ConfigError::BadValue {
                    field: field("routing_key"),
                    value: key.clone(),
                    expected: "a routing key of at most 255 bytes".into(),
                });
            }
            let routing_key = raw.routing_key.clone();
            (
                DestinationTarget::RabbitMq {
                    exchange,
                    routing_key,
                },
                url,
            )
        }
        Kind::Kafka => kafka(raw, field)?,
    })
}

/// A NATS or RabbitMQ destination's server URL (`url`, else `default`), with one of `schemes`.
fn server_url(
    raw: &RawDestination,
    field: &dyn Fn(&str) -> String,
    default: &str,
    schemes: &[&str],
) -> Result<String, ConfigError> {
    let url = raw.url.clone().unwrap_or_else(|| default.to_owned());
    if !schemes.iter().any(|s| url.starts_with(s)) {
        return Err(ConfigError::BadValue {
            field: field("url"),
            value: redact(&url),
            expected: format!("a URL starting with {}", schemes.join(" or ")),
        });
    }
    Ok(url)
}

/// Checks that `subject` is a literal NATS subject, as idem-broker's publisher does before it
/// sends: a publish to `orders.>` is no message to every `orders` subject.
fn literal_subject(subject: &str, field: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
    idem_broker::literal_subject(subject).map_err(|why| ConfigError::BadValue {
        field: field("subject"),
        value: subject.to_owned(),
        expected: format!(
            "a literal NATS subject such as \"orders.events\": dot-separated tokens, no spaces, no wildcard ({why})"
        ),
    })
}

/// A Kafka destination: `bootstrap` and `topic`, both required.
fn kafka(
    raw: &RawDestination,
    field: &dyn Fn(&str) -> String,
) -> Result<(DestinationTarget, String), ConfigError> {
    let listed: Option<Vec<String>> = raw.bootstrap.as_ref().map(|text| {
        text.split(',')
            .map(|b| b.trim().to_owned())
            .filter(|b| !b.is_empty())
            .collect()
    });
    let bootstrap = bootstrap_brokers(listed.as_deref(), &field("bootstrap")).map_err(|e| {
        match e {
            // The destination's key is one string, not a list: say so.
            ConfigError::BadValue { field, value, .. } => ConfigError::BadValue {
                field,
                value,
                expected: "the bootstrap brokers as host:port, comma-separated, such as \"kafka-1:9092,kafka-2:9092\"".into(),
            },
            other => other,
        }
    })?;
    let topic = raw.topic.clone().unwrap_or_default();
    if !legal_topic(&topic) {
        return Err(ConfigError::BadValue {
            field: field("topic"),
            value: topic,
            expected:
                "the name of an existing topic: 1 to 200 of a-z A-Z 0-9 . _ -, such as \"orders\""
                    .into(),
        });
    }
    let url = bootstrap.join(",");
    Ok((DestinationTarget::Kafka { bootstrap, topic }, url))
}

/// Refuses a key `kind` does not take: HTTP's keys (`signing_secret_env`, `retry_4xx`,
/// `retry_after_cap`, the TLS files) on a broker, a broker's keys on HTTP or another broker.
/// A key that would do nothing is a mistake to report, not to ignore.
fn refuse_foreign_keys(
    raw: &RawDestination,
    kind: Kind,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ConfigError> {
    use Kind::{Http, Kafka, Nats, RabbitMq};
    let keys: [(&str, Option<String>, &[Kind], &str); 13] = [
        (
            "url",
            raw.url.as_deref().map(redact),
            &[Http, Nats, RabbitMq],
            "a kafka destination takes `bootstrap`",
        ),
        (
            "signing_secret_env",
            raw.signing_secret_env.clone(),
            &[Http],
            "it is a key of kind = \"http\" destinations: broker messages are not signed",
        ),
        (
            "signing_secret_file",
            (raw.signing_secret_file.as_ref()).map(|p| p.display().to_string()),
            &[Http],
            "it is a key of kind = \"http\" destinations: broker messages are not signed",
        ),
        (
            "retry_4xx",
            raw.retry_4xx.map(|b| b.to_string()),
            &[Http],
            "it is a key of kind = \"http\" destinations: brokers answer no HTTP status",
        ),
        (
            "retry_after_cap",
            raw.retry_after_cap.clone(),
            &[Http],
            "it is a key of kind = \"http\" destinations: brokers send no Retry-After",
        ),
        (
            "ca_file",
            raw.ca_file.clone(),
            &[Http],
            "it is a key of kind = \"http\" destinations (give NATS a tls:// URL, RabbitMQ an amqps:// one)",
        ),
        (
            "client_cert_file",
            raw.client_cert_file.clone(),
            &[Http],
            "it is a key of kind = \"http\" destinations",
        ),
        (
            "client_key_file",
            raw.client_key_file.clone(),
            &[Http],
            "it is a key of kind = \"http\" destinations",
        ),
        (
            "subject",
            raw.subject.clone(),
            &[Nats],
            "it is a key of kind = \"nats\" destinations",
        ),
        (
            "exchange",
            raw.exchange.clone(),
            &[RabbitMq],
            "it is a key of kind = \"rabbitmq\" destinations",
        ),
        (
            "routing_key",
            raw.routing_key.clone(),
            &[RabbitMq],
            "it is a key of kind = \"rabbitmq\" destinations",
        ),
        (
            "bootstrap",
            raw.bootstrap.clone(),
            &[Kafka],
            "it is a key of kind = \"kafka\" destinations",
        ),
        (
            "topic",
            raw.topic.clone(),
            &[Kafka],
            "it is a key of kind = \"kafka\" destinations",
        ),
    ];
    match keys
        .iter()
        .find(|(_, value, kinds, _)| value.is_some() && !kinds.contains(&kind))
    {
        Some((key, value, _, why)) => Err(ConfigError::BadValue {
            field: field(key),
            value: value.clone().unwrap_or_default(),
            expected: format!(
                "no {key} on a kind = \"{}\" destination: {why}",
                kind.as_str()
            ),
        }),
        None => Ok(()),
    }
}

/// The secret an HTTP destination signs with (`signing_secret_env`, required), checked at start
/// rather than at the first delivery (unless it was not loaded, for an operator command); an
/// empty one for a broker destination, which signs nothing.
pub(super) fn signing_secret(
    dest_name: &Name,
    target: &DestinationTarget,
    (var, file): (Option<&str>, Option<&std::path::Path>),
    secret: &SecretLookup<'_>,
) -> Result<Secret, ConfigError> {
    let owner = || format!("destination {:?}", dest_name.as_str());
    let field = format!("destination {:?} signing_secret_env", dest_name.as_str());
    if target.is_broker() {
        return Ok(Secret::new(String::new()));
    }
    let at = SecretRef::either(
        owner,
        ("signing_secret_env", var),
        ("signing_secret_file", file),
    )?;
    let Some(at) = at else {
        return Err(ConfigError::BadValue {
            field,
            value: String::new(),
            expected: "the environment variable holding the Standard Webhooks secret (whsec_…) forwarded requests are signed with, such as \"APP_WEBHOOK_SECRET\" (or signing_secret_file, a file holding it)".into(),
        });
    };
    let signing_secret = secret(owner(), at)?;
    let (var, field) = match at {
        SecretRef::Env(var) => (var.to_owned(), field),
        SecretRef::File(path) => (
            path.display().to_string(),
            format!("destination {:?} signing_secret_file", dest_name.as_str()),
        ),
    };
    if signing_secret.is_loaded() {
        verify::standard_webhooks::sign(signing_secret.expose(), "msg_check", 0, b"").map_err(
            |error| ConfigError::BadValue {
                field,
                value: var,
                expected: format!("a variable or file holding a Standard Webhooks secret: {error}"),
            },
        )?;
    }
    Ok(signing_secret)
}
