//! What a replay reports: counts of the events it read and what became of them, and of the
//! effects its handler found or enqueued.

use idem_core::Timestamp;

use crate::Enqueued;

/// What one [`Replay::run`](crate::Replay::run) did, or (a dry run) would do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayReport {
    /// Whether it was a dry run: nothing was changed, and the counts below say what a run would
    /// find.
    pub dry_run: bool,
    /// Events read from the log.
    pub read: u64,
    /// Events the handler ran for and committed, ties and gaps included. In a dry run: the events
    /// whose key is not in this consumer's inbox, so that a run would apply them (or find them
    /// stale: the dry run does not run the version guard).
    pub applied: u64,
    /// Of `applied`, events whose version tied with the entity's stored one (docs/design.md C5).
    pub ties: u64,
    /// Of `applied`, events applied after a gap in their entity's sequence.
    pub gaps: u64,
    /// Events already in this consumer's inbox: nothing ran for them.
    pub duplicates: u64,
    /// Events older than their entity's stored version: recorded, not applied. Not counted by a
    /// dry run.
    pub stale: u64,
    /// Events the runner's gap policy held back (`GapPolicy::Reject` or `Park`): not applied;
    /// a later replay delivers them again.
    pub held: u64,
    /// Events not in the inbox that occurred before the effects' retention cutoff: the ledger
    /// rows of their effects may be gone, so their effects run again. A run refuses them unless
    /// [`allow_effects_rerun`](crate::Replay::allow_effects_rerun).
    pub past_retention: u64,
    /// When the oldest of `past_retention` occurred.
    pub oldest_past_retention: Option<Timestamp>,
    /// Effects stored under the consumer's effects scope before the run
    /// ([`EffectLedger::count_scope`](crate::EffectLedger::count_scope)): what the lineage
    /// recorded and a replay finds instead of running again.
    pub effects_recorded: u64,
    /// Effects the handler enqueued anew ([`Enqueued::Created`]): they run after the commit.
    pub effects_created: u64,
    /// Effects the handler found recorded ([`Enqueued::Completed`], `Pending`, `Failed`): they
    /// run no second time.
    pub effects_existing: u64,
}

impl ReplayReport {
    /// Counts what a handler returned about its effects.
    pub(crate) fn count_effects(&mut self, value: &impl HandlerEffects) {
        value.enqueued(&mut |enqueued| {
            if enqueued.is_created() {
                self.effects_created += 1;
            } else {
                self.effects_existing += 1;
            }
        });
    }
}

/// What a replay's handler returns: the effects it enqueued (the [`Enqueued`] answers of
/// [`Runner::enqueue_effect`](crate::Runner::enqueue_effect)), which the report counts.
/// Implemented for `()` (no effects), [`Enqueued`], `Option<Enqueued>` and `Vec<Enqueued>`.
pub trait HandlerEffects {
    /// Calls `each` with every effect answer this value holds.
    fn enqueued(&self, each: &mut dyn FnMut(&Enqueued));
}

impl HandlerEffects for () {
    fn enqueued(&self, _: &mut dyn FnMut(&Enqueued)) {}
}

impl HandlerEffects for Enqueued {
    fn enqueued(&self, each: &mut dyn FnMut(&Enqueued)) {
        each(self);
    }
}

impl HandlerEffects for Option<Enqueued> {
    fn enqueued(&self, each: &mut dyn FnMut(&Enqueued)) {
        self.iter().for_each(each);
    }
}

impl HandlerEffects for Vec<Enqueued> {
    fn enqueued(&self, each: &mut dyn FnMut(&Enqueued)) {
        self.iter().for_each(each);
    }
}

/// One event a run settled, for [`Replay::run_with_progress`](crate::Replay::run_with_progress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplayProgress {
    /// The event's position in the log (from 1; a JSONL log's line).
    pub position: u64,
    /// What became of it: the runner's outcome name (`applied`, `tie`, `gap`, `duplicate`,
    /// `stale`, `gap_rejected`, `gap_parked`), committed when this is reported.
    pub outcome: &'static str,
}
