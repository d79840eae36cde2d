//! What a consumer listing asks for.

use idem_core::Timestamp;

use crate::Thresholds;

/// The options of [`Consumers::list`](crate::Consumers::list) and
/// [`Consumers::show`](crate::Consumers::show).
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ListOptions {
    /// List only consumers first seen at or after this time (`--since 90d` is now − 90 days);
    /// `None` lists all. `show` ignores it.
    pub since: Option<Timestamp>,
    /// When flags are raised.
    pub thresholds: Thresholds,
    /// The time the windows end at and "not seen for" is measured from: the store's clock for
    /// [`ListOptions::at`]; a later time in tests, rather than sleeping.
    pub now: Timestamp,
}

impl ListOptions {
    /// Every consumer, the default [`Thresholds`], windows ending at `now`.
    pub fn at(now: Timestamp) -> Self {
        Self {
            since: None,
            thresholds: Thresholds::default(),
            now,
        }
    }

    /// The same options, listing only consumers first seen at or after `since`.
    pub fn since(self, since: Timestamp) -> Self {
        Self {
            since: Some(since),
            ..self
        }
    }

    /// The same options with `thresholds`.
    pub fn thresholds(self, thresholds: Thresholds) -> Self {
        Self { thresholds, ..self }
    }
}
