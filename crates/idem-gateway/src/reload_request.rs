//! What asks the running server for a configuration reload, and what it answers: the
//! [`ReloadHandle`] the admin API and `idem serve`'s SIGHUP hold, the [`ReloadReport`] of an
//! applied reload and the [`ReloadError`] of a refused one. The reload itself is assembly's
//! (`crate::reload`): it stops and starts dispatchers.

use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::config::ConfigError;

/// What a reload applied. Every list is of names, sorted as in the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ReloadReport {
    /// Which reload this is since the start (1 for the first that applied).
    pub generation: u64,
    /// Whether no source, destination or route changed. Secrets read from files, the admin
    /// token and the alert settings are not compared, and are applied all the same.
    pub unchanged: bool,
    /// Destinations added (a dispatcher each was started).
    pub added_destinations: Vec<String>,
    /// Destinations whose settings changed, or that read TLS files (their dispatcher was
    /// restarted with the new settings once it had finished what it held).
    pub changed_destinations: Vec<String>,
    /// Destinations removed (none had pending or in-flight deliveries).
    pub removed_destinations: Vec<String>,
    /// Webhook sources added.
    pub added_sources: Vec<String>,
    /// Webhook sources whose settings changed (a rotated secret is applied without being
    /// listed here).
    pub changed_sources: Vec<String>,
    /// How many routes run now.
    pub routes: usize,
    /// Routes added, by name.
    pub added_routes: Vec<String>,
    /// Routes whose settings (`event_types`, `ordering`, `filter`, destination) changed.
    pub changed_routes: Vec<String>,
    /// Routes removed.
    pub removed_routes: Vec<String>,
}

/// Why a reload was refused; the running configuration stays, whole.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// The server was started from a configuration made in memory, not read from a file.
    #[error("no configuration file to read again: the gateway was not started from one")]
    NoFile,
    /// The file cannot be read or is not a valid configuration.
    #[error("the configuration file is not valid: {0}")]
    Invalid(#[from] ConfigError),
    /// A key outside the closed list of what a reload applies changed.
    #[error("{key} changed, and that needs a restart; nothing was applied")]
    NeedsRestart {
        /// The key as written in the file.
        key: String,
    },
    /// The file has warnings and the server runs with `--strict`
    /// ([`Gateway::with_strict_reload`](crate::Gateway::with_strict_reload)).
    #[error(
        "the configuration has {count} warning(s), logged above (the first: {first}); refused under --strict; nothing was applied"
    )]
    Warnings {
        /// How many.
        count: usize,
        /// The first, as logged.
        first: String,
    },
    /// A source of the running configuration is missing from the file.
    #[error(
        "source {source_name:?} was removed, and removing a source needs a restart (its senders would get 404); nothing was applied"
    )]
    SourceRemoved {
        /// The source.
        source_name: String,
    },
    /// A route the file introduces with `renamed_from`: its rows are carried over at start,
    /// not while events flow.
    #[error(
        "route {route:?} is new and renamed from {from:?}: a rename carries the old name's deliveries and version-guard rows over at start, so it needs a restart; nothing was applied"
    )]
    Rename {
        /// The new name.
        route: String,
        /// The running route's name.
        from: String,
    },
    /// A route removed from the file leaves deliveries or version-guard rows that no route of
    /// the file has, renames or retires (the next start would refuse them).
    #[error("{detail}; nothing was applied")]
    UnconfiguredRoute {
        /// The stored route name.
        route: String,
        /// What is stored under it and the key to add.
        detail: String,
    },
    /// A destination removed from the file still has deliveries to send.
    #[error(
        "destination {destination:?} was removed but has {open} pending or in-flight deliveries; let them be sent, or keep the destination; nothing was applied"
    )]
    OpenDeliveries {
        /// The destination.
        destination: String,
        /// Its pending and in-flight deliveries.
        open: u64,
    },
    /// A destination added or changed cannot be reached (a broker destination connects
    /// first) or its HTTP client cannot be built.
    #[error("{0}; nothing was applied")]
    Destination(Box<crate::Error>),
    /// The database did not answer while checking for open deliveries.
    #[error("the database did not answer: {0}; nothing was applied")]
    Store(#[from] idem_sql::Error),
    /// Another error of the gateway's while checking the file against the database.
    #[error("{0}; nothing was applied")]
    Gateway(Box<crate::Error>),
    /// The server has stopped.
    #[error("the server is not running")]
    NotServing,
}

impl ReloadError {
    /// A short stable name of the error, for logs, metrics and the admin API's problem type.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NoFile => "no-file",
            Self::Invalid(_) => "invalid-config",
            Self::NeedsRestart { .. } => "needs-restart",
            Self::Warnings { .. } => "warnings",
            Self::SourceRemoved { .. } => "source-removed",
            Self::OpenDeliveries { .. } => "open-deliveries",
            Self::Rename { .. } => "rename-needs-restart",
            Self::UnconfiguredRoute { .. } => "unconfigured-route",
            Self::Destination(_) => "destination-unreachable",
            Self::Store(_) => "store-unavailable",
            Self::Gateway(_) => "gateway-error",
            Self::NotServing => "not-serving",
        }
    }

    /// A database error as [`ReloadError::Store`], any other as [`ReloadError::Gateway`].
    pub(crate) fn from_gateway(error: crate::Error) -> Self {
        match error {
            crate::Error::Store(e) => Self::Store(e),
            other => Self::Gateway(Box::new(other)),
        }
    }
}

/// Where the reload's outcome goes.
pub(crate) type Reply = oneshot::Sender<Result<ReloadReport, ReloadError>>;

/// Asks the running server to reload; cheap to clone.
#[derive(Debug, Clone)]
pub struct ReloadHandle {
    requests: mpsc::Sender<Reply>,
}

impl ReloadHandle {
    /// Reads the configuration file again and applies it (see the module docs); one reload
    /// runs at a time, in the order asked.
    ///
    /// # Errors
    /// A [`ReloadError`]: nothing was applied.
    pub async fn reload(&self) -> Result<ReloadReport, ReloadError> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(reply)
            .await
            .map_err(|_| ReloadError::NotServing)?;
        answer.await.unwrap_or(Err(ReloadError::NotServing))
    }
}

/// A handle and the receiver of its requests, which the reload task reads.
pub(crate) fn channel() -> (ReloadHandle, mpsc::Receiver<Reply>) {
    let (requests, asked) = mpsc::channel(16);
    (ReloadHandle { requests }, asked)
}
