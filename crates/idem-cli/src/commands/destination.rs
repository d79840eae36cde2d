//! `idem destination list`, `idem destination pause NAME` and `idem destination resume NAME`:
//! the gateway's destinations and their pause, stored in the database so that every `idem
//! serve` on it honours it.

use std::process::ExitCode;

use idem_gateway::time::format_time;
use idem_gateway::{Gateway, GatewayDb};

use crate::cli::DestinationCommand;

pub(super) async fn destination<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    command: DestinationCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        DestinationCommand::List { json: true } => {
            super::json_out::print(&gateway.destinations().await?)?;
        }
        DestinationCommand::List { json: false } => {
            outln!(
                "{:<16} {:<8} {:<12} {:>11}  target",
                "destination",
                "state",
                "rate limit",
                "concurrency"
            )?;
            for d in gateway.destinations().await? {
                let state = if d.paused { "paused" } else { "running" };
                let by = match d.paused_by {
                    Some("circuit_breaker") => " by the circuit breaker",
                    _ => "",
                };
                let since = d
                    .paused_at
                    .map(|at| format!(" (paused{by} since {})", format_time(at)))
                    .unwrap_or_default();
                outln!(
                    "{:<16} {:<8} {:<12} {:>11}  {}{since}",
                    d.name,
                    state,
                    d.rate_limit.as_deref().unwrap_or("none"),
                    d.concurrency,
                    d.target
                )?;
            }
        }
        // An unknown destination is refused, naming the configured ones.
        DestinationCommand::Pause { name } => {
            let change = gateway.pause(&name).await?;
            let since = change.paused_at.map(format_time).unwrap_or_default();
            if change.changed {
                outln!(
                    "destination {name} paused: its deliveries wait, none is attempted or dead-lettered; running gateways stop claiming them within a second"
                )?;
            } else {
                outln!("destination {name} was already paused (since {since})")?;
            }
        }
        DestinationCommand::Resume { name } => {
            if gateway.resume(&name).await?.changed {
                outln!(
                    "destination {name} resumed: running gateways send its waiting deliveries within a second"
                )?;
            } else {
                outln!("destination {name} was not paused")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
