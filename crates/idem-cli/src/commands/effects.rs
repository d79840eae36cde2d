//! `idem effects list|show|resolve`: the effect ledger (`idem_effects`).

use std::process::ExitCode;

use anyhow::{Context, bail};
use idem_core::EffectKey;
use idem_gateway::time::format_time;
use idem_sql::{Backend, EffectRecord, EffectStatus, Resolution, Store};
use serde_json::{Value, json};

use super::idem_tables::{Db, bytes, cell, open, with_db};
use crate::cli::{EffectStatusArg, EffectsCommand};

fn effect_status(arg: EffectStatusArg) -> EffectStatus {
    match arg {
        EffectStatusArg::Pending => EffectStatus::Pending,
        EffectStatusArg::Running => EffectStatus::Running,
        EffectStatusArg::Unknown => EffectStatus::Unknown,
        EffectStatusArg::Succeeded => EffectStatus::Succeeded,
        EffectStatusArg::Failed => EffectStatus::Failed,
        EffectStatusArg::Parked => EffectStatus::Parked,
        EffectStatusArg::Dead => EffectStatus::Dead,
    }
}

fn effect_key(text: &str) -> anyhow::Result<EffectKey> {
    EffectKey::intent(text).with_context(|| format!("{text:?} is not an effect key"))
}

fn effect_json(record: &EffectRecord) -> Value {
    let mut shown = json!({
        "key": record.key.as_str(),
        "effect": record.effect.as_str(),
        "status": record.status.as_str(),
        "attempts": record.attempts,
        "request": bytes(&record.request),
        "outcome": record.outcome.as_deref().map(bytes),
        "last_error": record.last_error,
        "first_attempt_at": record.first_attempt_at.map(|t| format_time(t.as_millis())),
        "next_attempt_at": format_time(record.next_attempt_at.as_millis()),
        "created_at": format_time(record.created_at.as_millis()),
        "updated_at": format_time(record.updated_at.as_millis()),
    });
    // A finished effect is never attempted again: its stored next time means nothing.
    if record.status.is_finished()
        && let Some(fields) = shown.as_object_mut()
    {
        fields.remove("next_attempt_at");
    }
    shown
}

/// `idem effects …` on the database at `url`.
pub(crate) async fn effects(url: &str, command: EffectsCommand) -> anyhow::Result<ExitCode> {
    with_db!(open(url, "idem_effects").await?, store => effects_on(&store, command).await)
}

async fn effects_on<DB: Backend>(
    store: &Store<DB>,
    command: EffectsCommand,
) -> anyhow::Result<ExitCode> {
    let ledger = store.effects();
    match command {
        EffectsCommand::List {
            status,
            limit,
            json,
        } => {
            let statuses = match status {
                Some(status) => vec![effect_status(status)],
                None => vec![EffectStatus::Parked, EffectStatus::Dead],
            };
            let mut records = Vec::new();
            for status in statuses {
                records.extend(ledger.list(status, limit).await?);
            }
            if json {
                let shown: Vec<Value> = records.iter().map(effect_json).collect();
                outln!("{}", serde_json::to_string_pretty(&shown)?)?;
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:<40} {:<16} {:<9} {:>8}  {:<24} last error",
                "key",
                "effect",
                "status",
                "attempts",
                "updated"
            )?;
            for e in records {
                outln!(
                    "{:<40} {:<16} {:<9} {:>8}  {:<24} {}",
                    e.key.as_str(),
                    e.effect.as_str(),
                    e.status.as_str(),
                    e.attempts,
                    format_time(e.updated_at.as_millis()),
                    cell(e.last_error.as_deref().unwrap_or_default(), 60)
                )?;
            }
        }
        // Always JSON: --json is accepted for scripts' sake.
        EffectsCommand::Show { key, json: _ } => {
            let key = effect_key(&key)?;
            let Some(record) = ledger.get(&key).await? else {
                bail!("no effect is stored under key {key}");
            };
            outln!("{}", serde_json::to_string_pretty(&effect_json(&record))?)?;
        }
        EffectsCommand::Resolve {
            key,
            succeeded,
            outcome,
            failed,
            retry,
        } => {
            let key = effect_key(&key)?;
            let resolution = match (succeeded, failed, retry) {
                (true, None, false) => Resolution::Succeeded(outcome_bytes(outcome.as_deref())?),
                (false, Some(reason), false) => {
                    if reason.trim().is_empty() {
                        bail!("--failed needs a reason, for the record");
                    }
                    Resolution::Failed(reason)
                }
                (false, None, true) => Resolution::Retry,
                _ => bail!("give exactly one of --succeeded, --failed REASON, --retry"),
            };
            // Unknown keys and effects that are not parked or dead are refused by the ledger,
            // naming the key (and the status).
            let record = ledger.resolve(&key, resolution).await?;
            outln!("effect {} is now {}", record.key, record.status)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--outcome`: inline JSON (checked, so that a shell quoting slip is caught), or `@FILE`, whose
/// bytes are taken as they are; none is an empty outcome.
fn outcome_bytes(outcome: Option<&str>) -> anyhow::Result<Vec<u8>> {
    match outcome {
        None => Ok(Vec::new()),
        Some(text) => match text.strip_prefix('@') {
            Some(path) => std::fs::read(path).with_context(|| format!("reading --outcome {text}")),
            None => {
                serde_json::from_str::<Value>(text).with_context(|| {
                    format!("--outcome {text:?} is not JSON (give @FILE for other bytes)")
                })?;
                Ok(text.as_bytes().to_vec())
            }
        },
    }
}
