//! What the broker consumers share: the [`Processor`] that turns one broker message into one run
//! of an [`idem_sql::Runner`] (decode → claim + handler + version guard in one transaction →
//! decision), the [`RetryPolicy`] (max deliveries N and a backoff schedule), dead-lettering after
//! N deliveries, and the delivery counters.
//!
//! # What happens to a delivery
//!
//! | runner result | [`Disposition`] | JetStream | RabbitMQ |
//! |---|---|---|---|
//! | applied (also tie, gap) | `Applied` | ack | ack |
//! | duplicate | `Duplicate` | ack | ack |
//! | stale | `Stale` | ack | ack |
//! | handler error, delivery < N | `Retry` | NAK with delay | copy to retry queue, ack |
//! | handler error, delivery ≥ N | `DeadLettered` | dead-letter row, TERM | dead-letter row, reject without requeue |
//! | handler error marked permanent ([`HandlerError::permanent`](idem_sql::HandlerError::permanent)) | `DeadLettered` at once | dead-letter row, TERM | dead-letter row, reject without requeue |
//! | conflict / database unavailable | `Retry` | NAK with delay | copy to retry queue, ack |
//! | gap rejected / parked | `Retry` | NAK with delay | copy to retry queue, ack |
//! | message cannot be decoded | `DeadLettered` | dead-letter row, TERM | dead-letter row, reject without requeue |
//!
//! The acknowledgement is sent only after the transaction committed (docs/design.md C2); a duplicate
//! is a success and is acknowledged (C3). Errors of the database itself (conflicts, a database
//! that cannot be reached) are retried without limit and never dead-lettered: the event is not at
//! fault, and the dead-letter row could not be written either.
//!
//! # Dead letters do not block their entity
//!
//! A dead-lettered event does not hold back later events of the same entity: they are processed
//! as they come. If one of them applies a newer version, a later redrive of the dead letter
//! (publishing its payload again, or running it through the runner) meets the version guard and is
//! recorded as **stale**, not applied (C5); an operator who needs it applied must reconcile the
//! entity by hand. A dead letter stays in `idem_dead_letters` until deleted (retention never
//! deletes it, C9); see [`idem_sql::DeadLetters`].

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idem_core::{DedupKey, EventId, Name};
use idem_sql::sqlx::Transaction;
use idem_sql::{Backend, BoxFuture, DeadLetterRecord, ErrorKind, Event, Outcome, Runner, Store};

use crate::metric_definitions::{ACK_FAILURES_TOTAL, DELIVERIES_TOTAL};
use crate::{Delivery, Settle, Sink};

/// The default [`RetryPolicy::max_deliveries`].
pub const DEFAULT_MAX_DELIVERIES: u32 = 5;

/// How often a failing message is delivered before it is dead-lettered, and how long to wait
/// before each redelivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    max_deliveries: u32,
    backoff: Vec<Duration>,
}

impl Default for RetryPolicy {
    /// [`DEFAULT_MAX_DELIVERIES`] (5) deliveries; waits of 1 s, 5 s, 30 s, then 2 min.
    fn default() -> Self {
        Self {
            max_deliveries: DEFAULT_MAX_DELIVERIES,
            backoff: [1, 5, 30, 120].map(Duration::from_secs).to_vec(),
        }
    }
}

impl RetryPolicy {
    /// A policy of at most `max_deliveries` deliveries (the first included) whose handler fails,
    /// waiting `backoff[n - 1]` after the n-th failed delivery (the last entry repeats when
    /// the schedule is shorter than the deliveries).
    ///
    /// # Errors
    /// [`ConsumerError::InvalidConfig`] when `max_deliveries` is 0, `backoff` is empty, or a wait
    /// is zero or longer than 1 day (JetStream and RabbitMQ both take the wait in whole
    /// milliseconds or finer; a day bounds a retry queue's TTL to something an operator expects).
    pub fn new(max_deliveries: u32, backoff: Vec<Duration>) -> Result<Self, ConsumerError> {
        if max_deliveries == 0 {
            return Err(ConsumerError::InvalidConfig(
                "max_deliveries must be at least 1".into(),
            ));
        }
        if backoff.is_empty() {
            return Err(ConsumerError::InvalidConfig(
                "the backoff schedule needs at least one wait".into(),
            ));
        }
        if let Some(bad) = backoff
            .iter()
            .find(|d| d.as_millis() == 0 || **d > Duration::from_secs(86_400))
        {
            return Err(ConsumerError::InvalidConfig(format!(
                "backoff wait {bad:?} is not between 1 ms and 1 day"
            )));
        }
        Ok(Self {
            max_deliveries,
            backoff,
        })
    }

    /// N: the delivery whose handler failure makes the message a dead letter.
    pub fn max_deliveries(&self) -> u32 {
        self.max_deliveries
    }

    /// The backoff schedule.
    pub fn backoff(&self) -> &[Duration] {
        &self.backoff
    }

    /// The wait before the delivery after the `delivered`-th (1-based) one failed.
    pub fn delay(&self, delivered: u32) -> Duration {
        self.backoff[self.step(delivered)]
    }

    /// The index in [`backoff`](Self::backoff) used after the `delivered`-th delivery failed.
    pub(crate) fn step(&self, delivered: u32) -> usize {
        (delivered.max(1) as usize - 1).min(self.backoff.len() - 1)
    }

    /// Whether a failure of the `delivered`-th delivery is final (delivered ≥ N).
    pub fn exhausted(&self, delivered: u32) -> bool {
        delivered >= self.max_deliveries
    }
}

/// Why a message could not be turned into an [`Event`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The default decoder needs the broker message id and the message has none (publish with
    /// `Nats-Msg-Id` / AMQP `message_id`, or supply a decoder).
    #[error("the message has no message id (JetStream Nats-Msg-Id header, AMQP message_id)")]
    MissingMessageId,
    /// An id, name or version in the message breaks one of idem's rules (blank, too long, …).
    #[error(transparent)]
    Invalid(#[from] idem_core::Error),
    /// The application's decoder rejected the payload.
    #[error("cannot decode the message: {0}")]
    Payload(#[source] idem_sql::BoxError),
}

/// The default decoder: the event is keyed `(source, message id)` (docs/design.md §1: a broker message
/// id is an event id), with no entity. The relays of this crate publish with the outbox row's
/// stable message id, so every republish of one row has one key.
///
/// # Errors
/// [`DecodeError::MissingMessageId`], [`DecodeError::Invalid`] for a blank or oversized id.
pub fn decode_message_id(source: &Name, delivery: &Delivery) -> Result<Event, DecodeError> {
    let id = delivery
        .message_id
        .as_deref()
        .ok_or(DecodeError::MissingMessageId)?;
    Ok(Event::new(DedupKey::from_event(source, &EventId::new(id)?)))
}

/// What the consumer decided for a delivery, after the store was written and before the broker is
/// told. Given to the [observer](Processor::observer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Disposition {
    /// The handler ran and its transaction committed; `outcome` is the runner's
    /// [`Outcome::name`]: `applied`, `tie` or `gap`. Acknowledged next.
    Applied {
        /// The runner's outcome name.
        outcome: &'static str,
    },
    /// The event was processed before: nothing ran. Acknowledged next (C3).
    Duplicate,
    /// Older than its entity's version: recorded, not applied. Acknowledged next (C5).
    Stale,
    /// Nothing was committed; the message is delivered again after `delay`.
    Retry {
        /// The wait before the redelivery.
        delay: Duration,
        /// Why: the error or the held gap, as text.
        reason: String,
    },
    /// The message was recorded as dead letter `id` in `idem_dead_letters` and is settled next
    /// (JetStream TERM, RabbitMQ `basic.reject` without requeue).
    DeadLettered {
        /// The dead letter's row id.
        id: i64,
    },
}

impl Disposition {
    /// The `outcome` label of [`DELIVERIES_TOTAL`]: `applied`, `duplicate`, `stale`, `retried`
    /// or `dead_lettered`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Applied { .. } => "applied",
            Self::Duplicate => "duplicate",
            Self::Stale => "stale",
            Self::Retry { .. } => "retried",
            Self::DeadLettered { .. } => "dead_lettered",
        }
    }
}

/// Deliveries a consumer settled, by outcome: a snapshot of [`DeliveryStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeliveryCounts {
    /// Applied (ties and gaps included).
    pub applied: u64,
    /// Duplicates, acknowledged.
    pub duplicate: u64,
    /// Stale events, acknowledged.
    pub stale: u64,
    /// Deliveries sent back for a later retry.
    pub retried: u64,
    /// Deliveries that became dead letters.
    pub dead_lettered: u64,
    /// Acknowledgements that could not be sent (the message will be redelivered).
    pub ack_failures: u64,
}

/// Live counters of one consumer (shared by its clones), also recorded as [`DELIVERIES_TOTAL`]
/// and [`ACK_FAILURES_TOTAL`].
#[derive(Debug, Clone, Default)]
pub struct DeliveryStats(Arc<[AtomicU64; 6]>);

impl DeliveryStats {
    /// The counts so far.
    pub fn get(&self) -> DeliveryCounts {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        DeliveryCounts {
            applied: n(0),
            duplicate: n(1),
            stale: n(2),
            retried: n(3),
            dead_lettered: n(4),
            ack_failures: n(5),
        }
    }

    fn add(&self, disposition: &Disposition) {
        let i = match disposition {
            Disposition::Applied { .. } => 0,
            Disposition::Duplicate => 1,
            Disposition::Stale => 2,
            Disposition::Retry { .. } => 3,
            Disposition::DeadLettered { .. } => 4,
        };
        self.0[i].fetch_add(1, Ordering::Relaxed);
    }

    fn add_ack_failure(&self) {
        self.0[5].fetch_add(1, Ordering::Relaxed);
    }
}

/// Errors of the broker consumers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// A setting that cannot work (zero deliveries, an empty backoff, an in-progress interval not
    /// below ack_wait, a queue name too long for its retry queues, …).
    #[error("invalid consumer configuration: {0}")]
    InvalidConfig(String),
    /// JetStream: the pull request failed (connection closed, consumer deleted, …). The consumer
    /// stopped after finishing its in-flight messages; unacknowledged ones are redelivered after
    /// ack_wait.
    #[cfg(feature = "nats")]
    #[error("JetStream pull failed: {0}")]
    Pull(#[source] async_nats::Error),
    /// JetStream: the durable consumer or its stream was deleted. The consumer stopped after
    /// finishing its in-flight messages rather than recreating a durable, which would start
    /// again from the stream's first message.
    #[cfg(feature = "nats")]
    #[error("JetStream consumer or stream deleted: {0}")]
    Deleted(#[source] async_nats::Error),
    /// RabbitMQ: a channel operation (declare, qos, consume, cancel, confirm mode) failed.
    #[cfg(feature = "rabbitmq")]
    #[error("RabbitMQ {operation} failed: {source}")]
    Amqp {
        /// The AMQP method, e.g. `queue.declare`.
        operation: &'static str,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
}

/// What kind of [`ConsumerError`] happened: what a caller can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConsumerErrorKind {
    /// A setting that cannot work: fix the configuration.
    InvalidConfig,
    /// The broker connection or channel failed: connect again and run again.
    Unavailable,
    /// The durable consumer or its stream is gone: it must be created (deliberately) again.
    Deleted,
}

impl ConsumerError {
    /// The kind of this error.
    pub fn kind(&self) -> ConsumerErrorKind {
        match self {
            Self::InvalidConfig(_) => ConsumerErrorKind::InvalidConfig,
            #[cfg(feature = "nats")]
            Self::Pull(_) => ConsumerErrorKind::Unavailable,
            #[cfg(feature = "nats")]
            Self::Deleted(_) => ConsumerErrorKind::Deleted,
            #[cfg(feature = "rabbitmq")]
            Self::Amqp { .. } => ConsumerErrorKind::Unavailable,
        }
    }
}

/// The application's handler, boxed: runs inside the runner's transaction for a fresh,
/// non-stale event, with the delivery it came in. [`idem_sql::handler!`] makes one from an async
/// closure; `&mut **tx` is the connection when it is written by hand.
pub type HandlerFn<DB> = Arc<
    dyn for<'t> Fn(
            &'t mut Transaction<'static, DB>,
            &'t Delivery,
        ) -> BoxFuture<'t, Result<(), idem_sql::Error>>
        + Send
        + Sync,
>;

/// A decoder from a delivery to the [`Event`] it carries.
pub type DecodeFn = Arc<dyn Fn(&Delivery) -> Result<Event, DecodeError> + Send + Sync>;

/// An observer, called with each delivery and its [`Disposition`] after the store was written
/// (the transaction committed, or the dead letter was recorded) and before the broker is told.
pub type ObserverFn = Arc<dyn Fn(&Delivery, &Disposition) -> BoxFuture<'static, ()> + Send + Sync>;

/// What a consumer does with each delivery, shared by [`JetStreamConsumer`] and
/// [`RabbitMqConsumer`]: decode it into an [`Event`], run the [`Runner`] with the handler (claim +
/// handler + version guard + the handler's effects and outbox rows, one transaction, C2), and
/// decide ([`Disposition`]) whether to acknowledge, retry or dead-letter it.
///
/// [`JetStreamConsumer`]: crate::JetStreamConsumer
/// [`RabbitMqConsumer`]: crate::RabbitMqConsumer
pub struct Processor<DB: Backend> {
    store: Store<DB>,
    runner: Runner<DB>,
    source: Name,
    handler: HandlerFn<DB>,
    decode: DecodeFn,
    retry: RetryPolicy,
    observer: Option<ObserverFn>,
    stats: DeliveryStats,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for Processor<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            runner: self.runner.clone(),
            source: self.source.clone(),
            handler: Arc::clone(&self.handler),
            decode: Arc::clone(&self.decode),
            retry: self.retry.clone(),
            observer: self.observer.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl<DB: Backend> fmt::Debug for Processor<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Processor")
            .field("consumer", self.runner.consumer())
            .field("source", &self.source)
            .field("retry", &self.retry)
            .field("observer", &self.observer.is_some())
            .finish_non_exhaustive()
    }
}

impl<DB: Backend> Processor<DB> {
    /// A processor that runs `handler` through `runner` (whose consumer name, versioned like
    /// `billing_v2`, is the consumer's identity for dedup and dead letters). `store` is where the
    /// dead letters go (normally the runner's store). Events are keyed `(source, message id)` by
    /// [`decode_message_id`] until [`decode`](Self::decode) sets another decoder; the retry policy
    /// is [`RetryPolicy::default`].
    ///
    /// The handler is an async closure in [`idem_sql::handler!`] (`idem::handler!` through the
    /// facade):
    ///
    /// ```no_run
    /// # fn f(store: idem_sql::SqliteStore, runner: idem_sql::Runner<idem_sql::sqlx::Sqlite>,
    /// #     source: idem_core::Name) {
    /// use idem_broker::{Delivery, Processor};
    /// use idem_sql::{HandlerError, handler, sqlx};
    ///
    /// let processor = Processor::new(store, runner, source, handler!(async move |tx, delivery: &Delivery| {
    ///     let order: serde_json::Value =
    ///         serde_json::from_slice(&delivery.payload).map_err(HandlerError::permanent)?;
    ///     sqlx::query("INSERT INTO orders (body) VALUES ($1)")
    ///         .bind(order.to_string())
    ///         .execute(&mut *tx)
    ///         .await?;
    ///     Ok(())
    /// }));
    /// # }
    /// ```
    ///
    /// `tx` is the transaction's connection (`&mut *tx` for sqlx and idem's writes), `?` takes
    /// any error, and an error marked [permanent](idem_sql::HandlerError::permanent)
    /// dead-letters the message at once; any other is retried by the [`RetryPolicy`]. The
    /// closure is `async move` and owns what it captures: the processor keeps it and runs it on
    /// its own tasks. A closure written `|tx, delivery| Box::pin(async move { … })` with
    /// `&mut **tx` as the connection is taken as it is.
    ///
    /// The handler may run more than once for one event (a conflict retried, a rolled-back
    /// attempt), so it must do nothing outside the transaction: record external calls with the
    /// effect ledger and messages with the outbox, in `tx`.
    pub fn new<H>(store: Store<DB>, runner: Runner<DB>, source: Name, handler: H) -> Self
    where
        H: for<'t> Fn(
                &'t mut Transaction<'static, DB>,
                &'t Delivery,
            ) -> BoxFuture<'t, Result<(), idem_sql::Error>>
            + Send
            + Sync
            + 'static,
    {
        let decode_source = source.clone();
        Self {
            store,
            runner,
            handler: Arc::new(handler),
            decode: Arc::new(move |d: &Delivery| decode_message_id(&decode_source, d)),
            source,
            retry: RetryPolicy::default(),
            observer: None,
            stats: DeliveryStats::default(),
        }
    }

    /// Sets the decoder, for events whose id, entity and version are in the payload or headers.
    /// A decode error dead-letters the message at once (retrying cannot change its bytes).
    pub fn decode<F>(self, decode: F) -> Self
    where
        F: Fn(&Delivery) -> Result<Event, DecodeError> + Send + Sync + 'static,
    {
        Self {
            decode: Arc::new(decode),
            ..self
        }
    }

    /// Sets the retry policy.
    pub fn retry(self, retry: RetryPolicy) -> Self {
        Self { retry, ..self }
    }

    /// Sets an observer, awaited after the store was written and before the acknowledgement:
    /// for tracing, audit, or a test that cuts the connection at exactly that point. It delays
    /// the acknowledgement by as long as it runs.
    pub fn observer<F>(self, observer: F) -> Self
    where
        F: Fn(&Delivery, &Disposition) -> BoxFuture<'static, ()> + Send + Sync + 'static,
    {
        Self {
            observer: Some(Arc::new(observer)),
            ..self
        }
    }

    /// The retry policy.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The consumer name (the runner's).
    pub fn consumer(&self) -> &Name {
        self.runner.consumer()
    }

    /// Registers its consumer as `kind` in the runner's store (the consumer registry).
    pub(crate) fn register(&self, kind: idem_sql::ConsumerKind) {
        self.runner.store().register_consumer(self.consumer(), kind);
    }

    /// Flushes the runner's store's pending consumer counts, when a consumer stops; a failure
    /// is logged (they are lost with the process, the events are not).
    pub(crate) async fn flush_counts(&self) {
        if let Err(e) = self.runner.store().flush_consumer_counts().await {
            tracing::warn!(consumer = %self.consumer(), error = %e, "flushing the consumer counts at shutdown failed");
        }
    }

    /// The live delivery counters of this processor and every consumer built on it.
    pub fn stats(&self) -> DeliveryStats {
        self.stats.clone()
    }

    /// Decides one delivery: decode, run, and on failure retry or dead-letter; then counts it and
    /// calls the observer. The caller settles the message with the broker.
    pub(crate) async fn process(
        &self,
        delivery: Arc<Delivery>,
        broker: &'static str,
    ) -> Disposition {
        let disposition = self.decide(&delivery).await;
        self.stats.add(&disposition);
        metrics::counter!(DELIVERIES_TOTAL, "consumer" => self.consumer().to_string(), "broker" => broker, "outcome" => disposition.label())
            .increment(1);
        if let Some(observer) = &self.observer {
            observer(&delivery, &disposition).await;
        }
        disposition
    }

    async fn decide(&self, delivery: &Arc<Delivery>) -> Disposition {
        let event = match (self.decode)(delivery) {
            Ok(event) => event,
            Err(e) => return self.dead_letter(delivery, None, &e.to_string()).await,
        };
        let handler = Arc::clone(&self.handler);
        let shared = Arc::clone(delivery);
        let result = self
            .runner
            .run_boxed(&event, move |tx| {
                let handler = Arc::clone(&handler);
                let delivery = Arc::clone(&shared);
                Box::pin(async move { handler(tx, &delivery).await })
            })
            .await;
        let delivered = delivery.delivered;
        match result {
            Ok(Outcome::Duplicate) => {
                tracing::debug!(consumer = %self.consumer(), key = %event.key, delivered, "duplicate delivery acknowledged");
                Disposition::Duplicate
            }
            Ok(Outcome::Stale { current, got }) => {
                tracing::info!(consumer = %self.consumer(), key = %event.key, ?current, ?got, "stale event recorded, not applied");
                Disposition::Stale
            }
            Ok(Outcome::GapRejected { expected, got }) => Disposition::Retry {
                delay: self.retry.delay(delivered),
                reason: format!("gap rejected: expected sequence {expected}, got {got}"),
            },
            Ok(Outcome::GapParked {
                expected,
                got,
                until,
            }) => {
                let wait = until
                    .as_millis()
                    .saturating_sub(self.store.now().as_millis());
                Disposition::Retry {
                    delay: Duration::from_millis(wait.clamp(1, i64::MAX) as u64),
                    reason: format!("gap parked: expected sequence {expected}, got {got}"),
                }
            }
            Ok(outcome) => Disposition::Applied {
                outcome: outcome.name(),
            },
            Err(e) if matches!(e.kind(), ErrorKind::Conflict | ErrorKind::Unavailable) => {
                tracing::warn!(consumer = %self.consumer(), key = %event.key, delivered, error = %e, "database not available; retrying later");
                Disposition::Retry {
                    delay: self.retry.delay(delivered),
                    reason: e.to_string(),
                }
            }
            Err(e) if self.retry.exhausted(delivered) || e.kind() == ErrorKind::Permanent => {
                self.dead_letter(delivery, Some(&event), &e.to_string())
                    .await
            }
            Err(e) => {
                tracing::warn!(consumer = %self.consumer(), key = %event.key, delivered, error = %e, "handler failed; retrying later");
                Disposition::Retry {
                    delay: self.retry.delay(delivered),
                    reason: e.to_string(),
                }
            }
        }
    }

    async fn dead_letter(
        &self,
        delivery: &Delivery,
        event: Option<&Event>,
        error: &str,
    ) -> Disposition {
        let letter = DeadLetterRecord {
            consumer: self.consumer().clone(),
            source: self.source.clone(),
            event_id: delivery.message_id.clone(),
            dedup_key: event.map(|e| e.key.clone()),
            entity: event.and_then(|e| e.entity.as_ref().map(|(entity, _)| entity.clone())),
            destination: delivery.destination.clone(),
            headers: delivery.headers.clone(),
            payload: delivery.payload.to_vec(),
            error: error.to_owned(),
            delivery_count: delivery.delivered,
        };
        match self.store.dead_letters().record(&letter).await {
            Ok(id) => {
                tracing::error!(consumer = %self.consumer(), key = ?letter.dedup_key, delivered = delivery.delivered, dead_letter = id, %error, "message dead-lettered");
                Disposition::DeadLettered { id }
            }
            Err(e) => {
                tracing::warn!(consumer = %self.consumer(), error = %e, "cannot record the dead letter; retrying later");
                Disposition::Retry {
                    delay: self.retry.delay(delivery.delivered),
                    reason: format!("{error}; recording the dead letter failed: {e}"),
                }
            }
        }
    }
}

/// A processor is the sink of idem's consumers: each delivery is decoded and run in one
/// transaction, and settled only after it committed or was recorded as a dead letter.
impl<DB: Backend> Sink for Processor<DB> {
    async fn take(&self, delivery: Arc<Delivery>, broker: &'static str) -> Settle {
        match self.process(delivery, broker).await {
            Disposition::Applied { .. } | Disposition::Duplicate | Disposition::Stale => {
                Settle::Ack
            }
            Disposition::Retry { delay, .. } => Settle::Retry { delay },
            Disposition::DeadLettered { .. } => Settle::Reject,
        }
    }

    /// Counts an acknowledgement the broker client could not send.
    fn ack_failed(&self, broker: &'static str, error: &dyn fmt::Display) {
        self.stats.add_ack_failure();
        metrics::counter!(ACK_FAILURES_TOTAL, "consumer" => self.consumer().to_string(), "broker" => broker)
            .increment(1);
        tracing::warn!(consumer = %self.consumer(), broker, %error, "acknowledgement not sent; the broker will redeliver");
    }

    /// Records the lag in the runner's store (the consumer registry), in memory until its next
    /// flush.
    fn report_lag(&self, pending: u64) {
        self.runner.store().report_lag(self.consumer(), pending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_follows_the_delivery_count_and_repeats_its_last_wait() {
        let ms = Duration::from_millis;
        let policy = RetryPolicy::new(4, vec![ms(100), ms(400)]).unwrap();
        let waits: Vec<Duration> = (1..=5).map(|n| policy.delay(n)).collect();
        assert_eq!(waits, [ms(100), ms(400), ms(400), ms(400), ms(400)]);
        assert!(!policy.exhausted(3));
        assert!(policy.exhausted(4), "the N-th failed delivery is final");
        assert!(policy.exhausted(9));
    }

    #[test]
    fn policies_that_cannot_work_are_refused() {
        let ms = Duration::from_millis;
        for (n, backoff) in [
            (0, vec![ms(1)]),
            (3, vec![]),
            (3, vec![Duration::ZERO]),
            (3, vec![Duration::from_secs(86_401)]),
        ] {
            assert!(matches!(
                RetryPolicy::new(n, backoff),
                Err(ConsumerError::InvalidConfig(_))
            ));
        }
    }

    #[test]
    fn default_decoder_keys_by_source_and_message_id() {
        let orders = Name::new("source", "orders").unwrap();
        let mut delivery = Delivery {
            destination: "orders.created".into(),
            message_id: Some("mid-1".into()),
            headers: vec![],
            payload: bytes::Bytes::new(),
            delivered: 1,
            message_type: None,
            routing_key: None,
            content_type: None,
            position: "stream ORDERS sequence 1".into(),
        };
        let event = decode_message_id(&orders, &delivery).unwrap();
        assert_eq!(event.key.as_str(), "orders:mid-1");
        assert_eq!(event.entity, None);
        delivery.message_id = None;
        assert!(matches!(
            decode_message_id(&orders, &delivery),
            Err(DecodeError::MissingMessageId)
        ));
        delivery.message_id = Some("  ".into());
        assert!(matches!(
            decode_message_id(&orders, &delivery),
            Err(DecodeError::Invalid(_))
        ));
    }
}
