//! `idem consumers reset NAME`: a consumer's cursor rows deleted for a rebuild
//! (`Store::reset_consumer`). On a database that holds the gateway's tables the reset goes
//! through the gateway (`Gateway::reset_consumer`), which refuses its routes' and Kafka
//! sources' consumers as well as its inbox.

use std::path::Path;
use std::process::ExitCode;

use idem_core::Name;
use idem_gateway::operations::ConsumerResetReport;
use idem_gateway::time::format_time;
use idem_gateway::{Config, Gateway, GatewayDb};
use idem_sql::{AnyStore, Backend, ResetOptions, Store};

use super::consumer_inventory as inventory;
use super::idem_tables::{Db, open, open_gateway, with_db};
use super::json_out;
use crate::cli::ConsumersCommand;

/// `idem consumers …` on the database at `url`; `config` (from `--config`) names the gateway's
/// routes and Kafka sources when the database is a gateway's.
pub(crate) async fn consumers(
    url: &str,
    config: Option<&Path>,
    command: ConsumersCommand,
) -> anyhow::Result<ExitCode> {
    let (name, dry_run, yes, json) = match command {
        ConsumersCommand::Reset {
            name,
            dry_run,
            yes,
            json,
        } => (name, dry_run, yes, json),
        ConsumersCommand::List { since, json } => {
            return inventory::list(url, config, since.as_deref(), json).await;
        }
        ConsumersCommand::Show { name, json } => {
            return inventory::show(url, config, &name, json).await;
        }
    };
    // Without --yes, a dry run: what would go is shown, and nothing is deleted.
    let counted = dry_run || !yes;
    let report = match open_gateway(url).await? {
        Some(AnyStore::Sqlite(store)) => via_gateway(store, config, &name, counted).await?,
        Some(AnyStore::Postgres(store)) => via_gateway(store, config, &name, counted).await?,
        _ => {
            with_db!(open(url, "idem_inbox").await?, store => direct(&store, &name, counted).await?)
        }
    };
    if json {
        json_out::print(&report)?;
    } else {
        print(&report)?;
    }
    if !dry_run && !yes {
        eprintln!(
            "error: nothing was deleted: resetting consumer {name} deletes the {} rows above; \
             add --yes to delete them (stop the consumer first)",
            report.total
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// The reset through the gateway of `config` (the defaults without one) over `store`.
async fn via_gateway<DB: GatewayDb>(
    store: Store<DB>,
    config: Option<&Path>,
    name: &str,
    dry_run: bool,
) -> anyhow::Result<ConsumerResetReport> {
    let config = match config {
        Some(path) => Config::load_for_operations(path)?,
        None => Config::defaults(),
    };
    Ok(Gateway::new(config, store)
        .reset_consumer(name, dry_run)
        .await?)
}

/// The reset through idem's library alone.
async fn direct<DB: Backend>(
    store: &Store<DB>,
    name: &str,
    dry_run: bool,
) -> anyhow::Result<ConsumerResetReport> {
    let consumer = Name::new("consumer", name)?;
    let report = store
        .reset_consumer(&consumer, &ResetOptions::new().dry_run(dry_run))
        .await?;
    Ok(ConsumerResetReport::from(&report))
}

fn print(report: &ConsumerResetReport) -> anyhow::Result<()> {
    let verb = if report.dry_run {
        "would delete (nothing deleted)"
    } else {
        "deleted"
    };
    outln!("consumer {}: {verb}", report.consumer)?;
    for (table, rows) in &report.rows {
        outln!("  {table:<20} {rows:>10}")?;
    }
    outln!("  {:<20} {:>10}", "total", report.total)?;
    match report.last_seen_at {
        Some(at) => outln!("last written at {}", format_time(at))?,
        None => outln!("never wrote a row")?,
    }
    Ok(())
}
