//! What a replay reads: the application's event log, one [`LoggedEvent`] after another in the
//! log's order (the original order: the replay keeps it, so each entity's events arrive in the
//! order the log holds them).

use idem_core::Timestamp;

use crate::{Error, Event};

/// One event of the application's log: what the runner needs ([`Event`]: the dedup key, the
/// entity and version), when it happened, and the payload the handler gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedEvent<P> {
    /// The event as the runner claims it: its dedup key (the same key its first delivery was
    /// claimed under, so a consumer that handled it sees a duplicate) and its entity and version.
    pub event: Event,
    /// When the event happened (or was first handled): compared with the effects' retention
    /// ([`Replay`](crate::Replay)).
    pub occurred_at: Timestamp,
    /// What the handler reads: the event's body.
    pub payload: P,
}

/// An event log a [`Replay`](crate::Replay) can read, from its start, as many times as it needs
/// (it reads it once to check it before any event runs, then once to run it).
///
/// Implemented for a slice or a `Vec` of [`LoggedEvent`]s (a log loaded from the application's
/// own table) and for [`JsonlLog`](crate::JsonlLog) (a file of JSON lines).
pub trait EventLog {
    /// The payload each event carries.
    type Payload;

    /// The events from the start of the log, in its order, each with its position (from 1; a
    /// JSONL log's line number). An item is an error where the log cannot be read there:
    /// [`Error::InvalidLogLine`], [`Error::LogUnreadable`].
    fn events(&self) -> LogEntries<'_, Self::Payload>;
}

/// What [`EventLog::events`] returns: positioned events, or the error that stops the log there.
pub type LogEntries<'a, P> =
    Box<dyn Iterator<Item = Result<(u64, LoggedEvent<P>), Error>> + Send + 'a>;

impl<P: Clone + Send + Sync> EventLog for [LoggedEvent<P>] {
    type Payload = P;

    fn events(&self) -> LogEntries<'_, P> {
        Box::new(
            self.iter()
                .zip(1..)
                .map(|(event, position)| Ok((position, event.clone()))),
        )
    }
}

impl<P: Clone + Send + Sync> EventLog for Vec<LoggedEvent<P>> {
    type Payload = P;

    fn events(&self) -> LogEntries<'_, P> {
        self.as_slice().events()
    }
}
