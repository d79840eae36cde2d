//! `idem events list [--source S] [--limit N]` and `idem events show SOURCE EVENT_ID`.

use std::process::ExitCode;

use anyhow::bail;
use idem_gateway::time::format_time;
use idem_gateway::{Gateway, GatewayDb};

use crate::cli::EventsCommand;

pub(super) async fn events<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    command: EventsCommand,
) -> anyhow::Result<ExitCode> {
    match command {
        EventsCommand::List { source, limit } => {
            let events = gateway.list_events(source.as_deref(), limit).await?;
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
                    e.event_id,
                    e.event_type.unwrap_or_default(),
                    e.entity.unwrap_or_default()
                )?;
            }
        }
        EventsCommand::Show { source, event_id } => {
            let Some(detail) = gateway.show_event(&source, &event_id).await? else {
                bail!("no event {event_id:?} of source {source:?} is stored");
            };
            outln!("{}", serde_json::to_string_pretty(&detail)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
