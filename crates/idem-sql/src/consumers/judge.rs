//! Judging a report against the thresholds: the flags (docs/consumers.md, "Flags and their
//! thresholds"). The gateway judges its own consumers with the same rules, adding its
//! destinations' backlog.

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
    if let (Some(by), Some(seen)) = (&report.successor, successor_seen)
        && seen > report.last_seen.as_millis()
    {
        flags.push(ConsumerFlag::Superseded { by: by.clone() });
    }
    flags.extend(report.orphaned(thresholds, now));
    // A library consumer's stale events are not among its claimed ones.
    let deliveries = (report.windows.first()).map_or(0, |h| h.claimed + h.duplicates + h.stale);
    let reasons = report.unhealthy_reasons(thresholds, deliveries);
    if !reasons.is_empty() {
        flags.push(ConsumerFlag::Unhealthy { reasons });
    }
    flags
}

impl ConsumerReport {
    /// [`ConsumerFlag::Orphaned`] when this consumer, judged at `now` (ms since the Unix
    /// epoch), has no successor, was last seen `thresholds.orphan_after` or longer ago and
    /// still holds something ([`Holds::any`](crate::Holds::any)); `None` otherwise.
    pub fn orphaned(&self, thresholds: &Thresholds, now: i64) -> Option<ConsumerFlag> {
        let unseen = now.saturating_sub(self.last_seen.as_millis());
        let orphan_after = i64::try_from(thresholds.orphan_after.as_millis()).unwrap_or(i64::MAX);
        (self.successor.is_none() && unseen >= orphan_after && self.holds.any()).then(|| {
            ConsumerFlag::Orphaned {
                days_unseen: u64::try_from(unseen / DAY_MS).unwrap_or(0),
            }
        })
    }

    /// Why this consumer is unhealthy under `thresholds`, one sentence per figure above its
    /// threshold (empty: healthy): the first window's (the last hour's) repeat rate when its
    /// `hour_deliveries` (the deliveries that rate is of) reach `min_deliveries`, the second
    /// window's (24 hours') dead letters, the reported lag. A consumer whose figures are
    /// counted elsewhere (the gateway's) passes its own `hour_deliveries`.
    pub fn unhealthy_reasons(&self, t: &Thresholds, hour_deliveries: u64) -> Vec<String> {
        let mut reasons = Vec::new();
        if let Some(hour) = self.windows.first()
            && hour_deliveries >= t.min_deliveries
            && hour.repeat_rate > t.max_repeat_rate
        {
            reasons.push(format!(
                "repeat rate {:.2} over the last hour ({} duplicates of {hour_deliveries} deliveries) > {}",
                hour.repeat_rate, hour.duplicates, t.max_repeat_rate
            ));
        }
        if let Some(day) = self.windows.get(1)
            && day.dead_letters > t.max_dead_letters
        {
            reasons.push(format!(
                "{} dead letters in the last 24 hours > {}",
                day.dead_letters, t.max_dead_letters
            ));
        }
        if let Some(lag) = self.lag
            && lag.value > t.max_lag
        {
            reasons.push(format!("lag {} > {}", lag.value, t.max_lag));
        }
        reasons
    }
}
