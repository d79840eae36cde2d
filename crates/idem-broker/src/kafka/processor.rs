//! The library's sink: the handler, the inbox claim, the version guard and the offset advance of
//! a batch in one transaction; retries with backoff, then a dead letter (or a halt).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem_core::{Advance, DedupKey, EventId, Name};
use idem_sql::sqlx::Transaction;
use idem_sql::{
    Backend, BoxFuture, Claim, DEFAULT_MAX_ATTEMPTS, DeadLetterRecord, DeadLetters, ErrorKind,
    Event, Inbox, KafkaOffsets, Store, VersionGuard,
};

use super::message::{KafkaMessage, MESSAGE_ID_HEADER};
use super::sink::{BatchOutcome, PartitionBatch, PartitionSink};
use crate::consumer::{DecodeError, RetryPolicy};
use crate::metric_definitions::{
    KAFKA_DEAD_LETTERS_TOTAL, KAFKA_MESSAGES_TOTAL, KAFKA_RETRIES_TOTAL,
};

/// The application's handler, boxed: runs inside the batch's transaction for each fresh,
/// non-stale message, in offset order. [`idem_sql::handler!`] makes one from an async closure;
/// `&mut **tx` is the connection when it is written by hand.
pub type KafkaHandlerFn<DB> = Arc<
    dyn for<'t> Fn(
            &'t mut Transaction<'static, DB>,
            &'t KafkaMessage,
        ) -> BoxFuture<'t, Result<(), idem_sql::Error>>
        + Send
        + Sync,
>;

/// A decoder from a Kafka message to the [`Event`] it carries.
pub type KafkaDecodeFn = Arc<dyn Fn(&KafkaMessage) -> Result<Event, DecodeError> + Send + Sync>;

/// What happens to a message whose handler failed on every delivery the [`RetryPolicy`] allows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoisonPolicy {
    /// Record a dead letter (topic, partition and offset in its `destination`, headers, payload,
    /// error) and move the partition past the message in the same transaction; the later
    /// messages of the partition are applied.
    #[default]
    DeadLetter,
    /// Stop consuming the partition at the message: its offset stays stored with the failure
    /// count and last error, the partition stays held by this process, and the other partitions
    /// go on. A restart (with a fixed handler) delivers the message again, once, before halting
    /// again if it still fails.
    Halt,
}

/// The default decoder: the event id is the value of header `header` (the relay's
/// [`MESSAGE_ID_HEADER`], `idem-message-id`, unless configured otherwise), or, for a message
/// without it, the message's position `{topic}/{partition}@{offset}`; the dedup key is
/// `(source, event id)`; no entity.
///
/// The position is a safe event id only when each event is written to the topic once: a
/// producer that retries a send without Kafka's idempotent producer (`enable.idempotence`, on
/// by default since Kafka 3.0), a relay that republishes after a lost acknowledgement, a
/// mirror (MirrorMaker) or a replay into a new topic writes the same event at another offset,
/// and a position id makes that two events. Publish with a stable id in a header for those.
///
/// # Errors
/// [`DecodeError::Payload`] when the header is not UTF-8; [`DecodeError::Invalid`] when it is
/// blank or longer than 255 bytes.
pub fn decode_kafka_event(
    source: &Name,
    header: &str,
    message: &KafkaMessage,
) -> Result<Event, DecodeError> {
    let id = match message.header(header) {
        Some(bytes) => std::str::from_utf8(bytes)
            .map_err(|_| DecodeError::Payload(format!("header {header} is not UTF-8").into()))?
            .to_owned(),
        None => message.position().to_string(),
    };
    Ok(Event::new(DedupKey::from_event(source, &EventId::new(id)?)))
}

/// Messages a [`KafkaProcessor`] settled, by outcome: a snapshot of [`KafkaStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaCounts {
    /// Applied (the handler ran and committed; ties and gaps included).
    pub applied: u64,
    /// Duplicates: the inbox had the event (a copy at another offset).
    pub duplicate: u64,
    /// Stale events, recorded and not applied.
    pub stale: u64,
    /// Dead-lettered (failed past the retry policy, or undecodable).
    pub dead_lettered: u64,
    /// Failed deliveries delivered again later.
    pub retried: u64,
}

impl KafkaCounts {
    /// The repeat rate: duplicates over every settled message (0 when none settled).
    pub fn repeat_rate(&self) -> f64 {
        let settled = self.applied + self.duplicate + self.stale + self.dead_lettered;
        if settled == 0 {
            0.0
        } else {
            self.duplicate as f64 / settled as f64
        }
    }
}

/// Live counters of one processor (shared by its clones), counted after each commit and also
/// recorded as [`KAFKA_MESSAGES_TOTAL`], [`KAFKA_RETRIES_TOTAL`] and [`KAFKA_DEAD_LETTERS_TOTAL`].
#[derive(Debug, Clone, Default)]
pub struct KafkaStats(Arc<[AtomicU64; 5]>);

impl KafkaStats {
    /// The counts so far.
    pub fn get(&self) -> KafkaCounts {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        KafkaCounts {
            applied: n(0),
            duplicate: n(1),
            stale: n(2),
            dead_lettered: n(3),
            retried: n(4),
        }
    }

    fn add(&self, counts: &KafkaCounts) {
        for (i, n) in [
            counts.applied,
            counts.duplicate,
            counts.stale,
            counts.dead_lettered,
            counts.retried,
        ]
        .into_iter()
        .enumerate()
        {
            self.0[i].fetch_add(n, Ordering::Relaxed);
        }
    }
}

/// The library's [`PartitionSink`]: for each batch, in one transaction, claims every message's
/// event in the inbox (one statement), checks the version guard of those with an entity, runs
/// the handler for the fresh, non-stale ones in offset order, and advances the partition's
/// stored offset past them (compare-and-set under the partition's fence); then commits.
///
/// - A message at an offset already stored is never handed to it (the transport fetches from
///   the stored offset), so its handler does not run again.
/// - A message whose event the inbox has (published again at a new offset with the same event
///   id) is a duplicate: counted, not applied.
/// - A handler error rolls the transaction back; the messages before the failed one are
///   settled again in a new transaction (their handler runs again: it must do nothing outside
///   the transaction) with the offset advanced to the failed message and its failure counted in
///   the offsets row, and the failed message is delivered again after the [`RetryPolicy`]'s
///   wait. On its N-th failed delivery (counted across restarts and holders) it is
///   dead-lettered, or the partition halts ([`PoisonPolicy`]).
/// - A message that cannot be decoded is dead-lettered at once, in the batch's transaction.
/// - Conflicts (serialization failures, deadlocks, SQLITE_BUSY) retry the whole transaction up
///   to [`DEFAULT_MAX_ATTEMPTS`] times; a database that cannot be reached fails the batch and the
///   transport delivers it again later.
///
/// Sequence gaps of the version guard are applied and reported (C5's default): holding one
/// message back would hold back its whole partition.
pub struct KafkaProcessor<DB: Backend> {
    store: Store<DB>,
    offsets: KafkaOffsets<DB>,
    inbox: Inbox<DB>,
    guard: VersionGuard<DB>,
    dead_letters: DeadLetters<DB>,
    source: Name,
    handler: KafkaHandlerFn<DB>,
    header: String,
    decode: Option<KafkaDecodeFn>,
    retry: RetryPolicy,
    poison: PoisonPolicy,
    stats: KafkaStats,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for KafkaProcessor<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            offsets: self.offsets.clone(),
            inbox: self.inbox.clone(),
            guard: self.guard.clone(),
            dead_letters: self.dead_letters.clone(),
            source: self.source.clone(),
            handler: Arc::clone(&self.handler),
            header: self.header.clone(),
            decode: self.decode.clone(),
            retry: self.retry.clone(),
            poison: self.poison,
            stats: self.stats.clone(),
        }
    }
}

impl<DB: Backend> fmt::Debug for KafkaProcessor<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaProcessor")
            .field("consumer", self.offsets.consumer())
            .field("source", &self.source)
            .field("header", &self.header)
            .field("custom_decoder", &self.decode.is_some())
            .field("retry", &self.retry)
            .field("poison", &self.poison)
            .finish_non_exhaustive()
    }
}

/// What one transaction over a prefix of the batch decided.
enum Verdict {
    /// Every message settled.
    Settled,
    /// The message at this index failed on its last allowed delivery and was dead-lettered; the
    /// offset is past it.
    DeadLettered(usize),
    /// The message at this index failed and is delivered again later.
    Retry { index: usize, attempts: u32 },
    /// The message at this index failed on its last allowed delivery under
    /// [`PoisonPolicy::Halt`].
    Halt { index: usize, error: String },
}

/// A handler failure at `index` of the batch, settled in the next attempt.
struct Failure {
    index: usize,
    error: String,
    permanent: bool,
}

/// What one attempt at a transaction did.
enum Attempt {
    Committed(Verdict, KafkaCounts),
    /// The handler failed at this index; the transaction was rolled back.
    HandlerFailed {
        index: usize,
        error: String,
        /// The handler marked the error permanent: no retry.
        permanent: bool,
    },
}

impl<DB: Backend> KafkaProcessor<DB> {
    /// A processor for `consumer` (versioned, like `billing_v2`: dedup, versions, offsets and
    /// dead letters are per consumer) that runs `handler`, keys events `(source, event id)` with
    /// [`decode_kafka_event`] on header [`MESSAGE_ID_HEADER`], retries with
    /// [`RetryPolicy::default`] and dead-letters poison messages ([`PoisonPolicy::DeadLetter`]).
    ///
    /// The handler is an async closure in [`idem_sql::handler!`] (`idem::handler!` through the
    /// facade): `handler!(async move |tx, message: &KafkaMessage| { … })`, where `tx` is the
    /// transaction's connection (`&mut *tx` for sqlx and idem's writes) and `?` takes any error.
    /// An error marked [permanent](idem_sql::HandlerError::permanent) settles the message at
    /// once as the [`PoisonPolicy`] says (a dead letter, or a halt) instead of retrying it. A
    /// closure written `|tx, message| Box::pin(async move { … })` with `&mut **tx` as the
    /// connection is taken as it is.
    ///
    /// The handler may run more than once for one message (a conflict retried, a later message
    /// of its batch failing), so it must do nothing outside the transaction: record external
    /// calls with the effect ledger ([`idem_sql::EffectLedger::enqueue`]) and messages with the
    /// outbox, in `tx`.
    pub fn new<H>(store: Store<DB>, consumer: &Name, source: Name, handler: H) -> Self
    where
        H: for<'t> Fn(
                &'t mut Transaction<'static, DB>,
                &'t KafkaMessage,
            ) -> BoxFuture<'t, Result<(), idem_sql::Error>>
            + Send
            + Sync
            + 'static,
    {
        Self {
            offsets: store.kafka_offsets(consumer),
            inbox: store.inbox(consumer),
            guard: store.version_guard(consumer),
            dead_letters: store.dead_letters(),
            store,
            source,
            handler: Arc::new(handler),
            header: MESSAGE_ID_HEADER.to_owned(),
            decode: None,
            retry: RetryPolicy::default(),
            poison: PoisonPolicy::default(),
            stats: KafkaStats::default(),
        }
    }

    /// Sets the header the default decoder reads the event id from (default
    /// [`MESSAGE_ID_HEADER`]); compared exactly (Kafka header names are case-sensitive).
    pub fn message_id_header(self, header: impl Into<String>) -> Self {
        Self {
            header: header.into(),
            ..self
        }
    }

    /// Sets the decoder, for events whose id, entity and version are in the payload or headers.
    /// A decode error dead-letters the message at once (retrying cannot change its bytes).
    pub fn decode<F>(self, decode: F) -> Self
    where
        F: Fn(&KafkaMessage) -> Result<Event, DecodeError> + Send + Sync + 'static,
    {
        Self {
            decode: Some(Arc::new(decode)),
            ..self
        }
    }

    /// Sets the retry policy: at most [`RetryPolicy::max_deliveries`] failed deliveries of a
    /// message, with its backoff between them.
    pub fn retry(self, retry: RetryPolicy) -> Self {
        Self { retry, ..self }
    }

    /// Sets what happens to a message that failed on every allowed delivery.
    pub fn poison(self, poison: PoisonPolicy) -> Self {
        Self { poison, ..self }
    }

    /// The consumer name.
    pub fn consumer(&self) -> &Name {
        self.offsets.consumer()
    }

    /// The live counters of this processor and its clones.
    pub fn stats(&self) -> KafkaStats {
        self.stats.clone()
    }

    fn decode_one(&self, message: &KafkaMessage) -> Result<Event, DecodeError> {
        match &self.decode {
            Some(decode) => decode(message),
            None => decode_kafka_event(&self.source, &self.header, message),
        }
    }

    /// Settles `messages[start..]` of `batch`, whose stored offset is `from`, in one committed
    /// transaction (retried on conflicts, and on the shorter prefix when a handler fails).
    async fn settle(
        &self,
        batch: &PartitionBatch,
        start: usize,
        from: i64,
        events: &[Result<Event, DecodeError>],
    ) -> Result<Verdict, idem_sql::Error> {
        let mut limit = batch.messages.len();
        let mut failure: Option<Failure> = None;
        let mut attempt = 1;
        loop {
            let result = self
                .attempt(batch, start, limit, from, events, failure.as_ref())
                .await;
            match result {
                Ok(Attempt::Committed(verdict, counts)) => {
                    self.count(batch.topic(), &counts);
                    return Ok(verdict);
                }
                Ok(Attempt::HandlerFailed {
                    index,
                    error,
                    permanent,
                }) => {
                    tracing::warn!(consumer = %self.consumer(), position = %batch.messages[index].position(), %error, permanent, "handler failed; settling the messages before it");
                    limit = index;
                    failure = Some(Failure {
                        index,
                        error,
                        permanent,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Conflict && attempt < DEFAULT_MAX_ATTEMPTS => {
                    tracing::debug!(consumer = %self.consumer(), attempt, error = %e, "transaction conflict, retrying the batch");
                    tokio::time::sleep(conflict_backoff(attempt)).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One transaction over `messages[start..limit]`, then the failure at `limit` if any.
    async fn attempt(
        &self,
        batch: &PartitionBatch,
        start: usize,
        limit: usize,
        from: i64,
        events: &[Result<Event, DecodeError>],
        failure: Option<&Failure>,
    ) -> Result<Attempt, idem_sql::Error> {
        let mut tx = self.store.begin().await?;
        let keyed: Vec<DedupKey> = events[start..limit]
            .iter()
            .filter_map(|e| e.as_ref().ok().map(|e| e.key.clone()))
            .collect();
        let mut claims = if keyed.is_empty() {
            Vec::new()
        } else {
            self.inbox.claim_many(&mut tx, &keyed).await?
        }
        .into_iter();
        let mut counts = KafkaCounts::default();
        let pending = batch.messages.iter().zip(events).enumerate();
        for (index, (message, decoded)) in pending.take(limit).skip(start) {
            let event = match decoded {
                Ok(event) => event,
                Err(e) => {
                    let letter = self.letter(message, None, &e.to_string());
                    let id = self.dead_letters.record_in(&mut tx, &letter).await?;
                    tracing::error!(consumer = %self.consumer(), position = %message.position(), dead_letter = id, error = %e, "undecodable message dead-lettered");
                    metrics::counter!(KAFKA_DEAD_LETTERS_TOTAL, "consumer" => self.consumer().to_string(), "topic" => batch.topic().to_owned(), "reason" => "undecodable").increment(1);
                    counts.dead_lettered += 1;
                    continue;
                }
            };
            if claims.next() != Some(Claim::Fresh) {
                counts.duplicate += 1;
                continue;
            }
            if let Some((entity, version)) = &event.entity {
                let advance = self
                    .guard
                    .advance(&mut tx, entity, version, &event.key)
                    .await?;
                if matches!(advance, Advance::Stale { .. }) {
                    counts.stale += 1;
                    continue;
                }
            }
            match (self.handler)(&mut tx, message).await {
                Ok(()) => counts.applied += 1,
                Err(e) if matches!(e.kind(), ErrorKind::Conflict | ErrorKind::Unavailable) => {
                    return Err(e);
                }
                Err(e) => {
                    // Released now rather than when the pool next uses the connection, so the
                    // next attempt's claims do not wait on these.
                    tx.rollback().await.ok();
                    return Ok(Attempt::HandlerFailed {
                        index,
                        error: e.to_string(),
                        permanent: e.kind() == ErrorKind::Permanent,
                    });
                }
            }
        }
        let fence = &batch.fence;
        let Some(Failure {
            index,
            error,
            permanent,
        }) = failure
        else {
            self.offsets
                .advance_in(&mut tx, fence, from, batch.end())
                .await?;
            self.commit(tx, &counts).await?;
            return Ok(Attempt::Committed(Verdict::Settled, counts));
        };
        let (index, failed) = (*index, &batch.messages[*index]);
        if failed.offset > from {
            self.offsets
                .advance_in(&mut tx, fence, from, failed.offset)
                .await?;
        }
        let attempts = self
            .offsets
            .record_failure_in(&mut tx, fence, failed.offset, error)
            .await?;
        let verdict = if !*permanent && !self.retry.exhausted(attempts) {
            Verdict::Retry { index, attempts }
        } else if self.poison == PoisonPolicy::Halt {
            Verdict::Halt {
                index,
                error: error.clone(),
            }
        } else {
            let event = events[index].as_ref().ok();
            let mut letter = self.letter(failed, event, error);
            letter.delivery_count = attempts;
            let id = self.dead_letters.record_in(&mut tx, &letter).await?;
            self.offsets
                .advance_in(
                    &mut tx,
                    fence,
                    failed.offset,
                    failed.offset.saturating_add(1),
                )
                .await?;
            tracing::error!(consumer = %self.consumer(), position = %failed.position(), attempts, dead_letter = id, %error, "message dead-lettered after its last allowed delivery");
            counts.dead_lettered += 1;
            Verdict::DeadLettered(index)
        };
        self.commit(tx, &counts).await?;
        match &verdict {
            Verdict::DeadLettered(_) => {
                metrics::counter!(KAFKA_DEAD_LETTERS_TOTAL, "consumer" => self.consumer().to_string(), "topic" => batch.topic().to_owned(), "reason" => "failed").increment(1);
            }
            Verdict::Retry { .. } => counts.retried += 1,
            Verdict::Settled | Verdict::Halt { .. } => {}
        }
        Ok(Attempt::Committed(verdict, counts))
    }

    /// Commits a batch's transaction, carrying the consumer registry's pending counts when a
    /// flush is due, then counts the batch's outcomes.
    async fn commit(
        &self,
        tx: idem_sql::sqlx::Transaction<'static, DB>,
        counts: &KafkaCounts,
    ) -> Result<(), idem_sql::Error> {
        let counted = idem_sql::EventCounts::new(counts.applied, counts.duplicate, counts.stale);
        self.store
            .commit_counting(tx, self.consumer(), counted)
            .await
    }

    fn letter(
        &self,
        message: &KafkaMessage,
        event: Option<&Event>,
        error: &str,
    ) -> DeadLetterRecord {
        DeadLetterRecord {
            consumer: self.consumer().clone(),
            source: self.source.clone(),
            event_id: message.header_str(&self.header).map(str::to_owned),
            dedup_key: event.map(|e| e.key.clone()),
            entity: event.and_then(|e| e.entity.as_ref().map(|(entity, _)| entity.clone())),
            destination: message.position().to_string(),
            headers: message.text_headers(),
            payload: message.payload().to_vec(),
            error: error.to_owned(),
            delivery_count: message.delivered,
        }
    }

    fn count(&self, topic: &str, counts: &KafkaCounts) {
        self.stats.add(counts);
        let consumer = self.consumer().to_string();
        for (outcome, n) in [
            ("applied", counts.applied),
            ("duplicate", counts.duplicate),
            ("stale", counts.stale),
            ("dead_lettered", counts.dead_lettered),
        ] {
            if n > 0 {
                metrics::counter!(KAFKA_MESSAGES_TOTAL, "consumer" => consumer.clone(), "topic" => topic.to_owned(), "outcome" => outcome).increment(n);
            }
        }
        if counts.retried > 0 {
            metrics::counter!(KAFKA_RETRIES_TOTAL, "consumer" => consumer, "topic" => topic.to_owned())
                .increment(counts.retried);
        }
    }
}

impl<DB: Backend> PartitionSink for KafkaProcessor<DB> {
    async fn apply(&self, batch: &PartitionBatch) -> Result<BatchOutcome, idem_sql::Error> {
        let events: Vec<Result<Event, DecodeError>> =
            batch.messages.iter().map(|m| self.decode_one(m)).collect();
        let (mut start, mut from) = (0, batch.from);
        while start < batch.messages.len() {
            match self.settle(batch, start, from, &events).await? {
                Verdict::Settled => return Ok(BatchOutcome::Settled),
                Verdict::DeadLettered(index) => {
                    start = index + 1;
                    from = batch.messages[index].offset.saturating_add(1);
                }
                Verdict::Retry { index, attempts } => {
                    let after = self.retry.delay(attempts);
                    tracing::warn!(consumer = %self.consumer(), position = %batch.messages[index].position(), attempts, ?after, "delivery failed; retrying later");
                    return Ok(BatchOutcome::Retry {
                        next_offset: batch.messages[index].offset,
                        attempts,
                        after,
                    });
                }
                Verdict::Halt { index, error } => {
                    let position = batch.messages[index].position();
                    tracing::error!(consumer = %self.consumer(), %position, %error, "message failed on its last allowed delivery; partition halted");
                    return Ok(BatchOutcome::Halt {
                        next_offset: position.offset,
                        reason: format!("{position} failed: {error}"),
                    });
                }
            }
        }
        Ok(BatchOutcome::Settled)
    }
}

/// The pause before retry `attempt` (1-based) after a conflict: 5, 10, 20, … ms, capped at
/// 200 ms (as the runner's).
fn conflict_backoff(attempt: u32) -> Duration {
    Duration::from_millis((5u64 << attempt.min(6)).min(200))
}
