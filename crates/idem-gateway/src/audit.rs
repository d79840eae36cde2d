//! Every operator action (redrive, replay, backfill, rebuild, resend, gc, pause, resume,
//! reset-consumer), whoever asked — the admin API, the console or the `idem` command — is logged
//! at INFO with what it did and counted in `idem_admin_actions_total{action}`.

use serde::Serialize;

use crate::metric_definitions::ADMIN_ACTIONS_TOTAL;

/// Logs and counts `action` with its `report` (as JSON); a dry run is logged as such and not
/// counted.
pub(crate) fn done(action: &'static str, dry_run: bool, report: &impl Serialize) {
    let what = serde_json::to_string(report).unwrap_or_default();
    if dry_run {
        tracing::info!(action, dry_run, report = %what, "operator action (dry run, not counted)");
        return;
    }
    metrics::counter!(ADMIN_ACTIONS_TOTAL, "action" => action).increment(1);
    tracing::info!(action, report = %what, "operator action done");
}
