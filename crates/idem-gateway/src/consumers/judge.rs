//! Judging a gateway consumer's report again once its figures are the gateway's: the same
//! rules and thresholds as idem-sql's (`docs/consumers.md`), with a destination's lag judged
//! against its health's `backlog_after`.

use std::time::Duration;

use idem_sql::{ConsumerFlag, Thresholds};

use super::entry::ConsumerEntry;

/// One day in ms.
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Replaces `entry`'s orphaned and unhealthy flags by those its figures give at `now` (ms)
/// under `thresholds`; `backlog_after` is the age of a due delivery a destination is unhealthy
/// past. A superseded flag, judged from the lineage, stays as the registry gave it.
pub(crate) fn rejudge(
    entry: &mut ConsumerEntry,
    thresholds: &Thresholds,
    backlog_after: Duration,
    now: i64,
) {
    let report = &mut entry.report;
    report
        .flags
        .retain(|f| matches!(f, ConsumerFlag::Superseded { .. }));
    let unseen = now.saturating_sub(report.last_seen.as_millis());
    let orphan_after = i64::try_from(thresholds.orphan_after.as_millis()).unwrap_or(i64::MAX);
    if report.successor.is_none() && unseen >= orphan_after && report.holds.any() {
        report.flags.push(ConsumerFlag::Orphaned {
            days_unseen: u64::try_from(unseen / DAY_MS).unwrap_or(0),
        });
    }
    let reasons = unhealthy(entry, thresholds, backlog_after);
    if !reasons.is_empty() {
        entry.report.flags.push(ConsumerFlag::Unhealthy { reasons });
    }
}

/// What is above its threshold: the repeat rate over the last hour, dead letters over 24
/// hours, the lag (messages) or a destination's oldest due delivery.
fn unhealthy(entry: &ConsumerEntry, t: &Thresholds, backlog_after: Duration) -> Vec<String> {
    let report = &entry.report;
    let mut reasons = Vec::new();
    if let Some(hour) = report.windows.first() {
        let deliveries = hour.claimed + hour.duplicates;
        if deliveries >= t.min_deliveries && hour.repeat_rate > t.max_repeat_rate {
            reasons.push(format!(
                "repeat rate {:.2} over the last hour ({} duplicates of {deliveries} deliveries) > {}",
                hour.repeat_rate, hour.duplicates, t.max_repeat_rate
            ));
        }
    }
    if let Some(day) = report.windows.get(1)
        && day.dead_letters > t.max_dead_letters
    {
        reasons.push(format!(
            "{} dead letters in the last 24 hours > {}",
            day.dead_letters, t.max_dead_letters
        ));
    }
    if let Some(lag) = report.lag
        && lag.value > t.max_lag
    {
        reasons.push(format!("lag {} > {}", lag.value, t.max_lag));
    }
    let backlog_ms = u64::try_from(backlog_after.as_millis()).unwrap_or(u64::MAX);
    if let Some(due) = entry.delivery_lag_ms
        && due > backlog_ms
    {
        // Whole seconds once past a second: a backlog of minutes reads as `3m 12s`.
        let due = Duration::from_millis(if due >= 1000 { due / 1000 * 1000 } else { due });
        reasons.push(format!(
            "oldest due delivery due for {} > backlog_after {}",
            humantime::format_duration(due),
            humantime::format_duration(backlog_after)
        ));
    }
    reasons
}
