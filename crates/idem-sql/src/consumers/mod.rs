//! The consumer registry (issue 34): every consumer's name, kind, first and last seen, and its
//! counts per 5-minute bucket, kept in `idem_consumers` and `idem_consumer_counts`; read as
//! [`ConsumerReport`]s by [`Store::consumers`](crate::Store::consumers).
//!
//! Counting costs one mutex lock per event in memory ([`tally`]); the counts are written by
//! the consumer's own transactions ([`flush`]), never by a background task.

mod figures;
mod flag;
mod flush;
mod judge;
mod kind;
mod list_options;
mod read;
mod registry;
mod report;
mod serde_time;
pub(crate) mod tally;
mod thresholds;

pub use flag::ConsumerFlag;
pub use kind::ConsumerKind;
pub use list_options::ListOptions;
pub use read::Consumers;
pub use report::{ConsumerReport, Holds, Lag, WindowCounts};
pub use tally::DEFAULT_COUNTS_FLUSH_INTERVAL;
pub use thresholds::{DEFAULT_ORPHAN_AFTER, Thresholds};

pub(crate) use flush::{commit, flush_if_due};
pub(crate) use tally::Counted;
