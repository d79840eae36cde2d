//! The consumer inventory on the gateway's database (issue 34): idem-sql's registry reports
//! ([`Store::consumers`](idem_sql::Store::consumers)) with the gateway's own consumers — each
//! source, each destination, each Kafka source's cursor — filled from the counts the gateway
//! already writes in its ingest and outcome commits (`idem_gateway_counts`), so the registry
//! costs ingest and dispatch nothing. Read by `idem consumers list|show`, `GET
//! /admin/consumers`, the console's consumers page and the monitor's gauges.

mod entry;
mod figures;
mod judge;
mod register;

use std::collections::BTreeSet;

pub use entry::ConsumerEntry;
use figures::GatewayFigures;
use idem_sql::{ConsumerKind, ListOptions};

use crate::config::{Broker, Config};
use crate::error::Error;
use crate::gateway::{Gateway, INBOX_CONSUMER};
use crate::model::counts::Scope;
use crate::model::health::Thresholds as HealthThresholds;
use crate::store::GatewayDb;

impl<DB: GatewayDb> Gateway<DB> {
    /// Every consumer in the registry first seen at or after `options.since` (when given),
    /// sorted by name, each judged by `options.thresholds` with windows ending at
    /// `options.now`. The gateway's sources and destinations, and each Kafka source's consumer
    /// (counted as its source), carry the gateway's counts: claimed = accepted (a source) or
    /// delivered (a destination), duplicates, stale, gaps, dead letters = dead deliveries;
    /// last seen is the newest counted minute when newer than the registry's; a destination's
    /// `delivery_lag_ms` is the age of its oldest due delivery.
    ///
    /// # Errors
    /// [`Error::Store`] when the database cannot be read (or holds a consumer kind this idem
    /// does not know).
    pub async fn consumers(&self, options: &ListOptions) -> Result<Vec<ConsumerEntry>, Error> {
        // First seen may move earlier once the gateway's counts are read: filter after.
        let mut all = *options;
        all.since = None;
        let reports = self.store().consumers().list(&all).await?;
        let reports = self.without_internal(reports);
        let mut entries = self.filled(reports, options, Depth::Full).await?;
        if let Some(since) = options.since {
            entries.retain(|e| e.report.first_seen >= since);
        }
        Ok(entries)
    }

    /// The consumer called `name`, as [`consumers`](Self::consumers) reports it
    /// (`options.since` does not apply).
    ///
    /// # Errors
    /// [`Error::Store`] with [`idem_sql::Error::UnknownConsumer`] (which lists the known names)
    /// when the registry has no such consumer; as [`consumers`](Self::consumers).
    pub async fn consumer(
        &self,
        name: &str,
        options: &ListOptions,
    ) -> Result<ConsumerEntry, Error> {
        let report = self.store().consumers().show(name, options).await?;
        let mut entries = self.filled(vec![report], options, Depth::Full).await?;
        Ok(entries.remove(0))
    }

    /// Every consumer with what the gauges need: last seen (the gateway's counts of the last
    /// hour read, not all of them) and lag. Windows and flags are the registry's as they are:
    /// the monitor reads this every `health_interval`, so it reads no more than that.
    ///
    /// # Errors
    /// As [`consumers`](Self::consumers).
    pub(crate) async fn consumers_seen(
        &self,
        options: &ListOptions,
    ) -> Result<Vec<ConsumerEntry>, Error> {
        let reports = self.store().consumers().list(options).await?;
        let reports = self.without_internal(reports);
        self.filled(reports, options, Depth::Recent).await
    }

    /// `reports` without the gateway's internal consumers: its inbox ([`INBOX_CONSUMER`]) and
    /// the version guards of its configured and retired routes, which a database of an older
    /// idem back-filled as `runner` rows from their inbox and guard rows. They are parts of
    /// the sources and routes, reported through the sources; listed alone they would never be
    /// seen again and read as orphans. `show` still answers for them.
    fn without_internal(
        &self,
        mut reports: Vec<idem_sql::ConsumerReport>,
    ) -> Vec<idem_sql::ConsumerReport> {
        let config = self.config();
        reports.retain(|r| {
            let name = r.name.as_str();
            let internal = name == INBOX_CONSUMER
                || config
                    .routes
                    .iter()
                    .any(|route| route.name.as_str() == name)
                || config.retired_routes.iter().any(|n| n.as_str() == name);
            !(r.kind == ConsumerKind::Runner && internal)
        });
        reports
    }

    /// `reports` as entries, the gateway's own filled from its figures (to `depth`) and, in
    /// full, judged again.
    async fn filled(
        &self,
        reports: Vec<idem_sql::ConsumerReport>,
        options: &ListOptions,
        depth: Depth,
    ) -> Result<Vec<ConsumerEntry>, Error> {
        let config = self.config();
        let now = options.now.as_millis();
        let (windows, counted_since): (BTreeSet<u64>, i64) = match depth {
            Depth::Full => (
                (reports.iter())
                    .flat_map(|r| r.windows.iter().map(|w| w.window_secs))
                    .collect(),
                i64::MIN,
            ),
            Depth::Recent => (BTreeSet::new(), now.saturating_sub(RECENT_MS)),
        };
        let mut conn = self.store().pool().acquire().await?;
        let figures = GatewayFigures::read::<DB>(&mut conn, windows, counted_since, now).await?;
        drop(conn);
        let mut entries = Vec::with_capacity(reports.len());
        for report in reports {
            let mut entry = ConsumerEntry::from(report);
            if let Some(counted_as) = counted_as(&config, &entry) {
                figures.fill(&mut entry, &counted_as, now);
                if depth == Depth::Full {
                    let backlog_after = backlog_after(&config, &counted_as);
                    judge::rejudge(&mut entry, &options.thresholds, backlog_after, now);
                }
            }
            entries.push(entry);
        }
        Ok(entries)
    }
}

/// How much of the gateway's counts a reading takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// Every window and every counted minute: listings, judged again.
    Full,
    /// The counted minutes of the last [`RECENT_MS`] only, for last seen: the gauges.
    Recent,
}

/// How far back the gauges' reading looks for counted minutes: an hour, in ms. A consumer not
/// counted within it keeps the registry's last seen, which is then the older one anyway.
const RECENT_MS: i64 = 3_600_000;

/// The source or destination whose counts are `entry`'s: its own for a gateway source or
/// destination, its source's for the consumer of a configured Kafka source; `None` for a
/// consumer that is not the gateway's.
fn counted_as(config: &Config, entry: &ConsumerEntry) -> Option<(Scope, String)> {
    let name = &entry.report.name;
    match entry.report.kind {
        ConsumerKind::GatewaySource => Some((Scope::Source, name.clone())),
        ConsumerKind::GatewayDestination => Some((Scope::Destination, name.clone())),
        ConsumerKind::Kafka => config
            .sources
            .iter()
            .find_map(|source| match source.broker() {
                Some(Broker::Kafka(kafka)) if kafka.consumer.as_str() == name => {
                    Some((Scope::Source, source.name.to_string()))
                }
                _ => None,
            }),
        _ => None,
    }
}

/// The age of a due delivery past which destination `counted_as` is unhealthy: its health's
/// `backlog_after` (the default for a destination the configuration does not name).
fn backlog_after(config: &Config, counted_as: &(Scope, String)) -> std::time::Duration {
    config
        .destinations
        .iter()
        .find(|d| counted_as.0 == Scope::Destination && d.name.as_str() == counted_as.1)
        .map_or(HealthThresholds::default().backlog_after, |d| {
            d.health.backlog_after
        })
}
