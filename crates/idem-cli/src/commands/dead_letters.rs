//! `idem dead-letters list|show|delete`: broker consumers' dead letters (`idem_dead_letters`).

use std::process::ExitCode;

use anyhow::{Context, bail};
use idem_core::Name;
use idem_gateway::time::format_time;
use idem_sql::{Backend, DeadLetter, Store};
use serde_json::{Value, json};

use super::idem_tables::{Db, bytes, cell, open, with_db};
use crate::cli::DeadLettersCommand;

fn dead_letter_json(letter: &DeadLetter) -> Value {
    json!({
        "id": letter.id,
        "consumer": letter.consumer,
        "source": letter.source,
        "event_id": letter.event_id,
        "dedup_key": letter.dedup_key,
        "aggregate_type": letter.aggregate_type,
        "aggregate_id": letter.aggregate_id,
        "destination": letter.destination,
        "headers": letter.headers,
        "payload": bytes(&letter.payload),
        "error": letter.error,
        "delivery_count": letter.delivery_count,
        "first_failed_at": format_time(letter.first_failed_at.as_millis()),
        "last_failed_at": format_time(letter.last_failed_at.as_millis()),
    })
}

/// `idem dead-letters …` on the database at `url`.
pub(crate) async fn dead_letters(
    url: &str,
    command: DeadLettersCommand,
) -> anyhow::Result<ExitCode> {
    with_db!(open(url, "idem_dead_letters").await?, store => dead_letters_on(&store, command).await)
}

async fn dead_letters_on<DB: Backend>(
    store: &Store<DB>,
    command: DeadLettersCommand,
) -> anyhow::Result<ExitCode> {
    let letters = store.dead_letters();
    match command {
        DeadLettersCommand::List {
            consumer,
            limit,
            json,
        } => {
            let consumer = Name::new("consumer", consumer.clone())
                .with_context(|| format!("--consumer {consumer:?}"))?;
            let list = letters.list(&consumer, limit).await?;
            if json {
                let shown: Vec<Value> = list.iter().map(dead_letter_json).collect();
                outln!("{}", serde_json::to_string_pretty(&shown)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:>6} {:<12} {:<28} {:<28} {:>10}  {:<24} error",
                "id",
                "source",
                "event id",
                "subject or queue",
                "deliveries",
                "last failed"
            )?;
            for d in &list {
                outln!(
                    "{:>6} {:<12} {:<28} {:<28} {:>10}  {:<24} {}",
                    d.id,
                    cell(&d.source, 12),
                    cell(d.event_id.as_deref().unwrap_or("(none)"), 28),
                    cell(&d.destination, 28),
                    d.delivery_count,
                    format_time(d.last_failed_at.as_millis()),
                    cell(&d.error, 60)
                )?;
            }
            if list.is_empty() {
                eprintln!("no dead letters of consumer {consumer} (--consumer NAME for another)");
            }
        }
        // Always JSON: --json is accepted for scripts' sake.
        DeadLettersCommand::Show { id, json: _ } => {
            let Some(letter) = letters.get(id).await? else {
                bail!("no dead letter has id {id}");
            };
            outln!(
                "{}",
                serde_json::to_string_pretty(&dead_letter_json(&letter))?
            )?;
        }
        DeadLettersCommand::Delete { id } => {
            if !letters.delete(id).await? {
                bail!("no dead letter has id {id}");
            }
            outln!("dead letter {id} deleted")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
