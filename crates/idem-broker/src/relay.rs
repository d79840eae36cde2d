//! The outbox relay: claims due outbox rows, publishes them with their stable message ids, and
//! records what the destination confirmed (docs/design.md C7).

use std::future::Future;
use std::time::Duration;

use idem_sql::{Backend, LockedBatch, MessageId, Outbox, OutboxFailure, OutboxRow};

use futures_util::FutureExt;

use crate::metric_definitions::{RELAY_ERRORS_TOTAL, RELAY_MESSAGES_TOTAL};
use crate::publisher::{PublishOutcome, Publisher};

/// The name of a relay until [`Relay::name`] sets one: the `relay` label of its metrics.
pub const DEFAULT_RELAY_NAME: &str = "outbox";

/// The default number of rows claimed and published per cycle.
pub const DEFAULT_BATCH_SIZE: u32 = 100;
/// The default claim lease: a row claimed by a relay that neither confirms nor fails it within
/// this time is claimed again by the next relay cycle.
pub const DEFAULT_CLAIM_TTL: Duration = Duration::from_secs(30);
/// The shortest claim lease [`Relay::claim_ttl`] sets: a shorter one (zero in particular) would
/// let another relay claim the rows again while the first is still publishing them.
pub const MIN_CLAIM_TTL: Duration = Duration::from_secs(1);
/// The longest claim lease [`Relay::claim_ttl`] sets: the rows of a relay that died are stuck
/// for as long as its lease.
pub const MAX_CLAIM_TTL: Duration = Duration::from_secs(3600);
/// The default shortest wait of [`Relay::run`] after an idle cycle or an error.
pub const DEFAULT_MIN_WAIT: Duration = Duration::from_millis(50);
/// The default longest wait of [`Relay::run`] between cycles while idle or failing.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(2);

/// A relay cycle that could not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The outbox's store failed (claiming, or recording what was published or failed). Rows
    /// whose outcome was not recorded stay claimed until the claim expires and are then
    /// published again with the same message ids, which downstream deduplication absorbs.
    #[error("outbox store: {0}")]
    Store(#[from] idem_sql::Error),
}

impl RelayError {
    /// The kind of the store error behind it: [`ErrorKind::is_retryable`](idem_sql::ErrorKind)
    /// says whether the next cycle can succeed.
    pub fn kind(&self) -> idem_sql::ErrorKind {
        match self {
            Self::Store(e) => e.kind(),
        }
    }
}

/// What one or more relay cycles did, in messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Rows claimed.
    pub claimed: u64,
    /// Rows the destination confirmed as new copies, marked published.
    pub published: u64,
    /// Rows the destination confirmed as duplicates of a copy it already had (JetStream's
    /// `duplicate` ack), marked published.
    pub duplicates: u64,
    /// Failed publishes that left the row pending, backing off.
    pub failed: u64,
    /// Failed (or deferred) publishes that were the row's last allowed attempt: the row is now
    /// parked.
    pub parked: u64,
    /// Rows the destination answered "not now" (HTTP 409), put off until the later of its
    /// `Retry-After` and the outbox policy's backoff; counted as an attempt (a deferral that
    /// was the row's last allowed attempt is counted in `parked` instead).
    pub deferred: u64,
    /// Rows the destination could not be reached for ([`PublishOutcome::Unavailable`]):
    /// nothing recorded, no attempt counted; the cycles stop and [`Relay::run`] backs off.
    pub unavailable: u64,
}

impl RelayReport {
    fn add(&mut self, other: &Self) {
        self.claimed += other.claimed;
        self.published += other.published;
        self.duplicates += other.duplicates;
        self.failed += other.failed;
        self.parked += other.parked;
        self.deferred += other.deferred;
        self.unavailable += other.unavailable;
    }
}

/// Publishes the rows of an [`Outbox`] with a [`Publisher`].
///
/// Each cycle ([`run_once`](Self::run_once)) claims up to a batch of due rows (by status and
/// due time, never by "id greater than the last one seen"), publishes them with their stable
/// message ids, waits for the destination's confirmations, then marks the confirmed rows
/// published by id, records failures (backoff, park after the outbox policy's
/// `max_attempts`) and deferrals (attempts too, due again after the destination's wait). Any
/// number of relays may run on one PostgreSQL database and never publish one row at the same
/// time: [`run_once`](Self::run_once) claims rows for the
/// claim ttl (skipping rows another relay is claiming, `FOR UPDATE SKIP LOCKED`), and a relay
/// that crashed mid-cycle leaves its rows to the next once the claim expires;
/// [`drain`](Self::drain) and [`run`](Self::run) on PostgreSQL hold each batch by row locks in an
/// open transaction instead ([`Outbox::lock_due`]: one write per row rather than two; a crashed
/// relay's locks go with its connection), two batches at a time.
///
/// Delivery is at least once: when the store fails after the broker confirmed, the row is
/// published again later with the same message id. JetStream drops that copy only within the
/// stream's duplicate window (2 minutes by default); RabbitMQ and HTTP receivers see it again.
/// The consumer's inbox remains the guarantee of one effect per message.
///
/// Order: per aggregate, as documented on [`Outbox`]; a parked row holds back the later rows of
/// its aggregate until it is requeued or discarded.
#[derive(Debug)]
pub struct Relay<DB: Backend, P: Publisher> {
    outbox: Outbox<DB>,
    publisher: P,
    batch_size: u32,
    claim_ttl: Duration,
    min_wait: Duration,
    max_wait: Duration,
    name: String,
}

impl<DB: Backend, P: Publisher> Relay<DB, P> {
    /// A relay of `outbox` (with its retry policy) through `publisher`, with
    /// [`DEFAULT_BATCH_SIZE`], [`DEFAULT_CLAIM_TTL`], [`DEFAULT_MIN_WAIT`] and
    /// [`DEFAULT_MAX_WAIT`].
    pub fn new(outbox: Outbox<DB>, publisher: P) -> Self {
        Self {
            outbox,
            publisher,
            batch_size: DEFAULT_BATCH_SIZE,
            claim_ttl: DEFAULT_CLAIM_TTL,
            min_wait: DEFAULT_MIN_WAIT,
            max_wait: DEFAULT_MAX_WAIT,
            name: DEFAULT_RELAY_NAME.to_owned(),
        }
    }

    /// Names the relay (default [`DEFAULT_RELAY_NAME`]): the `relay` label of its metrics and a
    /// field of its log lines, to tell several relays apart.
    pub fn name(self, name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..self
        }
    }

    /// Sets how many rows a cycle claims and publishes (at least 1).
    pub fn batch_size(self, batch_size: u32) -> Self {
        Self {
            batch_size: batch_size.max(1),
            ..self
        }
    }

    /// Sets the claim lease of [`run_once`](Self::run_once) and of [`drain`](Self::drain) and
    /// [`run`](Self::run) on SQLite (default [`DEFAULT_CLAIM_TTL`]), clamped to
    /// [`MIN_CLAIM_TTL`] (1 s) .. [`MAX_CLAIM_TTL`] (1 h): a zero lease would leave claimed rows
    /// due at once, and two relays would publish every row twice. It must cover a whole cycle
    /// (publish, confirms, marking) with a margin, else another relay publishes the same rows
    /// again meanwhile (with the same message ids); for `drain` and `run` on SQLite, which
    /// claim the next batch while one is published, about two publishes and their marking.
    pub fn claim_ttl(self, claim_ttl: Duration) -> Self {
        Self {
            claim_ttl: claim_ttl.clamp(MIN_CLAIM_TTL, MAX_CLAIM_TTL),
            ..self
        }
    }

    /// Sets the waits of [`run`](Self::run) after an idle or failed cycle: from `min`, doubling
    /// per idle or failed cycle in a row, up to `max`.
    pub fn waits(self, min: Duration, max: Duration) -> Self {
        Self {
            min_wait: min,
            max_wait: max.max(min),
            ..self
        }
    }

    /// The publisher.
    pub fn publisher(&self) -> &P {
        &self.publisher
    }

    /// The outbox.
    pub fn outbox(&self) -> &Outbox<DB> {
        &self.outbox
    }

    /// One cycle: claim, publish, record. Returns what it did; a report with `claimed: 0`
    /// means nothing was due.
    ///
    /// # Errors
    /// [`RelayError::Store`] when claiming or recording fails. Rows published but not yet
    /// marked are published again with the same ids after their claim expires.
    pub async fn run_once(&self) -> Result<RelayReport, RelayError> {
        let rows = self.claim().await?;
        if rows.is_empty() {
            return Ok(RelayReport::default());
        }
        let outcomes = self.publisher.publish(&rows).await;
        self.record(&rows, outcomes).await
    }

    /// Cycles until a claim finds nothing due; returns the totals. The cycles overlap, so the
    /// store's work and the destination's round trips are not added up: on PostgreSQL two
    /// batches are held by row locks at once ([`Outbox::lock_due`]), one published while the
    /// other is recorded and committed; on SQLite, while one batch is being published, the next
    /// is claimed and the previous one's outcomes are recorded. Order
    /// per aggregate still holds: a row is not claimable while an older row of its aggregate is
    /// unpublished, and rows being published or recorded are still unpublished.
    ///
    /// # Errors
    /// [`RelayError::Store`] when claiming or recording fails, after the batches already
    /// published were recorded (where the store allows). Rows published but not marked are
    /// published again with the same ids after their claim expires.
    pub async fn drain(&self) -> Result<RelayReport, RelayError> {
        self.pipeline(|| false).await
    }

    /// [`drain`](Self::drain), claiming no further batch once `stop` says so.
    async fn pipeline(
        &self,
        mut stop: impl FnMut() -> bool + Send,
    ) -> Result<RelayReport, RelayError> {
        if self.outbox.locks_rows() {
            return self.lanes(stop).await;
        }
        let mut totals = RelayReport::default();
        let mut current = self.claim().await?;
        let mut published: Option<(Vec<OutboxRow>, Vec<PublishOutcome>)> = None;
        // Set when the destination could not be reached: no more claims this round.
        let mut unreachable = false;
        loop {
            if current.is_empty() {
                // The unrecorded batch may be what held back the next rows of its aggregates:
                // record it and look again before calling the outbox drained.
                match published.take() {
                    Some((rows, outcomes)) => {
                        let report = self.record(&rows, outcomes).await?;
                        totals.add(&report);
                        if unreachable || report.unavailable > 0 {
                            break;
                        }
                        current = self.claim().await?;
                        continue;
                    }
                    None => break,
                }
            }
            if stop() {
                // Claimed but not published: released when the claim expires.
                break;
            }
            let previous = published.take();
            let (outcomes, next, recorded) =
                tokio::join!(self.publisher.publish(&current), self.claim(), async {
                    match previous {
                        Some((rows, outcomes)) => self.record(&rows, outcomes).await,
                        None => Ok(RelayReport::default()),
                    }
                },);
            published = Some((current, outcomes));
            let recorded = recorded.and_then(|r| next.map(|next| (r, next)));
            match recorded {
                Ok((report, next)) => {
                    totals.add(&report);
                    current = next;
                    if report.unavailable > 0 {
                        // The destination is down: stop claiming (the rows just claimed are
                        // released when their claim expires); `run` backs off.
                        unreachable = true;
                        current.clear();
                    }
                }
                Err(e) => {
                    if let Some((rows, outcomes)) = published.take() {
                        totals.add(&self.record(&rows, outcomes).await?);
                    }
                    return Err(e);
                }
            }
        }
        if let Some((rows, outcomes)) = published {
            totals.add(&self.record(&rows, outcomes).await?);
        }
        Ok(totals)
    }

    async fn claim(&self) -> Result<Vec<OutboxRow>, RelayError> {
        Ok(self.outbox.claim(self.batch_size, self.claim_ttl).await?)
    }

    /// Records what the destination said about `rows`: marks the confirmed ones published,
    /// the failed ones failed (backoff or park) and the deferred ones deferred.
    async fn record(
        &self,
        rows: &[OutboxRow],
        outcomes: Vec<PublishOutcome>,
    ) -> Result<RelayReport, RelayError> {
        record(&self.name, &mut ClaimMarks(&self.outbox), rows, outcomes).await
    }

    /// Runs until `shutdown` completes; returns the totals.
    ///
    /// While rows are due it cycles back to back as [`drain`](Self::drain) does (the next
    /// batch's claim and the last batch's recording overlap each publish). When a claim finds
    /// nothing, only rows the destination deferred (HTTP 409: they are not due again before
    /// their `Retry-After`), or a cycle failed ([`RelayError`], logged as a warning), it waits
    /// from the minimum wait, doubling per idle or failed round in a row, up to the maximum (see
    /// [`waits`](Self::waits)). `shutdown` is checked between cycles and during waits, never in
    /// the middle of one, so the confirmed rows of every published batch are marked before it
    /// returns; a batch claimed but not yet published when shutdown came is released when its
    /// claim expires. Then it flushes the consumer registry's pending rows (the outbox's relay
    /// name, [`Outbox::relay_name`]: its last seen), a failure logged.
    pub async fn run(&self, shutdown: impl Future<Output = ()> + Send) -> RelayReport {
        let totals = self.run_until(shutdown).await;
        if let Err(e) = self.outbox.store().flush_consumer_counts().await {
            tracing::warn!(relay = %self.name, error = %e, "flushing the consumer registry at shutdown failed");
        }
        totals
    }

    /// [`run`](Self::run)'s cycles, until `shutdown` completes.
    async fn run_until(&self, shutdown: impl Future<Output = ()> + Send) -> RelayReport {
        let mut shutdown = std::pin::pin!(shutdown);
        let mut totals = RelayReport::default();
        let mut wait = self.min_wait;
        loop {
            let mut stopped = false;
            let round = self
                .pipeline(|| {
                    stopped = stopped || shutdown.as_mut().now_or_never().is_some();
                    stopped
                })
                .await;
            if stopped {
                if let Ok(report) = round {
                    totals.add(&report);
                }
                return totals;
            }
            // Busy: rows were handled and more may be due. A round whose rows were all deferred
            // made nothing due sooner, so it waits like an idle or failed one.
            let busy = match round {
                Ok(report) => {
                    totals.add(&report);
                    if report.unavailable > 0 {
                        tracing::warn!(relay = %self.name, rows = report.unavailable, "outbox relay destination unreachable; backing off");
                        metrics::counter!(RELAY_ERRORS_TOTAL, "relay" => self.name.clone())
                            .increment(1);
                    }
                    report.unavailable == 0 && report.claimed > report.deferred
                }
                Err(e) => {
                    tracing::warn!(relay = %self.name, error = %e, "outbox relay cycle failed");
                    metrics::counter!(RELAY_ERRORS_TOTAL, "relay" => self.name.clone())
                        .increment(1);
                    false
                }
            };
            let pause = if busy {
                wait = self.min_wait;
                Duration::ZERO
            } else {
                let pause = wait;
                wait = wait.saturating_mul(2).min(self.max_wait);
                pause
            };
            tokio::select! {
                biased;
                () = &mut shutdown => return totals,
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// The cycles of a relay on PostgreSQL: [`LANES`] loops, each locking a batch
    /// ([`Outbox::lock_due`]), publishing it and recording its outcomes in the same
    /// transaction, so one lane's database work overlaps the other's publishing. A lane stops
    /// when nothing is due to it; the lane that stops last looked after every other lane's
    /// commit, so the outbox is drained when both have stopped.
    async fn lanes(&self, stop: impl FnMut() -> bool + Send) -> Result<RelayReport, RelayError> {
        let stop = std::sync::Mutex::new(stop);
        let stopped = || stop.lock().map_or(true, |mut stop| stop());
        let lane = || async {
            let mut totals = RelayReport::default();
            while !stopped() {
                let (mut batch, rows) = self.outbox.lock_due(self.batch_size).await?;
                if rows.is_empty() {
                    break;
                }
                let outcomes = self.publisher.publish(&rows).await;
                let report = record(&self.name, &mut batch, &rows, outcomes).await?;
                batch.commit().await?;
                totals.add(&report);
                if report.unavailable > 0 {
                    // The destination is down; the unrecorded rows are due again at once, so
                    // stop here and let `run` back off.
                    break;
                }
            }
            Ok::<_, RelayError>(totals)
        };
        let lanes = futures_util::future::join_all((0..LANES).map(|_| lane())).await;
        let mut totals = RelayReport::default();
        for lane in lanes {
            totals.add(&lane?);
        }
        Ok(totals)
    }
}

/// Batches a relay on PostgreSQL holds at once by lock ([`Relay::drain`]).
const LANES: usize = 2;

/// Where a relay records what the destination said: the outbox itself for claimed rows, or the
/// transaction of a [`LockedBatch`].
trait Marks {
    async fn published(&mut self, ids: &[MessageId]) -> Result<u64, idem_sql::Error>;
    async fn failed(
        &mut self,
        row: &OutboxRow,
        reason: &str,
    ) -> Result<OutboxFailure, idem_sql::Error>;
    async fn deferred(
        &mut self,
        row: &OutboxRow,
        after: Duration,
        reason: &str,
    ) -> Result<OutboxFailure, idem_sql::Error>;
}

struct ClaimMarks<'a, DB: Backend>(&'a Outbox<DB>);

impl<DB: Backend> Marks for ClaimMarks<'_, DB> {
    async fn published(&mut self, ids: &[MessageId]) -> Result<u64, idem_sql::Error> {
        self.0.mark_published(ids).await
    }
    async fn failed(
        &mut self,
        row: &OutboxRow,
        reason: &str,
    ) -> Result<OutboxFailure, idem_sql::Error> {
        self.0.mark_failed(row, reason).await
    }
    async fn deferred(
        &mut self,
        row: &OutboxRow,
        after: Duration,
        reason: &str,
    ) -> Result<OutboxFailure, idem_sql::Error> {
        self.0.defer(row, after, reason).await
    }
}

impl<DB: Backend> Marks for LockedBatch<DB> {
    async fn published(&mut self, ids: &[MessageId]) -> Result<u64, idem_sql::Error> {
        self.mark_published(ids).await
    }
    async fn failed(
        &mut self,
        row: &OutboxRow,
        reason: &str,
    ) -> Result<OutboxFailure, idem_sql::Error> {
        self.mark_failed(row, reason).await
    }
    async fn deferred(
        &mut self,
        row: &OutboxRow,
        after: Duration,
        reason: &str,
    ) -> Result<OutboxFailure, idem_sql::Error> {
        self.defer(row, after, reason).await
    }
}

/// Records what the destination said about `rows` in `marks`: the confirmed ones published, the
/// failed ones failed (backoff or park) and the deferred ones deferred (an attempt too).
async fn record<M: Marks>(
    relay: &str,
    marks: &mut M,
    rows: &[OutboxRow],
    mut outcomes: Vec<PublishOutcome>,
) -> Result<RelayReport, RelayError> {
    let mut report = RelayReport {
        claimed: rows.len() as u64,
        ..RelayReport::default()
    };
    // A publisher owes one outcome per row; a missing one is a failure, never a success.
    outcomes.resize_with(rows.len(), || PublishOutcome::Failed {
        reason: "the publisher reported no outcome".to_owned(),
    });
    let confirmed: Vec<MessageId> = rows
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| matches!(o, PublishOutcome::Published | PublishOutcome::Duplicate))
        .map(|(row, _)| row.message_id.clone())
        .collect();
    marks.published(&confirmed).await?;
    for (row, outcome) in rows.iter().zip(outcomes) {
        match outcome {
            PublishOutcome::Published => report.published += 1,
            PublishOutcome::Duplicate => {
                tracing::debug!(message_id = %row.message_id, "broker reported a duplicate");
                report.duplicates += 1;
            }
            PublishOutcome::Unavailable { reason } => {
                tracing::debug!(relay, message_id = %row.message_id, %reason, "destination unreachable; nothing recorded");
                report.unavailable += 1;
            }
            // Both count an attempt; a deferral ("not now", HTTP 409) waits at least as long
            // as the destination asked.
            PublishOutcome::RetryLater { reason, after } => {
                let failure = marks.deferred(row, after, &reason).await?;
                count_failure(relay, row, &reason, failure, true, &mut report);
            }
            PublishOutcome::Failed { reason } => {
                let failure = marks.failed(row, &reason).await?;
                count_failure(relay, row, &reason, failure, false, &mut report);
            }
        }
    }
    for (outcome, n) in [
        ("published", report.published),
        ("duplicate", report.duplicates),
        ("failed", report.failed),
        ("parked", report.parked),
        ("deferred", report.deferred),
        ("unavailable", report.unavailable),
    ] {
        if n > 0 {
            metrics::counter!(RELAY_MESSAGES_TOTAL, "relay" => relay.to_owned(), "outcome" => outcome)
                    .increment(n);
        }
    }
    Ok(report)
}

/// Counts and logs what recording a failed or deferred publish of `row` did.
fn count_failure(
    relay: &str,
    row: &OutboxRow,
    reason: &str,
    failure: OutboxFailure,
    deferred: bool,
    report: &mut RelayReport,
) {
    let (message_id, destination) = (&row.message_id, &row.destination);
    match failure {
        OutboxFailure::Retry { at, attempts } if deferred => {
            tracing::info!(relay, %message_id, %destination, attempts, retry_at = %at.rfc3339(), %reason, "outbox publish deferred");
            report.deferred += 1;
        }
        OutboxFailure::Retry { at, attempts } => {
            tracing::warn!(relay, %message_id, %destination, attempts, retry_at = %at.rfc3339(), %reason, "outbox publish failed");
            report.failed += 1;
        }
        OutboxFailure::Parked { attempts } => {
            tracing::error!(relay, %message_id, %destination, attempts, %reason, "outbox row parked after its last allowed attempt");
            report.parked += 1;
        }
        OutboxFailure::NotHeld => {
            tracing::debug!(%message_id, "claim expired before the outcome was recorded");
        }
    }
}
