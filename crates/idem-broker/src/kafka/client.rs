//! Connecting to a Kafka cluster with rskafka, checking topic names, and reading a topic's
//! partitions.

use std::collections::BTreeSet;
use std::time::Duration;

use rskafka::BackoffConfig;
use rskafka::client::error::Error as ClientError;
use rskafka::client::{Client, ClientBuilder};

use super::error::KafkaError;

/// How long rskafka retries one request (reconnecting, following a new partition leader) before
/// it returns the error: the consumer and the relay then log it and retry on their own schedule.
/// rskafka's default is to retry for ever, which would hide an unreachable cluster.
pub const DEFAULT_CLIENT_DEADLINE: Duration = Duration::from_secs(10);

/// The `client.id` idem sends to the brokers (shown in their request logs and quotas).
pub const CLIENT_ID: &str = "idem";

/// The longest topic name the consumer and the relay accept, in bytes. Kafka allows 249
/// (`Topic.MAX_NAME_LENGTH`); a partition lease key holds the topic, the consumer name and a
/// member id within 255 bytes.
pub const MAX_TOPIC_BYTES: usize = 200;

/// Connects to the cluster through `bootstrap_brokers` (`host:port`, plaintext), reads its
/// metadata, and returns the client, set to give up on a request after
/// [`DEFAULT_CLIENT_DEADLINE`] of retries. For TLS or SASL, build an [`rskafka::client::Client`] yourself
/// (`ClientBuilder::tls_config`, `sasl_config`; see <https://docs.rs/rskafka>) and pass it to
/// [`KafkaConsumer::new`](crate::KafkaConsumer::new) or
/// [`KafkaPublisher::new`](crate::KafkaPublisher::new).
///
/// # Errors
/// [`KafkaError::InvalidConfig`] for an empty broker list; [`KafkaError::Client`] when no
/// bootstrap broker answered within the deadline.
pub async fn connect(bootstrap_brokers: &[String]) -> Result<Client, KafkaError> {
    if bootstrap_brokers.iter().all(|b| b.trim().is_empty()) {
        return Err(KafkaError::InvalidConfig(
            "at least one bootstrap broker (host:port) is needed".into(),
        ));
    }
    let build = ClientBuilder::new(bootstrap_brokers.to_vec())
        .client_id(CLIENT_ID)
        .backoff_config(BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 3.0,
            deadline: Some(DEFAULT_CLIENT_DEADLINE),
        })
        .build();
    // rskafka 0.6 has no request timeout: a broker that accepts the connection and never
    // answers would hold the metadata request for ever.
    let built = tokio::time::timeout(DEFAULT_CLIENT_DEADLINE + ANSWER_GRACE, build)
        .await
        .unwrap_or(Err(ClientError::Timeout));
    built.map_err(|source| KafkaError::Client {
        operation: "connect",
        source,
    })
}

/// How much longer than [`DEFAULT_CLIENT_DEADLINE`] a request may wait for its answer before
/// idem gives up on it (rskafka 0.6 has no request timeout of its own).
const ANSWER_GRACE: Duration = Duration::from_secs(5);

/// Checks a topic name: 1 to [`MAX_TOPIC_BYTES`] of `a-z A-Z 0-9 . _ -` (Kafka's legal
/// characters, `org.apache.kafka.common.internals.Topic`), and neither `.` nor `..`. Returns
/// what is wrong with it.
pub(crate) fn check_topic(topic: &str) -> Result<(), String> {
    if topic.is_empty() || topic.len() > MAX_TOPIC_BYTES {
        return Err(format!(
            "topic name {topic:?} must be 1 to {MAX_TOPIC_BYTES} bytes"
        ));
    }
    if topic == "." || topic == ".." {
        return Err(format!("topic name {topic:?} is not allowed by Kafka"));
    }
    if let Some(bad) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "topic name {topic:?} has {bad:?}; Kafka allows a-z, A-Z, 0-9, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// The partitions of `topic` from the cluster's metadata, or `None` when it does not exist.
///
/// # Errors
/// [`KafkaError::Client`] when the metadata cannot be read.
pub(crate) async fn partitions_of(
    client: &Client,
    topic: &str,
) -> Result<Option<BTreeSet<i32>>, KafkaError> {
    let topics = tokio::time::timeout(DEFAULT_CLIENT_DEADLINE + ANSWER_GRACE, client.list_topics())
        .await
        .unwrap_or(Err(ClientError::Timeout))
        .map_err(|source| KafkaError::Client {
            operation: "metadata",
            source,
        })?;
    Ok(topics
        .into_iter()
        .find(|t| t.name == topic)
        .map(|t| t.partitions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules_and_fit_lease_keys() {
        for ok in ["orders", "orders.v2", "a_b-c", &"t".repeat(MAX_TOPIC_BYTES)] {
            assert_eq!(check_topic(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "with space",
            "a/b",
            "ü",
            &"t".repeat(MAX_TOPIC_BYTES + 1),
        ] {
            assert!(check_topic(bad).is_err(), "{bad:?}");
        }
    }
}
