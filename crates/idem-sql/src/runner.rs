//! The runner: claim, version guard, the handler's writes and commit, in one call (C1, C2, C5).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use std::sync::Arc;

use idem_core::{
    Advance, Backoff, DedupKey, EffectKey, Entity, GapPolicy, Name, Timestamp, Version,
};
use sqlx::Transaction;
use tokio::sync::OnceCell;

use crate::backend::Backend;
use crate::consumers::{self, Counted};
use crate::lineage::{self, Declared};
use crate::metric_definitions::{CONFLICT_RETRIES_TOTAL, HANDLER_DURATION_SECONDS};
use crate::{
    Claim, EffectLedger, Enqueued, Error, ErrorKind, HandlerError, Inbox, Store, VersionGuard,
};

/// A boxed, sendable future: what a boxed handler returns ([`Runner::run_boxed`]).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The default number of attempts of [`Runner::run`] when transactions conflict.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// The parts of an event the runner needs: its dedup key and, when it is about an entity, the
/// entity and its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The key the event is claimed under.
    pub key: DedupKey,
    /// The entity and the event's version of it; `None` skips the version guard (C5).
    pub entity: Option<(Entity, Version)>,
}

impl Event {
    /// An event with no entity: only deduplicated.
    pub fn new(key: DedupKey) -> Self {
        Self { key, entity: None }
    }

    /// The same event, about `entity` at `version`.
    pub fn with_entity(self, entity: Entity, version: Version) -> Self {
        Self {
            entity: Some((entity, version)),
            ..self
        }
    }
}

/// What [`Runner::run`] did with a delivery. [`Outcome::acknowledge`] says whether to ack it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Outcome<T> {
    /// The handler ran and committed; `T` is what it returned.
    Applied(T),
    /// Applied (the handler ran and committed), but the version equalled the entity's stored
    /// one: report it (for example `Idem-Version-Tie: true`) so that the application can refetch
    /// the object.
    Tie {
        /// What the handler returned.
        value: T,
        /// The version it tied with.
        current: Version,
    },
    /// Applied, with a gap in the entity's sequence before it (`GapPolicy::Apply`, or `Park`
    /// after its timeout).
    Gap {
        /// What the handler returned.
        value: T,
        /// The sequence number that was due.
        expected: i64,
        /// The sequence number applied.
        got: i64,
    },
    /// The event was processed before: nothing ran, nothing was written (C3).
    Duplicate,
    /// Older than the entity's version: recorded as processed (its key is in the inbox), not
    /// applied; the handler did not run.
    Stale {
        /// The entity's stored, newer version.
        current: Version,
        /// The event's version.
        got: Version,
    },
    /// A gap under [`GapPolicy::Reject`]: nothing committed; do not acknowledge, so that the
    /// sender delivers it again later.
    GapRejected {
        /// The sequence number that was due.
        expected: i64,
        /// The sequence number that arrived.
        got: i64,
    },
    /// A gap under [`GapPolicy::Park`] within its timeout: nothing committed but the time the gap
    /// was first seen; do not acknowledge. A delivery after `until` is applied as a gap.
    GapParked {
        /// The sequence number that was due.
        expected: i64,
        /// The sequence number that arrived.
        got: i64,
        /// When the hold ends.
        until: Timestamp,
    },
}

impl<T> Outcome<T> {
    /// Whether the delivery should be acknowledged (HTTP 2xx, broker ack): every outcome but
    /// [`Outcome::GapRejected`] and [`Outcome::GapParked`].
    pub fn acknowledge(&self) -> bool {
        !matches!(self, Self::GapRejected { .. } | Self::GapParked { .. })
    }

    /// A short name: `applied`, `tie`, `gap`, `duplicate`, `stale`, `gap_rejected` or
    /// `gap_parked` (the `outcome` label of the runner's metrics).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Applied(_) => "applied",
            Self::Tie { .. } => "tie",
            Self::Gap { .. } => "gap",
            Self::Duplicate => "duplicate",
            Self::Stale { .. } => "stale",
            Self::GapRejected { .. } => "gap_rejected",
            Self::GapParked { .. } => "gap_parked",
        }
    }
}

/// Runs handlers exactly once per event for one consumer: in one transaction it claims the
/// event's key, checks the entity's version, runs the handler (which makes its own writes in the
/// same transaction) and commits (C2). A crash or error anywhere before the commit leaves nothing
/// behind, so the next delivery runs it again.
#[derive(Debug)]
pub struct Runner<DB: Backend> {
    store: Store<DB>,
    inbox: Inbox<DB>,
    guard: VersionGuard<DB>,
    gap_policy: GapPolicy,
    max_attempts: u32,
    duplicate_precheck: bool,
    /// The lineage it declared, if any; `None` derives effect keys under its own name.
    declared: Option<Declared>,
    /// The effects scope once resolved (shared by clones: resolved and recorded once).
    scope: Arc<OnceCell<Name>>,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for Runner<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            inbox: self.inbox.clone(),
            guard: self.guard.clone(),
            gap_policy: self.gap_policy,
            max_attempts: self.max_attempts,
            duplicate_precheck: self.duplicate_precheck,
            declared: self.declared.clone(),
            scope: Arc::clone(&self.scope),
        }
    }
}

impl<DB: Backend> Runner<DB> {
    /// A runner for `consumer` (a versioned name such as `billing_v2`: dedup and versions are per
    /// consumer), with [`GapPolicy::Apply`] and [`DEFAULT_MAX_ATTEMPTS`].
    ///
    /// Registers `consumer` in the consumer registry as a
    /// [`ConsumerKind::Runner`](crate::ConsumerKind::Runner) unless something more specific (a
    /// broker consumer) registered it; see [`Store::register_consumer`].
    pub fn new(store: Store<DB>, consumer: &Name) -> Self {
        store.register_consumer(consumer, crate::ConsumerKind::Runner);
        Self {
            inbox: store.inbox(consumer),
            guard: store.version_guard(consumer),
            store,
            gap_policy: GapPolicy::default(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            duplicate_precheck: false,
            declared: None,
            scope: Arc::new(OnceCell::new()),
        }
    }

    /// Declares that this consumer succeeds `predecessor` (`billing_v2` succeeding
    /// `billing_v1`): its effect keys ([`effect_key`](Self::effect_key)) are derived under the
    /// predecessor's effects scope — the predecessor's name, or the scope it was recorded with —
    /// so the same handler code enqueues under the keys the predecessor did, and replaying the
    /// events it handled runs none of their effects again (docs/design.md C6). Dedup and
    /// versions stay per consumer: a new name is a new cursor. Recorded in
    /// `idem_consumer_lineage` at the first run; see [`run`](Self::run)'s errors.
    pub fn succeeds(self, predecessor: &Name) -> Self {
        Self {
            declared: Some(Declared::Succeeds(predecessor.clone())),
            scope: Arc::new(OnceCell::new()),
            ..self
        }
    }

    /// Declares the name this consumer's effect keys are derived under (`billing` for
    /// `billing_v1`, `billing_v2`, …) instead of its own. Recorded as
    /// [`succeeds`](Self::succeeds) is.
    pub fn effects_scope(self, scope: &Name) -> Self {
        Self {
            declared: Some(Declared::Scope(scope.clone())),
            scope: Arc::new(OnceCell::new()),
            ..self
        }
    }

    /// The name this consumer's effect keys are derived under: its own without a declared
    /// lineage; else resolved (and recorded, once) as [`succeeds`](Self::succeeds) says.
    ///
    /// # Errors
    /// [`Error::Lineage`] when the declared lineage is refused (the consumer names itself, a
    /// cycle, a lineage other than the one recorded); [`Error::Database`].
    pub async fn effects_scope_name(&self) -> Result<&Name, Error> {
        match &self.declared {
            None => Ok(self.consumer()),
            Some(declared) => {
                let consumer = self.consumer();
                (self.scope)
                    .get_or_try_init(|| lineage::resolve(&self.store, consumer, declared))
                    .await
            }
        }
    }

    /// The key of `event`'s effect `effect`: [`EffectKey::derive`] over this consumer's effects
    /// scope ([`effects_scope_name`](Self::effects_scope_name)), so identical handler code in
    /// `billing_v1` and a `billing_v2` that succeeds it derives identical keys; without a
    /// declared lineage exactly `EffectKey::derive(consumer, key, effect)`, as before.
    ///
    /// # Errors
    /// [`Error::Lineage`] when a lineage was declared and not resolved yet: inside
    /// [`run`](Self::run)'s handler it always is; elsewhere await
    /// [`effects_scope_name`](Self::effects_scope_name) first.
    pub fn effect_key(&self, event: &Event, effect: &Name) -> Result<EffectKey, Error> {
        let scope = match &self.declared {
            None => self.consumer(),
            Some(_) => self.scope.get().ok_or_else(|| Error::Lineage {
                consumer: self.consumer().to_string(),
                reason: "its effects scope is not resolved yet: await Runner::effects_scope_name first, or ask inside Runner::run".into(),
            })?,
        };
        Ok(EffectKey::derive(scope, &event.key, effect))
    }

    /// Enqueues `event`'s effect `effect` with `request` under [`effect_key`](Self::effect_key),
    /// in the handler's transaction `tx`, as [`EffectLedger::enqueue`] does, recording this
    /// runner's consumer as the row's writer — except that a
    /// consumer with a declared lineage whose request bytes differ from the ones its lineage
    /// recorded (a new receipt template) gets the stored state all the same, runs nothing, and
    /// the difference is counted (`idem_effects_enqueued_total{outcome="request_differs"}`) and
    /// logged at WARN, instead of [`Error::EffectConflict`]: a replay must not stop on it.
    ///
    /// # Errors
    /// As [`EffectLedger::enqueue`] and [`effect_key`](Self::effect_key).
    pub async fn enqueue_effect(
        &self,
        tx: &mut DB::Connection,
        ledger: &EffectLedger<DB>,
        event: &Event,
        effect: &Name,
        request: &[u8],
    ) -> Result<Enqueued, Error> {
        let key = self.effect_key(event, effect)?;
        (ledger)
            .enqueue_as(
                tx,
                Some(self.consumer()),
                effect,
                &key,
                request,
                self.declared.is_some(),
            )
            .await
    }

    /// Enqueues `message` in the outbox `outbox`, in the handler's transaction `tx`, as
    /// [`Outbox::enqueue`](crate::Outbox::enqueue) does, recording this runner's consumer as
    /// the row's writer (counted per consumer by [`Store::consumers`]).
    ///
    /// # Errors
    /// As [`Outbox::enqueue`](crate::Outbox::enqueue).
    pub async fn enqueue_outbox(
        &self,
        tx: &mut DB::Connection,
        outbox: &crate::Outbox<DB>,
        message: &crate::OutboxMessage,
    ) -> Result<crate::MessageId, Error> {
        outbox.enqueue_for(tx, self.consumer(), message).await
    }

    /// Sets what happens to an event that leaves a gap in its entity's sequence.
    pub fn gap_policy(self, gap_policy: GapPolicy) -> Self {
        Self { gap_policy, ..self }
    }

    /// Sets how many times a run is attempted when its transaction conflicts (serialization
    /// failure, deadlock, SQLITE_BUSY); at least 1.
    pub fn max_attempts(self, max_attempts: u32) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            ..self
        }
    }

    /// Reads the inbox before opening a transaction: a key already committed is answered as
    /// [`Outcome::Duplicate`] with one read-only statement, no transaction. Off by default.
    ///
    /// Worth it where duplicates are common (replays, redelivery storms): on PostgreSQL and MySQL a
    /// duplicate then costs one round trip instead of a transaction. Each fresh event pays one
    /// extra read. Safe under C1: the read only ever answers "duplicate" for a committed key (keys
    /// are deleted only by retention, past the redelivery horizon); when it finds nothing, the
    /// `INSERT` claim still decides, so nothing is written on the strength
    /// of the read.
    pub fn duplicate_precheck(self, duplicate_precheck: bool) -> Self {
        Self {
            duplicate_precheck,
            ..self
        }
    }

    /// Processes one delivery of `event`, running `handler` for a fresh, non-stale event in the
    /// transaction that claims it.
    ///
    /// The handler is an async closure. It receives the transaction's connection, `tx` (a
    /// `&mut SqliteConnection` or `&mut PgConnection`), and passes `&mut *tx` to sqlx and to
    /// idem's own writes alike:
    ///
    /// ```no_run
    /// # async fn f(runner: idem_sql::Runner<idem_sql::sqlx::Sqlite>, event: idem_sql::Event,
    /// #     payload: Vec<u8>, effects: idem_sql::EffectLedger<idem_sql::sqlx::Sqlite>,
    /// #     effect: idem_core::Name, key: idem_core::EffectKey) -> Result<(), idem_sql::Error> {
    /// use idem_sql::sqlx;
    /// let outcome = runner
    ///     .run(&event, async |tx| {
    ///         let order: serde_json::Value = serde_json::from_slice(&payload)?;
    ///         sqlx::query("INSERT INTO orders (id) VALUES ($1)")
    ///             .bind(order["id"].to_string())
    ///             .execute(&mut *tx)
    ///             .await?;
    ///         let _ = effects.enqueue(&mut *tx, &effect, &key, &payload).await?;
    ///         Ok(())
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// It borrows what it uses from its surroundings (`payload`, `effects` above): no clones,
    /// no `move`, no `Box::pin`. `?` converts any error into a [`HandlerError`], retryable unless
    /// marked [permanent](HandlerError::permanent). The handler may run more than once (a
    /// conflict is retried in a new transaction), so it must do nothing outside the transaction:
    /// record external calls as effect intents ([`EffectLedger::enqueue`](crate::EffectLedger::enqueue))
    /// and messages in the outbox ([`Outbox::enqueue`](crate::Outbox::enqueue)).
    ///
    /// A handler that panics unwinds through `run` to its caller (after the transaction is
    /// dropped and so rolled back): nothing was committed and the next delivery runs again.
    ///
    /// Returns the [`Outcome`]. Duplicates, stale events and ties are successes (C3, C5).
    ///
    /// The closure form of earlier releases, `|tx| Box::pin(async move { … })`, is not an async
    /// closure whose argument type the compiler can infer here; it runs unchanged with
    /// [`run_boxed`](Self::run_boxed):
    ///
    /// ```compile_fail,E0282
    /// # async fn f(runner: idem_sql::Runner<idem_sql::sqlx::Sqlite>, event: idem_sql::Event) {
    /// let _ = runner.run(&event, |tx| Box::pin(async move { let _ = &mut **tx; Ok(()) })).await;
    /// # }
    /// ```
    ///
    /// # Errors
    /// The handler's error (after rollback): [`Error::Handler`], [`Error::Permanent`] when it
    /// was marked permanent, or the error's own variant when it came from sqlx
    /// ([`Error::Database`]) or from idem ([`Error`]). Conflicts ([`ErrorKind::Conflict`]),
    /// the handler's included, are retried up to the attempt limit with a short backoff before
    /// they are returned. [`Error::Invalid`] for mixed version kinds. On any error nothing was
    /// committed: answer 5xx / nack so that the sender retries (or, for [`Error::Permanent`],
    /// dead-letter the event).
    pub async fn run<T, F>(&self, event: &Event, mut handler: F) -> Result<Outcome<T>, Error>
    where
        T: Send,
        F: AsyncFnMut(&mut DB::Connection) -> Result<T, HandlerError> + Send,
    {
        // The handler is called in this function's own body, not through a wrapping closure:
        // a wrapper makes the compiler fail to prove the future `Send` (its proof over the
        // closure's lifetimes is not general enough).
        self.effects_scope_name().await?;
        let mut attempt = 1;
        loop {
            let started = Instant::now();
            let result = match self.begin_attempt(event).await {
                Ok(Step::Run { mut tx, advance }) => match handler(&mut tx).await {
                    Ok(value) => self.finish(tx, advance, value).await,
                    Err(e) => Err(e.into()),
                },
                Ok(Step::Done(outcome)) => Ok(outcome),
                Err(e) => Err(e),
            };
            match self.settle(event, started, attempt, result).await {
                Settled::Return(result) => return result,
                Settled::Retry => attempt += 1,
            }
        }
    }

    /// As [`run`](Self::run), for a handler written as a closure that returns a boxed future and
    /// receives the sqlx transaction itself (`&mut **tx` is the connection): the form of
    /// [`Runner::run`] before async closures, and the form of handlers kept boxed in a struct
    /// (the broker consumers' `HandlerFn`, what [`handler!`](crate::handler) makes).
    ///
    /// The future the handler returns may borrow the transaction but nothing else: move owned
    /// copies of what it needs into the closure and clone them inside it
    /// (`let row = row.clone(); Box::pin(async move { … row … })`).
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub async fn run_boxed<T, F>(&self, event: &Event, mut handler: F) -> Result<Outcome<T>, Error>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Transaction<'static, DB>) -> BoxFuture<'t, Result<T, Error>>
            + Send,
    {
        self.effects_scope_name().await?;
        let mut attempt = 1;
        loop {
            let started = Instant::now();
            let result = match self.begin_attempt(event).await {
                Ok(Step::Run { mut tx, advance }) => match handler(&mut tx).await {
                    Ok(value) => self.finish(tx, advance, value).await,
                    Err(e) => Err(e),
                },
                Ok(Step::Done(outcome)) => Ok(outcome),
                Err(e) => Err(e),
            };
            match self.settle(event, started, attempt, result).await {
                Settled::Return(result) => return result,
                Settled::Retry => attempt += 1,
            }
        }
    }

    /// The consumer this runner serves.
    pub fn consumer(&self) -> &Name {
        self.inbox.consumer()
    }

    /// The store it runs on.
    pub(crate) fn store(&self) -> &Store<DB> {
        &self.store
    }

    /// The inbox of its consumer.
    pub(crate) fn inbox(&self) -> &Inbox<DB> {
        &self.inbox
    }

    /// Records attempt number `attempt`'s duration and outcome, and decides: a conflict below
    /// the attempt limit is retried after a backoff; anything else is returned.
    async fn settle<T>(
        &self,
        event: &Event,
        started: Instant,
        attempt: u32,
        result: Result<Outcome<T>, Error>,
    ) -> Settled<T> {
        let outcome = match &result {
            Ok(outcome) => outcome.name(),
            Err(_) => "failed",
        };
        metrics::histogram!(HANDLER_DURATION_SECONDS, "consumer" => self.consumer().to_string(), "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        match result {
            Err(e) if e.kind() == ErrorKind::Conflict && attempt < self.max_attempts => {
                metrics::counter!(CONFLICT_RETRIES_TOTAL, "consumer" => self.consumer().to_string())
                    .increment(1);
                tracing::debug!(key = %event.key, attempt, error = %e, "transaction conflict, retrying");
                tokio::time::sleep(CONFLICT_BACKOFF.delay(attempt)).await;
                Settled::Retry
            }
            other => Settled::Return(other),
        }
    }

    /// One attempt up to the handler: begins the transaction, claims the key and checks the
    /// version; says whether the handler runs, or what the outcome already is.
    async fn begin_attempt<T>(&self, event: &Event) -> Result<Step<DB, T>, Error> {
        if self.duplicate_precheck && self.inbox.is_claimed(&event.key).await? {
            return Ok(self.duplicate().await);
        }
        let mut tx = self.store.begin().await?;
        if self.inbox.claim(&mut tx, &event.key).await? == Claim::Duplicate {
            // Nothing was written. Dropping the transaction queues its ROLLBACK on the connection,
            // sent when the pool takes it back, so the duplicate is answered without waiting for it.
            drop(tx);
            return Ok(self.duplicate().await);
        }
        let advance = match &event.entity {
            Some((entity, version)) => {
                let advance = self
                    .guard
                    .advance(&mut tx, entity, version, &event.key)
                    .await?;
                Some((advance, *version))
            }
            None => None,
        };
        match advance {
            Some((Advance::Stale { current }, got)) => {
                consumers::commit(&self.store, tx).await?;
                self.store.count(self.consumer(), Counted::Stale);
                return Ok(Step::Done(Outcome::Stale { current, got }));
            }
            Some((Advance::Gap { expected, got }, _)) if self.gap_policy != GapPolicy::Apply => {
                let consumer = self.consumer().as_str();
                let first_seen = match self.gap_policy {
                    GapPolicy::Park { .. } => {
                        DB::parked_since(&mut tx, consumer, event.key.as_str()).await?
                    }
                    _ => None,
                };
                let now = self.store.now();
                let first_seen = first_seen.map(Timestamp);
                if let Some(held) = gap_hold(self.gap_policy, expected, got, first_seen, now) {
                    tx.rollback().await?;
                    // The first delivery to meet the gap starts the hold, in its own statement
                    // after the rollback (SQLite's write lock is free by then).
                    if matches!(held, Outcome::GapParked { .. }) && first_seen.is_none() {
                        let mut conn = self.store.pool().acquire().await?;
                        DB::park(&mut conn, consumer, event.key.as_str(), now.as_millis()).await?;
                    }
                    return Ok(Step::Done(held));
                }
            }
            _ => {}
        }
        Ok(Step::Run { tx, advance })
    }

    /// A duplicate, counted; a flush that is due is done in its own transaction.
    async fn duplicate<T>(&self) -> Step<DB, T> {
        self.store.count(self.consumer(), Counted::Duplicate);
        consumers::flush_if_due(&self.store).await;
        Step::Done(Outcome::Duplicate)
    }

    /// Commits the handler's transaction (with the consumer counts when a flush is due) and
    /// says how the event was applied; counts it once committed.
    async fn finish<T>(
        &self,
        tx: Transaction<'static, DB>,
        advance: Option<(Advance, Version)>,
        value: T,
    ) -> Result<Outcome<T>, Error> {
        consumers::commit(&self.store, tx).await?;
        let gap = matches!(advance, Some((Advance::Gap { .. }, _)));
        self.store.count(self.consumer(), Counted::Claimed { gap });
        Ok(match advance {
            Some((Advance::Tie { current }, _)) => Outcome::Tie { value, current },
            Some((Advance::Gap { expected, got }, _)) => Outcome::Gap {
                value,
                expected,
                got,
            },
            _ => Outcome::Applied(value),
        })
    }
}

/// Where an attempt stands after the claim and the version check.
enum Step<DB: Backend, T> {
    /// The handler runs in `tx`; `advance` is the version guard's answer.
    Run {
        tx: Transaction<'static, DB>,
        advance: Option<(Advance, Version)>,
    },
    /// Settled without the handler: a duplicate, a stale event, a gap held back.
    Done(Outcome<T>),
}

/// What [`Runner::settle`] decided.
enum Settled<T> {
    Return(Result<Outcome<T>, Error>),
    Retry,
}

/// Whether a gap holds its event back under `policy`: `None` to apply it now. `first_seen` is
/// when a delivery first met this gap under `Park`.
fn gap_hold<T>(
    policy: GapPolicy,
    expected: i64,
    got: i64,
    first_seen: Option<Timestamp>,
    now: Timestamp,
) -> Option<Outcome<T>> {
    match policy {
        GapPolicy::Apply => None,
        GapPolicy::Reject => Some(Outcome::GapRejected { expected, got }),
        GapPolicy::Park { timeout } => {
            let until = first_seen.unwrap_or(now).saturating_add(timeout);
            match first_seen {
                Some(_) if now >= until => None,
                _ => Some(Outcome::GapParked {
                    expected,
                    got,
                    until,
                }),
            }
        }
    }
}

/// The pause after conflict number `attempt` (1-based): 10, 20, 40, … ms, capped at 200 ms.
const CONFLICT_BACKOFF: Backoff =
    Backoff::exponential(Duration::from_millis(10), Duration::from_millis(200));
