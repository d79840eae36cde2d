//! What the overview shows, read at one moment: per source and per destination the counts of
//! the last hour (per minute) and of the last day (per hour), each destination's backlog and
//! dispatcher (paused, failing to claim or to write outcomes, the oldest due delivery), and the
//! store's health.

use crate::Error;
use crate::error::Task;
use crate::gateway::Gateway;
use crate::model::counts::{MINUTE_MS, Metric, Scope};
use crate::model::health::Assessment;
use crate::store::{GatewayDb, destination_health};

/// One hour, in ms.
const HOUR_MS: i64 = 60 * MINUTE_MS;

/// The time range the overview's charts cover (`?range=1h`, `24h` or `7d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Range {
    /// The last hour, per minute (`1h`, the default).
    #[default]
    Hour,
    /// The last day, per 20 minutes (`24h`).
    Day,
    /// The last week, per 2 hours (`7d`).
    Week,
}

impl Range {
    /// Every range, as the page offers them.
    pub const ALL: [Self; 3] = [Self::Hour, Self::Day, Self::Week];

    /// The range written `text` (`1h`, `24h`, `7d`).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// How it is written in the query.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hour => "1h",
            Self::Day => "24h",
            Self::Week => "7d",
        }
    }

    /// One bar's width, in ms.
    pub fn bucket_ms(self) -> i64 {
        match self {
            Self::Hour => MINUTE_MS,
            Self::Day => 20 * MINUTE_MS,
            Self::Week => 2 * HOUR_MS,
        }
    }

    /// How many bars.
    pub fn buckets(self) -> usize {
        match self {
            Self::Hour => 60,
            Self::Day => 72,
            Self::Week => 84,
        }
    }

    /// What one bar counts, in words.
    pub fn per(self) -> &'static str {
        match self {
            Self::Hour => "per minute",
            Self::Day => "per 20 minutes",
            Self::Week => "per 2 hours",
        }
    }

    /// The end of the last bar for `now` (ms): the end of the bucket holding `now`.
    pub fn end(self, now: i64) -> i64 {
        now - now.rem_euclid(self.bucket_ms()) + self.bucket_ms()
    }

    /// The start of the first bar for `now`.
    pub fn start(self, now: i64) -> i64 {
        self.end(now) - self.bucket_ms() * i64::try_from(self.buckets()).unwrap_or(0)
    }
}

/// The circuit breaker's state for one destination, as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreakerState {
    /// Not paused: the breaker would pause it when it fails.
    Closed,
    /// `circuit_breaker = false` and not paused.
    Off,
    /// Paused by the breaker: since when, why, the last errors, when the next probe is due.
    Open {
        /// Since when (ms).
        since: i64,
        /// Why (`success rate 0% over 12 attempts`).
        reason: String,
        /// The last failed attempts' status and answer.
        last_errors: Vec<String>,
        /// When the next probe is due (ms).
        next_probe: Option<i64>,
    },
    /// Paused by an operator (the breaker never resumes it).
    Operator,
}

/// One destination's health.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthRow {
    /// The destination.
    pub destination: String,
    /// Its health and the figures it was judged on.
    pub assessment: Assessment,
    /// Its breaker.
    pub breaker: BreakerState,
}

/// One source's refused requests in the range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedRow {
    /// The source.
    pub source: String,
    /// Per reason (`bad_signature`, `too_large`, `malformed`): the range's total and its bars.
    pub reasons: Vec<(&'static str, u64, Vec<u64>)>,
}

/// One alert firing or clearing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertRow {
    /// When (ms).
    pub at: i64,
    /// `fired` or `cleared`.
    pub state: String,
    /// The condition (`destination_failing`, …).
    pub condition: String,
    /// The destination or source.
    pub subject: String,
    /// Why.
    pub detail: String,
}

/// The reasons refused requests are counted under, in the order shown.
pub const REJECTION_REASONS: [&str; 3] = ["bad_signature", "too_large", "malformed"];

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
    /// Per metric, the counts of the overview's range, one per bar, oldest first.
    pub chart: Vec<(Metric, Vec<u64>)>,
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
#[derive(Debug, Clone, PartialEq)]
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
    /// The charts' range.
    pub range: Range,
    /// Each configured destination's health and breaker.
    pub health: Vec<HealthRow>,
    /// Each webhook source's refused requests in the range.
    pub rejected: Vec<RejectedRow>,
    /// The latest alerts fired and cleared, newest first.
    pub alerts: Vec<AlertRow>,
}

impl<DB: GatewayDb> Gateway<DB> {
    /// The overview now: the stored per-minute counts of the last day, the backlog read from
    /// the deliveries, the pauses from the database, and each dispatcher's health in this
    /// process.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read.
    pub async fn overview(&self) -> Result<Overview, Error> {
        self.overview_over(Range::Hour).await
    }

    /// The overview with charts over `range`.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read.
    pub async fn overview_over(&self, range: Range) -> Result<Overview, Error> {
        let now = self.now().as_millis();
        let minute_end = now - now.rem_euclid(MINUTE_MS) + MINUTE_MS;
        let hour_end = now - now.rem_euclid(HOUR_MS) + HOUR_MS;
        let day_start = hour_end - 24 * HOUR_MS;
        let open = self.open_stats().await?;
        let (counts, figures, paused) = {
            let mut conn = self.store().pool().acquire().await?;
            let counts = DB::read_counts(&mut conn, day_start.min(range.start(now))).await?;
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
            chart: metrics
                .iter()
                .map(|m| {
                    let (end, width) = (range.end(now), range.bucket_ms());
                    (
                        *m,
                        counts.buckets(scope, name, *m, end, width, range.buckets()),
                    )
                })
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
        let (health, rejected, alerts) = self.health_figures(range, now).await?;
        Ok(Overview {
            now,
            range,
            health,
            rejected,
            alerts,
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

impl<DB: GatewayDb> Gateway<DB> {
    /// Each destination's health and breaker, each webhook source's refusals over `range`, and
    /// the latest alerts, at `now`.
    async fn health_figures(
        &self,
        range: Range,
        now: i64,
    ) -> Result<(Vec<HealthRow>, Vec<RejectedRow>, Vec<AlertRow>), Error> {
        let mut conn = self.store().pool().acquire().await?;
        let mut health = Vec::new();
        for d in &self.config().destinations {
            let name = d.name.as_str();
            let (assessment, _) = destination_health::<DB>(&mut conn, name, &d.health, now).await?;
            let breaker = match DB::pause_row(&mut conn, name).await? {
                Some(p) if p.auto => BreakerState::Open {
                    since: p.paused_at,
                    reason: p.reason.unwrap_or_default(),
                    last_errors: (p.last_errors.as_deref())
                        .and_then(|text| serde_json::from_str(text).ok())
                        .unwrap_or_default(),
                    next_probe: p.probe_at,
                },
                Some(_) => BreakerState::Operator,
                None if d.breaker.enabled => BreakerState::Closed,
                None => BreakerState::Off,
            };
            health.push(HealthRow {
                destination: name.to_owned(),
                assessment,
                breaker,
            });
        }
        let (start, width) = (range.start(now), range.bucket_ms());
        let refusals = DB::rejections_since(&mut conn, start).await?;
        let rejected = (self.config().sources.iter())
            .filter(|s| s.broker().is_none())
            .map(|s| RejectedRow {
                source: s.name.to_string(),
                reasons: REJECTION_REASONS
                    .iter()
                    .map(|reason| {
                        let mut bars = vec![0_u64; range.buckets()];
                        for (at, source, r, count) in &refusals {
                            if source == s.name.as_str() && r == reason {
                                let i = usize::try_from((at - start) / width).unwrap_or(0);
                                if let Some(bar) = bars.get_mut(i) {
                                    *bar += u64::try_from(*count).unwrap_or(0);
                                }
                            }
                        }
                        (*reason, bars.iter().sum(), bars)
                    })
                    .collect(),
            })
            .collect();
        let alerts = (DB::recent_alerts(&mut conn, 20).await?.into_iter())
            .map(|a| AlertRow {
                at: a.at,
                state: a.state,
                condition: a.condition,
                subject: a.subject,
                detail: a.detail,
            })
            .collect();
        Ok((health, rejected, alerts))
    }
}
