//! A Kafka record as the sink, the decoder and the handler see it, and where it was read from.

use std::fmt;

use bytes::Bytes;
use rskafka::record::RecordAndOffset;

/// The header the relay sets and the default decoder reads: the event id that stays the same
/// when a message is published again at a new offset (an outbox row's stable message id).
pub const MESSAGE_ID_HEADER: &str = "idem-message-id";

/// Where a record is: topic, partition and offset. Its text form, `{topic}/{partition}@{offset}`
/// (`orders/3@1234`), is unambiguous because topic names never hold `/` or `@`; it is the
/// `destination` of the consumer's dead letters and the fallback event id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KafkaPosition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset.
    pub offset: i64,
}

impl fmt::Display for KafkaPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}@{}", self.topic, self.partition, self.offset)
    }
}

/// One record of a partition, as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaMessage {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The record's offset in its partition.
    pub offset: i64,
    /// The record key, if any (the relay sets the outbox row's aggregate, `{type}:{id}`).
    pub key: Option<Bytes>,
    /// The record value; `None` for a null value (a tombstone on a compacted topic).
    pub value: Option<Bytes>,
    /// The headers as (name, value) pairs, sorted by name. rskafka keeps one value per name
    /// (the last one on the wire) and does not keep the wire order.
    pub headers: Vec<(String, Bytes)>,
    /// The record timestamp, ms since the Unix epoch (the producer's create time, or the
    /// broker's log-append time when the topic is configured so).
    pub timestamp_ms: i64,
    /// Which delivery of this record this is, 1 for the first: for the record at the stored
    /// offset, one more than its failed deliveries recorded in `idem_kafka_offsets` (which
    /// survive restarts); 1 for the records after it.
    pub delivered: u32,
}

impl KafkaMessage {
    /// The message as rskafka fetched it from `partition` of `topic`.
    pub(crate) fn from_record(topic: &str, partition: i32, fetched: RecordAndOffset) -> Self {
        let RecordAndOffset { record, offset } = fetched;
        Self {
            topic: topic.to_owned(),
            partition,
            offset,
            key: record.key.map(Bytes::from),
            value: record.value.map(Bytes::from),
            headers: record
                .headers
                .into_iter()
                .map(|(name, value)| (name, Bytes::from(value)))
                .collect(),
            timestamp_ms: record.timestamp.timestamp_millis(),
            delivered: 1,
        }
    }

    /// The value's bytes, empty for a null value.
    pub fn payload(&self) -> &[u8] {
        self.value.as_deref().unwrap_or_default()
    }

    /// The value of header `name` (compared exactly: Kafka header names are case-sensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_ref())
    }

    /// The value of header `name` as text, `None` when absent or not UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Where the record is.
    pub fn position(&self) -> KafkaPosition {
        KafkaPosition {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
        }
    }

    /// The headers as text pairs for a dead letter: values that are not UTF-8 are converted
    /// lossily (invalid bytes become U+FFFD); the payload is kept byte for byte.
    pub(crate) fn text_headers(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
            .collect()
    }
}
