//! The effect worker: claims due effects under a fenced lease, calls the provider with the
//! effect key as its idempotency key, and stores the result.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use idem_core::{Backoff, EffectKey, Name, Timestamp};
use sqlx::Transaction;
use tokio::task::JoinSet;

use super::EffectStatus;
use crate::backend::Backend;
use crate::backend::effect_ops::{ClaimedRow, Finish};
use crate::cut_short::ClosedIfCutShort;
use crate::metric_definitions::EFFECTS_TOTAL;
use crate::{BoxFuture, Error, Store};

/// How many due effects one [`EffectWorker::run_once`] claims by default.
pub const DEFAULT_EFFECT_BATCH_SIZE: u32 = 16;
/// How long a provider call may take by default before its result counts as unknown: 30 s.
pub const DEFAULT_EFFECT_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How many attempts a failing effect gets by default before it is dead: 10.
pub const DEFAULT_MAX_EFFECT_ATTEMPTS: u32 = 10;
/// How long by default a provider keeps an idempotency key, and so how long an effect whose
/// result is unknown is retried with the same key before it is parked: 24 h. Stripe keeps keys
/// for at least 24 hours (<https://docs.stripe.com/api/idempotent_requests>: "Keys are
/// eligible to be removed from the system automatically after they're at least 24 hours old").
pub const DEFAULT_KEY_RETENTION: Duration = Duration::from_secs(24 * 3600);
/// How long [`EffectWorker::run`] sleeps by default when nothing was due: 1 s.
pub const DEFAULT_EFFECT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// A claim's lease lasts the call timeout plus this margin (30 s), which covers storing the
/// result: a worker that is still within its timeout is never taken over.
pub const EFFECT_LEASE_MARGIN: Duration = Duration::from_secs(30);

/// One call to the provider: what an [`EffectWorker`] passes to its [`Provider`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EffectCall {
    /// The effect key: send it as the provider's idempotency key (for example the
    /// `Idempotency-Key` header). It is the same on every attempt.
    pub key: EffectKey,
    /// The effect's name, to choose what to call.
    pub effect: Name,
    /// The request bytes given to `enqueue`.
    pub request: Vec<u8>,
    /// Which attempt this is, from 1 (attempts whose result was unknown included).
    pub attempt: u32,
}

/// What a provider call came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The provider did it; these bytes (for example its response body) are stored as the
    /// outcome and returned by later `enqueue` calls of the key.
    Succeeded(Vec<u8>),
    /// The provider answered that it did not do it. `retryable` (a 429, a 5xx, a lost
    /// connection before sending) retries with backoff until the attempt limit, then dead; not
    /// retryable (a 4xx such as a declined card) is dead at once.
    Failed {
        /// Whether trying again may succeed.
        retryable: bool,
        /// Why, for operators (stored as `last_error`).
        reason: String,
    },
    /// It is not known whether the provider did it (a timeout, a connection lost after the
    /// request was sent). Retried with the same key within the key retention, then parked.
    Unknown {
        /// Why, for operators (stored as `last_error`).
        reason: String,
    },
}

/// Calls the outside world for an [`EffectWorker`]. Implemented for every
/// `Fn(EffectCall) -> impl Future<Output = CallOutcome>` closure that is `Send + Sync + 'static`
/// with a `Send + 'static` future, so an `async move` block over cloned clients will do.
///
/// The call must send [`EffectCall::key`] as the provider's idempotency key: the worker runs
/// each effect at least once, and the key is what makes a repeated call harmless.
pub trait Provider: Send + Sync + 'static {
    /// Makes one call. The worker drops the future (cancelling the call) after its timeout.
    fn call(&self, call: EffectCall) -> BoxFuture<'static, CallOutcome>;
}

impl<F, Fut> Provider for F
where
    F: Fn(EffectCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CallOutcome> + Send + 'static,
{
    fn call(&self, call: EffectCall) -> BoxFuture<'static, CallOutcome> {
        Box::pin(self(call))
    }
}

/// A successful call, as the apply hook sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The effect key.
    pub key: EffectKey,
    /// The effect's name.
    pub effect: Name,
    /// The request bytes given to `enqueue`.
    pub request: Vec<u8>,
    /// The provider's answer, being stored.
    pub outcome: Vec<u8>,
}

/// What one [`EffectWorker::run_once`] (or, added up, [`EffectWorker::drain`]) did, by the
/// status each effect was left in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerReport {
    /// Effects claimed (their provider was called).
    pub claimed: u64,
    /// Calls that succeeded and were stored (with the apply hook's writes).
    pub succeeded: u64,
    /// Retryable failures, scheduled again (status pending).
    pub failed: u64,
    /// Unknown results (timeouts, failed apply hooks), scheduled again with the same key.
    pub unknown: u64,
    /// Effects parked: unknown past the key retention (including ones found so at the start of
    /// the run).
    pub parked: u64,
    /// Effects dead: not retryable, or out of attempts.
    pub dead: u64,
    /// Results not stored because another worker had taken the lease over (fenced).
    pub fenced: u64,
    /// Results not stored because the store failed (logged; the lease lapses and the effect
    /// runs again with the same key).
    pub errors: u64,
}

impl WorkerReport {
    fn add(&mut self, round: &WorkerReport) {
        self.claimed += round.claimed;
        self.succeeded += round.succeeded;
        self.failed += round.failed;
        self.unknown += round.unknown;
        self.parked += round.parked;
        self.dead += round.dead;
        self.fenced += round.fenced;
        self.errors += round.errors;
    }
}

type ApplyHook<DB> = dyn for<'t> Fn(&'t mut Transaction<'static, DB>, &'t Applied) -> BoxFuture<'t, Result<(), Error>>
    + Send
    + Sync;

/// Runs pending effects at least once (docs/design.md C6): claims due ones under a fenced lease, calls
/// the [`Provider`] with the effect key as the idempotency key, and stores the result.
///
/// A claim takes effects that are pending, or whose result is unknown (status unknown, or
/// running under a lapsed lease) while the provider still keeps their key, that are due, and
/// that no live lease holds; each claim increments the effect's fencing token, and every later
/// write checks it (compare-and-set), so a worker that stalled past its lease cannot overwrite
/// its successor's result. On PostgreSQL and MySQL the claim is `FOR UPDATE SKIP LOCKED`: many workers
/// on one database claim disjoint effects and never run one effect at the same time within a
/// lease; on SQLite claims are serialised by its single writer.
///
/// Results: [`CallOutcome::Succeeded`] is stored (with the apply hook's writes, in one
/// transaction); [`CallOutcome::Failed`] is retried with [`Backoff`] until the attempt limit,
/// then dead (at once when not retryable); a timeout or [`CallOutcome::Unknown`] is retried
/// with the same key while `now − first attempt` is within the key retention, else parked
/// (C9). Each result counts `idem_effects_total{effect, outcome}`.
///
/// A worker runs every effect in the ledger unless limited with [`effects`](Self::effects) (one
/// worker per provider). Build it with [`new`](Self::new) and the setters; cloning is cheap and
/// clones share one configuration.
///
/// ```no_run
/// # async fn example(store: idem_sql::PgStore) -> Result<(), idem_sql::Error> {
/// use idem_core::Name;
/// use idem_sql::{CallOutcome, EffectCall, EffectWorker};
///
/// let worker = EffectWorker::new(store, |_call: EffectCall| async move {
///     // POST the call's request to the provider with `Idempotency-Key: {key}` …
///     CallOutcome::Succeeded(b"ch_1".to_vec())
/// })
/// .effects([Name::new("effect", "charge")?]);
/// let report = worker.run_once().await?;
/// println!("{} succeeded, {} dead", report.succeeded, report.dead);
/// # Ok(())
/// # }
/// ```
pub struct EffectWorker<DB: Backend> {
    inner: Arc<Inner<DB>>,
}

struct Inner<DB: Backend> {
    store: Store<DB>,
    /// Its name in the consumer registry.
    name: String,
    provider: Arc<dyn Provider>,
    apply: Option<Arc<ApplyHook<DB>>>,
    effects: Vec<Name>,
    batch_size: u32,
    call_timeout: Duration,
    max_attempts: u32,
    backoff: Backoff,
    key_retention: Duration,
    poll_interval: Duration,
}

impl<DB: Backend> Clone for Inner<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            provider: Arc::clone(&self.provider),
            name: self.name.clone(),
            apply: self.apply.clone(),
            effects: self.effects.clone(),
            ..*self
        }
    }
}

impl<DB: Backend> Clone for EffectWorker<DB> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<DB: Backend> fmt::Debug for EffectWorker<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("EffectWorker")
            .field("store", &i.store)
            .field("name", &i.name)
            .field("apply", &i.apply.is_some())
            .field("effects", &i.effects)
            .field("batch_size", &i.batch_size)
            .field("call_timeout", &i.call_timeout)
            .field("max_attempts", &i.max_attempts)
            .field("backoff", &i.backoff)
            .field("key_retention", &i.key_retention)
            .field("poll_interval", &i.poll_interval)
            .finish()
    }
}

/// Where one attempt left its effect.
enum Left {
    Succeeded,
    Failed,
    Unknown,
    Parked,
    Dead,
    Fenced,
}

impl<DB: Backend> EffectWorker<DB> {
    /// A worker over `store`'s ledger calling `provider`, with [`DEFAULT_EFFECT_BATCH_SIZE`],
    /// [`DEFAULT_EFFECT_CALL_TIMEOUT`], [`DEFAULT_MAX_EFFECT_ATTEMPTS`], [`Backoff::default`],
    /// [`DEFAULT_KEY_RETENTION`], [`DEFAULT_EFFECT_POLL_INTERVAL`] and no apply hook, named
    /// [`DEFAULT_EFFECT_WORKER_NAME`] in the consumer registry (registered as
    /// [`ConsumerKind::EffectWorker`](crate::ConsumerKind::EffectWorker)).
    pub fn new(store: Store<DB>, provider: impl Provider) -> Self {
        let name = DEFAULT_EFFECT_WORKER_NAME.to_owned();
        store.register_named(&name, crate::ConsumerKind::EffectWorker);
        Self {
            inner: Arc::new(Inner {
                store,
                name,
                provider: Arc::new(provider),
                apply: None,
                effects: Vec::new(),
                batch_size: DEFAULT_EFFECT_BATCH_SIZE,
                call_timeout: DEFAULT_EFFECT_CALL_TIMEOUT,
                max_attempts: DEFAULT_MAX_EFFECT_ATTEMPTS,
                backoff: Backoff::default(),
                key_retention: DEFAULT_KEY_RETENTION,
                poll_interval: DEFAULT_EFFECT_POLL_INTERVAL,
            }),
        }
    }

    fn with(self, change: impl FnOnce(&mut Inner<DB>)) -> Self {
        let mut inner = Arc::unwrap_or_clone(self.inner);
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Names this worker `name` in the consumer registry (default
    /// [`DEFAULT_EFFECT_WORKER_NAME`]), registered as
    /// [`ConsumerKind::EffectWorker`](crate::ConsumerKind::EffectWorker): its transactions
    /// update that row's last seen. Give each worker of a fleet that serves other effects its
    /// own name.
    pub fn name(self, name: &Name) -> Self {
        self.inner
            .store
            .register_consumer(name, crate::ConsumerKind::EffectWorker);
        self.with(|i| i.name = name.to_string())
    }

    /// Runs `hook` in the transaction that stores a success, after the fenced write of the
    /// outcome and before the commit: a local write such as crediting a balance commits with the
    /// outcome, or neither does. Written as an async closure in [`handler!`](crate::handler):
    /// `.apply(handler!(async move |tx, applied: &Applied| { … }))`, or as
    /// `|tx, applied| Box::pin(async move { … })` (`&mut **tx` is the connection).
    ///
    /// When the hook returns an error the transaction rolls back (no outcome, no local write);
    /// the effect is marked unknown (as the local half is undone and the provider's result is not
    /// stored) and runs again with the same key after the backoff, so the provider returns its
    /// first answer and the hook runs again; past the key retention it is parked.
    pub fn apply<F>(self, hook: F) -> Self
    where
        F: for<'t> Fn(
                &'t mut Transaction<'static, DB>,
                &'t Applied,
            ) -> BoxFuture<'t, Result<(), Error>>
            + Send
            + Sync
            + 'static,
    {
        self.with(|i| i.apply = Some(Arc::new(hook)))
    }

    /// Runs only effects with these names (by default, and when `effects` is empty, every
    /// effect): for example one worker per provider, each with its own [`Provider`].
    pub fn effects(self, effects: impl IntoIterator<Item = Name>) -> Self {
        let effects = effects.into_iter().collect();
        self.with(|i| i.effects = effects)
    }

    /// Sets how many due effects one run claims and calls concurrently (at least 1).
    pub fn batch_size(self, batch_size: u32) -> Self {
        self.with(|i| i.batch_size = batch_size.max(1))
    }

    /// Sets how long a call may take before its result counts as unknown (at least 1 ms). The
    /// lease of a claim lasts this plus [`EFFECT_LEASE_MARGIN`].
    pub fn call_timeout(self, call_timeout: Duration) -> Self {
        self.with(|i| i.call_timeout = call_timeout.max(Duration::from_millis(1)))
    }

    /// Sets how many attempts an effect that keeps failing (retryably) gets before it is dead
    /// (at least 1). Attempts whose result was unknown count too; an unknown result itself never
    /// makes an effect dead (it is parked after the key retention instead).
    pub fn max_attempts(self, max_attempts: u32) -> Self {
        self.with(|i| i.max_attempts = max_attempts.max(1))
    }

    /// Sets the pause between attempts.
    pub fn backoff(self, backoff: Backoff) -> Self {
        self.with(|i| i.backoff = backoff)
    }

    /// Sets how long the provider keeps an idempotency key: an effect with an unknown result is
    /// retried with its key only while now − first attempt is shorter than this, then parked for
    /// reconciliation (C9). Use the provider's documented retention, never a longer one.
    pub fn key_retention(self, key_retention: Duration) -> Self {
        self.with(|i| i.key_retention = key_retention)
    }

    /// Sets how long [`run`](Self::run) sleeps when a run found nothing due.
    pub fn poll_interval(self, poll_interval: Duration) -> Self {
        self.with(|i| i.poll_interval = poll_interval)
    }

    /// One round: parks effects whose result is unknown past the key retention, claims up to the
    /// batch size of due effects, calls the provider for each (concurrently, each under the call
    /// timeout) and stores each result. Returns when every call of the batch is done.
    ///
    /// # Errors
    /// [`Error::Database`] when parking or claiming fails (nothing was called). A failure to
    /// store one result is logged and counted in [`WorkerReport::errors`] instead: that effect's
    /// lease lapses and it runs again with the same key.
    pub async fn run_once(&self) -> Result<WorkerReport, Error> {
        let i = &self.inner;
        let mut report = WorkerReport::default();
        let retention_ms = ms(i.key_retention);
        let effects: Vec<&str> = i.effects.iter().map(Name::as_str).collect();
        let claimed = {
            let mut conn = ClosedIfCutShort::acquire(i.store.pool()).await?;
            let now = i.store.now().as_millis();
            (i.store.tally()).seen(&i.name, crate::ConsumerKind::EffectWorker, now);
            for (key, effect) in
                DB::effects_park_expired(&mut conn, now, retention_ms, &effects).await?
            {
                tracing::warn!(effect_key = %key, %effect, "effect result unknown past the provider's key retention: parked for reconciliation");
                count(&effect, "parked");
                report.parked += 1;
            }
            let lease_ms = ms(i.call_timeout.saturating_add(EFFECT_LEASE_MARGIN));
            let claimed = DB::effects_claim(
                &mut conn,
                now,
                lease_ms,
                retention_ms,
                i64::from(i.batch_size),
                &effects,
            )
            .await;
            conn.finished();
            claimed?
        };
        report.claimed = claimed.len() as u64;
        let mut calls = JoinSet::new();
        for row in claimed {
            let inner = Arc::clone(&self.inner);
            calls.spawn(async move {
                let key = row.key.clone();
                (key, inner.attempt(row).await)
            });
        }
        while let Some(joined) = calls.join_next().await {
            match joined {
                Ok((_, Ok(result))) => match result {
                    Left::Succeeded => report.succeeded += 1,
                    Left::Failed => report.failed += 1,
                    Left::Unknown => report.unknown += 1,
                    Left::Parked => report.parked += 1,
                    Left::Dead => report.dead += 1,
                    Left::Fenced => report.fenced += 1,
                },
                Ok((key, Err(e))) => {
                    tracing::warn!(effect_key = %key, error = %e, "storing an effect's result failed; it runs again after its lease");
                    report.errors += 1;
                }
                Err(e) => {
                    // The provider panicked: the lease lapses and the result counts as unknown.
                    tracing::error!(error = %e, "an effect call panicked; it runs again after its lease");
                    report.errors += 1;
                }
            }
        }
        // Its last seen, at most every flush interval, in a transaction of its own round.
        crate::consumers::flush_if_due(&i.store).await;
        Ok(report)
    }

    /// Runs rounds ([`run_once`](Self::run_once)) until one finds nothing due, and returns the
    /// totals: the worker run until idle, for tests and for a one-off job. What it leaves is not
    /// due yet: a retryable failure or an unknown result waits for its backoff, a call whose
    /// lease another worker holds for that lease. A test that wants those too advances the
    /// store's clock ([`ManualClock`](idem_core::ManualClock)) past the wait and drains again.
    ///
    /// ```no_run
    /// # async fn f(store: idem_sql::SqliteStore) -> Result<(), idem_sql::Error> {
    /// use idem_sql::{CallOutcome, EffectCall, EffectWorker};
    /// let worker = EffectWorker::new(store.clone(), |call: EffectCall| async move {
    ///     CallOutcome::Succeeded(call.request)
    /// });
    /// let report = worker.drain().await?;
    /// assert_eq!(report.succeeded, report.claimed);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`run_once`](Self::run_once): the first round that fails stops the drain; the rounds
    /// before it were stored.
    pub async fn drain(&self) -> Result<WorkerReport, Error> {
        let mut total = WorkerReport::default();
        loop {
            let round = self.run_once().await?;
            total.add(&round);
            if round.claimed == 0 {
                return Ok(total);
            }
        }
    }

    /// Runs rounds until `shutdown` completes: another round at once after a round that claimed
    /// something, else after the poll interval. A round's error is logged and the next round
    /// comes after the poll interval. Shutdown is checked between rounds, so calls in flight
    /// finish and are stored first; then the consumer registry's pending rows are flushed
    /// ([`Store::flush_consumer_counts`], its failure logged).
    pub async fn run(&self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let idle = match self.run_once().await {
                Ok(report) => report.claimed == 0,
                Err(e) => {
                    tracing::warn!(error = %e, "effect worker round failed");
                    true
                }
            };
            let pause = if idle {
                self.inner.poll_interval
            } else {
                Duration::ZERO
            };
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    if let Err(e) = self.inner.store.flush_consumer_counts().await {
                        tracing::warn!(error = %e, "flushing the consumer registry at shutdown failed");
                    }
                    return;
                }
                () = tokio::time::sleep(pause) => {}
            }
        }
    }
}

impl<DB: Backend> Inner<DB> {
    async fn attempt(&self, row: ClaimedRow) -> Result<Left, Error> {
        let corrupt = |detail: String| Error::CorruptRow {
            table: "idem_effects",
            detail,
        };
        let key = EffectKey::intent(&row.key)
            .map_err(|e| corrupt(format!("effect key {:?}: {e}", row.key)))?;
        let effect = Name::new("effect", row.effect.as_str())
            .map_err(|e| corrupt(format!("effect name {:?}: {e}", row.effect)))?;
        let attempt = u32::try_from(row.attempts).unwrap_or(u32::MAX);
        let call = EffectCall {
            key,
            effect,
            request: row.request,
            attempt,
        };
        let outcome =
            match tokio::time::timeout(self.call_timeout, self.provider.call(call.clone())).await {
                Ok(outcome) => outcome,
                Err(_) => CallOutcome::Unknown {
                    reason: format!(
                        "no answer within the call timeout of {} ms",
                        self.call_timeout.as_millis()
                    ),
                },
            };
        let now = self.store.now();
        let first = Timestamp(row.first_attempt_at);
        let fence = Fence {
            key: &row.key,
            token: row.token,
        };
        let result = match outcome {
            CallOutcome::Succeeded(outcome) => {
                return self.store_success(fence, call, outcome, first).await;
            }
            CallOutcome::Failed { retryable, reason } => {
                if retryable && attempt < self.max_attempts {
                    let next = now.saturating_add(self.backoff.delay(attempt));
                    self.finish(fence, EffectStatus::Pending, &reason, next)
                        .await?
                        .then_some(Left::Failed)
                } else {
                    let reason = if retryable {
                        format!("{reason} (attempt {attempt} of {})", self.max_attempts)
                    } else {
                        reason
                    };
                    self.finish(fence, EffectStatus::Dead, &reason, now)
                        .await?
                        .then_some(Left::Dead)
                }
            }
            CallOutcome::Unknown { reason } => self.unknown(fence, attempt, first, &reason).await?,
        };
        let result = result.unwrap_or(Left::Fenced);
        self.count_result(&call.effect, &result, &call.key);
        Ok(result)
    }

    /// Schedules a retry with the same key, or parks the effect when the retry would fall
    /// outside the provider's key retention. `None` when fenced.
    async fn unknown(
        &self,
        fence: Fence<'_>,
        attempt: u32,
        first: Timestamp,
        reason: &str,
    ) -> Result<Option<Left>, Error> {
        let now = self.store.now();
        let next = now.saturating_add(self.backoff.delay(attempt));
        if next < first.saturating_add(self.key_retention) {
            Ok(self
                .finish(fence, EffectStatus::Unknown, reason, next)
                .await?
                .then_some(Left::Unknown))
        } else {
            Ok(self
                .finish(fence, EffectStatus::Parked, reason, now)
                .await?
                .then_some(Left::Parked))
        }
    }

    async fn store_success(
        &self,
        fence: Fence<'_>,
        call: EffectCall,
        outcome: Vec<u8>,
        first: Timestamp,
    ) -> Result<Left, Error> {
        let now = self.store.now().as_millis();
        let mut tx = self.store.begin().await?;
        let finish = Finish {
            status: EffectStatus::Succeeded.as_str(),
            outcome: Some(&outcome),
            last_error: None,
            next_attempt_at: now,
            now,
        };
        if !DB::effects_finish(&mut tx, fence.key, fence.token, &finish).await? {
            tx.rollback().await?;
            self.count_result(&call.effect, &Left::Fenced, &call.key);
            return Ok(Left::Fenced);
        }
        if let Some(hook) = &self.apply {
            let applied = Applied {
                key: call.key.clone(),
                effect: call.effect.clone(),
                request: call.request.clone(),
                outcome,
            };
            if let Err(e) = hook(&mut tx, &applied).await {
                tx.rollback().await?;
                count(call.effect.as_str(), "apply_failed");
                tracing::warn!(effect_key = %call.key, effect = %call.effect, error = %e, "the apply hook failed after the provider succeeded; the effect runs again with the same key");
                let reason = format!("the provider succeeded but the apply hook failed: {e}");
                let result = self
                    .unknown(fence, call.attempt, first, &reason)
                    .await?
                    .unwrap_or(Left::Fenced);
                self.count_result(&call.effect, &result, &call.key);
                return Ok(result);
            }
        }
        tx.commit().await?;
        self.count_result(&call.effect, &Left::Succeeded, &call.key);
        Ok(Left::Succeeded)
    }

    /// The fenced write of a result other than success; false when fenced.
    async fn finish(
        &self,
        fence: Fence<'_>,
        status: EffectStatus,
        reason: &str,
        next: Timestamp,
    ) -> Result<bool, Error> {
        let mut conn = self.store.pool().acquire().await?;
        let finish = Finish {
            status: status.as_str(),
            outcome: None,
            last_error: Some(reason),
            next_attempt_at: next.as_millis(),
            now: self.store.now().as_millis(),
        };
        Ok(DB::effects_finish(&mut conn, fence.key, fence.token, &finish).await?)
    }

    fn count_result(&self, effect: &Name, result: &Left, key: &EffectKey) {
        let outcome = match result {
            Left::Succeeded => "succeeded",
            Left::Failed => "failed",
            Left::Unknown => "unknown",
            Left::Parked => "parked",
            Left::Dead => "dead",
            Left::Fenced => {
                tracing::info!(effect_key = %key, %effect, "result not stored: another worker took the lease over");
                "fenced"
            }
        };
        count(effect.as_str(), outcome);
    }
}

/// The lease an attempt holds: every write names it.
#[derive(Clone, Copy)]
struct Fence<'a> {
    key: &'a str,
    token: i64,
}

fn count(effect: &str, outcome: &'static str) {
    metrics::counter!(EFFECTS_TOTAL, "effect" => effect.to_owned(), "outcome" => outcome)
        .increment(1);
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// [`EffectWorker`]'s name in the consumer registry unless [`EffectWorker::name`] sets one.
pub const DEFAULT_EFFECT_WORKER_NAME: &str = "effect_worker";
