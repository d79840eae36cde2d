//! The circuit breaker: a `failing` destination is paused with the operator's pause (a row of
//! `idem_gateway_paused_destinations`, so every process of the database stops claiming), marked
//! `auto` with the reason and the last errors. After the cool-down one process claims the probe
//! in the pause row and its dispatcher sends the next due delivery; a delivered probe deletes
//! the row (only while it is still `auto`: an operator's pause, even one made over an automatic
//! one, is never lifted here), a failed one doubles the cool-down up to the cap. Deliveries wait
//! as under any pause: nothing is dropped.

use std::sync::Arc;
use std::time::Duration;

use super::Judged;
use crate::gateway::Gateway;
use crate::lanes::LEASE_MARGIN;
use crate::lanes::probe::ProbeResult;
use crate::metric_definitions::CIRCUIT_BREAKER_OPEN;
use crate::model::health::Health;
use crate::store::GatewayDb;

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Runs destination `judged`'s breaker once, after its health was judged; updates
/// `judged.pause` to what it leaves.
pub(super) async fn step<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    owner: &str,
    judged: &mut Judged,
) -> Result<(), idem_sql::Error> {
    let lane = Arc::clone(&judged.lane);
    let destination = lane.destination();
    let name = destination.name.as_str();
    let mut conn = gateway.store().pool().acquire().await?;
    if let Some(result) = lane.probe().take_result() {
        let cooldown = judged
            .pause
            .as_ref()
            .and_then(|p| p.cooldown_ms)
            .unwrap_or_else(|| ms(destination.breaker.cooldown));
        match result {
            ProbeResult::Delivered => {
                if DB::auto_resume(&mut conn, name, owner).await? {
                    DB::note_resume(&mut conn, name, gateway.now().as_millis()).await?;
                    tracing::info!(
                        destination = name,
                        "circuit breaker: the probe was delivered; destination resumed"
                    );
                    lane.handoff().throttle().set_paused(false);
                    lane.wake();
                }
            }
            ProbeResult::Failed(status, excerpt) => {
                let next = cooldown
                    .saturating_mul(2)
                    .min(ms(destination.breaker.cooldown_cap));
                let now = gateway.now().as_millis();
                let mut errors = vec![match status {
                    Some(status) => format!("{status}: {excerpt}"),
                    None => excerpt,
                }];
                errors.extend(judged.last_errors.iter().skip(1).take(4).cloned());
                let errors = serde_json::to_string(&errors).unwrap_or_default();
                DB::probe_failed(&mut conn, name, owner, (now + next, next, &errors)).await?;
                tracing::warn!(
                    destination = name,
                    "circuit breaker: the probe failed; the next in {}",
                    humantime::format_duration(Duration::from_millis(
                        u64::try_from(next).unwrap_or(0)
                    ))
                );
            }
            ProbeResult::NothingDue => DB::release_probe(&mut conn, name, owner).await?,
        }
        judged.pause = DB::pause_row(&mut conn, name).await?;
    }
    let now = gateway.now().as_millis();
    match &judged.pause {
        None if destination.breaker.enabled && judged.assessment.health == Health::Failing => {
            let reason = judged.assessment.reason.clone().unwrap_or_default();
            let errors = serde_json::to_string(&judged.last_errors).unwrap_or_default();
            let cooldown = ms(destination.breaker.cooldown);
            let pause = (
                now,
                reason.as_str(),
                errors.as_str(),
                now + cooldown,
                cooldown,
            );
            if DB::auto_pause(&mut conn, name, pause).await? {
                lane.handoff().throttle().set_paused(true);
                tracing::warn!(
                    destination = name, %reason, last_errors = %errors,
                    "circuit breaker: destination failing, paused; deliveries wait, a probe follows after {}",
                    humantime::format_duration(destination.breaker.cooldown)
                );
            }
            judged.pause = DB::pause_row(&mut conn, name).await?;
        }
        Some(pause) if pause.auto => {
            if !lane.handoff().throttle().paused() {
                lane.handoff().throttle().set_paused(true);
            }
            let due = pause.probe_at.is_some_and(|at| at <= now);
            let free = pause.probe_until.is_none_or(|until| until < now);
            let until =
                now + ms(destination.timeout + LEASE_MARGIN + gateway.config().health_interval * 2);
            if due && free && DB::claim_probe(&mut conn, name, owner, now, until).await? {
                lane.probe().request();
                lane.wake();
            }
        }
        _ => {}
    }
    let open = judged.pause.as_ref().is_some_and(|p| p.auto);
    metrics::gauge!(CIRCUIT_BREAKER_OPEN, "destination" => name.to_owned()).set(if open {
        1.0
    } else {
        0.0
    });
    Ok(())
}
