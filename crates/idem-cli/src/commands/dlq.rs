//! `idem dlq list [--destination D] [--limit N]` and `idem dlq redrive [--destination D]
//! [--id ID]… [--force] [--dry-run]`: the gateway's dead letters (deliveries that failed their whole schedule).

use std::process::ExitCode;

use idem_gateway::operations::RedriveRequest;
use idem_gateway::time::format_time;
use idem_gateway::{Gateway, GatewayDb};

use crate::cli::DlqCommand;
use crate::printable::printable;

pub(super) async fn dlq<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    command: DlqCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        DlqCommand::List {
            destination,
            limit,
            json,
        } => {
            let dead = gateway.dead_letters(destination.as_deref(), limit).await?;
            if json {
                super::json_out::print(&dead)?;
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:>6} {:<12} {:<10} {:<32} {:>8}  since",
                "id",
                "destination",
                "source",
                "event id",
                "attempts"
            )?;
            for d in dead {
                outln!(
                    "{:>6} {:<12} {:<10} {:<32} {:>8}  {}",
                    d.id,
                    d.destination,
                    d.source,
                    printable(&d.event_id),
                    d.attempts,
                    format_time(d.updated_at)
                )?;
            }
        }
        DlqCommand::Redrive {
            destination,
            id,
            force,
            dry_run,
        } => {
            // An unknown destination or dead letter is refused, naming what exists.
            let request = RedriveRequest {
                destination,
                deliveries: id,
                force,
                dry_run,
            };
            let report = gateway.redrive(&request).await?;
            if dry_run {
                outln!(
                    "{} dead letters matched: {} would be redriven (nothing changed)",
                    report.matched,
                    report.redriven
                )?;
            } else {
                outln!(
                    "{} dead letters redriven; a running `idem serve` sends them now",
                    report.redriven
                )?;
            }
            if report.older > 0 {
                outln!(
                    "{} refused as older than the entity's newest delivered event; use --force",
                    report.older
                )?;
            }
            if report.filtered > 0 {
                outln!(
                    "{} refused: their route's filter, as configured now, does not take the event; they stay dead letters",
                    report.filtered
                )?;
            }
            if report.not_configured > 0 {
                outln!(
                    "{} refused: their route is not configured (removed with its destination?); no dispatcher would send them; they stay dead letters",
                    report.not_configured
                )?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
