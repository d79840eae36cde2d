//! Applying a reload: read, plan, check removed destinations, connect what is new, swap the
//! wiring, then stop and start the dispatchers of what changed (see the module docs of
//! `reload`).

use std::sync::Arc;

use super::plan::{Change, Plan, plan};
use crate::config::{Config, Destination};
use crate::error::Task;
use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::metric_definitions::CONFIG_RELOADS_TOTAL;
use crate::reload_request::{ReloadError, ReloadReport};
use crate::store::GatewayDb;
use crate::supervise::Supervisor;
use crate::wiring::Wiring;
use crate::{audit, dispatchers};

/// Reads the file again and applies it; logs and counts the outcome either way.
pub(super) async fn reload<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    supervisor: &Supervisor<DB>,
) -> Result<ReloadReport, ReloadError> {
    let result = try_reload(gateway, supervisor).await;
    match &result {
        Ok(report) => {
            metrics::counter!(CONFIG_RELOADS_TOTAL, "result" => "applied").increment(1);
            audit::done("reload", false, report);
        }
        Err(e) => {
            metrics::counter!(CONFIG_RELOADS_TOTAL, "result" => "refused").increment(1);
            tracing::error!(kind = e.kind(), error = %e, "configuration reload refused; the running configuration stays");
        }
    }
    result
}

async fn try_reload<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    supervisor: &Supervisor<DB>,
) -> Result<ReloadReport, ReloadError> {
    let path = gateway.config_file().ok_or(ReloadError::NoFile)?.to_owned();
    let read = tokio::task::spawn_blocking(move || Config::load(&path))
        .await
        .map_err(|_| ReloadError::NotServing)??;
    let old = gateway.wiring();
    let plan = plan(old.config(), read)?;
    let warnings = plan.config.warnings();
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    if let (true, Some(first)) = (gateway.strict_reload(), warnings.first()) {
        return Err(ReloadError::Warnings {
            count: warnings.len(),
            first: first.to_string(),
        });
    }
    // Swapped even when nothing it compares changed: secrets read from files, the admin token
    // and the alert settings are not compared (a secret prints as `Secret(…)`), and a reload
    // must apply them.
    let unchanged = plan.is_empty(old.config()) && !has_tls(&plan);
    refuse_open_deliveries(gateway, &plan).await?;
    let stray =
        (gateway.unconfigured_routes_in(&plan.config).await).map_err(ReloadError::from_gateway)?;
    if let Some(stray) = stray.into_iter().next() {
        return Err(ReloadError::UnconfiguredRoute {
            route: stray.route.clone(),
            detail: stray.to_string(),
        });
    }
    let fresh: Vec<usize> = (plan.destinations.iter().enumerate())
        .filter(|(_, c)| !matches!(c, Change::Kept { .. }))
        .map(|(i, _)| i)
        .collect();
    let connecting: Vec<&Destination> = (fresh.iter())
        .map(|&i| &plan.config.destinations[i])
        .collect();
    let transports = dispatchers::connect(&connecting)
        .await
        .map_err(|e| ReloadError::Destination(Box::new(e)))?;
    let report = ReloadReport {
        unchanged,
        ..report_of(&plan, old.generation() + 1)
    };
    let config = Arc::new(plan.config);
    let now = gateway.now();
    let lanes: Vec<Arc<Lane>> = (config.destinations.iter().zip(&plan.destinations))
        .map(|(destination, change)| match change {
            Change::Kept { old: i } => old.lane_arc(*i),
            Change::Changed { .. } | Change::Added => Arc::new(Lane::new(destination, now)),
        })
        .collect();
    let wiring = Wiring::with_lanes(Arc::clone(&config), lanes, old.generation() + 1);
    let new = Arc::new(wiring);
    gateway.rewire(Arc::clone(&new));
    // A reload that cannot write the registry still applies: the next one (or a restart)
    // registers what it added.
    if let Err(error) = gateway.register_consumers().await {
        tracing::warn!(%error, "the reloaded configuration's consumers could not be registered");
    }
    // The old dispatchers of changed and removed destinations finish what they hold first:
    // one dispatcher per destination and process at any time.
    for name in report
        .changed_destinations
        .iter()
        .chain(&report.removed_destinations)
    {
        supervisor
            .stop(&Task::Dispatcher {
                destination: name.clone(),
            })
            .await;
    }
    for (&index, transport) in fresh.iter().zip(transports) {
        dispatchers::start(supervisor, gateway, new.lane_arc(index), transport);
    }
    tracing::info!(
        generation = report.generation,
        routes = report.routes,
        added = ?report.added_destinations,
        changed = ?report.changed_destinations,
        removed = ?report.removed_destinations,
        routes_added = ?report.added_routes,
        routes_changed = ?report.changed_routes,
        routes_removed = ?report.removed_routes,
        sources_added = ?report.added_sources,
        "configuration reloaded"
    );
    Ok(report)
}

fn has_tls(plan: &Plan) -> bool {
    plan.config.destinations.iter().any(|d| d.tls.is_some())
}

/// Refuses the removal of a destination that still has pending or in-flight deliveries: they
/// would never be sent.
async fn refuse_open_deliveries<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    plan: &Plan,
) -> Result<(), ReloadError> {
    if plan.removed.is_empty() {
        return Ok(());
    }
    let stats = gateway
        .open_stats()
        .await
        .map_err(ReloadError::from_gateway)?;
    for name in &plan.removed {
        let open = (stats.destinations.get(name)).map_or(0, |c| c.pending + c.in_flight);
        if open > 0 {
            return Err(ReloadError::OpenDeliveries {
                destination: name.clone(),
                open,
            });
        }
    }
    Ok(())
}

fn report_of(plan: &Plan, generation: u64) -> ReloadReport {
    let named = |want: fn(&Change) -> bool| {
        (plan.config.destinations.iter().zip(&plan.destinations))
            .filter(|(_, c)| want(c))
            .map(|(d, _)| d.name.to_string())
            .collect()
    };
    ReloadReport {
        generation,
        unchanged: false,
        added_destinations: named(|c| matches!(c, Change::Added)),
        changed_destinations: named(|c| matches!(c, Change::Changed { .. })),
        removed_destinations: plan.removed.clone(),
        added_sources: plan.added_sources.clone(),
        changed_sources: plan.changed_sources.clone(),
        routes: plan.config.routes.len(),
        added_routes: plan.routes.added.clone(),
        changed_routes: plan.routes.changed.clone(),
        removed_routes: plan.routes.removed.clone(),
    }
}
