//! The runner: claim, version guard, the handler's writes and commit, in one call (C1, C2, C5).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use idem_core::{Advance, Backoff, DedupKey, Entity, GapPolicy, Name, Timestamp, Version};
use sqlx::Transaction;

use crate::backend::Backend;
use crate::metric_definitions::{CONFLICT_RETRIES_TOTAL, HANDLER_DURATION_SECONDS};
use crate::{Claim, Error, ErrorKind, Inbox, Store, VersionGuard};

/// A boxed, sendable future: what a handler returns.
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
        }
    }
}

impl<DB: Backend> Runner<DB> {
    /// A runner for `consumer` (a versioned name such as `billing_v2`: dedup and versions are per
    /// consumer), with [`GapPolicy::Apply`] and [`DEFAULT_MAX_ATTEMPTS`].
    pub fn new(store: Store<DB>, consumer: &Name) -> Self {
        Self {
            inbox: store.inbox(consumer),
            guard: store.version_guard(consumer),
            store,
            gap_policy: GapPolicy::default(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            duplicate_precheck: false,
        }
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

    /// Processes one delivery of `event`.
    ///
    /// `handler` receives the open transaction and makes the application's writes with it
    /// (`&mut **tx` is the connection); it runs only for a fresh, non-stale event, and may run
    /// again if the transaction conflicts and is retried, so it must do nothing outside the
    /// transaction (record external effects as intents instead). It is written as
    /// `|tx| Box::pin(async move { … })`. The future it returns may borrow the transaction but
    /// nothing else: move owned copies of the data it needs into the closure and clone them
    /// inside it (`let row = row.clone(); Box::pin(async move { … row … })`), since the handler
    /// can be called more than once.
    ///
    /// A handler that panics unwinds through `run` to its caller (after the transaction is
    /// dropped and so rolled back): nothing was committed and the next delivery runs again.
    ///
    /// Returns the [`Outcome`]. Duplicates, stale events and ties are successes (C3, C5).
    ///
    /// # Errors
    /// The handler's error (after rollback): [`Error::Handler`], or [`Error::Database`] for its
    /// own statements. Conflicts ([`ErrorKind::Conflict`]) are retried up to the attempt limit
    /// with a short backoff before they are returned. [`Error::Invalid`] for mixed version kinds.
    /// On any error nothing was committed: answer 5xx / nack so that the sender retries.
    pub async fn run<T, F>(&self, event: &Event, mut handler: F) -> Result<Outcome<T>, Error>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Transaction<'static, DB>) -> BoxFuture<'t, Result<T, Error>>
            + Send,
    {
        let mut attempt = 1;
        loop {
            let started = Instant::now();
            let result = self.attempt(event, &mut handler).await;
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
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The consumer this runner serves.
    pub fn consumer(&self) -> &Name {
        self.inbox.consumer()
    }

    async fn attempt<T, F>(&self, event: &Event, handler: &mut F) -> Result<Outcome<T>, Error>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Transaction<'static, DB>) -> BoxFuture<'t, Result<T, Error>>
            + Send,
    {
        if self.duplicate_precheck && self.inbox.is_claimed(&event.key).await? {
            return Ok(Outcome::Duplicate);
        }
        let mut tx = self.store.begin().await?;
        if self.inbox.claim(&mut tx, &event.key).await? == Claim::Duplicate {
            // Nothing was written. Dropping the transaction queues its ROLLBACK on the connection,
            // sent when the pool takes it back, so the duplicate is answered without waiting for it.
            drop(tx);
            return Ok(Outcome::Duplicate);
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
                tx.commit().await?;
                return Ok(Outcome::Stale { current, got });
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
                    return Ok(held);
                }
            }
            _ => {}
        }
        let value = handler(&mut tx).await?;
        tx.commit().await?;
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
