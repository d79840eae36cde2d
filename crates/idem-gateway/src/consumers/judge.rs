//! Judging a gateway consumer's report again once its figures are the gateway's: the same
//! rules and thresholds as idem-sql's (`docs/consumers.md`), with a destination's lag judged
//! against its health's `backlog_after`.

use std::time::Duration;

use idem_sql::{ConsumerFlag, Thresholds};

use super::entry::ConsumerEntry;

/// Replaces `entry`'s orphaned and unhealthy flags by those its figures give at `now` (ms)
/// under `thresholds`; `backlog_after` is the age of a due delivery a destination is unhealthy
/// past. A superseded flag, judged from the lineage, stays as the registry gave it.
pub(crate) fn rejudge(
    entry: &mut ConsumerEntry,
    thresholds: &Thresholds,
    backlog_after: Duration,
    now: i64,
) {
    let report = &entry.report;
    let mut flags: Vec<ConsumerFlag> = (report.flags.iter())
        .filter(|f| matches!(f, ConsumerFlag::Superseded { .. }))
        .cloned()
        .collect();
    flags.extend(report.orphaned(thresholds, now));
    // The gateway's claimed events include its stale ones.
    let deliveries = (report.windows.first()).map_or(0, |h| h.claimed + h.duplicates);
    let mut reasons = report.unhealthy_reasons(thresholds, deliveries);
    reasons.extend(backlog(entry.delivery_lag_ms, backlog_after));
    if !reasons.is_empty() {
        flags.push(ConsumerFlag::Unhealthy { reasons });
    }
    entry.report.flags = flags;
}

/// Why a destination whose oldest due delivery has been due `due` ms is unhealthy past
/// `backlog_after`; `None` when it is not (or is no destination).
fn backlog(due: Option<u64>, backlog_after: Duration) -> Option<String> {
    let backlog_ms = u64::try_from(backlog_after.as_millis()).unwrap_or(u64::MAX);
    let due = due.filter(|due| *due > backlog_ms)?;
    // Whole seconds once past a second: a backlog of minutes reads as `3m 12s`.
    let due = Duration::from_millis(if due >= 1000 { due / 1000 * 1000 } else { due });
    Some(format!(
        "oldest due delivery due for {} > backlog_after {}",
        humantime::format_duration(due),
        humantime::format_duration(backlog_after)
    ))
}
