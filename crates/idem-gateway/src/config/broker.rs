//! Broker sources in the configuration: `[[source]]` with `kind = "nats"` (a JetStream stream
//! read by a durable pull consumer), `kind = "rabbitmq"` (a queue) or `kind = "kafka"` (a
//! topic read through idem partition leases), checked at start.

use std::time::Duration;

use super::raw::RawSource;
use idem_sql::redact_url as redact;

use idem_core::Name;

use super::duration;
use super::error::{ConfigError, number_out_of_range, out_of_range};
use super::kind::SourceKind;
use super::secret::{Secret, SecretLookup, SecretRef};

/// The NATS server without `url`: the local default port.
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";
/// The RabbitMQ server without `url`: the local default port, user `guest`, vhost `/`.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// How long JetStream waits for an ack before redelivering, without `ack_wait`.
pub(crate) const DEFAULT_ACK_WAIT: Duration = Duration::from_secs(30);
/// The shortest `ack_wait`: JetStream's own minimum is 1 ms, but a commit takes a few.
pub(crate) const MIN_ACK_WAIT: Duration = Duration::from_millis(100);
/// The longest `ack_wait`: JetStream keeps it in nanoseconds (an `i64`, so years overflow and
/// make a broken consumer), and a message held by a stalled gateway waits this long at most.
pub(crate) const MAX_ACK_WAIT: Duration = Duration::from_secs(12 * 3600);
/// How many messages of one broker source are taken but not yet acknowledged, without
/// `max_in_flight` (JetStream `max_ack_pending`, AMQP prefetch).
pub(crate) const DEFAULT_MAX_IN_FLIGHT: usize = 256;
/// The most messages of one broker source in flight (AMQP's prefetch count is 16 bits).
pub(crate) const MAX_MAX_IN_FLIGHT: usize = 65_535;

/// Where a broker source's messages come from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Broker {
    /// A NATS JetStream stream, read by a durable pull consumer.
    Nats(NatsSource),
    /// A RabbitMQ queue.
    RabbitMq(RabbitMqSource),
    /// A Kafka topic.
    Kafka(KafkaSource),
}

/// A `kind = "kafka"` source: the topic must exist (the gateway never creates topics). Its
/// partitions are shared among the gateways running this source by idem partition leases (not
/// Kafka consumer groups), and each partition's next offset is stored in the gateway's
/// database in the same commit as the events read before it (`idem_kafka_offsets`).
#[derive(Debug, Clone)]
pub struct KafkaSource {
    /// The bootstrap brokers, `host:port` each (`brokers`, required, plaintext).
    pub brokers: Vec<String>,
    /// The topic (`topic`, required; Kafka's legal names, at most 200 bytes).
    pub topic: String,
    /// The consumer name the offsets are stored under (`consumer`, required, versioned like
    /// every idem consumer: `orders_v1`). Two names are two cursors on the topic; gateways
    /// sharing one name share its partitions.
    pub consumer: Name,
    /// The partitions to read (`partitions`; default every partition of the topic).
    pub partitions: Option<Vec<i32>>,
    /// How long the topic keeps records (`redelivery_horizon`, default 7 days, Kafka's default
    /// `retention.ms`; 1s to 100 years): a copy of a record can reach the gateway that long
    /// after the first, so `retention` must be at least this long (checked at start, C9).
    pub redelivery_horizon: Duration,
}

/// A `kind = "nats"` source: the stream must exist (the gateway never creates or changes a
/// stream); the durable consumer is created when missing, with explicit acks, and used as it is
/// when present.
#[derive(Debug, Clone)]
pub struct NatsSource {
    /// The server URL (`url`, or the variable `url_env` names; default
    /// [`DEFAULT_NATS_URL`]); it may hold credentials, so it is never printed.
    pub url: Secret,
    /// The stream's name (`stream`, required).
    pub stream: String,
    /// The consumer's filter subject (`subject`, such as `orders.>`; default every subject of
    /// the stream).
    pub subject: Option<String>,
    /// The durable consumer's name (`durable`; default `idem-gateway-{source}` with `.` turned
    /// into `_`).
    pub durable: String,
    /// How long JetStream waits for the ack of a delivered message before delivering it again
    /// (`ack_wait`, default 30s, 100ms to 12h). The gateway sends in-progress acks while a
    /// message waits for its commit, so this bounds a stalled gateway, not a slow commit. Used
    /// when the consumer is created: an existing durable keeps its own (logged at WARN when
    /// it differs), and the in-progress acks follow the durable's.
    pub ack_wait: Duration,
    /// Messages taken but not yet acknowledged, at most (`max_in_flight`, default 256, 1 to
    /// 65535): the consumer's `max_ack_pending` when it is created (an existing durable keeps
    /// its own, logged at WARN when it differs).
    pub max_in_flight: usize,
}

/// A `kind = "rabbitmq"` source: the queue must exist (declared by whoever owns it, with its
/// own arguments); the gateway consumes it with manual acks.
#[derive(Debug, Clone)]
pub struct RabbitMqSource {
    /// The AMQP URL (`url`, or the variable `url_env` names; default [`DEFAULT_AMQP_URL`]);
    /// it holds the password, so it is never printed.
    pub url: Secret,
    /// The queue (`queue`, required).
    pub queue: String,
    /// Messages delivered but not yet acknowledged, at most (`max_in_flight`, default 256, 1
    /// to 65535): the channel's prefetch count.
    pub max_in_flight: usize,
}

impl Broker {
    /// The server URL with any user and password replaced by `***`, for logs and
    /// `idem check-config`.
    pub fn display_url(&self) -> String {
        let url = match self {
            Self::Nats(nats) => nats.url.expose(),
            Self::RabbitMq(rabbit) => rabbit.url.expose(),
            Self::Kafka(kafka) => return kafka.brokers.join(","),
        };
        redact(url)
    }

    /// Where messages are read: `stream ORDERS (orders.>) as idem-gateway-orders`,
    /// `queue billing` or `topic orders (every partition) as orders_v1`.
    pub fn describe(&self) -> String {
        match self {
            Self::Nats(nats) => format!(
                "stream {} ({}) as {}",
                nats.stream,
                nats.subject.as_deref().unwrap_or("every subject"),
                nats.durable
            ),
            Self::RabbitMq(rabbit) => format!("queue {}", rabbit.queue),
            Self::Kafka(kafka) => format!(
                "topic {} ({}) as {}",
                kafka.topic,
                match &kafka.partitions {
                    Some(p) => format!(
                        "partitions {}",
                        p.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
                    ),
                    None => "every partition".into(),
                },
                kafka.consumer
            ),
        }
    }
}

/// Refuses the keys of `raw` that mean nothing to a source of `kind`: broker keys on a webhook
/// source, signature keys on a broker source, one broker's keys on the other's. A key that does
/// nothing is a mistake to report, not to ignore (a `queue` on a generic source would otherwise
/// be silently unused).
pub(super) fn refuse_foreign_keys(
    raw: &RawSource,
    kind: SourceKind,
    source_name: &str,
) -> Result<(), ConfigError> {
    const SIGNATURE: &str = "broker messages carry no webhook signature";
    const BROKER: &str = "it is a key of kind = \"nats\" and \"rabbitmq\" sources";
    const KAFKA: &str = "it is a key of kind = \"kafka\" sources";
    const NATS: &str = "it is a key of kind = \"nats\" sources";
    const RABBITMQ: &str = "it is a key of kind = \"rabbitmq\" sources";
    const TRACEPARENT: &str =
        "it is a key of webhook sources: broker messages are not read for a traceparent";
    let broker = kind.is_broker();
    let url_broker = matches!(kind, SourceKind::Nats | SourceKind::RabbitMq);
    let kafka = kind == SourceKind::Kafka;
    let checks = [
        (
            "secrets_env",
            !raw.secrets_env.is_empty(),
            !broker,
            SIGNATURE,
        ),
        (
            "secrets_file",
            !raw.secrets_file.is_empty(),
            !broker,
            SIGNATURE,
        ),
        (
            "signature_header",
            raw.signature_header.is_some(),
            !broker,
            SIGNATURE,
        ),
        (
            "signature_encoding",
            raw.signature_encoding.is_some(),
            !broker,
            SIGNATURE,
        ),
        (
            "signature_prefix",
            raw.signature_prefix.is_some(),
            !broker,
            SIGNATURE,
        ),
        (
            "trust_traceparent",
            raw.trust_traceparent.is_some(),
            !broker,
            TRACEPARENT,
        ),
        ("url", raw.url.is_some(), url_broker, BROKER),
        ("url_env", raw.url_env.is_some(), url_broker, BROKER),
        (
            "max_in_flight",
            raw.max_in_flight.is_some(),
            url_broker,
            BROKER,
        ),
        ("brokers", raw.brokers.is_some(), kafka, KAFKA),
        ("topic", raw.topic.is_some(), kafka, KAFKA),
        ("consumer", raw.consumer.is_some(), kafka, KAFKA),
        ("partitions", raw.partitions.is_some(), kafka, KAFKA),
        (
            "redelivery_horizon",
            raw.redelivery_horizon.is_some(),
            kafka,
            KAFKA,
        ),
        (
            "stream",
            raw.stream.is_some(),
            kind == SourceKind::Nats,
            NATS,
        ),
        (
            "subject",
            raw.subject.is_some(),
            kind == SourceKind::Nats,
            NATS,
        ),
        (
            "durable",
            raw.durable.is_some(),
            kind == SourceKind::Nats,
            NATS,
        ),
        (
            "ack_wait",
            raw.ack_wait.is_some(),
            kind == SourceKind::Nats,
            NATS,
        ),
        (
            "queue",
            raw.queue.is_some(),
            kind == SourceKind::RabbitMq,
            RABBITMQ,
        ),
    ];
    match checks.iter().find(|(_, set, allowed, _)| *set && !*allowed) {
        Some((key, _, _, reason)) => Err(ConfigError::MisplacedKey {
            source_name: source_name.to_owned(),
            kind,
            key,
            reason,
        }),
        None => Ok(()),
    }
}

/// Builds the broker settings of a source of broker `kind`.
pub(super) fn build(
    raw: &RawSource,
    kind: SourceKind,
    source_name: &str,
    secret: &SecretLookup<'_>,
    field_name: &dyn Fn(&str) -> String,
) -> Result<Broker, ConfigError> {
    if kind == SourceKind::Kafka {
        return kafka(raw, field_name).map(Broker::Kafka);
    }
    let url = url(raw, kind, source_name, secret, field_name)?;
    let max_in_flight = raw.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT);
    if !(1..=MAX_MAX_IN_FLIGHT).contains(&max_in_flight) {
        return Err(number_out_of_range(
            &field_name("max_in_flight"),
            max_in_flight as u64,
            "between 1 and 65535",
        ));
    }
    if kind == SourceKind::RabbitMq {
        let queue = required(
            field_name,
            "queue",
            &raw.queue,
            "the name of an existing queue, such as \"billing-events\"",
        )?;
        // AMQP names are short strings: at most 255 bytes.
        if queue.len() > 255 {
            return Err(out_of_range(
                &field_name("queue"),
                &queue,
                "at most 255 bytes",
            ));
        }
        return Ok(Broker::RabbitMq(RabbitMqSource {
            url,
            queue,
            max_in_flight,
        }));
    }
    nats(raw, url, max_in_flight, source_name, field_name).map(Broker::Nats)
}

/// The server URL of a NATS or RabbitMQ source (`url` or `url_env`, else the default), with
/// its kind's scheme.
fn url(
    raw: &RawSource,
    kind: SourceKind,
    source_name: &str,
    secret: &SecretLookup<'_>,
    field_name: &dyn Fn(&str) -> String,
) -> Result<Secret, ConfigError> {
    let (default_url, schemes): (&str, &[&str]) = if kind == SourceKind::Nats {
        (DEFAULT_NATS_URL, &["nats://", "tls://"])
    } else {
        (DEFAULT_AMQP_URL, &["amqp://", "amqps://"])
    };
    let url = match (&raw.url, &raw.url_env) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::BadValue {
                field: field_name("url_env"),
                value: raw.url_env.clone().unwrap_or_default(),
                expected: "either url or url_env, not both".into(),
            });
        }
        (Some(url), None) => Secret::new(url.clone()),
        (None, Some(var)) => secret(format!("source {source_name:?}"), SecretRef::Env(var))?,
        (None, None) => Secret::new(default_url),
    };
    if url.is_loaded() && !schemes.iter().any(|s| url.expose().starts_with(s)) {
        return Err(ConfigError::BadValue {
            field: field_name(if raw.url_env.is_some() {
                "url_env"
            } else {
                "url"
            }),
            value: redact(url.expose()),
            expected: format!("a URL starting with {}", schemes.join(" or ")),
        });
    }
    Ok(url)
}

/// The value of required key `key`, not blank; `example` says what is expected.
fn required(
    field_name: &dyn Fn(&str) -> String,
    key: &str,
    value: &Option<String>,
    example: &str,
) -> Result<String, ConfigError> {
    match value {
        Some(v) if !v.trim().is_empty() => Ok(v.clone()),
        _ => Err(ConfigError::BadValue {
            field: field_name(key),
            value: value.clone().unwrap_or_default(),
            expected: example.into(),
        }),
    }
}

/// A NATS JetStream source: `stream` (required), `durable`, `subject` and `ack_wait`.
fn nats(
    raw: &RawSource,
    url: Secret,
    max_in_flight: usize,
    source_name: &str,
    field_name: &dyn Fn(&str) -> String,
) -> Result<NatsSource, ConfigError> {
    let stream = required(
        field_name,
        "stream",
        &raw.stream,
        "the name of an existing JetStream stream, such as \"ORDERS\"",
    )?;
    // JetStream names: no whitespace, `.`, `*`, `>` (they are subject tokens).
    let token = |key: &str, value: &str| {
        if value.is_empty()
            || value
                .chars()
                .any(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>'))
        {
            Err(ConfigError::BadValue {
                field: field_name(key),
                value: value.into(),
                expected: "a JetStream name: no spaces, '.', '*' or '>'".into(),
            })
        } else {
            Ok(())
        }
    };
    token("stream", &stream)?;
    let durable = raw
        .durable
        .clone()
        .unwrap_or_else(|| format!("idem-gateway-{}", source_name.replace('.', "_")));
    token("durable", &durable)?;
    let subject = raw
        .subject
        .as_ref()
        .map(|subject| subject_filter(subject, field_name))
        .transpose()?;
    let ack_wait = match &raw.ack_wait {
        Some(text) => {
            let d = duration::parse(&field_name("ack_wait"), text)?;
            if !(MIN_ACK_WAIT..=MAX_ACK_WAIT).contains(&d) {
                return Err(out_of_range(
                    &field_name("ack_wait"),
                    text,
                    "between 100ms and 12h",
                ));
            }
            d
        }
        None => DEFAULT_ACK_WAIT,
    };
    Ok(NatsSource {
        url,
        stream,
        subject,
        durable,
        ack_wait,
        max_in_flight,
    })
}

/// `subject` as a NATS subject filter: dot-separated tokens, `*` a whole token, `>` only last.
fn subject_filter(
    subject: &str,
    field_name: &dyn Fn(&str) -> String,
) -> Result<String, ConfigError> {
    let tokens_ok = !subject.is_empty()
        && !subject.chars().any(char::is_whitespace)
        && subject.split('.').enumerate().all(|(i, t)| {
            !t.is_empty()
                && (t == "*"
                    || (t == ">" && i == subject.split('.').count() - 1)
                    || !t.contains(['*', '>']))
        });
    if !tokens_ok {
        return Err(ConfigError::BadValue {
            field: field_name("subject"),
            value: subject.to_owned(),
            expected: "a NATS subject filter such as \"orders.>\" or \"orders.*.created\"".into(),
        });
    }
    Ok(subject.to_owned())
}

/// The shortest `redelivery_horizon`: a topic keeps its records at least this long.
const MIN_REDELIVERY_HORIZON: Duration = Duration::from_secs(1);
/// The longest `redelivery_horizon` (a topic with `retention.ms = -1` keeps records for ever:
/// set the gateway's `retention = "forever"` instead).
const MAX_REDELIVERY_HORIZON: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The `redelivery_horizon` of a Kafka source `raw` (default
/// [`DEFAULT_KAFKA_REDELIVERY_HORIZON`](super::kind::DEFAULT_KAFKA_REDELIVERY_HORIZON)).
pub(super) fn redelivery_horizon(
    raw: &RawSource,
    field_name: &dyn Fn(&str) -> String,
) -> Result<Duration, ConfigError> {
    let Some(text) = &raw.redelivery_horizon else {
        return Ok(super::kind::DEFAULT_KAFKA_REDELIVERY_HORIZON);
    };
    let d = duration::parse(&field_name("redelivery_horizon"), text)?;
    if !(MIN_REDELIVERY_HORIZON..=MAX_REDELIVERY_HORIZON).contains(&d) {
        return Err(out_of_range(
            &field_name("redelivery_horizon"),
            text,
            "between 1s and 100years (the topic's retention.ms)",
        ));
    }
    Ok(d)
}

/// The settings of a `kind = "kafka"` source.
fn kafka(raw: &RawSource, field_name: &dyn Fn(&str) -> String) -> Result<KafkaSource, ConfigError> {
    let brokers = bootstrap_brokers(raw.brokers.as_deref(), &field_name("brokers"))?;
    let topic = match &raw.topic {
        Some(topic) => topic.clone(),
        None => String::new(),
    };
    if !legal_topic(&topic) {
        return Err(ConfigError::BadValue {
            field: field_name("topic"),
            value: topic,
            expected:
                "the name of an existing topic: 1 to 200 of a-z A-Z 0-9 . _ -, such as \"orders\""
                    .into(),
        });
    }
    let consumer = match &raw.consumer {
        Some(consumer) => {
            super::error::name("consumer", &field_name("consumer"), consumer.clone())?
        }
        None => {
            return Err(ConfigError::BadValue {
                field: field_name("consumer"),
                value: String::new(),
                expected: "the consumer name the offsets are stored under, versioned, such as \"orders_v1\"".into(),
            });
        }
    };
    let partitions = match &raw.partitions {
        Some(list) => {
            let mut sorted = list.clone();
            sorted.sort_unstable();
            sorted.dedup();
            if sorted.is_empty() || sorted.len() != list.len() || sorted[0] < 0 {
                return Err(ConfigError::BadValue {
                    field: field_name("partitions"),
                    value: format!("{list:?}"),
                    expected: "a non-empty list of distinct partition numbers from 0, such as [0, 1]; leave it out for every partition".into(),
                });
            }
            Some(sorted)
        }
        None => None,
    };
    Ok(KafkaSource {
        brokers,
        topic,
        consumer,
        partitions,
        redelivery_horizon: redelivery_horizon(raw, field_name)?,
    })
}

/// Whether `topic` is a legal Kafka topic name within idem's bound: 1 to
/// [`MAX_TOPIC_BYTES`](idem_broker::MAX_TOPIC_BYTES) of `a-z A-Z 0-9 . _ -`, neither `.` nor
/// `..` (a Kafka source's `topic` and a Kafka destination's).
pub(super) fn legal_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= idem_broker::MAX_TOPIC_BYTES
        && topic != "."
        && topic != ".."
        && topic
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Checks a `brokers` list (`field` names it): at least one `host:port`, the port a number.
pub(super) fn bootstrap_brokers(
    brokers: Option<&[String]>,
    field: &str,
) -> Result<Vec<String>, ConfigError> {
    let brokers = brokers.unwrap_or_default();
    // rskafka takes bootstrap addresses in this form only.
    let bad = brokers.iter().find(|b| {
        b.rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
    });
    if brokers.is_empty() || bad.is_some() {
        return Err(ConfigError::BadValue {
            field: field.into(),
            value: bad.cloned().unwrap_or_default(),
            expected: "a list of bootstrap brokers as host:port, such as [\"kafka-1:9092\", \"kafka-2:9092\"]".into(),
        });
    }
    Ok(brokers.to_vec())
}
