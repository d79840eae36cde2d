//! Every metric idem-sql records, named once and described here. Recorded through the
//! [`metrics`] facade: install any recorder (Prometheus, StatsD, …) to collect them, or none to
//! pay nothing.

use metrics::{Unit, describe_counter, describe_histogram};

/// Claims by outcome; labels `consumer`, `outcome` = `fresh` | `duplicate`. Counts claims, not
/// events: a fresh claim whose transaction later rolled back (handler error, conflict retry) is
/// counted, and so is the next delivery's claim of the same key.
pub const CLAIMS_TOTAL: &str = "idem_claims_total";
/// Events that arrived older than their entity's version (recorded, not applied); label `consumer`.
pub const STALE_TOTAL: &str = "idem_stale_events_total";
/// Events whose version equalled their entity's version (applied, reported); label `consumer`.
pub const TIES_TOTAL: &str = "idem_version_ties_total";
/// Deliveries that met a gap in a dense sequence; label `consumer`.
pub const GAPS_TOTAL: &str = "idem_gaps_total";
/// How many sequence numbers each gap skipped (got − expected); label `consumer`.
pub const GAP_SIZE: &str = "idem_gap_size";
/// Expired leases taken over by a new holder (the old holder's writes are now fenced off).
pub const LEASE_TAKEOVERS_TOTAL: &str = "idem_lease_takeovers_total";
/// Time from the start of a runner transaction to its commit or rollback, in seconds; labels
/// `consumer`, `outcome` = `applied` | `tie` | `gap` | `duplicate` | `stale` | `gap_rejected` |
/// `gap_parked` | `failed`.
pub const HANDLER_DURATION_SECONDS: &str = "idem_handler_duration_seconds";
/// Runner attempts retried after a conflict (serialization failure, deadlock, busy); label `consumer`.
pub const CONFLICT_RETRIES_TOTAL: &str = "idem_conflict_retries_total";
/// Rows deleted by retention; label `table`.
pub const GC_DELETED_TOTAL: &str = "idem_gc_deleted_total";
/// Effect intents enqueued; labels `effect`, `outcome` = `created` | `existing` | `conflict` |
/// `request_differs` (a successor's other request bytes, answered with the stored state).
/// Counted when `enqueue` is called, whether or not its transaction commits.
pub const EFFECTS_ENQUEUED_TOTAL: &str = "idem_effects_enqueued_total";
/// Effect attempts by result; labels `effect`, `outcome` = `succeeded` | `failed` (retryable,
/// scheduled again) | `unknown` | `parked` | `dead` | `fenced` (result refused: the lease had
/// changed hands) | `apply_failed` (the provider succeeded, the apply hook failed; also counted
/// as `unknown` or `parked`).
pub const EFFECTS_TOTAL: &str = "idem_effects_total";

/// Registers the descriptions and units above with the installed recorder. Call once after
/// installing it; recording works without this call, only the help texts are missing.
pub fn describe() {
    describe_counter!(
        CLAIMS_TOTAL,
        Unit::Count,
        "Inbox claims by outcome (fresh, duplicate)."
    );
    describe_counter!(
        STALE_TOTAL,
        Unit::Count,
        "Events older than their entity's version, recorded and not applied."
    );
    describe_counter!(
        TIES_TOTAL,
        Unit::Count,
        "Events with the same version as their entity's, applied and reported."
    );
    describe_counter!(
        GAPS_TOTAL,
        Unit::Count,
        "Deliveries that skipped numbers of a dense sequence."
    );
    describe_histogram!(GAP_SIZE, Unit::Count, "Sequence numbers skipped by a gap.");
    describe_counter!(
        LEASE_TAKEOVERS_TOTAL,
        Unit::Count,
        "Expired leases taken over by a new holder."
    );
    describe_histogram!(
        HANDLER_DURATION_SECONDS,
        Unit::Seconds,
        "Runner transaction time, claim to commit."
    );
    describe_counter!(
        CONFLICT_RETRIES_TOTAL,
        Unit::Count,
        "Runner attempts retried after a transaction conflict."
    );
    describe_counter!(GC_DELETED_TOTAL, Unit::Count, "Rows deleted by retention.");
    describe_counter!(
        EFFECTS_ENQUEUED_TOTAL,
        Unit::Count,
        "Effect intents enqueued, by outcome (created, existing, conflict, request_differs)."
    );
    describe_counter!(
        EFFECTS_TOTAL,
        Unit::Count,
        "Effect attempts by result (succeeded, failed, unknown, parked, dead, fenced, apply_failed)."
    );
}
