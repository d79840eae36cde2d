//! Judging a report against the thresholds: the flags.

use crate::{ConsumerFlag, ConsumerReport, Thresholds};

/// One day in ms.
const DAY_MS: i64 = 24 * 3600 * 1000;

/// The flags of `report` at `now` (ms); `successor_seen` is when its successor was last seen
/// (its registry row, else when it declared itself).
pub(crate) fn flags(
    report: &ConsumerReport,
    successor_seen: Option<i64>,
    thresholds: &Thresholds,
    now: i64,
) -> Vec<ConsumerFlag> {
    let mut flags = Vec::new();
    let last_seen = report.last_seen.as_millis();
    if let (Some(by), Some(seen)) = (&report.successor, successor_seen)
        && seen > last_seen
    {
        flags.push(ConsumerFlag::Superseded { by: by.clone() });
    }
    let unseen = now.saturating_sub(last_seen);
    let orphan_after = i64::try_from(thresholds.orphan_after.as_millis()).unwrap_or(i64::MAX);
    if report.successor.is_none() && unseen >= orphan_after && report.holds.any() {
        flags.push(ConsumerFlag::Orphaned {
            days_unseen: u64::try_from(unseen / DAY_MS).unwrap_or(0),
        });
    }
    let reasons = unhealthy(report, thresholds);
    if !reasons.is_empty() {
        flags.push(ConsumerFlag::Unhealthy { reasons });
    }
    flags
}

/// What is above its threshold: the repeat rate over the last hour, dead letters over 24
/// hours, the lag.
fn unhealthy(report: &ConsumerReport, t: &Thresholds) -> Vec<String> {
    let mut reasons = Vec::new();
    if let Some(hour) = report.windows.first() {
        let deliveries = hour.claimed + hour.duplicates + hour.stale;
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
    reasons
}
