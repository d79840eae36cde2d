//! `idem consumers list [--since T] [--json]` and `idem consumers show NAME [--json]`: the
//! consumer inventory (issue 34). On a database that holds the gateway's tables it is read
//! through the gateway (`Gateway::consumers`: its sources and destinations carry its counts),
//! elsewhere through idem's library (`Store::consumers`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use idem_gateway::consumers::ConsumerEntry;
use idem_gateway::time::{format_time, parse_time};
use idem_gateway::{Config, Gateway, GatewayDb};
use idem_sql::{AnyStore, Backend, ConsumerFlag, ListOptions, Store, WindowCounts};

use super::idem_tables::{Db, open, open_gateway, with_db};
use super::json_out;

/// The window the list's figures are of: the last 24 hours.
const LIST_WINDOW_SECS: u64 = 24 * 3600;

/// What to read: every consumer (first seen since a time, when given) or one by name.
enum Read<'a> {
    List(Option<&'a str>),
    Show(&'a str),
}

/// `idem consumers list`.
pub(super) async fn list(
    url: &str,
    config: Option<&Path>,
    since: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let entries = read(url, config, Read::List(since)).await?;
    if json {
        json_out::print(&entries)?;
    } else {
        print_table(&entries)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `idem consumers show NAME`.
pub(super) async fn show(
    url: &str,
    config: Option<&Path>,
    name: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut entries = read(url, config, Read::Show(name)).await?;
    let entry = entries.remove(0);
    if json {
        json_out::print(&entry)?;
    } else {
        print_one(&entry)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The entries `what` asks for, through the gateway when `url` is a gateway's database.
async fn read(
    url: &str,
    config: Option<&Path>,
    what: Read<'_>,
) -> anyhow::Result<Vec<ConsumerEntry>> {
    // Opened first on every database, a gateway's too: one an older idem migrated has no
    // registry, and this names it rather than failing on the first query.
    let db = open(url, "idem_consumers").await?;
    match open_gateway(url).await? {
        Some(AnyStore::Sqlite(store)) => via_gateway(store, config, what).await,
        Some(AnyStore::Postgres(store)) => via_gateway(store, config, what).await,
        Some(AnyStore::MySql(store)) => via_gateway(store, config, what).await,
        _ => with_db!(db, store => direct(&store, what).await),
    }
}

/// The listing options at the store's now, `--since` read as `idem replay` reads it.
fn options(now: i64, what: &Read<'_>) -> anyhow::Result<ListOptions> {
    let options = ListOptions::at(idem_core::Timestamp(now));
    Ok(match what {
        Read::List(Some(since)) => {
            options.since(idem_core::Timestamp(parse_time("--since", since, now)?))
        }
        _ => options,
    })
}

async fn via_gateway<DB: GatewayDb>(
    store: Store<DB>,
    config: Option<&Path>,
    what: Read<'_>,
) -> anyhow::Result<Vec<ConsumerEntry>> {
    let config = match config {
        Some(path) => Config::load_for_operations(path)?,
        None => Config::defaults(),
    };
    let gateway = Gateway::new(config, store);
    let options = options(gateway.now().as_millis(), &what)?;
    Ok(match what {
        Read::List(_) => gateway.consumers(&options).await?,
        Read::Show(name) => vec![gateway.consumer(name, &options).await?],
    })
}

async fn direct<DB: Backend>(
    store: &Store<DB>,
    what: Read<'_>,
) -> anyhow::Result<Vec<ConsumerEntry>> {
    let options = options(store.now().as_millis(), &what)?;
    let consumers = store.consumers();
    Ok(match what {
        Read::List(_) => (consumers.list(&options).await?)
            .into_iter()
            .map(ConsumerEntry::from)
            .collect(),
        Read::Show(name) => vec![ConsumerEntry::from(consumers.show(name, &options).await?)],
    })
}

/// One line per consumer, figures of the last 24 hours.
fn print_table(entries: &[ConsumerEntry]) -> anyhow::Result<()> {
    if entries.is_empty() {
        outln!("no consumers")?;
        return Ok(());
    }
    outln!(
        "{:<24} {:<20} {:<26} {:<25} {:>8} {:>16} {:>6} {:>6} {:>6} {:>10}  flags",
        "name",
        "kind",
        "first seen",
        "last seen",
        "claimed",
        "duplicates",
        "stale",
        "gaps",
        "dead",
        "lag"
    )?;
    for entry in entries {
        let r = &entry.report;
        let day = window(entry, LIST_WINDOW_SECS);
        outln!(
            "{:<24} {:<20} {:<26} {:<25} {:>8} {:>16} {:>6} {:>6} {:>6} {:>10}  {}",
            r.name,
            r.kind.as_str(),
            first_seen(entry),
            format_time(r.last_seen.as_millis()),
            day.map_or(0, |w| w.claimed),
            day.map_or("0".to_owned(), |w| format!(
                "{} ({:.0}%)",
                w.duplicates,
                w.repeat_rate * 100.0
            )),
            day.map_or(0, |w| w.stale),
            day.map_or(0, |w| w.gaps),
            day.map_or(0, |w| w.dead_letters),
            lag(entry),
            flag_words(&r.flags),
        )?;
    }
    Ok(())
}

/// Every figure of one consumer.
fn print_one(entry: &ConsumerEntry) -> anyhow::Result<()> {
    let r = &entry.report;
    outln!("consumer {} ({})", r.name, r.kind.as_str())?;
    outln!("  first seen  {}", first_seen(entry))?;
    outln!("  last seen   {}", format_time(r.last_seen.as_millis()))?;
    outln!("  lag         {}", lag(entry))?;
    outln!("  successor   {}", r.successor.as_deref().unwrap_or("none"))?;
    outln!(
        "  {:<8} {:>8} {:>10} {:>7} {:>6} {:>6} {:>6}",
        "window",
        "claimed",
        "duplicates",
        "repeat",
        "stale",
        "gaps",
        "dead"
    )?;
    for w in &r.windows {
        outln!(
            "  {:<8} {:>8} {:>10} {:>6.1}% {:>6} {:>6} {:>6}",
            humantime::format_duration(Duration::from_secs(w.window_secs)).to_string(),
            w.claimed,
            w.duplicates,
            w.repeat_rate * 100.0,
            w.stale,
            w.gaps,
            w.dead_letters
        )?;
    }
    for (what, by_status) in [
        ("effects", &r.effects_by_status),
        ("outbox", &r.outbox_by_status),
    ] {
        let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{s} {n}")).collect();
        let shown = if statuses.is_empty() {
            "none".to_owned()
        } else {
            statuses.join(", ")
        };
        outln!("  {what:<11} {shown}")?;
    }
    let h = &r.holds;
    outln!(
        "  holds       {} leases, {} Kafka offsets, {} pending effects, {} open outbox rows",
        h.leases,
        h.kafka_offsets,
        h.pending_effects,
        h.open_outbox
    )?;
    if r.flags.is_empty() {
        outln!("  flags       none")?;
    }
    for flag in &r.flags {
        outln!("  flag        {}", flag_reason(flag))?;
    }
    Ok(())
}

/// The window of `secs` seconds, if the report has one.
fn window(entry: &ConsumerEntry, secs: u64) -> Option<&WindowCounts> {
    entry.report.windows.iter().find(|w| w.window_secs == secs)
}

/// First seen, with `≤` when it is "at or before" (back-filled from thinned rows).
fn first_seen(entry: &ConsumerEntry) -> String {
    let at = format_time(entry.report.first_seen.as_millis());
    if entry.report.first_seen_exact {
        at
    } else {
        format!("≤{at}")
    }
}

/// A destination's oldest due delivery's age, or the messages behind a consumer reported.
fn lag(entry: &ConsumerEntry) -> String {
    match (entry.delivery_lag_ms, entry.report.lag) {
        (Some(ms), _) => format!("{} s due", ms / 1000),
        (None, Some(lag)) => format!("{} msgs", lag.value),
        (None, None) => "-".to_owned(),
    }
}

/// The flags as words: `superseded, unhealthy`; `-` for none.
fn flag_words(flags: &[ConsumerFlag]) -> String {
    let words: Vec<&str> = flags
        .iter()
        .map(|f| match f {
            ConsumerFlag::Superseded { .. } => "superseded",
            ConsumerFlag::Orphaned { .. } => "orphaned",
            ConsumerFlag::Unhealthy { .. } => "unhealthy",
            _ => "flagged",
        })
        .collect();
    if words.is_empty() {
        "-".to_owned()
    } else {
        words.join(", ")
    }
}

/// A flag with its reason.
fn flag_reason(flag: &ConsumerFlag) -> String {
    match flag {
        ConsumerFlag::Superseded { by } => format!("superseded by {by} (seen after it)"),
        ConsumerFlag::Orphaned { days_unseen } => {
            format!("orphaned: not seen for {days_unseen} days, no successor, still holding rows")
        }
        ConsumerFlag::Unhealthy { reasons } => format!("unhealthy: {}", reasons.join("; ")),
        other => format!("{other:?}"),
    }
}
