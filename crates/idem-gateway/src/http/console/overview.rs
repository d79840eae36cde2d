//! What the overview shows, read at one moment: per source and per destination the counts of
//! the last hour (per minute) and of the last day (per hour), each destination's backlog and
//! dispatcher (paused, failing to claim or to write outcomes, the oldest due delivery), and the
//! store's health.

use crate::Error;
use crate::error::Task;
use crate::gateway::Gateway;
use crate::model::counts::{MINUTE_MS, Metric, Scope};
use crate::store::GatewayDb;

/// One hour, in ms.
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// The metrics the overview shows for a source: all of them (delivered, retried and dead
/// counted for the event's source).
pub const SOURCE_METRICS: [Metric; 8] = Metric::ALL;

/// The metrics the overview shows for a destination: accepted and duplicates are the
/// source's alone.
pub const DESTINATION_METRICS: [Metric; 6] = [
    Metric::Stale,
    Metric::Tie,
    Metric::Gap,
    Metric::Delivered,
    Metric::Retried,
    Metric::Dead,
];

/// Whether the store takes writes, as the last ingest commit found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// It takes writes.
    Working,
    /// It fails, and why.
    Failing(String),
}

/// One source's or destination's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesRow {
    /// Its name.
    pub name: String,
    /// Per metric, the counts of the last 60 minutes, oldest first (the last is the current
    /// minute).
    pub per_minute: Vec<(Metric, Vec<u64>)>,
    /// Per metric, the counts of the last 24 hours, oldest first (the last is the current
    /// hour).
    pub per_hour: Vec<(Metric, Vec<u64>)>,
}

impl SeriesRow {
    /// The count of `metric` over the last hour's minutes (0 for a metric not shown).
    pub fn last_hour(&self, metric: Metric) -> u64 {
        sum_of(&self.per_minute, metric)
    }

    /// The count of `metric` over the last day's hours.
    pub fn last_day(&self, metric: Metric) -> u64 {
        sum_of(&self.per_hour, metric)
    }

    /// Duplicates per delivery received over the last hour (duplicates over accepted plus
    /// duplicates); `None` when nothing was received.
    pub fn repeat_rate(&self) -> Option<f64> {
        let duplicates = self.last_hour(Metric::Duplicate);
        let received = self.last_hour(Metric::Accepted) + duplicates;
        (received > 0).then(|| duplicates as f64 / received as f64)
    }
}

fn sum_of(series: &[(Metric, Vec<u64>)], metric: Metric) -> u64 {
    series
        .iter()
        .find(|(m, _)| *m == metric)
        .map_or(0, |(_, v)| v.iter().sum())
}

/// A part of a dispatcher that fails now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// The last failure's reason: the database's error, or that it did not answer within
    /// `database_timeout`.
    pub reason: String,
    /// When the failures began (ms since the epoch, the gateway's clock).
    pub since: i64,
}

/// What one destination's dispatcher in this process can do now. Failed attempts at the
/// destination (an error status, a refused connection) are not its failures: they are counted
/// as retried and dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatcherHealth {
    /// Set when its task stopped, with why: nothing is sent from this process, and the gateway
    /// is not ready.
    pub stopped: Option<String>,
    /// Since when the destination is paused (ms since the epoch, as the database holds it);
    /// `None` while it runs.
    pub paused_since: Option<i64>,
    /// Its due queries or claims fail now (the database refuses, times out or is locked).
    pub claims: Option<Failing>,
    /// Its outcome writer cannot commit attempts' outcomes now.
    pub outcomes: Option<Failing>,
    /// When the delivery due the longest fell due (ms since the epoch): pending and due, or in
    /// flight past its claim; it may be waiting for its entity's earlier delivery, a free
    /// permit, a token of the rate limit, or a resume. `None` when nothing is due.
    pub oldest_due: Option<i64>,
}

impl DispatcherHealth {
    /// Whether it runs, is not paused, and claims and writes outcomes.
    pub fn is_working(&self) -> bool {
        self.stopped.is_none()
            && self.paused_since.is_none()
            && self.claims.is_none()
            && self.outcomes.is_none()
    }
}

/// One destination's backlog and dispatcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BacklogRow {
    /// The destination.
    pub destination: String,
    /// Pending, no attempt failed yet (since the last redrive or replay).
    pub pending: u64,
    /// Pending after a failed attempt, waiting for their next one.
    pub retrying: u64,
    /// Being sent.
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// When the oldest event pending or in flight for it was received (ms since the epoch).
    pub oldest_undelivered: Option<i64>,
    /// Its dispatcher in this process.
    pub dispatcher: DispatcherHealth,
}

/// The overview at [`now`](Self::now).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overview {
    /// When it was read (ms since the epoch, the gateway's clock).
    pub now: i64,
    /// Each configured source's counts.
    pub sources: Vec<SeriesRow>,
    /// Each configured destination's counts.
    pub destinations: Vec<SeriesRow>,
    /// Each configured destination's backlog.
    pub backlog: Vec<BacklogRow>,
    /// When the oldest event not yet delivered anywhere was received.
    pub oldest_undelivered: Option<i64>,
    /// Whether the store took the last ingest commit.
    pub store: Health,
}

impl<DB: GatewayDb> Gateway<DB> {
    /// The overview now: the stored per-minute counts of the last day, the backlog read from
    /// the deliveries, the pauses from the database, and each dispatcher's health in this
    /// process.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read.
    pub async fn overview(&self) -> Result<Overview, Error> {
        let now = self.now().as_millis();
        let minute_end = now - now.rem_euclid(MINUTE_MS) + MINUTE_MS;
        let hour_end = now - now.rem_euclid(HOUR_MS) + HOUR_MS;
        let day_start = hour_end - 24 * HOUR_MS;
        let open = self.open_stats().await?;
        let (counts, figures, paused) = {
            let mut conn = self.store().pool().acquire().await?;
            let counts = DB::read_counts(&mut conn, day_start).await?;
            let figures = DB::destination_figures(&mut conn, now).await?;
            let paused = DB::paused(&mut conn).await?;
            (counts, figures, paused)
        };
        let row = |scope: Scope, name: &str, metrics: &[Metric]| SeriesRow {
            name: name.to_owned(),
            per_minute: metrics
                .iter()
                .map(|m| {
                    (
                        *m,
                        counts.buckets(scope, name, *m, minute_end, MINUTE_MS, 60),
                    )
                })
                .collect(),
            per_hour: metrics
                .iter()
                .map(|m| (*m, counts.buckets(scope, name, *m, hour_end, HOUR_MS, 24)))
                .collect(),
        };
        let config = self.config();
        let sources = (config.sources.iter())
            .map(|s| row(Scope::Source, s.name.as_str(), &SOURCE_METRICS))
            .collect();
        let destinations = (config.destinations.iter())
            .map(|d| row(Scope::Destination, d.name.as_str(), &DESTINATION_METRICS))
            .collect();
        let stopped = match self.stopped_task() {
            Some((Task::Dispatcher { destination }, reason)) => {
                Some((destination.clone(), reason.to_owned()))
            }
            _ => None,
        };
        let failing = |(reason, since)| Failing { reason, since };
        let wiring = self.wiring();
        let backlog = (config.destinations.iter().enumerate())
            .map(|(index, d)| {
                let name = d.name.as_str();
                let states = open.destinations.get(name).copied().unwrap_or_default();
                let figure = figures.iter().find(|f| f.destination == name);
                let retrying = figure.map_or(0, |f| u64::try_from(f.retrying).unwrap_or(0));
                let health = wiring.lane(index).health();
                BacklogRow {
                    destination: name.to_owned(),
                    pending: states.pending.saturating_sub(retrying),
                    retrying,
                    in_flight: states.in_flight,
                    dead: states.dead,
                    oldest_undelivered: figure.and_then(|f| f.oldest_undelivered),
                    dispatcher: DispatcherHealth {
                        stopped: match &stopped {
                            Some((stopped, reason)) if stopped == name => Some(reason.clone()),
                            _ => None,
                        },
                        paused_since: (paused.iter())
                            .find(|(destination, _)| destination == name)
                            .map(|(_, at)| *at),
                        claims: health.claims().map(failing),
                        outcomes: health.outcomes().map(failing),
                        oldest_due: figure.and_then(|f| f.oldest_due),
                    },
                }
            })
            .collect();
        Ok(Overview {
            now,
            sources,
            destinations,
            backlog,
            oldest_undelivered: open.oldest_undelivered.map(|t| t.as_millis()),
            store: match self.health().failing() {
                Some(reason) => Health::Failing(reason),
                None => Health::Working,
            },
        })
    }
}
