//! `idem events list [--source S] [--limit N]` and `idem events show SOURCE EVENT_ID`.

use std::process::ExitCode;

use anyhow::bail;
use idem_gateway::time::format_time;
use idem_gateway::{Gateway, GatewayDb};
use serde_json::Value;

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
        } => {
            let events = if unrouted {
                gateway
                    .list_unrouted_events(source.as_deref(), limit)
                    .await?
            } else {
                gateway.list_events(source.as_deref(), limit).await?
            };
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
            outln!(
                "{} deliveries: {} {}, {} still in progress, {} older than their entity's newest{}, {} without a stored body, {} not taken by their route's filter",
                r.matched,
                r.requeued,
                if dry_run {
                    "would be sent again"
                } else {
                    "sent again (a running idem serve sends them now)"
                },
                r.in_progress,
                r.older,
                if force {
                    ""
                } else {
                    " (use --force to send them)"
                },
                r.no_body,
                r.filtered
            )?;
        }
        EventsCommand::Show { source, event_id } => {
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
            let mut shown = serde_json::to_value(&detail)?;
            rfc3339_times(&mut shown);
            outln!("{}", serde_json::to_string_pretty(&shown)?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes every time of `value` (a `…_at` field: ms since the epoch, as `/admin` answers) as
/// RFC 3339 UTC with milliseconds, as the listings show times.
fn rfc3339_times(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                match field.as_i64() {
                    Some(ms) if name.ends_with("_at") => *field = Value::from(format_time(ms)),
                    _ => rfc3339_times(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(rfc3339_times),
        _ => {}
    }
}
