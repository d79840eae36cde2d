//! The monitor (issue 31): every `health_interval`, each gateway process judges each
//! destination's health (`model::health`, from the database, so every process judges alike),
//! runs its circuit breaker ([`breaker`]), writes the refused requests it counted, evaluates
//! the alerts ([`alerts`]) and sends the notifications due ([`notify`]); then it sets the
//! consumer gauges from a read of the consumer inventory ([`consumer_gauges`]).
//!
//! What must happen once for the whole database is decided by the database: the breaker's
//! pause, its probe, an alert's firing and clearing, and a notification's send are each a
//! conditional write that one process wins (`store::monitor`). So two gateways on one
//! PostgreSQL pause once, probe once and alert once, and a restart repeats nothing.

mod alerts;
mod breaker;
mod consumer_gauges;
mod notify;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::metric_definitions::{DESTINATION_HEALTH, READY};
use crate::model::health::Assessment;
use crate::store::{GatewayDb, PauseRow, destination_health};

/// How long a tick may take before it is given up (the next one starts over).
const TICK_DEADLINE: Duration = Duration::from_secs(30);

/// One destination as this tick found it.
pub(crate) struct Judged {
    /// The destination's lane, which carries its settings.
    pub(crate) lane: Arc<Lane>,
    pub(crate) assessment: Assessment,
    pub(crate) last_errors: Vec<String>,
    pub(crate) pause: Option<PauseRow>,
}

/// Runs the monitor until `shutdown` turns true. `client` sends the alert notifications.
pub(crate) async fn run<DB: GatewayDb>(
    gateway: Gateway<DB>,
    client: reqwest::Client,
    mut shutdown: watch::Receiver<bool>,
) {
    // This process's name in the probe claims: unique, so two processes never share a claim.
    let owner = format!("{:016x}", rand::random::<u64>());
    let interval = gateway.config().health_interval;
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => {}
        }
        if *shutdown.borrow() {
            break;
        }
        let ticked = tokio::time::timeout(TICK_DEADLINE, tick(&gateway, &owner, &client)).await;
        let ready = match ticked {
            Ok(Ok(())) => gateway.failure().is_none(),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the health monitor could not read or write the database; trying at the next interval");
                false
            }
            Err(_) => {
                tracing::warn!(
                    "the health monitor took over {TICK_DEADLINE:?}; trying at the next interval"
                );
                false
            }
        };
        metrics::gauge!(READY).set(if ready { 1.0 } else { 0.0 });
        // Read only, and apart from the tick: a registry that cannot be read now does not make
        // the gateway unready.
        if let Err(e) = consumer_gauges::set(&gateway).await {
            tracing::warn!(error = %e, "the consumer gauges could not be read; trying at the next interval");
        }
    }
}

/// One round: refusals, health, breakers, alerts, notifications.
async fn tick<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    owner: &str,
    client: &reqwest::Client,
) -> Result<(), idem_sql::Error> {
    write_rejections(gateway).await?;
    let mut judged = Vec::new();
    // One configuration for the round: a reload swaps it between rounds.
    let wiring = gateway.wiring();
    for lane in wiring.lanes_arc() {
        let destination = lane.destination();
        let now = gateway.now().as_millis();
        let mut conn = gateway.store().pool().acquire().await?;
        let (assessment, last_errors) = destination_health::<DB>(
            &mut conn,
            destination.name.as_str(),
            &destination.health,
            now,
        )
        .await?;
        let pause = DB::pause_row(&mut conn, destination.name.as_str()).await?;
        drop(conn);
        metrics::gauge!(DESTINATION_HEALTH, "destination" => destination.name.to_string())
            .set(assessment.health.gauge());
        let mut one = Judged {
            lane: Arc::clone(lane),
            assessment,
            last_errors,
            pause,
        };
        breaker::step(gateway, owner, &mut one).await?;
        judged.push(one);
    }
    alerts::evaluate(gateway, &judged).await?;
    notify::send_due(gateway, client).await
}

/// Adds the refusals this process counted since the last tick to `idem_gateway_rejections`,
/// under the current second; put back when the write fails.
async fn write_rejections<DB: GatewayDb>(gateway: &Gateway<DB>) -> Result<(), idem_sql::Error> {
    let counted = gateway.rejections().take();
    if counted.is_empty() {
        return Ok(());
    }
    let now = gateway.now().as_millis();
    let second = now - now.rem_euclid(1_000);
    let rows: Vec<(i64, String, &'static str, i64)> = counted
        .iter()
        .map(|(source, reason, n)| (second, source.clone(), *reason, *n))
        .collect();
    let written = async {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::add_rejections(&mut conn, &rows).await?;
        Ok::<_, idem_sql::Error>(())
    }
    .await;
    if written.is_err() {
        gateway.rejections().restore(counted);
    }
    written
}
