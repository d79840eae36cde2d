//! The effect ledger and its worker (docs/design.md C6): external effects (a charge, an email, an API
//! call) recorded as intents in the handler's transaction, run at least once by a worker with a
//! stable idempotency key, their outcomes stored.
//!
//! The life of an effect, one row of `idem_effects` per [`EffectKey`]:
//!
//! ```text
//!             enqueue (in the handler's transaction)
//!                 │
//!                 ▼
//!   ┌──────────► pending ──claim──► running ──Succeeded──► succeeded   (finished)
//!   │  retryable     ▲                 │  │
//!   │  failure ──────┘ (backoff)       │  └─Failed, not retryable,
//!   │                                  │    or max attempts ────────► dead     (operator)
//!   │               unknown ◄──────────┘ timeout / Unknown / apply hook failed /
//!   │                  │   (claimed again   lease lapsed mid-call
//!   │                  │    with the same key within the key retention)
//!   │                  └── key retention passed ────────────────────► parked   (operator)
//!   │
//!   └── resolve(Retry) ◄── parked, dead ──resolve(Succeeded)──► succeeded
//!                                      └─resolve(Failed)─────► failed     (finished)
//! ```

mod ledger;
mod worker;

use idem_core::{EffectKey, FencingToken, Name, Timestamp};

pub use ledger::EffectLedger;
pub use worker::{
    Applied, CallOutcome, DEFAULT_EFFECT_BATCH_SIZE, DEFAULT_EFFECT_CALL_TIMEOUT,
    DEFAULT_EFFECT_POLL_INTERVAL, DEFAULT_EFFECT_WORKER_NAME, DEFAULT_KEY_RETENTION,
    DEFAULT_MAX_EFFECT_ATTEMPTS, EFFECT_LEASE_MARGIN, EffectCall, EffectWorker, Provider,
    WorkerReport,
};

use crate::Error;
use crate::backend::effect_ops::EffectRow;

/// Where an effect is in its life (the `status` column of `idem_effects`; see the diagram in
/// the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EffectStatus {
    /// Waiting for its first attempt, or for the next one after a retryable failure.
    Pending,
    /// A worker holds the lease and is calling the provider. A running effect whose lease
    /// lapsed (its worker crashed or stalled) has an unknown result and is claimed again like
    /// [`EffectStatus::Unknown`].
    Running,
    /// The last call's result is unknown (timeout, connection lost after sending, the local apply
    /// failed after the provider succeeded). Claimed again with the same key while the provider
    /// still keeps idempotency keys, then [`EffectStatus::Parked`].
    Unknown,
    /// The provider succeeded; the outcome is stored. Finished.
    Succeeded,
    /// Resolved as failed by an operator. Finished.
    Failed,
    /// Unknown past the provider's key retention: retrying with the same key could run the
    /// effect twice, so it waits for reconciliation ([`EffectLedger::resolve`]).
    Parked,
    /// Failed past the retry policy (a non-retryable failure, or the attempt limit): a dead
    /// letter, kept until an operator resolves it.
    Dead,
}

impl EffectStatus {
    /// The text stored in `idem_effects.status`: `pending`, `running`, `unknown`, `succeeded`,
    /// `failed`, `parked` or `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Unknown => "unknown",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Parked => "parked",
            Self::Dead => "dead",
        }
    }

    /// Whether the effect is finished ([`Succeeded`](Self::Succeeded) or
    /// [`Failed`](Self::Failed)): no worker will run it again, and retention may delete it.
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    fn parse(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "unknown" => Self::Unknown,
            "succeeded" => Self::Succeeded,
            "failed" => Self::Failed,
            "parked" => Self::Parked,
            "dead" => Self::Dead,
            other => return Err(corrupt(format!("unknown status {other:?}"))),
        })
    }
}

impl std::fmt::Display for EffectStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One effect as stored in the ledger, for operators ([`EffectLedger::get`],
/// [`EffectLedger::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EffectRecord {
    /// The effect key (the provider's idempotency key).
    pub key: EffectKey,
    /// The effect's name (`send_receipt`, `charge`).
    pub effect: Name,
    /// The request bytes given to `enqueue`, passed to the provider on every attempt.
    pub request: Vec<u8>,
    /// Where it is in its life.
    pub status: EffectStatus,
    /// Attempts so far (calls started, including ones whose result is unknown); reset to 0 by
    /// [`Resolution::Retry`].
    pub attempts: u32,
    /// When a worker may next claim it (for pending and unknown effects).
    pub next_attempt_at: Timestamp,
    /// The fencing token of the latest claim (0 before the first).
    pub lease_token: FencingToken,
    /// The provider's answer (succeeded), or the operator's (resolved as succeeded).
    pub outcome: Option<Vec<u8>>,
    /// The last failure's reason, or the operator's reason for a failed resolution.
    pub last_error: Option<String>,
    /// When the first attempt with this key started: the key retention window counts from here.
    pub first_attempt_at: Option<Timestamp>,
    /// When the intent was enqueued.
    pub created_at: Timestamp,
    /// When the row last changed (retention of finished effects counts from here).
    pub updated_at: Timestamp,
}

impl EffectRecord {
    fn from_row(row: EffectRow) -> Result<Self, Error> {
        Ok(Self {
            key: EffectKey::intent(&row.key)
                .map_err(|e| corrupt(format!("effect key {:?}: {e}", row.key)))?,
            effect: Name::new("effect", row.effect.as_str())
                .map_err(|e| corrupt(format!("effect name {:?}: {e}", row.effect)))?,
            request: row.request,
            status: EffectStatus::parse(&row.status)?,
            attempts: u32::try_from(row.attempts)
                .map_err(|_| corrupt(format!("attempts {}", row.attempts)))?,
            next_attempt_at: Timestamp(row.next_attempt_at),
            lease_token: FencingToken(row.lease_token),
            outcome: row.outcome,
            last_error: row.last_error,
            first_attempt_at: row.first_attempt_at.map(Timestamp),
            created_at: Timestamp(row.created_at),
            updated_at: Timestamp(row.updated_at),
        })
    }
}

/// What [`EffectLedger::enqueue`] found for the key, and what it means for the handler.
///
/// For a key derived from the event ([`EffectKey::derive`]), a handler runs once per event, so
/// it sees [`Created`](Self::Created); the other answers come with business intent keys that
/// several code paths share (`charge:order:50266`), and with replays. In every case the handler
/// commits: there is nothing to undo, and no call to make itself.
///
/// ```no_run
/// # async fn f(tx: &mut idem_sql::sqlx::SqliteConnection, effects: idem_sql::EffectLedger<idem_sql::sqlx::Sqlite>,
/// #     effect: idem_core::Name, key: idem_core::EffectKey) -> Result<(), idem_sql::Error> {
/// use idem_sql::Enqueued;
/// match effects.enqueue(&mut *tx, &effect, &key, b"{}").await? {
///     // the worker calls the provider after the commit
///     Enqueued::Created | Enqueued::Pending { .. } => {}
///     // done before: use its answer here if the handler needs it (a charge id, say)
///     Enqueued::Completed { outcome } => println!("already sent: {}", String::from_utf8_lossy(&outcome)),
///     // an operator decided it must not happen: record that, if the application cares
///     Enqueued::Failed { reason } => println!("will not be sent: {reason}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "`Completed` carries the outcome of the effect run before; match it, or `let _ =` when only new intents matter"]
pub enum Enqueued {
    /// A new intent, pending; it becomes visible to workers when the caller's transaction
    /// commits (and disappears if it rolls back). The handler has nothing more to do: the
    /// worker makes the call.
    Created,
    /// The same effect with the same request was enqueued before and has not succeeded:
    /// nothing was written. `status` says where it is (pending, running, unknown, parked, dead).
    /// For the handler it is as good as [`Created`](Self::Created): the earlier intent will run
    /// (or waits for an operator, if parked or dead), and no second one is made.
    Pending {
        /// The stored status.
        status: EffectStatus,
    },
    /// The same effect with the same request succeeded before: here is the stored outcome;
    /// nothing was written and the provider will not be called again. The handler may use the
    /// outcome (the provider's answer, a charge id) as if it had made the call now.
    Completed {
        /// The provider's answer as stored.
        outcome: Vec<u8>,
    },
    /// The same effect with the same request was resolved as failed by an operator: nothing was
    /// written and it will not run again. The handler decides whether that matters to its own
    /// writes (say, mark the order as not receipted).
    Failed {
        /// The operator's reason.
        reason: String,
    },
}

impl Enqueued {
    /// Whether a new intent was written ([`Created`](Self::Created)).
    pub fn is_created(&self) -> bool {
        matches!(self, Self::Created)
    }
}

/// An operator's decision on a parked or dead effect ([`EffectLedger::resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The effect did happen (for example the provider's dashboard shows the charge): store this
    /// outcome and finish it as succeeded. Later `enqueue` calls of the key return it.
    Succeeded(Vec<u8>),
    /// The effect did not happen and must not: finish it as failed with this reason.
    Failed(String),
    /// Run it again: back to pending, due now, attempts reset to 0 and a new key-retention
    /// window. For a parked effect, do this only after checking with the provider that the call
    /// did not take effect: past its key retention the provider may no longer recognise the key.
    Retry,
}

fn corrupt(detail: String) -> Error {
    Error::CorruptRow {
        table: "idem_effects",
        detail,
    }
}
