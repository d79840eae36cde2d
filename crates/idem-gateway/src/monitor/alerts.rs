//! The alert conditions, evaluated every tick by every process; each is a level (true or not
//! now), and its rising and falling edges are decided once for the database: the `INSERT` of
//! its `idem_gateway_alerts` row fires it, the `DELETE` clears it, each in the transaction that
//! logs it and queues its notifications. A condition that stays true fires once, however many
//! processes or restarts see it.
//!
//! | condition | subject | true while |
//! |---|---|---|
//! | `destination_failing` | destination | its health is `failing` |
//! | `destination_auto_paused` | destination | the circuit breaker holds it paused |
//! | `dead_letters` | destination | its dead letters in `alert_dead_letters_window` are over `alert_dead_letters_over` |
//! | `backlog_age` | destination | a delivery has been due longer than `alert_backlog_after` |
//! | `rejected_requests` | source | its requests refused for a bad signature in `alert_rejected_window` are over `alert_rejected_over` |

use std::collections::BTreeMap;
use std::time::Duration;

use super::Judged;
use crate::gateway::Gateway;
use crate::metric_definitions::ALERTS_FIRING;
use crate::model::health::Health;
use crate::store::{AlertChange, GatewayDb};

/// Every condition's name.
pub(crate) const CONDITIONS: [&str; 5] = [
    "destination_failing",
    "destination_auto_paused",
    "dead_letters",
    "backlog_age",
    "rejected_requests",
];

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The conditions true now: (condition, subject) to its detail.
async fn active<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    judged: &[Judged],
) -> Result<BTreeMap<(String, String), String>, idem_sql::Error> {
    let config = gateway.config();
    let limits = &config.alert_conditions;
    let now = gateway.now().as_millis();
    let since = |window: Duration| now.saturating_sub(ms(window));
    let mut conn = gateway.store().pool().acquire().await?;
    let dead: BTreeMap<String, i64> = DB::dead_since(&mut conn, since(limits.dead_letters_window))
        .await?
        .into_iter()
        .collect();
    let mut rejected: BTreeMap<String, i64> = BTreeMap::new();
    for (_, source, reason, count) in
        DB::rejections_since(&mut conn, since(limits.rejected_window)).await?
    {
        if reason == "bad_signature" {
            *rejected.entry(source).or_default() += count;
        }
    }
    let mut on = BTreeMap::new();
    let mut set = |condition: &str, subject: &str, detail: String| {
        on.insert((condition.to_owned(), subject.to_owned()), detail);
    };
    for one in judged {
        let name = one.lane.destination().name.as_str();
        let a = &one.assessment;
        if a.health == Health::Failing {
            set(
                "destination_failing",
                name,
                a.reason.clone().unwrap_or_default(),
            );
        }
        if let Some(pause) = one.pause.as_ref().filter(|p| p.auto) {
            let errors = pause.last_errors.as_deref().unwrap_or("[]");
            let reason = pause.reason.as_deref().unwrap_or_default();
            set(
                "destination_auto_paused",
                name,
                format!("paused by the circuit breaker: {reason}; last errors {errors}"),
            );
        }
        let dead = dead.get(name).copied().unwrap_or(0);
        if u64::try_from(dead).unwrap_or(0) > limits.dead_letters_over {
            set(
                "dead_letters",
                name,
                format!(
                    "{dead} dead letters in the last {}",
                    humantime::format_duration(limits.dead_letters_window)
                ),
            );
        }
        if let Some(age) = a
            .oldest_due_ms
            .filter(|age| *age > ms(limits.backlog_after))
        {
            set(
                "backlog_age",
                name,
                format!("a delivery has been due for {} s", age / 1000),
            );
        }
    }
    for (source, count) in rejected {
        if u64::try_from(count).unwrap_or(0) > limits.rejected_over {
            set(
                "rejected_requests",
                &source,
                format!(
                    "{count} requests with a bad signature in the last {}",
                    humantime::format_duration(limits.rejected_window)
                ),
            );
        }
    }
    Ok(on)
}

/// Fires the conditions that became true and clears those that stopped being, once for the
/// database.
pub(super) async fn evaluate<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    judged: &[Judged],
) -> Result<(), idem_sql::Error> {
    let on = active(gateway, judged).await?;
    let firing: BTreeMap<(String, String), String> = {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::firing(&mut conn)
            .await?
            .into_iter()
            .map(|(condition, subject, _, detail)| ((condition, subject), detail))
            .collect()
    };
    let config = gateway.config();
    let sinks: Vec<&str> = config.alerts.iter().map(|s| s.name.as_str()).collect();
    let now = gateway.now().as_millis();
    for ((condition, subject), detail) in &on {
        if firing.contains_key(&(condition.clone(), subject.clone())) {
            continue;
        }
        let change = AlertChange {
            condition,
            subject,
            at: now,
            detail,
            sinks: &sinks,
        };
        let mut tx = gateway.store().begin().await?;
        let fired = DB::fire(&mut tx, &change).await?;
        tx.commit().await?;
        if fired {
            tracing::warn!(condition, subject, detail, "alert fired");
        }
    }
    for ((condition, subject), detail) in &firing {
        if on.contains_key(&(condition.clone(), subject.clone())) {
            continue;
        }
        let detail = format!("cleared (was: {detail})");
        let change = AlertChange {
            condition,
            subject,
            at: now,
            detail: &detail,
            sinks: &sinks,
        };
        let mut tx = gateway.store().begin().await?;
        let cleared = DB::clear(&mut tx, &change).await?;
        tx.commit().await?;
        if cleared {
            tracing::info!(condition, subject, "alert cleared");
        }
    }
    for condition in CONDITIONS {
        let count = on.keys().filter(|(c, _)| c == condition).count();
        #[allow(clippy::cast_precision_loss)]
        metrics::gauge!(ALERTS_FIRING, "condition" => condition).set(count as f64);
    }
    Ok(())
}
