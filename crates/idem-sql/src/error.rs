//! The one error type of `idem-sql`, with a [`kind`](Error::kind) to decide on.

use std::borrow::Cow;

use idem_core::{EffectKey, FencingToken, LeaseKey};

use crate::EffectStatus;

/// A boxed error from the application's handler.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in a store operation or a run of the [`Runner`](crate::Runner).
///
/// Branch on [`Error::kind`] rather than on variants: it says whether a retry can succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database returned an error or could not be reached. [`Error::kind`] classifies it:
    /// serialization failures (40001), deadlocks (40P01; MySQL 1213) and lock waits past their
    /// timeout (55P03; MySQL 1205), SQLITE_BUSY / SQLITE_LOCKED are [`ErrorKind::Conflict`];
    /// lost connections, pool timeouts and servers shutting down [`ErrorKind::Unavailable`].
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    /// A database URL that idem cannot use: wrong scheme, no file path, an in-memory SQLite
    /// database (private to each pooled connection), or a directory that does not exist.
    #[error("database URL {url:?} cannot be used: expected {expected}")]
    InvalidUrl {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// What was expected instead.
        expected: String,
    },
    /// The first connection to the database failed (refused, unknown host, authentication, …).
    #[error("cannot connect to {url}: {source}{hint}")]
    Connect {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
        /// What to do, when the cause is a common one (`; …`), else empty: see
        /// [`connect_hint`].
        hint: String,
    },
    /// A database opened with [`AnyStore::open_existing`](crate::AnyStore::open_existing) has
    /// no `table` (for SQLite: no file at the URL's path, which is never created there): the
    /// tables were never made in it, or the URL names another database.
    #[error("no {table} table at {url}")]
    MissingTable {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// The table looked for.
        table: &'static str,
    },
    /// Applying idem's migrations failed.
    #[error("migrating idem's tables failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// `migrate` refused the database: its idem tables were made by another idem version (a
    /// newer one, or another build of a migration), or another process kept migrating them
    /// past the wait. Nothing was changed. (MySQL and MariaDB.)
    #[error("idem's tables in this database cannot be used by this idem: {reason}")]
    IncompatibleSchema {
        /// What was found, and what to do.
        reason: String,
    },
    /// The server is a version idem does not run on (it needs features older ones lack, such as
    /// `SKIP LOCKED`); refused at connect, before anything was written.
    #[error("{url} runs {found}, which idem does not support; supported: {supported}")]
    UnsupportedServer {
        /// The URL, with any password replaced by `***`.
        url: String,
        /// The version the server reported (`SELECT VERSION()`).
        found: String,
        /// The versions idem supports.
        supported: &'static str,
    },
    /// Input that breaks one of idem's rules (blank id, bad name, ttl out of range, retention
    /// shorter than the redelivery horizon, mixed version kinds).
    #[error(transparent)]
    Invalid(#[from] idem_core::Error),
    /// A fenced write (`complete`, `release`, `extend`) was refused: `token` is no longer the
    /// lease's current token, the lease is not running, or (for `extend`) it has expired. Nothing
    /// was written; the current holder's record stands.
    #[error("lease {key} is not held with token {token}; the write was refused")]
    Fenced {
        /// The lease.
        key: LeaseKey,
        /// The token the caller presented.
        token: FencingToken,
    },
    /// `acquire` found the lease changing hands on every read (acquired and released by others
    /// in between) and gave up; try again.
    #[error("lease {key} kept changing hands while being acquired")]
    LeaseContended {
        /// The lease.
        key: LeaseKey,
    },
    /// A row in idem's tables holds a value idem never writes (for example an unknown version
    /// kind): the tables were changed by hand or by another program.
    #[error("idem's table {table} holds an unexpected value: {detail}")]
    CorruptRow {
        /// The table.
        table: &'static str,
        /// What was found.
        detail: String,
    },
    /// An outbox message that cannot be written: a message id that is not 1–255 bytes of visible
    /// ASCII, a blank or oversized destination, or a bad header name or value.
    #[error("outbox message refused: {reason}")]
    InvalidOutboxMessage {
        /// What is wrong with it.
        reason: String,
    },
    /// `Outbox::enqueue` with a message id that an outbox row already has: each id names one
    /// message, so a second, possibly different message under it is refused rather than dropped.
    #[error("an outbox row with message id {message_id} exists already")]
    DuplicateMessageId {
        /// The id.
        message_id: crate::MessageId,
    },
    /// An effect key was enqueued again with a different effect name or different request
    /// bytes: one key names one request (docs/design.md C6). Nothing was written.
    #[error(
        "effect {key} was enqueued before with a different {what}; an effect key names one request, so use a new key for a new request"
    )]
    EffectConflict {
        /// The effect key.
        key: EffectKey,
        /// What differs: "request" or "effect name".
        what: &'static str,
    },
    /// A consumer's declared lineage ([`Runner::succeeds`](crate::Runner::succeeds),
    /// [`Runner::effects_scope`](crate::Runner::effects_scope)) is refused: it names itself as
    /// its predecessor, closes a cycle of predecessors, or differs from the one recorded; or an
    /// effect key was asked for before the lineage was resolved.
    #[error("the lineage of consumer {consumer} is refused: {reason}")]
    Lineage {
        /// The consumer.
        consumer: String,
        /// Why.
        reason: String,
    },
    /// A line of a replay's event log ([`JsonlLog`](crate::JsonlLog)) is not an event: `line`
    /// is its number (from 1) and `expected` says what was expected there. Nothing of the log
    /// was applied when the replay read it (the log is read whole before any event runs, unless
    /// effects may run again: see [`Replay::run`](crate::Replay::run)).
    #[error("line {line} of the event log is not an event: expected {expected}")]
    InvalidLogLine {
        /// The line's number, from 1.
        line: u64,
        /// What was expected, and what was found where that helps.
        expected: String,
    },
    /// A replay's event log could not be read (a missing file, an I/O error part way).
    #[error("the event log {log} cannot be read: {source}")]
    LogUnreadable {
        /// The log (its path).
        log: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A replay was refused because `count` events of its log occurred before the effects'
    /// retention cutoff (`cutoff`, now − the retention `Store::gc` runs with): their effects'
    /// ledger rows may be deleted, so their effects would run again whatever their keys
    /// (docs/design.md C6, C9). Nothing was applied. Replay from a later point, or run them on
    /// purpose with [`Replay::allow_effects_rerun`](crate::Replay::allow_effects_rerun).
    #[error(
        "{count} events of the log occurred before the effects' retention cutoff {cutoff} (the oldest at {oldest}): gc may have deleted their effects' ledger rows, so their effects would run again; nothing was applied (allow it with Replay::allow_effects_rerun, or replay from a later point)",
        cutoff = cutoff.rfc3339(),
        oldest = oldest.rfc3339()
    )]
    EffectsPastRetention {
        /// How many events (not already in the consumer's inbox) are past the cutoff.
        count: u64,
        /// When the oldest of them occurred.
        oldest: idem_core::Timestamp,
        /// The cutoff: events that occurred before it are past the retention.
        cutoff: idem_core::Timestamp,
    },
    /// A replay stopped at the event at `position` of its log (its line, for a JSONL log)
    /// because of `source` (a handler's error, a database error); the `applied` events before it
    /// stay committed. Running the replay again goes on from there: the events applied are
    /// duplicates then. [`Error::kind`] is `source`'s.
    #[error(
        "the replay stopped at event {position} of the log ({applied} applied before it, committed): {source}"
    )]
    ReplayStopped {
        /// The event's position in the log, from 1.
        position: u64,
        /// How many events this run applied before it.
        applied: u64,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// [`Store::reset_consumer`](crate::Store::reset_consumer) refused a consumer that is
    /// live: it holds a lease that has not expired or been released (a Kafka consumer's
    /// partition or member lease), or it wrote a row (a claim, a version, an offset) within the
    /// last minute of the store's clock. Nothing was deleted; stop the consumer, wait a minute
    /// and ask again.
    #[error(
        "consumer {consumer} is live ({reason}); nothing was reset: stop it, wait until it has been idle for a minute, and reset again"
    )]
    ConsumerLive {
        /// The consumer.
        consumer: String,
        /// What shows it live: its live leases, or when it last wrote.
        reason: String,
    },
    /// [`Store::reset_consumer`](crate::Store::reset_consumer) refused a consumer that must not
    /// be reset: the gateway's own inbox consumer, or one the caller protected
    /// ([`ResetOptions::protect`](crate::ResetOptions::protect)). Nothing was deleted.
    #[error("consumer {consumer} cannot be reset: {reason}")]
    ConsumerProtected {
        /// The consumer.
        consumer: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// [`Store::reset_consumer`](crate::Store::reset_consumer) found no row of this consumer in
    /// any of idem's tables. Nothing was deleted.
    #[error(
        "no consumer {consumer} is known here; known consumers: {}",
        known_list(known)
    )]
    UnknownConsumer {
        /// The name asked for.
        consumer: String,
        /// The consumers the tables hold rows of, sorted.
        known: Vec<String>,
    },
    /// A consumer kind that idem does not know ([`ConsumerKind`](crate::ConsumerKind)'s
    /// `FromStr`).
    #[error("unknown consumer kind {found:?}: expected one of {expected}")]
    UnknownConsumerKind {
        /// The text given.
        found: String,
        /// The kinds known, comma-separated.
        expected: String,
    },
    /// No effect is stored under this key (`resolve`).
    #[error("no effect is stored under key {key}")]
    EffectNotFound {
        /// The effect key.
        key: EffectKey,
    },
    /// `resolve` was called on an effect that is neither parked nor dead; nothing was changed.
    #[error("effect {key} is {status}; only parked or dead effects can be resolved")]
    EffectNotResolvable {
        /// The effect key.
        key: EffectKey,
        /// Its current status.
        status: EffectStatus,
    },
    /// One of idem's writes that belong in the caller's transaction ([`Inbox::claim`],
    /// [`EffectLedger::enqueue`], [`Outbox::enqueue`]) was given a connection with no transaction
    /// open on it: the write would commit at once, apart from the writes it must commit with
    /// (docs/design.md C1, C2). Nothing was written. Pass the open transaction: `&mut *tx`.
    ///
    /// [`Inbox::claim`]: crate::Inbox::claim
    /// [`EffectLedger::enqueue`]: crate::EffectLedger::enqueue
    /// [`Outbox::enqueue`]: crate::Outbox::enqueue
    #[error(
        "{operation} was given a connection with no open transaction; pass the transaction (`&mut *tx`) so that it commits with the other writes"
    )]
    NoTransaction {
        /// The operation, such as `EffectLedger::enqueue`.
        operation: &'static str,
    },
    /// The application's handler returned an error; its transaction was rolled back and the
    /// delivery should be retried by the sender (HTTP 5xx, broker nack).
    #[error("handler failed: {0}")]
    Handler(#[source] BoxError),
    /// The application's handler returned an error it marked permanent
    /// ([`HandlerError::permanent`](crate::HandlerError::permanent)): its transaction was rolled
    /// back, and the same event fails the same way on every delivery. Dead-letter it (the broker
    /// consumers do, at once) rather than retry it.
    #[error("handler failed permanently: {0}")]
    Permanent(#[source] BoxError),
}

/// What kind of failure an [`Error`] is, for the caller's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Two transactions collided (serialization failure, deadlock, busy database). Nothing was
    /// committed; running the same work again is safe and usually succeeds at once. The runner
    /// retries these itself.
    Conflict,
    /// The database cannot be reached now (connection lost, pool exhausted). Nothing was
    /// committed; answer 503 / nack so the sender retries later.
    Unavailable,
    /// The handler failed. Nothing was committed; answer 5xx / nack so the sender retries.
    Handler,
    /// The handler failed and marked its error permanent: nothing was committed, and retrying the
    /// same event fails the same way. Dead-letter it, or answer a webhook with a 4xx that names
    /// the problem.
    Permanent,
    /// The input breaks a rule; retrying the same input fails the same way.
    InvalidInput,
    /// A fenced write was refused because the lease changed hands.
    Fenced,
    /// What was asked for is in use now (a consumer still running, for a reset): nothing was
    /// changed. Stop what uses it, then ask again.
    InUse,
    /// Any other database or migration error.
    Database,
}

impl ErrorKind {
    /// Whether the same operation may succeed if tried again unchanged: [`ErrorKind::Conflict`],
    /// [`ErrorKind::Unavailable`] and [`ErrorKind::Handler`].
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Conflict | Self::Unavailable | Self::Handler)
    }
}

impl Error {
    /// Wraps an application error as a retryable handler error. Inside a handler given to
    /// [`Runner::run`](crate::Runner::run), `?` does this by itself
    /// ([`HandlerError`](crate::HandlerError)); this is for handlers that return `Error`
    /// ([`Runner::run_boxed`](crate::Runner::run_boxed), the broker consumers' boxed handlers).
    pub fn handler(error: impl Into<BoxError>) -> Self {
        Self::Handler(error.into())
    }

    /// The kind of failure; see [`ErrorKind`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Database(e) => classify(e),
            Self::Migrate(_) | Self::CorruptRow { .. } | Self::IncompatibleSchema { .. } => {
                ErrorKind::Database
            }
            Self::Invalid(_)
            | Self::InvalidUrl { .. }
            | Self::UnsupportedServer { .. }
            | Self::MissingTable { .. }
            | Self::EffectConflict { .. }
            | Self::Lineage { .. }
            | Self::InvalidLogLine { .. }
            | Self::LogUnreadable { .. }
            | Self::EffectsPastRetention { .. }
            | Self::EffectNotFound { .. }
            | Self::EffectNotResolvable { .. }
            | Self::ConsumerProtected { .. }
            | Self::UnknownConsumer { .. }
            | Self::UnknownConsumerKind { .. } => ErrorKind::InvalidInput,
            Self::ConsumerLive { .. } => ErrorKind::InUse,
            Self::InvalidOutboxMessage { .. }
            | Self::DuplicateMessageId { .. }
            | Self::NoTransaction { .. } => ErrorKind::InvalidInput,
            Self::Connect { source, .. } => match classify(source) {
                ErrorKind::Database => ErrorKind::Unavailable,
                kind => kind,
            },
            Self::Fenced { .. } => ErrorKind::Fenced,
            Self::LeaseContended { .. } => ErrorKind::Conflict,
            Self::Handler(inner) => match inner.downcast_ref::<Error>() {
                Some(e) => e.kind(),
                None => ErrorKind::Handler,
            },
            Self::Permanent(_) => ErrorKind::Permanent,
            Self::ReplayStopped { source, .. } => source.kind(),
        }
    }

    /// Shorthand for `self.kind().is_retryable()`.
    pub fn is_retryable(&self) -> bool {
        self.kind().is_retryable()
    }
}

/// The known consumers of [`Error::UnknownConsumer`], as the message lists them.
fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    }
}

/// `Err(Error::NoTransaction)` unless `conn` has a transaction open (C1, C2: the write must
/// commit with the others).
pub(crate) fn in_transaction<C: sqlx::Connection>(
    conn: &C,
    operation: &'static str,
) -> Result<(), Error> {
    if conn.is_in_transaction() {
        Ok(())
    } else {
        Err(Error::NoTransaction { operation })
    }
}

impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        Self::Database(e)
    }
}

/// SQLite primary result codes (the low byte of an extended code): SQLITE_BUSY and
/// SQLITE_LOCKED (<https://sqlite.org/rescode.html>).
#[cfg(feature = "sqlite")]
const SQLITE_BUSY: i64 = 5;
#[cfg(feature = "sqlite")]
const SQLITE_LOCKED: i64 = 6;

fn classify(e: &sqlx::Error) -> ErrorKind {
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or(Cow::Borrowed(""));
            #[cfg(feature = "sqlite")]
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                return match code.parse::<i64>() {
                    Ok(n) if matches!(n & 0xff, SQLITE_BUSY | SQLITE_LOCKED) => ErrorKind::Conflict,
                    _ => ErrorKind::Database,
                };
            }
            #[cfg(feature = "mysql")]
            if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
                return classify_mysql(my.number());
            }
            // PostgreSQL SQLSTATEs (Appendix A): 40001 serialization_failure, 40P01
            // deadlock_detected, 55P03 lock_not_available; class 08 connection exceptions and
            // 57P01-57P03 shutdown / cannot connect now.
            match code.as_ref() {
                "40001" | "40P01" | "55P03" => ErrorKind::Conflict,
                c if c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03") => {
                    ErrorKind::Unavailable
                }
                _ => ErrorKind::Database,
            }
        }
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => ErrorKind::Unavailable,
        _ => ErrorKind::Database,
    }
}

/// MySQL and MariaDB server error numbers (the server error reference of each):
/// - conflicts, retried as a whole transaction: 1205 `ER_LOCK_WAIT_TIMEOUT` (InnoDB rolls back
///   the statement, or the transaction with `innodb_rollback_on_timeout`), 1213
///   `ER_LOCK_DEADLOCK` (the transaction was rolled back), 3572 `ER_LOCK_NOWAIT`, and MariaDB's
///   1020 `ER_CHECKREAD` (a row changed under `innodb_snapshot_isolation`);
/// - unavailable: 1040 too many connections, 1053 server shutdown, 1927 connection killed
///   (MariaDB), 4031 disconnected for inactivity (MySQL 8.0).
#[cfg(feature = "mysql")]
fn classify_mysql(number: u16) -> ErrorKind {
    match number {
        1020 | 1205 | 1213 | 3572 => ErrorKind::Conflict,
        1040 | 1053 | 1927 | 4031 => ErrorKind::Unavailable,
        _ => ErrorKind::Database,
    }
}

/// What to do about a failed first connection to a PostgreSQL or MySQL database at `url` (its
/// password already hidden), for [`Error::Connect`]'s message: `; …`, or empty. A missing
/// database names the statement that makes it; an answer that is not the database's protocol,
/// or none at all, says to check the host and port.
pub(crate) fn connect_hint(source: &sqlx::Error, url: &str) -> String {
    let database = url
        .rsplit('/')
        .next()
        .and_then(|tail| tail.split('?').next())
        .filter(|name| !name.is_empty() && !name.contains('@'));
    match source {
        sqlx::Error::Database(e)
            if matches!(e.code().as_deref(), Some("3D000") | Some("1049")) =>
        {
            let name = database.unwrap_or("<database>");
            format!("; the database does not exist: create it first (`CREATE DATABASE {name};`), then start again")
        }
        sqlx::Error::Protocol(_) | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => {
            "; is a database server listening at that host and port? (something else answered, or nothing did)".into()
        }
        _ => String::new(),
    }
}
