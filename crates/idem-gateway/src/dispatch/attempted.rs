//! How an attempt went, whatever carried it: delivered, a failure another attempt may fix, or
//! one none can, with what the attempts table records (a status where the transport has one,
//! an excerpt, a `Retry-After`-like delay).

use std::time::Duration;

/// How one attempt ended, whatever the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptResult {
    /// The destination took the event (HTTP: 2xx).
    Delivered,
    /// It failed, and another attempt may succeed: retried on the schedule.
    Retryable,
    /// It failed, and no attempt can succeed (HTTP: a 4xx that is not "not now", or a delivery
    /// that cannot be sent): a dead letter at once.
    Permanent,
}

/// How an attempt went: its result, with what the attempts table records of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempted {
    /// Delivered, or failed for now or for good.
    pub result: AttemptResult,
    /// The transport's status code when it has one (HTTP: the status); `None` when no answer
    /// came (timeout, refused connection) or the transport has none.
    pub status: Option<u16>,
    /// The start of the answer, or why it failed.
    pub excerpt: String,
    /// How long the destination asked to wait before the next attempt (HTTP: `Retry-After` of
    /// a 429 or 503, in whole seconds), where the transport has such a thing.
    pub retry_after: Option<Duration>,
}

impl Attempted {
    /// A delivery that cannot be sent, for `reason`: no attempt can succeed.
    pub(crate) fn unsendable(reason: String) -> Self {
        Self {
            result: AttemptResult::Permanent,
            status: None,
            excerpt: reason,
            retry_after: None,
        }
    }
}
