//! Per-minute counts per source and per destination (table `idem_gateway_counts`, migration
//! 0009): accepted events, duplicates, stale events, version ties and gaps, written in the
//! ingest commit; delivered, retried and dead deliveries, written in the outcome commit. Being
//! in the same transactions as what they count, they survive restarts and agree across gateway
//! processes on one database. The console's overview reads them back ([`CountSeries`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};

use serde::Serialize;

use super::text_enum::text_enum;

/// One minute, in ms.
pub const MINUTE_MS: i64 = 60_000;

/// How long count rows are kept: `idem gc` deletes older ones. The overview shows the last
/// day; a week leaves room to look back.
pub const COUNTS_KEPT: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// How many `slot` rows a count is spread over (see the migration): at least the number of
/// commits PostgreSQL keeps in flight, so that concurrent commits rarely write one row.
const SLOTS: i64 = 8;

/// The slot of the next commit, round robin.
static NEXT_SLOT: AtomicI64 = AtomicI64::new(0);

/// What a count counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// New events stored (answered `accepted`).
    Accepted,
    /// Deliveries of events stored before (answered `duplicate`, C3).
    Duplicate,
    /// Deliveries judged older than their entity's newest at ingest: never sent (C5).
    Stale,
    /// Deliveries with the same version as their entity's newest: sent with
    /// `Idem-Version-Tie: true`.
    Tie,
    /// Deliveries whose dense version sequence skipped numbers (applied and reported).
    Gap,
    /// Attempts answered 2xx.
    Delivered,
    /// Attempts that failed and are tried again on the schedule.
    Retried,
    /// Attempts after which the delivery is a dead letter.
    Dead,
}

text_enum!(Metric, "metric", [8], {
    Accepted => "accepted",
    Duplicate => "duplicate",
    Stale => "stale",
    Tie => "tie",
    Gap => "gap",
    Delivered => "delivered",
    Retried => "retried",
    Dead => "dead",
});

/// Whether a count is of a source or of a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Counted for the source the event came from.
    Source,
    /// Counted for the destination the delivery goes to.
    Destination,
}

text_enum!(Scope, "scope", {
    Source => "source",
    Destination => "destination",
});

/// `(minute, scope, name, metric)`: what one count row is of.
pub(crate) type CountKey = (i64, Scope, String, Metric);

/// The counts one commit adds, keyed in the order their rows are written (so two commits
/// touching the same rows lock them in one order and cannot deadlock), with the commit's slot.
#[derive(Debug, Default)]
pub struct Counts {
    pub(crate) slot: i64,
    pub(crate) added: BTreeMap<CountKey, i64>,
}

impl Counts {
    /// Empty counts, on the next slot (round robin).
    pub(crate) fn new() -> Self {
        Self {
            slot: NEXT_SLOT.fetch_add(1, Ordering::Relaxed).rem_euclid(SLOTS),
            added: BTreeMap::new(),
        }
    }

    /// Counts one `metric` of `name` in the minute of `at` (ms).
    pub(crate) fn add(&mut self, at: i64, scope: Scope, name: &str, metric: Metric) {
        let minute = at - at.rem_euclid(MINUTE_MS);
        *self
            .added
            .entry((minute, scope, name.to_owned(), metric))
            .or_default() += 1;
    }
}

/// Counts read back: per (scope, name, metric), the count of each minute that has one (minute
/// start in ms), summed over slots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CountSeries {
    /// `(scope, name, metric)` to `minute → count`.
    pub series: BTreeMap<(Scope, String, Metric), BTreeMap<i64, u64>>,
}

impl CountSeries {
    /// The counts of `(scope, name, metric)` in `buckets` buckets of `width` ms, the last one
    /// ending at `end` (exclusive), oldest first.
    pub fn buckets(
        &self,
        scope: Scope,
        name: &str,
        metric: Metric,
        end: i64,
        width: i64,
        buckets: usize,
    ) -> Vec<u64> {
        let mut out = vec![0; buckets];
        let Some(minutes) = self.series.get(&(scope, name.to_owned(), metric)) else {
            return out;
        };
        let start = end - width * buckets as i64;
        for (minute, count) in minutes.range(start..end) {
            let index = usize::try_from((minute - start) / width).unwrap_or(0);
            if let Some(bucket) = out.get_mut(index) {
                *bucket += count;
            }
        }
        out
    }

    /// The sum of `(scope, name, metric)` over the minutes in `[since, until)`.
    pub fn total(&self, scope: Scope, name: &str, metric: Metric, since: i64, until: i64) -> u64 {
        self.series
            .get(&(scope, name.to_owned(), metric))
            .map_or(0, |m| m.range(since..until).map(|(_, c)| c).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_and_the_table_accepts_exactly_these() {
        for metric in Metric::ALL {
            assert_eq!(Metric::parse(metric.as_str()), Some(metric));
        }
        for scope in [Scope::Source, Scope::Destination] {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        let words: Vec<String> = Metric::ALL
            .iter()
            .map(|m| format!("'{}'", m.as_str()))
            .collect();
        let check = format!("CHECK (metric IN ({}))", words.join(", "));
        for sql in [
            include_str!("../../migrations/sqlite/0009_console_counts_and_sessions.sql"),
            include_str!("../../migrations/postgres/0009_console_counts_and_sessions.sql"),
            include_str!("../../migrations/mysql/0001_gateway.sql"),
        ] {
            assert!(sql.contains(&check), "{check}");
        }
    }

    #[test]
    fn a_count_falls_in_the_minute_it_happened_in() {
        let mut counts = Counts::new();
        counts.add(119_999, Scope::Source, "s", Metric::Accepted);
        counts.add(120_000, Scope::Source, "s", Metric::Accepted);
        counts.add(120_001, Scope::Source, "s", Metric::Accepted);
        let minutes: Vec<(i64, i64)> = counts
            .added
            .iter()
            .map(|((minute, ..), n)| (*minute, *n))
            .collect();
        assert_eq!(minutes, [(60_000, 1), (120_000, 2)]);
    }

    #[test]
    fn buckets_sum_the_minutes_within_each() {
        let mut series = CountSeries::default();
        let key = (Scope::Destination, "app".to_owned(), Metric::Delivered);
        let minutes = series.series.entry(key).or_default();
        // Minutes 0, 1, 2 (bucket 0 of width 3), 3 (bucket 1), 6 (past the end).
        for (minute, count) in [(0, 1), (1, 2), (2, 3), (3, 4), (6, 5)] {
            minutes.insert(minute * MINUTE_MS, count);
        }
        let got = series.buckets(
            Scope::Destination,
            "app",
            Metric::Delivered,
            6 * MINUTE_MS,
            3 * MINUTE_MS,
            2,
        );
        assert_eq!(got, [6, 4]);
        assert_eq!(
            series.total(
                Scope::Destination,
                "app",
                Metric::Delivered,
                0,
                6 * MINUTE_MS
            ),
            10
        );
        assert_eq!(
            series.buckets(Scope::Source, "app", Metric::Delivered, 0, MINUTE_MS, 3),
            [0, 0, 0]
        );
    }
}
