//! `idem events list [--source S] [--limit N]` and `idem events show SOURCE EVENT_ID`.

use std::process::ExitCode;

use anyhow::bail;
use idem_gateway::time::format_time;
use idem_gateway::{Gateway, GatewayDb};

use crate::cli::EventsCommand;
use crate::printable::printable;

pub(super) async fn events<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    command: EventsCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        EventsCommand::List {
            source,
            limit,
            unrouted,
            json,
        } => {
            let events = if unrouted {
                gateway
                    .list_unrouted_events(source.as_deref(), limit)
                    .await?
            } else {
                gateway.list_events(source.as_deref(), limit).await?
            };
            if json {
                super::json_out::print(&events)?;
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:<24} {:<10} {:<32} {:<36} entity",
                "received",
                "source",
                "event id",
                "type"
            )?;
            for e in events {
                outln!(
                    "{:<24} {:<10} {:<32} {:<36} {}",
                    format_time(e.received_at),
                    e.source,
                    printable(&e.event_id),
                    printable(&e.event_type.unwrap_or_default()),
                    printable(&e.entity.unwrap_or_default())
                )?;
            }
        }
        EventsCommand::Resend {
            source,
            event_id,
            force,
            dry_run,
        } => {
            let Some(r) = gateway.resend(&source, &event_id, force, dry_run).await? else {
                bail!("no event {event_id:?} of source {source:?} is stored");
            };
            if r.matched == 0 {
                let filtered = gateway
                    .show_event(&source, &event_id)
                    .await?
                    .map(|d| d.event.filtered_by)
                    .unwrap_or_default();
                let why = if filtered.is_empty() {
                    String::new()
                } else {
                    format!(" (filtered by {})", filtered.join(", "))
                };
                bail!(
                    "event {event_id:?} of source {source:?} has no delivery to send again: no route took it{why}; once a route takes it, `idem replay --backfill --source {source} --since …` gives it one"
                );
            }
            outln!("{}", super::replay::requeued_line(&r, dry_run, force))?;
        }
        // Always JSON: --json is accepted for scripts' sake.
        EventsCommand::Show {
            source,
            event_id,
            json: _,
        } => {
            let Some(detail) = gateway.show_event(&source, &event_id).await? else {
                let config = gateway.config();
                if config.source(&source).is_none() {
                    let known: Vec<&str> = config.sources.iter().map(|s| s.name.as_str()).collect();
                    bail!(
                        "source {source:?} is not in the configuration; its sources are: {}",
                        known.join(", ")
                    );
                }
                bail!("no event {event_id:?} of source {source:?} is stored");
            };
            super::json_out::print(&detail)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
