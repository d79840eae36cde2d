//! A `kind = "kafka"` destination: each attempt produces one record to its topic through
//! rskafka (acks = all), keyed by the event's entity (`type:id`), else its event id, in the
//! partition Kafka's default partitioner picks for that key (idem-broker's
//! [`partition_for_key`]), so one entity's events land in one partition, in the order the
//! dispatcher sends them (one per entity at a time, in version order, on `drop-stale` routes).
//! The header `idem-message-id` carries the delivery's `webhook-id`. Kafka does not
//! deduplicate: a resend is a second record with the same id.
//!
//! Not idem-broker's `KafkaPublisher`: it keys a record by an outbox row's aggregate and leaves
//! a row without one unkeyed, where a destination keys it by its event id.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use idem_broker::rskafka::chrono::{TimeZone, Utc};
use idem_broker::rskafka::client::Client;
use idem_broker::rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use idem_broker::rskafka::record::Record;
use idem_broker::{MESSAGE_ID_HEADER, kafka_connect, partition_for_key};
use idem_core::Timestamp;
use tokio::sync::Mutex;

use super::attempted::Attempted;
use super::message::{Message, delivered, failed};

/// How long reading the topic's partitions may take (rskafka has no request timeout).
const METADATA_TIMEOUT: Duration = Duration::from_secs(15);

/// A connected Kafka destination: one client (rskafka reconnects its brokers on its own) and
/// the topic's partition clients, looked up again after a failed produce.
pub(crate) struct KafkaTarget {
    client: Client,
    topic: String,
    partitions: Mutex<Option<Arc<Vec<PartitionClient>>>>,
}

impl KafkaTarget {
    /// Connects through `bootstrap` and finds `topic`'s partitions.
    ///
    /// # Errors
    /// The reason, naming the brokers or the topic: none answers, or the topic does not exist.
    pub(super) async fn connect(bootstrap: &[String], topic: &str) -> Result<Self, String> {
        let shown = bootstrap.join(",");
        let client = kafka_connect(bootstrap)
            .await
            .map_err(|e| format!("cannot connect to Kafka at {shown}: {e}"))?;
        let target = Self {
            client,
            topic: topic.to_owned(),
            partitions: Mutex::new(None),
        };
        target
            .partitions()
            .await
            .map_err(|e| format!("{e} (at {shown})"))?;
        Ok(target)
    }

    /// The topic's partition clients, numbered 0..n, looked up when not known.
    async fn partitions(&self) -> Result<Arc<Vec<PartitionClient>>, String> {
        let mut known = self.partitions.lock().await;
        if let Some(partitions) = known.as_ref() {
            return Ok(Arc::clone(partitions));
        }
        let topics = tokio::time::timeout(METADATA_TIMEOUT, self.client.list_topics())
            .await
            .map_err(|_| format!("no metadata from Kafka within {METADATA_TIMEOUT:?}"))?
            .map_err(|e| format!("cannot read Kafka's metadata: {e}"))?;
        let Some(found) = topics.into_iter().find(|t| t.name == self.topic) else {
            return Err(format!(
                "topic {:?} does not exist; create it (idem never creates topics)",
                self.topic
            ));
        };
        let mut partitions = Vec::with_capacity(found.partitions.len());
        // Kafka numbers a topic's partitions 0..n; a BTreeSet holds them in order.
        for (expected, number) in found.partitions.into_iter().enumerate() {
            if usize::try_from(number).ok() != Some(expected) {
                return Err(format!(
                    "topic {:?} has partitions that are not numbered 0..n",
                    self.topic
                ));
            }
            let client = self
                .client
                .partition_client(self.topic.clone(), number, UnknownTopicHandling::Error)
                .await
                .map_err(|e| format!("partition {}/{number}: {e}", self.topic))?;
            partitions.push(client);
        }
        if partitions.is_empty() {
            return Err(format!("topic {:?} has no partitions", self.topic));
        }
        let partitions = Arc::new(partitions);
        *known = Some(Arc::clone(&partitions));
        Ok(partitions)
    }

    /// Produces `message` as one record and waits for the acknowledgement.
    pub(super) async fn publish(&self, message: Message, now: Timestamp) -> Attempted {
        let partitions = match self.partitions().await {
            Ok(partitions) => partitions,
            Err(reason) => return failed(&reason),
        };
        let key = message.key.into_bytes();
        let partition = partition_for_key(&key, partitions.len());
        let Some(client) = usize::try_from(partition)
            .ok()
            .and_then(|p| partitions.get(p))
        else {
            return failed("partition out of range");
        };
        let mut headers: BTreeMap<String, Vec<u8>> = message
            .headers
            .into_iter()
            .map(|(name, value)| (name, value.into_bytes()))
            .collect();
        headers.insert(MESSAGE_ID_HEADER.to_owned(), message.id.into_bytes());
        let record = Record {
            key: Some(key),
            value: Some(message.body),
            headers,
            timestamp: Utc
                .timestamp_millis_opt(now.as_millis())
                .single()
                .unwrap_or_default(),
        };
        match client
            .produce(vec![record], Compression::NoCompression)
            .await
        {
            Ok(offsets) => delivered(format!(
                "written to {}/{partition} at offset {}",
                self.topic,
                offsets.first().copied().unwrap_or(-1)
            )),
            Err(e) => {
                // A new leader, a deleted topic: look the partitions up again next time.
                *self.partitions.lock().await = None;
                failed(&format!("produce to {}/{partition}: {e}", self.topic))
            }
        }
    }
}
