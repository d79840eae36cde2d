//! The gateway's error type.

use crate::config::ConfigError;
use crate::model::time::{BadTime, bad_time_message, format_time};

/// What can stop the gateway or one of its commands.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot start a gateway; the gateway refuses to start (fail closed).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An admin operation was asked for something the configuration does not have (an unknown
    /// source or destination) or an empty time range; nothing was changed.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// The configuration and the database disagree on a route's name (docs/gateway.md "Renaming
    /// a route"): a route's `renamed_from` names a route whose deliveries went to another
    /// destination, or the database holds open deliveries or version-guard rows of a route name
    /// the configuration neither has, renames nor retires. `idem serve` refuses to start.
    #[error("{reason}")]
    RouteRename {
        /// The route (the stored name, for one the configuration lacks).
        route: String,
        /// What is wrong and what to add to the file.
        reason: String,
    },
    /// A store operation failed (idem's tables or the gateway's). [`idem_sql::Error::kind`] says
    /// whether a retry can succeed.
    #[error(transparent)]
    Store(#[from] idem_sql::Error),
    /// Applying the gateway's migrations failed: a statement failed, or the database's
    /// `idem_gateway_migrations` records a migration this idem does not know (the tables were
    /// made by a newer idem) or one whose checksum differs (another build). Nothing is changed
    /// in the last two cases: sqlx checks what is recorded before it applies anything.
    #[error("migrating the gateway's tables failed: {}", migrate_message(.0))]
    Migrate(#[from] idem_sql::sqlx::migrate::MigrateError),
    /// A broker source could not start: its server cannot be reached, its stream or queue
    /// does not exist, or its JetStream consumer exists with other settings. The gateway
    /// refuses to start, naming the source and the reason.
    #[error("source {source_name:?}: {reason}")]
    Broker {
        /// The source.
        source_name: String,
        /// What failed, naming the server, stream, queue or consumer.
        reason: String,
    },
    /// An outbox relay could not start: its database or its NATS or RabbitMQ target cannot be
    /// reached (an HTTP target is not contacted at start), or the database has no
    /// `idem_outbox` table. The gateway refuses to start, naming the relay.
    #[error("relay {relay:?}: {reason}")]
    Relay {
        /// The relay.
        relay: String,
        /// What failed, naming the database or target.
        reason: String,
    },
    /// A broker destination could not start: its server cannot be reached, or no stream takes
    /// its subject, or its exchange or topic does not exist. The gateway refuses to start,
    /// naming the destination and the reason (an HTTP destination is not contacted at start).
    #[error("destination {destination:?}: {reason}")]
    Destination {
        /// The destination.
        destination: String,
        /// What failed, naming the server, subject, exchange or topic.
        reason: String,
    },
    /// A task of the running server stopped (it panicked or ended before shutdown): a
    /// destination's dispatcher (its events would be accepted but never sent), a broker
    /// source's reader or a relay (its messages would no longer be taken or published). `/readyz`
    /// fails (problem type `dispatcher-stopped` for a dispatcher, `task-stopped` otherwise) and
    /// the server stops.
    #[error("{task} stopped ({reason}){}", task.consequence())]
    TaskStopped {
        /// Which task.
        task: Task,
        /// The panic message, or why it ended.
        reason: String,
    },
    /// The trace pipeline ([`Traces`](crate::traces::Traces)) could not start, or could not
    /// send its spans to the collector (unreachable, or it refused them): traces are lost,
    /// events are not.
    #[error("traces: {what}: {reason}")]
    Traces {
        /// What was being done.
        what: &'static str,
        /// The exporter's error.
        reason: String,
    },
    /// The listener could not be bound or served.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// What kind of [`Error`] happened: what an operator or an embedding program can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The configuration or the request is wrong: fix it; retrying the same cannot succeed.
    Invalid,
    /// The database, a broker or the listener is not usable now: retrying later can succeed.
    Unavailable,
    /// A task of a running server stopped: the server stops; restart it.
    Stopped,
}

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Config(_) | Self::Request(_) | Self::Migrate(_) | Self::RouteRename { .. } => {
                ErrorKind::Invalid
            }
            Self::Store(e) if e.kind() == idem_sql::ErrorKind::InvalidInput => ErrorKind::Invalid,
            Self::Store(_)
            | Self::Broker { .. }
            | Self::Relay { .. }
            | Self::Destination { .. }
            | Self::Traces { .. }
            | Self::Io { .. } => ErrorKind::Unavailable,
            Self::TaskStopped { .. } => ErrorKind::Stopped,
        }
    }
}

/// A task the server runs and supervises ([`Error::TaskStopped`] names it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Task {
    /// The dispatcher of a destination.
    Dispatcher {
        /// The destination.
        destination: String,
    },
    /// The reader of a broker source (NATS JetStream, RabbitMQ, Kafka).
    Reader {
        /// The source.
        source: String,
    },
    /// An outbox relay.
    Relay {
        /// The relay.
        relay: String,
    },
    /// The health monitor: destination health, circuit breakers and alerts.
    Monitor,
}

impl Task {
    /// What its stop costs, said after the reason.
    fn consequence(&self) -> &'static str {
        match self {
            Self::Dispatcher { .. } => "; its events would never be sent",
            Self::Reader { .. } | Self::Relay { .. } => "",
            Self::Monitor => "; circuit breakers and alerts would stop",
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Dispatcher { destination } => {
                write!(f, "the dispatcher of destination {destination:?}")
            }
            Self::Reader { source } => write!(f, "the reader of source {source:?}"),
            Self::Relay { relay } => write!(f, "relay {relay:?}"),
            Self::Monitor => f.write_str("the health monitor"),
        }
    }
}

impl From<idem_sql::sqlx::Error> for Error {
    fn from(e: idem_sql::sqlx::Error) -> Self {
        Self::Store(idem_sql::Error::from(e))
    }
}

/// An admin request the gateway refuses, naming what was wrong and what it accepts; nothing
/// was changed. `/admin` answers it with 400 problem+json (types `unknown-source`,
/// `unknown-destination`, `unknown-dead-letter`, `bad-time`, `empty-range`, `no-route`,
/// `bodies-missing`), or 409 for `deliveries-in-progress`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// No source of this name is configured.
    #[error(
        "no source {name:?} is configured; configured sources: {}",
        names(known)
    )]
    UnknownSource {
        /// The name asked for.
        name: String,
        /// The configured sources.
        known: Vec<String>,
    },
    /// No destination of this name is configured.
    #[error(
        "no destination {name:?} is configured; configured destinations: {}",
        names(known)
    )]
    UnknownDestination {
        /// The name asked for.
        name: String,
        /// The configured destinations.
        known: Vec<String>,
    },
    /// No dead letter has this id (of this destination, when one was given): unknown, or not
    /// a dead letter (delivered, stale, still pending).
    #[error(
        "no dead letter {}has id {id}; `idem dlq list` (GET /admin/dlq) lists the dead letters with their ids",
        destination.as_ref().map(|d| format!("of destination {d:?} ")).unwrap_or_default()
    )]
    UnknownDeadLetter {
        /// The delivery id asked for.
        id: i64,
        /// The destination asked for, if any.
        destination: Option<String>,
    },
    /// A time in none of the forms [`parse_time`](crate::model::time::parse_time) reads.
    #[error("{}", bad_time_message(field, value))]
    BadTime {
        /// The field or option (`since`, `--until`, …).
        field: &'static str,
        /// The text given.
        value: String,
    },
    /// An event-type filter that is no pattern: empty, or a `*` other than one at the end.
    #[error(
        "event type {value:?} is not a pattern: expected an exact type such as \"invoice.paid\" \
         or a prefix with a single trailing * such as \"invoice.*\""
    )]
    BadEventType {
        /// The text given.
        value: String,
    },
    /// A console filter that cannot be used: an unknown source or route, a state or page
    /// cursor that is none.
    #[error("{message}")]
    BadFilter {
        /// What is wrong, naming the value.
        message: String,
    },
    /// A list's `after` that no page gave as its next cursor.
    #[error(
        "after={value:?} is not a page cursor; expected the `after` of a `Link: <…>; rel=\"next\"` header of the page before"
    )]
    BadCursor {
        /// The text given.
        value: String,
    },
    /// A consumer name (of a consumer reset) that is not a name: blank, too long, or with a
    /// character other than letters, digits, `_`, `.` and `-`.
    #[error("{value:?} is not a consumer name: {reason}")]
    BadConsumerName {
        /// The text given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A replay range with `since` not before `until`: it would match nothing.
    #[error(
        "since {} ({since} ms) is not before until {} ({until} ms): the range is empty",
        format_time(*since),
        format_time(*until)
    )]
    EmptyRange {
        /// The start, in ms since the epoch.
        since: i64,
        /// The end (now when none was given), in ms since the epoch.
        until: i64,
    },
    /// A rebuild replay to a destination no route of the source leads to: the destination
    /// would not know the source's events.
    #[error(
        "no route leads from source {source_name:?} to destination {destination:?}; the routes of {source_name:?}: {}; a rebuild sends a source's events to a destination one of its routes leads to",
        names(routes)
    )]
    NoRoute {
        /// The source.
        source_name: String,
        /// The destination asked for.
        destination: String,
        /// The source's routes, each as `route -> destination`.
        routes: Vec<String>,
    },
    /// A rebuild replay over events whose raw bodies `body_retention` dropped: they cannot be
    /// sent, and a rebuild without them is not the history. Refused unless the request skips
    /// them (`--skip-missing-bodies`, `"skip_missing_bodies": true`).
    #[error(
        "{count} event(s) of the range have no stored body (body_retention dropped it) and cannot be sent; nothing was changed. Narrow the range, or skip them explicitly with --skip-missing-bodies (\"skip_missing_bodies\": true)"
    )]
    BodiesMissing {
        /// How many events of the range have no body.
        count: u64,
    },
    /// A rebuild replay over events whose delivery to the destination is still pending or in
    /// flight (live traffic, a retry, or a rebuild still running): sending them again now
    /// would race their own attempts out of order. Refused; wait until they are delivered or
    /// dead, then rebuild.
    #[error(
        "{count} event(s) of the range are still pending or in flight to destination {destination:?}; nothing was changed. Wait until they are delivered or dead letters (the console's overview, or `idem_backlog{{destination}}` on /metrics, shows what is left), then rebuild"
    )]
    DeliveriesInProgress {
        /// The destination.
        destination: String,
        /// How many deliveries of the range are open.
        count: u64,
    },
}

impl From<BadTime> for RequestError {
    fn from(BadTime { field, value }: BadTime) -> Self {
        Self::BadTime { field, value }
    }
}

impl From<BadTime> for Error {
    fn from(e: BadTime) -> Self {
        Self::Request(e.into())
    }
}

impl RequestError {
    /// The problem type (`urn:idem:problem:{code}`) `/admin` answers this error with.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::UnknownSource { .. } => "unknown-source",
            Self::UnknownDestination { .. } => "unknown-destination",
            Self::UnknownDeadLetter { .. } => "unknown-dead-letter",
            Self::BadTime { .. } => "bad-time",
            Self::BadEventType { .. } => "bad-event-type",
            Self::BadFilter { .. } => "bad-filter",
            Self::BadCursor { .. } => "bad-cursor",
            Self::EmptyRange { .. } => "empty-range",
            Self::BadConsumerName { .. } => "bad-consumer-name",
            Self::NoRoute { .. } => "no-route",
            Self::BodiesMissing { .. } => "bodies-missing",
            Self::DeliveriesInProgress { .. } => "deliveries-in-progress",
        }
    }

    /// Whether the request may succeed unchanged later (deliveries in progress finish): `/admin`
    /// answers it with 409, every other refusal with 400.
    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, Self::DeliveriesInProgress { .. })
    }

    pub(crate) fn title(&self) -> &'static str {
        match self {
            Self::UnknownSource { .. } => "Unknown source",
            Self::UnknownDestination { .. } => "Unknown destination",
            Self::UnknownDeadLetter { .. } => "Unknown dead letter",
            Self::BadTime { .. } => "Bad time",
            Self::BadEventType { .. } => "Bad event type",
            Self::BadFilter { .. } => "Bad filter",
            Self::BadCursor { .. } => "Bad page cursor",
            Self::EmptyRange { .. } => "Empty time range",
            Self::BadConsumerName { .. } => "Bad consumer name",
            Self::NoRoute { .. } => "No route to the destination",
            Self::BodiesMissing { .. } => "Bodies missing",
            Self::DeliveriesInProgress { .. } => "Deliveries in progress",
        }
    }
}

/// `"a", "b"`, or `(none)`.
fn names(known: &[String]) -> String {
    if known.is_empty() {
        "(none)".to_owned()
    } else {
        known
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// [`Error::Migrate`]'s reason, in the words of idem's own migrations (`idem_sql`'s
/// `IncompatibleSchema`) where sqlx's would name only a version.
fn migrate_message(error: &idem_sql::sqlx::migrate::MigrateError) -> String {
    use idem_sql::sqlx::migrate::MigrateError;
    const TABLE: &str = crate::store::MIGRATIONS_TABLE;
    match error {
        MigrateError::VersionMissing(version) => format!(
            "{TABLE} records migration {version}, which this idem does not know: the tables \
             were made by a newer idem; run that version (or a newer one) on this database"
        ),
        MigrateError::VersionMismatch(version) => format!(
            "migration {version} recorded in {TABLE} is not this idem's migration {version} (its \
             checksum differs): the tables were made by another idem build; run that build on \
             this database"
        ),
        // Only the MySQL migration's lock wait says this; sqlx's wording ("while resolving
        // migrations") would mislead.
        MigrateError::Source(reason) => reason.to_string(),
        other => other.to_string(),
    }
}
