//! `idem outbox list|show|requeue|discard`: the transactional outbox (`idem_outbox`).

use std::process::ExitCode;

use anyhow::bail;
use idem_gateway::time::format_time;
use idem_sql::{Backend, MAX_MESSAGE_ID_BYTES, MessageId, OutboxRow, OutboxStatus, Store};
use serde_json::{Value, json};

use super::idem_tables::{Db, bytes, cell, open, with_db};
use crate::cli::{OutboxCommand, OutboxStatusArg};

fn outbox_json(row: &OutboxRow) -> Value {
    json!({
        "message_id": row.message_id.as_str(),
        "destination": row.destination,
        "aggregate": row.aggregate.as_ref().map(ToString::to_string),
        "status": row.status.as_str(),
        "attempts": row.attempts,
        "headers": row.headers,
        "payload": bytes(&row.payload),
        "last_error": row.last_error,
        "next_attempt_at": format_time(row.next_attempt_at.as_millis()),
        "created_at": format_time(row.created_at.as_millis()),
        "published_at": row.published_at.map(|t| format_time(t.as_millis())),
    })
}

/// `text` as a message id, or an error saying what one is.
fn message_id(text: &str) -> anyhow::Result<MessageId> {
    MessageId::new(text).map_err(|_| {
        anyhow::anyhow!(
            "{text:?} is not a valid message id: expected 1 to {MAX_MESSAGE_ID_BYTES} bytes of visible ASCII ('!' to '~', no spaces), as `idem outbox list` shows them"
        )
    })
}

/// `idem outbox …` on the database at `url`.
pub(crate) async fn outbox(url: &str, command: OutboxCommand) -> anyhow::Result<ExitCode> {
    // A malformed id is the argument's fault, whatever the database: say so first.
    if let OutboxCommand::Show { message_id: id, .. }
    | OutboxCommand::Requeue { message_id: id }
    | OutboxCommand::Discard { message_id: id } = &command
    {
        message_id(id)?;
    }
    with_db!(open(url, "idem_outbox").await?, store => outbox_on(&store, command).await)
}

async fn outbox_on<DB: Backend>(
    store: &Store<DB>,
    command: OutboxCommand,
) -> anyhow::Result<ExitCode> {
    let outbox = store.outbox();
    match command {
        OutboxCommand::List {
            status,
            limit,
            json,
        } => {
            let status = match status {
                OutboxStatusArg::Pending => OutboxStatus::Pending,
                OutboxStatusArg::Published => OutboxStatus::Published,
                OutboxStatusArg::Parked => OutboxStatus::Parked,
            };
            let rows = outbox.list(status, limit).await?;
            if json {
                let shown: Vec<Value> = rows.iter().map(outbox_json).collect();
                outln!("{}", serde_json::to_string_pretty(&shown)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:<36} {:<28} {:<9} {:>8}  {:<24} last error",
                "message id",
                "destination",
                "status",
                "attempts",
                "created"
            )?;
            for row in rows {
                outln!(
                    "{:<36} {:<28} {:<9} {:>8}  {:<24} {}",
                    row.message_id.as_str(),
                    cell(&row.destination, 28),
                    row.status.as_str(),
                    row.attempts,
                    format_time(row.created_at.as_millis()),
                    cell(row.last_error.as_deref().unwrap_or_default(), 60)
                )?;
            }
        }
        // Always JSON: --json is accepted for scripts' sake.
        OutboxCommand::Show {
            message_id: id,
            json: _,
        } => {
            let Some(row) = outbox.get(&message_id(&id)?).await? else {
                bail!("no outbox row has message id {id:?}");
            };
            outln!("{}", serde_json::to_string_pretty(&outbox_json(&row))?)?;
        }
        OutboxCommand::Requeue { message_id: id } => {
            let parsed = message_id(&id)?;
            if !outbox.requeue(&parsed).await? {
                not_parked(&outbox.get(&parsed).await?, &id, "requeued")?;
            }
            outln!("outbox row {id} is pending again; a running relay publishes it now")?;
        }
        OutboxCommand::Discard { message_id: id } => {
            let parsed = message_id(&id)?;
            if !outbox.discard(&parsed).await? {
                not_parked(&outbox.get(&parsed).await?, &id, "discarded")?;
            }
            outln!("outbox row {id} is deleted and will never be published")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The error for a requeue or discard that changed nothing: no such row, or not parked.
fn not_parked(row: &Option<OutboxRow>, id: &str, what: &str) -> anyhow::Result<()> {
    match row {
        None => bail!("no outbox row has message id {id:?}"),
        Some(row) => bail!(
            "outbox row {id:?} is {}; only parked rows can be {what}",
            row.status.as_str()
        ),
    }
}
