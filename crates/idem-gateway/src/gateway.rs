//! The gateway's shared state: configuration, store, and the wiring between ingest and dispatch.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use idem_core::{Name, Timestamp};
use idem_sql::{Inbox, Store};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::Config;
use crate::error::{Error, Task};
use crate::health::{Rejections, StoreHealth};
use crate::store::{DeliveryState, GatewayDb};
use crate::wiring::Wiring;
use crate::writer_gate::WriterGate;

/// The consumer name of the gateway's inbox in idem's tables: every accepted event's dedup key
/// (`{dedup scope}:{event id}`) is claimed under it. Defined once in `idem-sql`, whose
/// consumer reset refuses it.
pub const INBOX_CONSUMER: &str = idem_sql::GATEWAY_INBOX_CONSUMER;

/// Connections of the pool kept for what is neither ingest nor dispatch: `/readyz`, `/metrics`
/// and the admin API.
const OTHER_CONNECTIONS: usize = 2;

/// How many of a pool of `pool_size` connections dispatch may hold at once: what is left after
/// ingest's `commits` group commits in flight and [`OTHER_CONNECTIONS`], at least one.
pub(crate) fn dispatch_share(pool_size: usize, commits: usize) -> usize {
    pool_size.saturating_sub(commits + OTHER_CONNECTIONS).max(1)
}

/// A gateway over a store on `DB` ([`idem_sql::sqlx::Sqlite`], [`idem_sql::sqlx::Postgres`] or
/// [`idem_sql::sqlx::MySql`]): what ingest, dispatch and the admin commands share. Cheap to clone.
pub struct Gateway<DB: GatewayDb> {
    inner: Arc<Inner<DB>>,
}

struct Inner<DB: GatewayDb> {
    store: Store<DB>,
    inbox: Inbox<DB>,
    /// The configuration, lanes, sources and routes, behind the one swap point a reload swaps.
    wiring: ArcSwap<Wiring>,
    /// The file a reload reads (`None`: a configuration made in memory, which cannot reload).
    config_file: OnceLock<PathBuf>,
    /// Whether a reload refuses a configuration with warnings (`idem serve --strict`).
    strict: OnceLock<bool>,

    /// The pool's connections dispatch may hold at once (see [`Gateway::dispatch_connection`]).
    dispatch_connections: Semaphore,
    /// Whether the last ingest commit (or `/readyz` probe) could write.
    health: StoreHealth,
    /// Webhook requests refused since the monitor last wrote them down.
    rejections: Rejections,
    /// Ingest's and dispatch's write transactions, one at a time on SQLite.
    writer: WriterGate,
    /// Set when a supervised task (a dispatcher, a broker reader, a relay) stopped while
    /// serving, with why: `/readyz` fails with it.
    failure: OnceLock<(Task, String)>,
    /// Dispatch's write transactions' pool where it is not the store's (SQLite: see
    /// `store::relaxed`), made on first use.
    relaxed: OnceLock<Option<sqlx::Pool<DB>>>,
}

impl<DB: GatewayDb> Clone for Gateway<DB> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<DB: GatewayDb> fmt::Debug for Gateway<DB> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gateway")
            .field("config", self.inner.wiring.load().config())
            .finish_non_exhaustive()
    }
}

/// Deliveries of one destination by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StateCounts {
    /// Waiting for their first or next attempt.
    pub pending: u64,
    /// Being sent now (or held by a lease that has not lapsed).
    pub in_flight: u64,
    /// Answered 2xx.
    pub delivered: u64,
    /// Older than their entity's newest event at ingest: never sent.
    pub stale: u64,
    /// Failed every attempt of the schedule: kept for redrive.
    pub dead: u64,
}

/// A summary of the gateway's tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Delivery states per destination name.
    pub destinations: BTreeMap<String, StateCounts>,
    /// When the oldest event still waiting to be delivered was received (ms since the epoch).
    pub oldest_undelivered: Option<Timestamp>,
    /// Attempts that did not deliver (each led to a retry or a dead letter).
    pub failed_attempts: u64,
}

impl<DB: GatewayDb> Gateway<DB> {
    /// A gateway with `config` over `store` (whose clock is the gateway's clock: give the store a
    /// [`ManualClock`](idem_core::ManualClock) with [`Store::with_clock`] in tests).
    pub fn new(config: Config, store: Store<DB>) -> Self {
        let inbox = store.inbox(&Name::new("consumer", INBOX_CONSUMER).expect("a valid name"));
        let pool_size = usize::try_from(store.pool().options().get_max_connections()).unwrap_or(1);
        let dispatch_connections =
            Semaphore::new(dispatch_share(pool_size, DB::CONCURRENT_COMMITS));
        let now = store.now();
        let wiring = ArcSwap::from_pointee(Wiring::new(config, now));
        Self {
            inner: Arc::new(Inner {
                store,
                inbox,
                wiring,
                config_file: OnceLock::new(),
                strict: OnceLock::new(),
                dispatch_connections,
                health: StoreHealth::default(),
                rejections: Rejections::default(),
                writer: WriterGate::new(DB::CONCURRENT_COMMITS == 1),
                failure: OnceLock::new(),
                relaxed: OnceLock::new(),
            }),
        }
    }

    /// Creates or updates idem's tables and the gateway's, each recorded in its own migrations
    /// table (`idem_migrations`, `idem_gateway_migrations`). Safe at every start.
    ///
    /// # Errors
    /// [`Error::Store`] or [`Error::Migrate`] when a migration fails.
    pub async fn migrate(&self) -> Result<(), Error> {
        self.inner.store.migrate().await?;
        DB::migrate_gateway(self.inner.store.pool()).await?;
        Ok(())
    }

    /// The file of a database that belongs to one process (SQLite), which `idem serve` locks;
    /// `None` on PostgreSQL and for SQLite in memory.
    ///
    /// # Errors
    /// [`Error::Store`] when the database does not answer.
    pub(crate) async fn database_file(&self) -> Result<Option<String>, Error> {
        Ok(DB::database_file(self.inner.store.pool())
            .await
            .map_err(idem_sql::Error::from)?)
    }

    /// The configuration running now: a reload may replace it, so read it once per request or
    /// operation and keep the `Arc`, rather than once per field.
    pub fn config(&self) -> Arc<Config> {
        Arc::clone(self.inner.wiring.load().config())
    }

    /// Names the file the configuration was read from, which a reload
    /// ([`ReloadHandle::reload`](crate::ReloadHandle::reload), `SIGHUP` in `idem serve`, `POST
    /// /admin/reload`) reads again. Set once; later calls are ignored.
    pub fn with_config_file(self, path: impl Into<PathBuf>) -> Self {
        let _ = self.inner.config_file.set(path.into());
        self
    }

    /// Makes a reload refuse a configuration with [warnings](Config::warnings), as `idem serve
    /// --strict` refuses one at start. Set once; later calls are ignored.
    pub fn with_strict_reload(self, strict: bool) -> Self {
        let _ = self.inner.strict.set(strict);
        self
    }

    /// Whether a reload refuses a configuration with warnings.
    pub(crate) fn strict_reload(&self) -> bool {
        self.inner.strict.get().copied().unwrap_or(false)
    }

    /// The file a reload reads, if one was named.
    pub(crate) fn config_file(&self) -> Option<&Path> {
        self.inner.config_file.get().map(PathBuf::as_path)
    }

    /// The store.
    pub fn store(&self) -> &Store<DB> {
        &self.inner.store
    }

    /// The current time from the store's clock.
    pub fn now(&self) -> Timestamp {
        self.inner.store.now()
    }

    pub(crate) fn inbox(&self) -> &Inbox<DB> {
        &self.inner.inbox
    }

    /// Whether the store takes writes, as the last commit found it.
    pub(crate) fn rejections(&self) -> &Rejections {
        &self.inner.rejections
    }

    /// Whether the store takes writes.
    pub(crate) fn health(&self) -> &StoreHealth {
        &self.inner.health
    }

    /// Ingest's and dispatch's turns at the writer (one at a time on SQLite).
    pub(crate) fn writer(&self) -> &WriterGate {
        &self.inner.writer
    }

    /// Opens one of dispatch's write transactions (claims, attempt outcomes): on SQLite on the
    /// connection that commits without waiting for the disk (see `store::relaxed` for why that
    /// loses no event and lets no two holders send at once), elsewhere as [`Store::begin`].
    ///
    /// # Errors
    /// The database's, as [`Store::begin`].
    pub(crate) async fn begin_dispatch(
        &self,
    ) -> Result<sqlx::Transaction<'static, DB>, idem_sql::Error> {
        let relaxed =
            (self.inner.relaxed).get_or_init(|| DB::relaxed_pool(self.inner.store.pool()));
        match relaxed {
            Some(pool) => Ok(pool.begin_with(DB::BEGIN).await?),
            None => self.inner.store.begin().await,
        }
    }

    /// The current wiring (lanes, sources, routes): the swap point. Read it once per batch or
    /// loop iteration, not per event.
    pub(crate) fn wiring(&self) -> Arc<Wiring> {
        self.inner.wiring.load_full()
    }

    /// Replaces the wiring; what loaded the old one keeps it until it loads again. The seam of
    /// a configuration reload (which also starts and stops the tasks of what changed).
    pub(crate) fn rewire(&self, wiring: Arc<Wiring>) {
        self.inner.wiring.store(wiring);
    }

    /// A turn to use one of the pool's connections for dispatch (a due query, a claim, an
    /// outcome batch), held for that one statement or transaction. Dispatch holds at most
    /// [`dispatch_share`] connections at once, whatever the number of destinations, so that
    /// ingest's group commits always find theirs.
    pub(crate) async fn dispatch_connection(&self) -> SemaphorePermit<'_> {
        self.inner
            .dispatch_connections
            .acquire()
            .await
            .expect("the semaphore is never closed")
    }

    /// Records that `task` stopped while serving, and why (the first failure wins):
    /// `/readyz` fails with it.
    pub(crate) fn set_failure(&self, task: Task, reason: String) {
        let _ = self.inner.failure.set((task, reason));
    }

    /// The task that stopped while serving and why, if one did: the gateway is then not ready.
    pub(crate) fn stopped_task(&self) -> Option<(&Task, &str)> {
        (self.inner.failure.get()).map(|(task, reason)| (task, reason.as_str()))
    }

    /// [`stopped_task`](Self::stopped_task) as the error [`Server`](crate::Server) returns.
    pub(crate) fn failure(&self) -> Option<Error> {
        self.stopped_task()
            .map(|(task, reason)| Error::TaskStopped {
                task: task.clone(),
                reason: reason.to_owned(),
            })
    }

    /// Counts deliveries by destination and state, the oldest undelivered event and the failed
    /// attempts.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read.
    pub async fn stats(&self) -> Result<Stats, Error> {
        let mut stats = self.counts(false).await?;
        let mut conn = self.inner.store.pool().acquire().await?;
        stats.failed_attempts =
            u64::try_from(DB::count_failed_attempts(&mut conn).await?).unwrap_or(0);
        Ok(stats)
    }

    /// Pending, in-flight and dead deliveries and the oldest undelivered event: what metrics
    /// need, read through indexes (delivered, stale and failed attempts are left at 0).
    pub(crate) async fn open_stats(&self) -> Result<Stats, Error> {
        self.counts(true).await
    }

    async fn counts(&self, open_only: bool) -> Result<Stats, Error> {
        let mut conn = self.inner.store.pool().acquire().await?;
        let mut stats = Stats::default();
        for destination in &self.config().destinations {
            stats
                .destinations
                .insert(destination.name.to_string(), StateCounts::default());
        }
        for row in DB::count_by_state(&mut conn, open_only).await? {
            let counts = stats.destinations.entry(row.destination).or_default();
            let count = u64::try_from(row.count).unwrap_or(0);
            match row.state {
                DeliveryState::Pending => counts.pending = count,
                DeliveryState::InFlight => counts.in_flight = count,
                DeliveryState::Delivered => counts.delivered = count,
                DeliveryState::Stale => counts.stale = count,
                DeliveryState::Dead => counts.dead = count,
            }
        }
        stats.oldest_undelivered = DB::oldest_undelivered(&mut conn).await?.map(Timestamp);
        Ok(stats)
    }
}
