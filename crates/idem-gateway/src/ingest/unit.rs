//! What ingest commits: a [`Unit`] of [`Incoming`] events (one webhook or broker message, or
//! a Kafka partition batch with its dead letters and offset advance), and how a request waits
//! in the batcher's queue ([`Pending`]).

use bytes::Bytes;
use idem_core::{DedupKey, Name};
use idem_sql::{DeadLetterRecord, PartitionFence};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::answer::Answer;
use crate::model::fields::Extracted;
use crate::traces::TraceHeaders;

/// A verified delivery with its event read, waiting to be committed.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub source: usize,
    pub key: DedupKey,
    pub event: Extracted,
    pub body: Bytes,
    pub received_at: i64,
    /// The trace context stored with the event (`crate::traces`).
    pub trace: Option<TraceHeaders>,
    /// The request's `ingest` span, linked to the span of the commit it is in (disabled for
    /// broker messages and with traces off).
    pub span: tracing::Span,
    /// The routes its type matches whose `filter` does not take it (`ingest::filter`): no
    /// delivery for them, and recorded on the event.
    pub filtered: Vec<Name>,
}

/// A Kafka partition's stored offset moved from `from` to `to` (compare-and-set, fenced by the
/// partition lease) in the commit of the events read from the records in between.
#[derive(Debug, Clone)]
pub(crate) struct OffsetAdvance {
    /// The consumer name the offsets are stored under.
    pub consumer: Name,
    pub fence: PartitionFence,
    pub from: i64,
    pub to: i64,
}

/// What commits together or not at all.
#[derive(Debug)]
pub(crate) struct Unit {
    /// The events, in arrival (offset) order.
    pub events: Vec<Incoming>,
    /// Messages that can never be events, recorded in idem's dead-letter table.
    pub letters: Vec<DeadLetterRecord>,
    /// A Kafka partition's offset moved over `events` and `letters`.
    pub advance: Option<OffsetAdvance>,
    /// The generation of the wiring whose route filters set the events' `filtered`
    /// (`ingest::filter`); `None` before. A commit under another generation (a reload came
    /// in between) evaluates them again, so that every route of the configuration it commits
    /// with was asked.
    pub filtered_with: Option<u64>,
}

impl Unit {
    /// A unit of one event: a webhook, a NATS or RabbitMQ message.
    pub(crate) fn one(incoming: Incoming) -> Self {
        Self {
            events: vec![incoming],
            letters: Vec::new(),
            advance: None,
            filtered_with: None,
        }
    }
}

/// A request waiting in the batcher's queue.
pub(crate) struct Pending {
    pub unit: Unit,
    /// One answer per event of the unit, in order.
    pub reply: oneshot::Sender<Result<Vec<Answer>, Unavailable>>,
    /// When the request's `database_timeout` runs out: a request still queued then is answered
    /// 503 and left out of the batch, and the batch's commit must end before its earliest
    /// request's deadline, so that no request answered 503 is committed after all.
    pub deadline: Instant,
}

/// The batch holding a request could not be committed (the error was logged once for the
/// batch): the request is answered 503 and nothing of it was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unavailable;
