//! The gateway's error type.

use crate::admin::RequestError;
use crate::config::ConfigError;

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
    /// A store operation failed (idem's tables or the gateway's). [`idem_sql::Error::kind`] says
    /// whether a retry can succeed.
    #[error(transparent)]
    Store(#[from] idem_sql::Error),
    /// Applying the gateway's migrations failed.
    #[error("migrating the gateway's tables failed: {0}")]
    Migrate(#[from] idem_sql::sqlx::migrate::MigrateError),
    /// A destination's dispatcher stopped (it panicked or ended) while the server ran: its
    /// events would be accepted but never sent, so `/readyz` fails and the server stops.
    #[error(
        "the dispatcher of destination {destination:?} stopped ({reason}); its events would never be sent"
    )]
    Dispatcher {
        /// The destination.
        destination: String,
        /// The panic message, or why it ended.
        reason: String,
    },
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
    /// A broker source's reader or a relay stopped (it panicked) while the server ran: its
    /// messages would no longer be taken or published, so `/readyz` fails and the server stops.
    #[error("{task} stopped ({reason})")]
    TaskStopped {
        /// `source "orders"` or `relay "orders-out"`.
        task: String,
        /// The panic message.
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

impl From<idem_sql::sqlx::Error> for Error {
    fn from(e: idem_sql::sqlx::Error) -> Self {
        Self::Store(idem_sql::Error::from(e))
    }
}
