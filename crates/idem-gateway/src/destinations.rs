//! Operations on destinations, shared by the `idem destination` command and `/admin/destinations`:
//! list them with their pause and rate limit, pause and resume one.
//!
//! A pause is a row of `idem_gateway_paused_destinations`, so every gateway process on the
//! database honours it: the process that pauses or resumes applies it at once, the others when
//! their dispatcher next reads it (at least every second, or every `poll_interval` if shorter;
//! see [`PAUSE_REFRESH`](crate::lanes::throttle::PAUSE_REFRESH)). While paused, a
//! destination's deliveries stay pending: none is claimed, no attempt is made or counted, none
//! is dead-lettered, and ingest goes on accepting events. Attempts already started when the
//! pause is applied finish. On resume they are claimed oldest first, one per entity at a time in
//! version order, as always.

use serde::Serialize;

use crate::Error;
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// A configured destination and whether it is paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DestinationStatus {
    /// Its name.
    pub name: String,
    /// Where its events are POSTed, with any user and password replaced by `***`; for a broker
    /// destination, its server (or Kafka's bootstrap brokers).
    pub url: String,
    /// `http`, `nats`, `rabbitmq` or `kafka`.
    pub kind: String,
    /// Where its events go, as [`Destination::describe_target`](crate::Destination::describe_target)
    /// says: the URL for HTTP, else the kind, server and subject, exchange or topic.
    pub target: String,
    /// Whether it is paused (in the database).
    pub paused: bool,
    /// Since when, in ms since the epoch; `None` while it runs.
    pub paused_at: Option<i64>,
    /// Who paused it: `operator` (`idem destination pause`, the admin API, the console) or
    /// `circuit_breaker` (it was failing; see docs/gateway.md, Destination health and the circuit
    /// breaker); `None` while it runs.
    pub paused_by: Option<&'static str>,
    /// Whether this process holds it paused now: its dispatcher read (or this process set) the
    /// pause. It differs from `paused` for up to a second after a change made through another
    /// process, and in a process that runs no dispatcher (`idem destination`).
    pub applied: bool,
    /// Its `rate_limit` (`200/s`), per gateway process; `None` without one.
    pub rate_limit: Option<String>,
    /// Its `concurrency`.
    pub concurrency: usize,
}

/// What a pause or resume did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseChange {
    /// The destination.
    pub destination: String,
    /// Whether it is paused now.
    pub paused: bool,
    /// Since when it is paused (ms since the epoch); `None` once resumed.
    pub paused_at: Option<i64>,
    /// Whether this call changed it (false: it was already paused, or already running).
    pub changed: bool,
}

impl<DB: GatewayDb> Gateway<DB> {
    /// Every configured destination, in configuration order, with its pause as the database
    /// holds it.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read.
    pub async fn destinations(&self) -> Result<Vec<DestinationStatus>, Error> {
        let mut conn = self.store().pool().acquire().await?;
        let paused = DB::paused(&mut conn).await?;
        let mut by_breaker = Vec::new();
        for (name, _) in &paused {
            if DB::pause_row(&mut conn, name)
                .await?
                .is_some_and(|row| row.auto)
            {
                by_breaker.push(name.clone());
            }
        }
        let config = self.config();
        Ok(config
            .destinations
            .iter()
            .enumerate()
            .map(|(index, d)| {
                let paused_at = (paused.iter())
                    .find(|(name, _)| name == d.name.as_str())
                    .map(|(_, at)| *at);
                let paused_by = paused_at.map(|_| {
                    if by_breaker.iter().any(|name| name == d.name.as_str()) {
                        "circuit_breaker"
                    } else {
                        "operator"
                    }
                });
                DestinationStatus {
                    name: d.name.to_string(),
                    url: d.display_url(),
                    kind: d.target.kind().to_owned(),
                    target: d.describe_target(),
                    paused: paused_at.is_some(),
                    paused_at,
                    paused_by,
                    applied: self.wiring().lane(index).handoff().throttle().paused(),
                    rate_limit: d.rate_limit.map(|limit| limit.to_string()),
                    concurrency: d.concurrency,
                }
            })
            .collect())
    }

    /// Pauses destination `name` for every gateway process on the database (see the module
    /// docs); pausing a paused destination changes nothing.
    ///
    /// # Errors
    /// [`Error::Request`] ([`RequestError::UnknownDestination`](crate::RequestError::UnknownDestination))
    /// when no destination `name` is configured, before anything is changed; [`Error::Store`].
    pub async fn pause(&self, name: &str) -> Result<PauseChange, Error> {
        self.known_destination(name)?;
        let mut conn = self.store().pool().acquire().await?;
        let changed = DB::pause(&mut conn, name, self.now().as_millis()).await?;
        let paused_at = DB::paused_since(&mut conn, name).await?;
        if let Some(index) = self.destination_index(name) {
            self.wiring()
                .lane(index)
                .handoff()
                .throttle()
                .set_paused(true);
        }
        let change = PauseChange {
            destination: name.to_owned(),
            paused: true,
            paused_at,
            changed,
        };
        crate::audit::done("pause", false, &change);
        Ok(change)
    }

    /// Resumes destination `name` for every gateway process on the database; its waiting
    /// deliveries are claimed at once here, and by the other processes when they read it.
    /// Resuming a running destination changes nothing.
    ///
    /// # Errors
    /// As [`pause`](Self::pause).
    pub async fn resume(&self, name: &str) -> Result<PauseChange, Error> {
        self.known_destination(name)?;
        let mut conn = self.store().pool().acquire().await?;
        let changed = DB::resume(&mut conn, name).await?;
        if changed {
            DB::note_resume(&mut conn, name, self.now().as_millis()).await?;
        }
        if let Some(index) = self.destination_index(name) {
            self.wiring()
                .lane(index)
                .handoff()
                .throttle()
                .set_paused(false);
            self.wiring().lane(index).wake();
        }
        let change = PauseChange {
            destination: name.to_owned(),
            paused: false,
            paused_at: None,
            changed,
        };
        crate::audit::done("resume", false, &change);
        Ok(change)
    }

    fn destination_index(&self, name: &str) -> Option<usize> {
        (self.config().destinations.iter()).position(|d| d.name.as_str() == name)
    }
}
