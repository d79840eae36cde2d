//! A Kafka source: idem-broker's [`KafkaConsumer`] (partitions assigned by idem leases with
//! fencing, fetched from the offsets stored in `idem_kafka_offsets`) with the gateway's group
//! commit as its [`PartitionSink`]: each partition batch is one [`Unit`] whose events, dead
//! letters and offset advance commit in one transaction, beside other batches and webhooks.
//!
//! So a crash loses nothing and forwards nothing twice: a batch either committed with its
//! offset (the next holder starts after it) or not at all (the next holder reads it again); a
//! record republished at a new offset with the same `idem-message-id` is a duplicate in the
//! inbox; a gateway whose partition lease was taken over (paused past its ttl) cannot advance
//! the offset, so its whole commit is refused and nothing of its batch is stored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use idem_broker::rskafka::client::Client;
use idem_broker::{BatchOutcome, KafkaConsumer, KafkaMessage, PartitionBatch, PartitionSink};
use idem_core::{DedupKey, EventId, Name};
use idem_sql::DeadLetterRecord;
use tokio::sync::watch;

use super::intake::{Intake, RECONNECT_DELAY, pause, until_stopped};
use crate::config::KafkaSource;
use crate::gateway::INBOX_CONSUMER;
use crate::ingest::answer::Answer;
use crate::ingest::unit::{Incoming, OffsetAdvance, Unit};
use crate::metric_definitions::{BROKER_REJECTED_TOTAL, INGEST_DURATION_SECONDS, INGEST_TOTAL};
use crate::model::fields::{KAFKA_KEY, KAFKA_MESSAGE_ID, KAFKA_POSITION, KAFKA_TOPIC};
use crate::store::GatewayDb;

/// A connected Kafka source: the cluster answered and has the topic (and its partitions).
pub(crate) struct Reader {
    settings: KafkaSource,
    client: Arc<Client>,
}

impl Reader {
    /// Connects to the bootstrap brokers and checks that the topic, and each configured
    /// partition, exists.
    ///
    /// # Errors
    /// The reason, as text naming the brokers, topic or partition.
    pub(crate) async fn connect(settings: KafkaSource) -> Result<Self, String> {
        let brokers = settings.brokers.join(",");
        let client = idem_broker::kafka_connect(&settings.brokers)
            .await
            .map_err(|e| format!("cannot connect to Kafka at {brokers}: {e}"))?;
        // rskafka 0.6 has no request timeout: a broker that never answers would hold the start.
        let topics = tokio::time::timeout(
            idem_broker::KAFKA_CLIENT_DEADLINE + Duration::from_secs(5),
            client.list_topics(),
        )
        .await
        .map_err(|_| format!("Kafka at {brokers} did not list its topics in time"))?
        .map_err(|e| format!("cannot read the topics of Kafka at {brokers}: {e}"))?;
        let Some(topic) = topics.into_iter().find(|t| t.name == settings.topic) else {
            return Err(format!(
                "Kafka topic {:?} does not exist at {brokers}; the gateway never creates topics: create it, or fix `topic`",
                settings.topic
            ));
        };
        if let Some(missing) = settings
            .partitions
            .iter()
            .flatten()
            .find(|p| !topic.partitions.contains(p))
        {
            return Err(format!(
                "Kafka topic {:?} has no partition {missing} (it has {}); fix `partitions`",
                settings.topic,
                topic.partitions.len()
            ));
        }
        Ok(Self {
            settings,
            client: Arc::new(client),
        })
    }

    /// Consumes the topic until `stopped`: takes the fair share of its partitions, stores each
    /// batch with its offset, and at shutdown finishes the batches in flight and releases the
    /// partition leases (another gateway takes them at once). A failure of the consumer itself
    /// (the topic's metadata unreadable) is logged and the consumer started again after a
    /// second.
    ///
    /// # Errors
    /// The reason the reader stopped before `stopped`: a setting idem-broker refuses.
    pub(crate) async fn run<DB: GatewayDb>(
        self,
        intake: Intake<DB>,
        stopped: watch::Receiver<bool>,
    ) -> Result<(), String> {
        let source = intake.source_name().to_string();
        let sink = KafkaIntake {
            intake: intake.clone(),
            consumer: self.settings.consumer.clone(),
        };
        loop {
            let consumer = KafkaConsumer::new(
                Arc::clone(&self.client),
                intake.gateway.store().clone(),
                &self.settings.consumer,
                &self.settings.topic,
                sink.clone(),
            )
            .map_err(|e| e.to_string())?;
            let consumer = match &self.settings.partitions {
                Some(partitions) => consumer.partitions(partitions.iter().copied()),
                None => consumer,
            };
            let mut stop = stopped.clone();
            match consumer
                .run(async move { until_stopped(&mut stop).await })
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == idem_broker::KafkaErrorKind::InvalidConfig => {
                    return Err(e.to_string());
                }
                Err(error) => {
                    tracing::warn!(%source, %error, "Kafka consumer failed; starting it again");
                    if pause(RECONNECT_DELAY, &stopped).await {
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// The gateway's ingest as the sink of a Kafka source's partitions.
struct KafkaIntake<DB: GatewayDb> {
    intake: Intake<DB>,
    consumer: Name,
}

impl<DB: GatewayDb> Clone for KafkaIntake<DB> {
    fn clone(&self) -> Self {
        Self {
            intake: self.intake.clone(),
            consumer: self.consumer.clone(),
        }
    }
}

/// A record that can never be an event, for its log line.
struct Rejected {
    position: String,
    reason: &'static str,
    detail: String,
}

impl<DB: GatewayDb> PartitionSink for KafkaIntake<DB> {
    /// Reads each record's event (a record that is not one becomes a dead letter), commits the
    /// events, the dead letters and the offset advance `from..end` as one unit of the group
    /// commit, and says [`BatchOutcome::Settled`].
    ///
    /// # Errors
    /// A handler-kind error when the unit was not committed: the database failed or did not
    /// answer within `database_timeout`, or the partition was taken over (the fenced advance
    /// refused the whole commit). Nothing of the batch was stored; the consumer waits 100 ms
    /// (doubling to 5 s), reads the stored offset again, and drops the partition if it is no
    /// longer its own.
    async fn apply(&self, batch: &PartitionBatch) -> Result<BatchOutcome, idem_sql::Error> {
        let started = Instant::now();
        let gateway = &self.intake.gateway;
        let wiring = gateway.wiring();
        let source = wiring.source(self.intake.index);
        let limit = wiring.config().max_body_bytes;
        let received_at = gateway.now().as_millis();
        let mut unit = Unit {
            events: Vec::with_capacity(batch.messages.len()),
            letters: Vec::new(),
            advance: Some(OffsetAdvance {
                consumer: self.consumer.clone(),
                fence: batch.fence.clone(),
                from: batch.from,
                to: batch.end(),
            }),
            filtered_with: None,
        };
        let mut rejected = Vec::new();
        for message in &batch.messages {
            let headers = headers_of(message);
            let body = message.value.clone().unwrap_or_default();
            let extracted = if body.len() > limit {
                Err((
                    "body-too-large",
                    format!(
                        "the body is {} bytes, more than max_body_bytes = {limit}; the dead letter keeps its first {limit} bytes",
                        body.len()
                    ),
                ))
            } else {
                source
                    .fields
                    .extract(&headers, &body)
                    .map_err(|e| (e.code(), e.to_string()))
            };
            match extracted {
                Ok(event) => unit.events.push(Incoming {
                    source: self.intake.index,
                    key: DedupKey::from_event(&source.dedup_scope, &event.event_id),
                    event,
                    body,
                    received_at,
                    // Broker messages are not traced at ingest.
                    trace: None,
                    span: tracing::Span::none(),
                    filtered: Vec::new(),
                }),
                Err((reason, detail)) => {
                    unit.letters
                        .push(self.letter(message, &body, reason, &detail));
                    rejected.push(Rejected {
                        position: message.position().to_string(),
                        reason,
                        detail,
                    });
                }
            }
        }
        let events = unit.events.len();
        let answers = crate::ingest::submit_unit(gateway, self.intake.queue.as_ref(), unit).await;
        let name = source.name.to_string();
        let count = |status: &'static str, n: usize| {
            if n > 0 {
                metrics::counter!(INGEST_TOTAL, "source" => name.clone(), "status" => status)
                    .increment(n as u64);
            }
        };
        let outcome = match answers {
            Ok(answers) => {
                let accepted = answers.iter().filter(|a| **a == Answer::Accepted).count();
                count("accepted", accepted);
                count("duplicate", answers.len() - accepted);
                count("rejected", rejected.len());
                for r in &rejected {
                    tracing::warn!(
                        source = %name, position = %r.position, reason = r.reason, detail = %r.detail,
                        "Kafka record is not an event; kept as a dead letter and not read again"
                    );
                    metrics::counter!(BROKER_REJECTED_TOTAL, "source" => name.clone(), "reason" => r.reason)
                        .increment(1);
                }
                Ok(BatchOutcome::Settled)
            }
            Err(_) => {
                count("unavailable", events + rejected.len());
                Err(idem_sql::Error::handler(format!(
                    "the batch {}/{}@{}..{} was not stored; read again from the stored offset",
                    batch.topic(),
                    batch.partition(),
                    batch.from,
                    batch.end()
                )))
            }
        };
        metrics::histogram!(INGEST_DURATION_SECONDS, "source" => name)
            .record(started.elapsed().as_secs_f64());
        outcome
    }
}

impl<DB: GatewayDb> KafkaIntake<DB> {
    /// The dead letter of `message` (value `body`): keyed by its event id when it has one (a
    /// copy read again updates the row), its body cut at `max_body_bytes`, its position as the
    /// destination.
    fn letter(
        &self,
        message: &KafkaMessage,
        body: &Bytes,
        reason: &str,
        detail: &str,
    ) -> DeadLetterRecord {
        let source = &*self.intake.source;
        let kept = body.len().min(self.intake.gateway.config().max_body_bytes);
        let event_id = message.header_str(KAFKA_MESSAGE_ID).map(str::to_owned);
        let dedup_key = event_id
            .as_deref()
            .and_then(|id| EventId::new(id).ok())
            .map(|id| DedupKey::from_event(&source.dedup_scope, &id));
        DeadLetterRecord {
            consumer: Name::new("consumer", INBOX_CONSUMER).expect("a valid name"),
            source: source.name.clone(),
            event_id,
            dedup_key,
            entity: None,
            destination: message.position().to_string(),
            headers: message
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
                .collect(),
            payload: body[..kept].to_vec(),
            error: format!("{reason}: {detail}"),
            delivery_count: message.delivered,
        }
    }
}

/// `message`'s headers as the gateway's fields read them, with the pseudo-headers
/// [`KAFKA_TOPIC`], [`KAFKA_POSITION`] and (for a UTF-8 key) [`KAFKA_KEY`], which win over
/// record headers of the same name. Kafka header names are case-sensitive, HTTP's are not: a
/// record header is read by its lower-cased name. Headers HTTP cannot carry are left out.
fn headers_of(message: &KafkaMessage) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in &message.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(value),
        ) {
            headers.append(name, value);
        }
    }
    let mut set = |name: &'static str, value: Option<&str>| {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            headers.insert(HeaderName::from_static(name), value);
        }
    };
    set(KAFKA_TOPIC, Some(&message.topic));
    set(KAFKA_POSITION, Some(&message.position().to_string()));
    let key = message
        .key
        .as_deref()
        .and_then(|k| std::str::from_utf8(k).ok());
    set(KAFKA_KEY, key);
    headers
}
