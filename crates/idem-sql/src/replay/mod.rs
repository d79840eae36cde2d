//! Replaying history into a new consumer version (issue 33; docs/design.md C6): the
//! application's event log, fed through a [`Runner`] in the log's order, with a dry run that
//! counts what would happen and a refusal of events past the effects' retention.
//!
//! The log is the application's own record of what happened (a table, a JSONL file): its order
//! is taken as the original order, and each entity's events reach the handler in that order.
//! A consumer that succeeds the one that handled the events first ([`Runner::succeeds`]) applies
//! them to its new projection and finds their effects recorded under its lineage's keys, so
//! none runs again — as long as the ledger still holds them. [`Store::gc`] deletes finished
//! effects past its retention; an event older than that would run its effects again whatever
//! the keys, so a run refuses the log while it holds such an event (not already in the
//! consumer's inbox), unless told otherwise.

mod jsonl;
mod log;
mod report;

use std::time::Duration;

use idem_core::{RetentionPolicy, Timestamp};

pub use jsonl::JsonlLog;
pub use log::{EventLog, LogEntries, LoggedEvent};
pub use report::{HandlerEffects, ReplayProgress, ReplayReport};

use crate::backend::Backend;
use crate::{Error, HandlerError, Outcome, Runner};

/// Feeds an event log through a [`Runner`], in the log's order; made with [`Replay::new`],
/// set with [`dry_run`](Self::dry_run) and [`allow_effects_rerun`](Self::allow_effects_rerun),
/// run with [`run`](Self::run).
///
/// ```no_run
/// # async fn f(store: idem_sql::SqliteStore, v1: idem_core::Name, v2: idem_core::Name,
/// #     receipt: idem_core::Name, policy: idem_core::RetentionPolicy) -> Result<(), idem_sql::Error> {
/// use idem_sql::{JsonlLog, Replay, Runner};
/// let runner = Runner::new(store.clone(), &v2).succeeds(&v1);
/// let ledger = store.effects();
/// let log = JsonlLog::open("events.jsonl");
/// let handler = async |tx: &mut idem_sql::sqlx::SqliteConnection, logged: &idem_sql::LoggedEvent<serde_json::Value>| {
///     // … the projection's writes, from `logged.payload` …
///     Ok(runner.enqueue_effect(tx, &ledger, &logged.event, &receipt, b"receipt").await?)
/// };
/// // First look: what would be applied, and which effects would run again.
/// let preview = Replay::new(&runner, &policy).dry_run(true).run(&log, handler).await?;
/// println!("{} to apply, {} past the effects' retention", preview.applied, preview.past_retention);
/// let report = Replay::new(&runner, &policy).run(&log, handler).await?;
/// println!("{} applied, {} effects found recorded", report.applied, report.effects_existing);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Replay<'r, DB: Backend> {
    runner: &'r Runner<DB>,
    effects_retention: Duration,
    dry_run: bool,
    allow_effects_rerun: bool,
}

impl<'r, DB: Backend> Replay<'r, DB> {
    /// A replay through `runner` (its consumer, lineage and gap policy), for a store collected
    /// with `effects_retention`: the [`RetentionPolicy`] the application gives [`Store::gc`]
    /// (`Store::gc` deletes finished effects last changed before now − its `keep()`). A store
    /// never collected may pass `RetentionPolicy::new(Duration::MAX, Duration::ZERO)`.
    ///
    /// [`Store::gc`]: crate::Store::gc
    pub fn new(runner: &'r Runner<DB>, effects_retention: &RetentionPolicy) -> Self {
        Self {
            runner,
            effects_retention: effects_retention.keep(),
            dry_run: false,
            allow_effects_rerun: false,
        }
    }

    /// With `true`, [`run`](Self::run) changes nothing and runs no handler: it counts the
    /// events that would be applied (their key is not in this consumer's inbox), the duplicates,
    /// the events past the effects' retention and the effects already recorded under the
    /// consumer's effects scope. Off by default.
    pub fn dry_run(self, dry_run: bool) -> Self {
        Self { dry_run, ..self }
    }

    /// With `true`, events past the effects' retention are run too: their effects run again
    /// (under the same keys; the provider may still know them, or not). Off by default: a run
    /// refuses a log that holds such an event ([`Error::EffectsPastRetention`]).
    pub fn allow_effects_rerun(self, allow_effects_rerun: bool) -> Self {
        Self {
            allow_effects_rerun,
            ..self
        }
    }

    /// Reads `log` and runs `handler` for each of its events through the runner, in the log's
    /// order, each in the transaction that claims it ([`Runner::run`]): `handler` gets the
    /// transaction's connection and the [`LoggedEvent`] (its payload), and returns what it
    /// enqueued ([`HandlerEffects`]) for the report.
    ///
    /// It reads the whole log first, before any event runs: it stops on a line it cannot read,
    /// counts the events past the effects' retention (occurred before now − the retention, by
    /// the store's clock, and not in the consumer's inbox) and refuses them, unless
    /// [`allow_effects_rerun`](Self::allow_effects_rerun). A [dry run](Self::dry_run) stops
    /// after that reading, with its counts. Then it runs the events one by one; an error stops
    /// it, the events before it staying committed: run it again and those are duplicates.
    ///
    /// # Errors
    /// Before anything runs: [`Error::InvalidLogLine`] and [`Error::LogUnreadable`] from the
    /// log; [`Error::EffectsPastRetention`], naming their number, the oldest and the cutoff;
    /// [`Error::Lineage`] when the runner's lineage is refused; [`Error::Database`]. While it
    /// runs: [`Error::ReplayStopped`] with the event's position, the events applied before it
    /// and the cause (a handler's error, a database error, the log's).
    pub async fn run<L, F, T>(&self, log: &L, handler: F) -> Result<ReplayReport, Error>
    where
        L: EventLog + ?Sized,
        L::Payload: Sync,
        F: AsyncFnMut(&mut DB::Connection, &LoggedEvent<L::Payload>) -> Result<T, HandlerError>
            + Send,
        T: HandlerEffects + Send,
    {
        self.run_with_progress(log, handler, |_| {}).await
    }

    /// As [`run`](Self::run), calling `progress` after each event is settled (committed, or
    /// found a duplicate): to log the replay's progress, or to tell a supervisor. A dry run calls
    /// it for none.
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub async fn run_with_progress<L, F, T>(
        &self,
        log: &L,
        mut handler: F,
        mut progress: impl FnMut(ReplayProgress) + Send,
    ) -> Result<ReplayReport, Error>
    where
        L: EventLog + ?Sized,
        L::Payload: Sync,
        F: AsyncFnMut(&mut DB::Connection, &LoggedEvent<L::Payload>) -> Result<T, HandlerError>
            + Send,
        T: HandlerEffects + Send,
    {
        let scope = self.runner.effects_scope_name().await?;
        let store = self.runner.store();
        let mut checked = self.check(log).await?;
        checked.effects_recorded = store.effects().count_scope(scope).await?;
        if self.dry_run {
            return Ok(checked);
        }
        if let (Some(oldest), false) = (checked.oldest_past_retention, self.allow_effects_rerun) {
            return Err(Error::EffectsPastRetention {
                count: checked.past_retention,
                oldest,
                cutoff: self.cutoff(),
            });
        }
        let mut report = ReplayReport {
            past_retention: checked.past_retention,
            oldest_past_retention: checked.oldest_past_retention,
            effects_recorded: checked.effects_recorded,
            ..ReplayReport::default()
        };
        for entry in log.events() {
            let stopped = |source: Error, report: &ReplayReport, position| Error::ReplayStopped {
                position,
                applied: report.applied,
                source: Box::new(source),
            };
            let (position, logged) = entry.map_err(|e| stopped(e, &report, report.read + 1))?;
            report.read += 1;
            let outcome = self
                .runner
                .run(&logged.event, async |tx| handler(tx, &logged).await)
                .await
                .map_err(|e| stopped(e, &report, position))?;
            tally(&mut report, &outcome);
            progress(ReplayProgress {
                position,
                outcome: outcome.name(),
            });
        }
        Ok(report)
    }

    /// Reads the whole log: counts its events and those past the effects' retention (not in
    /// the inbox); in a dry run also what would be applied and the duplicates.
    async fn check<L>(&self, log: &L) -> Result<ReplayReport, Error>
    where
        L: EventLog + ?Sized,
    {
        let cutoff = self.cutoff();
        let inbox = self.runner.inbox();
        let mut report = ReplayReport {
            dry_run: self.dry_run,
            ..ReplayReport::default()
        };
        for entry in log.events() {
            let (_, logged) = entry?;
            report.read += 1;
            let past = logged.occurred_at < cutoff;
            // Outside a dry run only the events past the cutoff need the inbox's answer.
            if !(self.dry_run || past) {
                continue;
            }
            if inbox.is_claimed(&logged.event.key).await? {
                report.duplicates += 1;
                continue;
            }
            report.applied += 1;
            if past {
                report.past_retention += 1;
                let oldest = report
                    .oldest_past_retention
                    .get_or_insert(logged.occurred_at);
                *oldest = (*oldest).min(logged.occurred_at);
            }
        }
        Ok(report)
    }

    /// Events that occurred before this are past the effects' retention.
    fn cutoff(&self) -> Timestamp {
        self.runner
            .store()
            .now()
            .saturating_sub(self.effects_retention)
    }
}

/// Adds one event's outcome to the report.
fn tally<T: HandlerEffects>(report: &mut ReplayReport, outcome: &Outcome<T>) {
    match outcome {
        Outcome::Applied(value) => {
            report.applied += 1;
            report.count_effects(value);
        }
        Outcome::Tie { value, .. } => {
            report.applied += 1;
            report.ties += 1;
            report.count_effects(value);
        }
        Outcome::Gap { value, .. } => {
            report.applied += 1;
            report.gaps += 1;
            report.count_effects(value);
        }
        Outcome::Duplicate => report.duplicates += 1,
        Outcome::Stale { .. } => report.stale += 1,
        Outcome::GapRejected { .. } | Outcome::GapParked { .. } => report.held += 1,
    }
}
