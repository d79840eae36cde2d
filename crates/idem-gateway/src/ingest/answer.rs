//! What a committed ingest request is told, shared by the group commit, the per-minute counts
//! and the broker sources.

/// What a committed request is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// First delivery of this event: stored, deliveries queued.
    Accepted,
    /// The event was stored before (C3: a success).
    Duplicate,
}
