//! The gateway's own figures of its consumers, read from its tables and written into the
//! registry's reports: the per-minute counts (`idem_gateway_counts`) as the windows, the last
//! counted minute as last seen, and a destination's oldest due delivery as its lag.

use std::collections::HashMap;

use idem_core::Timestamp;
use idem_sql::{ConsumerKind, WindowCounts};

use super::entry::ConsumerEntry;
use crate::model::counts::{MINUTE_MS, Metric, Scope};
use crate::store::GatewayDb;

/// Counts of one source or destination over one window, by metric.
type Totals = HashMap<Metric, u64>;

/// What the gateway's tables say about its sources and destinations at one `now`.
#[derive(Debug, Default)]
pub(crate) struct GatewayFigures {
    /// Per window of the reports (by its length in seconds), per (scope, name).
    windows: HashMap<u64, HashMap<(Scope, String), Totals>>,
    /// Per (scope, name), the first and last minute with a count (ms).
    counted: HashMap<(Scope, String), (i64, i64)>,
    /// Per destination, since when its delivery due the longest is due (ms).
    oldest_due: HashMap<String, i64>,
}

impl GatewayFigures {
    /// Reads the counts of each window in `window_secs` ending at `now` (ms), the first and
    /// last counted minutes from `counted_since` (ms) on, and the destinations' oldest due
    /// deliveries: read only, a few grouped queries (each a range of the counts' primary key,
    /// which starts with the minute).
    ///
    /// # Errors
    /// The database's.
    pub(crate) async fn read<DB: GatewayDb>(
        conn: &mut DB::Connection,
        window_secs: impl IntoIterator<Item = u64>,
        counted_since: i64,
        now: i64,
    ) -> Result<Self, sqlx::Error> {
        let mut figures = Self::default();
        for secs in window_secs {
            let ms = i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000);
            let from = now.saturating_sub(ms);
            let totals = figures.windows.entry(secs).or_default();
            for (scope, name, metric, count) in DB::window_totals(conn, from, now).await? {
                // Words the migration's CHECK constraints allow; nothing else is stored.
                let (Some(scope), Some(metric)) = (Scope::parse(&scope), Metric::parse(&metric))
                else {
                    continue;
                };
                let count = u64::try_from(count).unwrap_or(0);
                *totals
                    .entry((scope, name))
                    .or_default()
                    .entry(metric)
                    .or_default() += count;
            }
        }
        for (scope, name, first, last) in DB::counted_minutes(conn, counted_since).await? {
            if let Some(scope) = Scope::parse(&scope) {
                figures.counted.insert((scope, name), (first, last));
            }
        }
        for row in DB::destination_figures(conn, now).await? {
            if let Some(due) = row.oldest_due {
                figures.oldest_due.insert(row.destination, due);
            }
        }
        Ok(figures)
    }

    /// Writes the figures of `counted_as` (the source or destination whose counts are
    /// `entry`'s) into `entry` at `now` (ms): each window's counts, last seen when a counted
    /// minute (its start) is newer than the registry's, first seen (not exact: "at or before")
    /// when a minute that ended before the registry's row has counts (a database the gateway
    /// used before the registry existed, its counts thinned by `idem gc`), and a destination's
    /// lag.
    pub(crate) fn fill(&self, entry: &mut ConsumerEntry, counted_as: &(Scope, String), now: i64) {
        let report = &mut entry.report;
        for window in &mut report.windows {
            let totals = self
                .windows
                .get(&window.window_secs)
                .and_then(|w| w.get(counted_as));
            fill_window(window, counted_as.0, totals);
        }
        if let Some(&(first, last)) = self.counted.get(counted_as) {
            if last > report.last_seen.as_millis() {
                report.last_seen = Timestamp(last);
            }
            // A count is kept by the start of its minute: only a minute that ended before the
            // registry's row was written shows counts older than the row.
            if first + MINUTE_MS <= report.first_seen.as_millis() {
                report.first_seen = Timestamp(first);
                report.first_seen_exact = false;
            }
        }
        if report.kind == ConsumerKind::GatewayDestination {
            let due = self.oldest_due.get(&counted_as.1);
            entry.delivery_lag_ms = Some(due.map_or(0, |at| age(now, *at)));
        }
    }
}

/// One window's counts of a source (claimed = accepted, which includes the stale events: the
/// gateway stores and claims them too) or a destination (claimed = delivered; a destination
/// sees no duplicates, the source answered them).
fn fill_window(window: &mut WindowCounts, scope: Scope, totals: Option<&Totals>) {
    let get = |metric| totals.and_then(|t| t.get(&metric)).copied().unwrap_or(0);
    window.claimed = match scope {
        Scope::Source => get(Metric::Accepted),
        Scope::Destination => get(Metric::Delivered),
    };
    window.duplicates = get(Metric::Duplicate);
    window.stale = get(Metric::Stale);
    window.gaps = get(Metric::Gap);
    window.dead_letters = get(Metric::Dead);
    // Stale events are among the claimed ones here: the deliveries are claimed + duplicates.
    let deliveries = window.claimed + window.duplicates;
    window.repeat_rate = if deliveries == 0 {
        0.0
    } else {
        window.duplicates as f64 / deliveries as f64
    };
}

/// Milliseconds from `at` to `now`, 0 when `at` is later.
fn age(now: i64, at: i64) -> u64 {
    u64::try_from(now.saturating_sub(at)).unwrap_or(0)
}
