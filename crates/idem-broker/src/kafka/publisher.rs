//! Publishing outbox rows to Kafka: the relay target `kafka`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use idem_sql::OutboxRow;
use rskafka::chrono::{TimeZone, Utc};
use rskafka::client::Client;
use rskafka::client::error::Error as ClientError;
use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::record::Record;
use tokio::sync::Mutex;

use super::client::{check_topic, partitions_of};
use super::message::MESSAGE_ID_HEADER;
use super::partitioner::partition_for_key;
use crate::publisher::{PublishOutcome, Publisher};

/// The default longest wait for one produce request's acknowledgement; past it the rows are
/// failed (they may have been written: the relay publishes them again with the same message id,
/// and the consumer's inbox drops the copy).
pub const DEFAULT_PRODUCE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a topic's partition count is trusted before it is read again (Kafka's
/// `metadata.max.age.ms` default): partitions added to a topic are seen within this time.
const METADATA_MAX_AGE: Duration = Duration::from_secs(300);

/// Publishes outbox rows to Kafka: the row's destination is the topic; the record key is the
/// row's aggregate (`{aggregate_type}:{aggregate_id}`), so that one entity's messages land in
/// one partition and keep their order there; the header [`MESSAGE_ID_HEADER`]
/// (`idem-message-id`) carries the row's stable message id, and the row's headers go along.
///
/// - **Partition**: Kafka's default for keyed records, murmur2 of the key modulo the partition
///   count ([`partition_for_key`]), so Java producers with the same keys agree; a row without an
///   aggregate is placed by its message id the same way (every republish of it lands in the same
///   partition).
/// - **Acknowledgement**: rskafka sends every produce request with `acks = -1` (all in-sync
///   replicas, <https://kafka.apache.org/documentation/#producerconfigs_acks>); a batch's rows of
///   one partition go in one request, and `publish` returns only after every request was
///   answered, so the relay marks rows published only after the broker acknowledged them. Set
///   the topic's `min.insync.replicas` (2 on a 3-broker cluster) for `acks = all` to mean more
///   than the leader.
/// - **Duplicates**: the producer is not idempotent (rskafka has no producer ids), so a produce
///   whose answer was lost and that is sent again writes a second copy at a new offset, with the
///   same `idem-message-id`: the consumer's inbox makes it one effect.
/// - **Destinations** must be Kafka topic names (`a-z A-Z 0-9 . _ -`, at most
///   [`MAX_TOPIC_BYTES`](crate::MAX_TOPIC_BYTES)); a row with another destination, or to a topic
///   the cluster does not have, is [`PublishOutcome::Failed`] without being sent. A cluster that
///   cannot be reached makes the rows [`PublishOutcome::Unavailable`] (no attempt counted).
/// - **Headers**: rskafka keeps one value per header name, so of several row headers with one
///   name only the last is sent; a row header named `idem-message-id` is replaced by the row's
///   message id.
#[derive(Debug)]
pub struct KafkaPublisher {
    client: Arc<Client>,
    topics: Mutex<HashMap<String, Arc<Topic>>>,
    compression: Compression,
    timeout: Duration,
}

/// A topic's partition clients, by partition number, and when they were looked up.
#[derive(Debug)]
struct Topic {
    partitions: Vec<Arc<PartitionClient>>,
    read_at: Instant,
}

/// The rows of one batch bound for one partition, by index in the batch, in batch order (the
/// order within an aggregate).
struct Group {
    topic: Arc<Topic>,
    partition: usize,
    rows: Vec<usize>,
}

/// Why a group of rows was not acknowledged.
enum Refusal {
    /// The cluster could not be reached: nothing is known to be wrong with the rows.
    Unreachable(String),
    /// The rows were refused or their fate is unknown.
    Failed(String),
}

impl KafkaPublisher {
    /// A publisher through `client` (see [`kafka_connect`](crate::kafka_connect)), sending
    /// uncompressed record batches, waiting up to [`DEFAULT_PRODUCE_TIMEOUT`] per request.
    pub fn new(client: Arc<Client>) -> Self {
        Self {
            client,
            topics: Mutex::new(HashMap::new()),
            compression: Compression::NoCompression,
            timeout: DEFAULT_PRODUCE_TIMEOUT,
        }
    }

    /// Sends record batches with `compression` (gzip and snappy with the `kafka` feature, lz4
    /// and zstd with `kafka-lz4` and `kafka-zstd`).
    pub fn compression(self, compression: Compression) -> Self {
        Self {
            compression,
            ..self
        }
    }

    /// Sets the longest wait for one produce request's acknowledgement (at least 1 s).
    pub fn timeout(self, timeout: Duration) -> Self {
        Self {
            timeout: timeout.max(Duration::from_secs(1)),
            ..self
        }
    }

    /// The partition clients of `name`, looked up on first use and again after
    /// [`METADATA_MAX_AGE`].
    async fn topic(&self, name: &str) -> Result<Arc<Topic>, Refusal> {
        let mut topics = self.topics.lock().await;
        if let Some(topic) = topics.get(name)
            && topic.read_at.elapsed() < METADATA_MAX_AGE
        {
            return Ok(Arc::clone(topic));
        }
        let numbers = match partitions_of(&self.client, name).await {
            Ok(Some(numbers)) => numbers,
            Ok(None) => return Err(Refusal::Failed(format!("topic {name} does not exist"))),
            Err(e) => return Err(Refusal::Unreachable(e.to_string())),
        };
        let mut partitions = Vec::with_capacity(numbers.len());
        // Kafka numbers a topic's partitions 0..n.
        for (expected, number) in numbers.into_iter().enumerate() {
            if usize::try_from(number).ok() != Some(expected) {
                return Err(Refusal::Failed(format!(
                    "topic {name} has partitions that are not numbered 0..n"
                )));
            }
            let client = self
                .client
                .partition_client(name, number, UnknownTopicHandling::Error)
                .await
                .map_err(|e| refusal(&format!("partition {name}/{number}"), &e))?;
            partitions.push(Arc::new(client));
        }
        let topic = Arc::new(Topic {
            partitions,
            read_at: Instant::now(),
        });
        topics.insert(name.to_owned(), Arc::clone(&topic));
        Ok(topic)
    }

    /// Forgets a topic's partition clients (after a refusal that may mean they changed).
    async fn forget(&self, name: &str) {
        self.topics.lock().await.remove(name);
    }

    /// Sends the rows of one partition in one produce request and waits for its answer.
    async fn produce(&self, client: &PartitionClient, rows: &[&OutboxRow]) -> Result<(), Refusal> {
        let records = rows.iter().map(|row| record_of(row)).collect();
        let where_to = format!("{}/{}", client.topic(), client.partition());
        match tokio::time::timeout(self.timeout, client.produce(records, self.compression)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(refusal(&where_to, &e)),
            Err(_) => Err(Refusal::Failed(format!(
                "produce to {where_to}: no acknowledgement within {:?}",
                self.timeout
            ))),
        }
    }
}

/// The record for `row`: key = aggregate, value = payload, headers + `idem-message-id`.
fn record_of(row: &OutboxRow) -> Record {
    let mut headers: std::collections::BTreeMap<String, Vec<u8>> = row
        .headers
        .iter()
        .filter(|(name, _)| name != MESSAGE_ID_HEADER)
        .map(|(name, value)| (name.clone(), value.as_bytes().to_vec()))
        .collect();
    headers.insert(
        MESSAGE_ID_HEADER.to_owned(),
        row.message_id.as_str().as_bytes().to_vec(),
    );
    Record {
        key: row.aggregate.as_ref().map(|a| a.to_string().into_bytes()),
        value: Some(row.payload.clone()),
        headers,
        timestamp: now(),
    }
}

/// The record timestamp: now (rskafka's chrono has no clock; the epoch if the clock is before it).
fn now() -> rskafka::chrono::DateTime<Utc> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// The key the partition is chosen by: the aggregate, else the message id.
fn partition_key(row: &OutboxRow) -> Vec<u8> {
    match &row.aggregate {
        Some(aggregate) => aggregate.to_string().into_bytes(),
        None => row.message_id.as_str().as_bytes().to_vec(),
    }
}

/// Sorts a client error into "unreachable" (connection, retries exhausted) and "failed".
fn refusal(what: &str, error: &ClientError) -> Refusal {
    let text = format!("{what}: {error}");
    match error {
        ClientError::Connection(_) | ClientError::Request(_) | ClientError::RetryFailed(_) => {
            Refusal::Unreachable(text)
        }
        _ => Refusal::Failed(text),
    }
}

impl Publisher for KafkaPublisher {
    async fn publish(&self, batch: &[OutboxRow]) -> Vec<PublishOutcome> {
        let mut outcomes: Vec<Option<PublishOutcome>> = vec![None; batch.len()];
        // Each topic looked up once per batch, so an unreachable cluster costs one deadline.
        let mut topics: HashMap<&str, Result<Arc<Topic>, PublishOutcome>> = HashMap::new();
        let mut groups: Vec<Group> = Vec::new();
        for (i, row) in batch.iter().enumerate() {
            if let Err(reason) = check_topic(&row.destination) {
                outcomes[i] = Some(PublishOutcome::Failed { reason });
                continue;
            }
            let looked_up = match topics.get(row.destination.as_str()) {
                Some(known) => known.clone(),
                None => {
                    let found = self.topic(&row.destination).await.map_err(outcome_of);
                    topics.insert(&row.destination, found.clone());
                    found
                }
            };
            let topic = match looked_up {
                Ok(topic) => topic,
                Err(outcome) => {
                    outcomes[i] = Some(outcome);
                    continue;
                }
            };
            let partition = partition_for_key(&partition_key(row), topic.partitions.len());
            // In range by construction (0..len).
            let partition = usize::try_from(partition).unwrap_or(0);
            match groups
                .iter_mut()
                .find(|g| Arc::ptr_eq(&g.topic, &topic) && g.partition == partition)
            {
                Some(group) => group.rows.push(i),
                None => groups.push(Group {
                    topic,
                    partition,
                    rows: vec![i],
                }),
            }
        }
        let sent = join_all(groups.iter().map(|group| {
            let rows: Vec<&OutboxRow> = group.rows.iter().map(|&i| &batch[i]).collect();
            async move {
                match group.topic.partitions.get(group.partition) {
                    Some(client) => self.produce(client, &rows).await,
                    None => Err(Refusal::Failed("partition out of range".into())),
                }
            }
        }))
        .await;
        for (group, result) in groups.iter().zip(sent) {
            let outcome = match result {
                Ok(()) => PublishOutcome::Published,
                Err(refused) => {
                    if let Some(client) = group.topic.partitions.get(group.partition) {
                        // A new leader or changed partitions: look the topic up again next time.
                        self.forget(client.topic()).await;
                    }
                    outcome_of(refused)
                }
            };
            for &i in &group.rows {
                outcomes[i] = Some(outcome.clone());
            }
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| PublishOutcome::Failed {
                    reason: "not sent".into(),
                })
            })
            .collect()
    }
}

fn outcome_of(refused: Refusal) -> PublishOutcome {
    match refused {
        Refusal::Unreachable(reason) => PublishOutcome::Unavailable { reason },
        Refusal::Failed(reason) => PublishOutcome::Failed { reason },
    }
}
