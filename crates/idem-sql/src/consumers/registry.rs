//! The Store's side of the registry: registering consumers, reporting lag, switching counting
//! and flushing what is pending.

use std::time::Duration;

use idem_core::Name;

use super::EventCounts;
use super::flush;
use super::tally::Counted;
use crate::backend::Backend;
use crate::{ConsumerKind, Error, Store};
use sqlx::Transaction;

impl<DB: Backend> Store<DB> {
    /// Registers `name` as a consumer of `kind`, in memory: its registry row is written with the
    /// next flush (first seen now, by the store's clock). A more specific kind replaces
    /// [`ConsumerKind::Runner`] ([`Runner::new`](crate::Runner::new) registers `runner`; the
    /// broker consumers register `jetstream`, `rabbitmq`, `kafka` for the same name); nothing
    /// else is replaced. Writes nothing, fails never.
    pub fn register_consumer(&self, name: &Name, kind: ConsumerKind) {
        self.tally()
            .register(name.as_str(), kind, self.now().as_millis());
    }

    /// [`register_consumer`](Self::register_consumer) for a name idem chose itself (a default
    /// such as `effect_worker`), not checked again.
    pub(crate) fn register_named(&self, name: &str, kind: ConsumerKind) {
        self.tally().register(name, kind, self.now().as_millis());
    }

    /// Records that `consumer` is `lag` messages behind its source now (Kafka: high watermark −
    /// stored offset, summed over its partitions; JetStream: the consumer's pending count), in
    /// memory: written with the next flush. Fails never.
    pub fn report_lag(&self, consumer: &Name, lag: u64) {
        let lag = i64::try_from(lag).unwrap_or(i64::MAX);
        self.tally()
            .report_lag(consumer.as_str(), lag, self.now().as_millis());
    }

    /// Counts one event of `consumer` (the runner, after its outcome is known): in memory, in
    /// the 5-minute bucket of now. Nothing when counting is off.
    pub(crate) fn count(&self, consumer: &Name, counted: Counted) {
        self.tally()
            .count(consumer.as_str(), counted, self.now().as_millis());
    }

    /// Commits `tx` — carrying the pending counts and registry rows when a flush is due (at most
    /// every [flush interval](Self::counts_flush_interval)) — then counts `counts` of
    /// `consumer`. For consumers that commit their own transactions instead of going through a
    /// [`Runner`](crate::Runner) (the Kafka processor, a batched ingest); the runner does this
    /// itself. When the commit fails nothing is counted and the pending counts it carried stay
    /// pending: never counted twice, never lost on a rollback.
    ///
    /// # Errors
    /// [`Error::Database`] when the flush's statements or the commit fail; nothing was
    /// committed.
    pub async fn commit_counting(
        &self,
        tx: Transaction<'static, DB>,
        consumer: &Name,
        counts: EventCounts,
    ) -> Result<(), Error> {
        super::commit(self, tx).await?;
        self.tally()
            .count_many(consumer.as_str(), counts, self.now().as_millis());
        Ok(())
    }

    /// Adds `counts` to `consumer`'s counts in memory and marks it seen now (zero counts: only
    /// seen), for consumers that do not run through a [`Runner`](crate::Runner) (the
    /// Idempotency-Key layer, the gateway). Written with the next flush; fails never. Counts
    /// nothing when counting is off, but still marks it seen.
    pub fn count_consumer_events(&self, consumer: &Name, counts: EventCounts) {
        let now = self.now().as_millis();
        // One lock either way: counting marks it seen too.
        if self.tally().enabled() {
            self.tally().count_many(consumer.as_str(), counts, now);
        } else {
            (self.tally()).seen(consumer.as_str(), ConsumerKind::Runner, now);
        }
    }

    /// Flushes what is pending, in its own transaction, when a flush is due (something pending
    /// and the last flush at least the flush interval ago); else does nothing. For a consumer's
    /// own step outside any transaction of its own (never from a background task: on SQLite
    /// the flush holds the database's write lock while it runs).
    ///
    /// # Errors
    /// As [`flush_consumer_counts`](Self::flush_consumer_counts); what was pending stays
    /// pending.
    pub async fn flush_consumer_counts_if_due(&self) -> Result<(), Error> {
        if self.tally().due(self.now().as_millis()) {
            self.flush_consumer_counts().await
        } else {
            Ok(())
        }
    }

    /// The same store with per-consumer counting on (the default) or off. Off, the runner counts
    /// nothing and its commits carry no flush; registrations and lag are still written by
    /// [`flush_consumer_counts`](Self::flush_consumer_counts). Shared by the store's clones.
    pub fn consumer_counts(self, on: bool) -> Self {
        self.tally().set_enabled(on);
        self
    }

    /// The same store flushing counts with a commit at most every `interval` (default
    /// [`DEFAULT_COUNTS_FLUSH_INTERVAL`](crate::DEFAULT_COUNTS_FLUSH_INTERVAL), 5 s). A crash
    /// loses the counts since the last flush — at most this long of them — never events.
    /// Shared by the store's clones.
    pub fn counts_flush_interval(self, interval: Duration) -> Self {
        self.tally().set_interval(interval);
        self
    }

    /// Writes what is pending now (counts, registrations, lag, last seen) in its own
    /// transaction: call it when a consumer stops (the broker consumers, the effect worker and
    /// the outbox relay do). Does nothing, and opens no transaction, when nothing is pending.
    /// On failure what was pending stays pending, for the next flush.
    ///
    /// # Errors
    /// [`Error::Database`] when the transaction cannot begin, write or commit.
    pub async fn flush_consumer_counts(&self) -> Result<(), Error> {
        let batch = self.tally().take(self.now().as_millis());
        if batch.is_empty() {
            return Ok(());
        }
        let result = async {
            let mut tx = self.begin().await?;
            flush::write::<DB>(&mut tx, &self.tally().instance, &batch).await?;
            tx.commit().await?;
            Ok::<_, Error>(())
        }
        .await;
        if result.is_err() {
            self.tally().restore(batch);
        }
        result
    }
}
