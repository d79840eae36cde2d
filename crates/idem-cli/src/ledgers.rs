//! `idem effects`, `idem outbox`, `idem dead-letters`: operator commands on idem's own tables
//! in any database (usually the application's), through idem's library APIs. They never create
//! or migrate a database: a missing table is an error naming the database.

use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use idem_core::EffectKey;
use idem_core::Name;
use idem_gateway::DatabaseKind;
use idem_gateway::time::format_time;
use idem_sql::redact_url;
use idem_sql::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use idem_sql::sqlx::{self, Postgres, Sqlite};
use idem_sql::{Backend, Store};
use idem_sql::{
    DeadLetter, EffectRecord, EffectStatus, MAX_MESSAGE_ID_BYTES, MessageId, OutboxRow,
    OutboxStatus, Resolution,
};
use serde_json::{Value, json};

use crate::cli::{
    DeadLettersCommand, EffectStatusArg, EffectsCommand, OutboxCommand, OutboxStatusArg,
};

/// A store on one of the two databases idem supports.
enum Db {
    Sqlite(Store<Sqlite>),
    Postgres(Store<Postgres>),
}

/// Runs `$body` with `$store` bound to the opened store, whichever database it is on.
macro_rules! with_db {
    ($db:expr, $store:ident => $body:expr) => {
        match $db {
            Db::Sqlite($store) => $body,
            Db::Postgres($store) => $body,
        }
    };
}

/// How long opening a PostgreSQL database may take: a server that does not answer at all
/// (packets dropped) would otherwise hold the command for the operating system's TCP timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens `url` and checks that idem's `table` is there. Messages show the URL without its
/// user and password.
///
/// # Errors
/// A URL that is neither SQLite nor PostgreSQL, a database that cannot be opened (a SQLite file
/// that does not exist is not created; a PostgreSQL server that refuses, or rejects the login,
/// is reported at once with the driver's reason; one that does not answer, after 10 s), or a
/// missing `table`, each naming the database.
async fn open(url: &str, table: &'static str) -> anyhow::Result<Db> {
    let check = format!("SELECT 1 FROM {table} LIMIT 1");
    let shown = redact_url(url);
    match DatabaseKind::of(url) {
        Some(DatabaseKind::Sqlite) => {
            let options = SqliteConnectOptions::from_str(url)
                .with_context(|| format!("{shown:?} is not a SQLite URL"))?
                .create_if_missing(false);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .map_err(|e| missing(url, table, e))?;
            sqlx::query(sqlx::AssertSqlSafe(check))
                .fetch_optional(&pool)
                .await
                .map_err(|e| missing(url, table, e))?;
            Ok(Db::Sqlite(Store::from_pool(pool)))
        }
        Some(DatabaseKind::Postgres) => {
            // idem's connect opens one connection before the pool: a refused connection or a
            // failed login is reported at once with its cause, where a bare pool retries for
            // 30 s and then says only "pool timed out".
            let store =
                tokio::time::timeout(CONNECT_TIMEOUT, Store::<Postgres>::connect_with(url, 1))
                    .await
                    .map_err(|_| {
                        anyhow::anyhow!("no answer from the database at {shown} within 10s")
                    })?
                    // idem's error names the database, without the password.
                    .map_err(anyhow::Error::new)?;
            sqlx::query(sqlx::AssertSqlSafe(check))
                .fetch_optional(store.pool())
                .await
                .map_err(|e| missing(url, table, e))?;
            Ok(Db::Postgres(store))
        }
        _ => bail!("database {shown:?} is neither sqlite:// nor postgres://"),
    }
}

/// A missing table (or SQLite file) says idem's tables were never made there: name the table
/// and what to check. Other errors pass through with the database named (without credentials).
fn missing(url: &str, table: &str, error: sqlx::Error) -> anyhow::Error {
    let url = redact_url(url);
    if is_missing_table(&error) {
        anyhow::anyhow!(
            "no {table} table at {url}: check --database (the application creates idem's tables with Store::migrate)"
        )
    } else {
        anyhow::Error::new(error).context(format!("cannot read the database at {url}"))
    }
}

/// Whether `error` says the table (or, for SQLite, the database file) is not there: PostgreSQL
/// 42P01 `undefined_table`, SQLite "no such table" or SQLITE_CANTOPEN (14).
pub(crate) fn is_missing_table(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(e) => {
            let message = e.message();
            message.contains("no such table")
                || message.contains("unable to open database file")
                || e.code().as_deref() == Some("42P01")
                || e.code().as_deref() == Some("14")
        }
        _ => false,
    }
}

/// Bytes as JSON: the JSON they hold, else their text, else `{"hex": …}`.
fn bytes(data: &[u8]) -> Value {
    if let Ok(value) = serde_json::from_slice::<Value>(data) {
        return value;
    }
    match std::str::from_utf8(data) {
        Ok(text) => Value::String(text.to_owned()),
        Err(_) => json!({ "hex": hex::encode(data) }),
    }
}

/// One line of a table cell: at most `width` characters, line breaks as spaces.
fn cell(text: &str, width: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() > width {
        let cut: String = flat.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

// ---------------------------------------------------------------------------------------------
// effects

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
        EffectsCommand::List { status, limit } => {
            let statuses = match status {
                Some(status) => vec![effect_status(status)],
                None => vec![EffectStatus::Parked, EffectStatus::Dead],
            };
            outln!(
                "{:<40} {:<16} {:<9} {:>8}  {:<24} last error",
                "key",
                "effect",
                "status",
                "attempts",
                "updated"
            )?;
            for status in statuses {
                for e in ledger.list(status, limit).await? {
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
        }
        EffectsCommand::Show { key } => {
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

// ---------------------------------------------------------------------------------------------
// outbox

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
    if let OutboxCommand::Show { message_id: id }
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
        OutboxCommand::List { status, limit } => {
            let status = match status {
                OutboxStatusArg::Pending => OutboxStatus::Pending,
                OutboxStatusArg::Published => OutboxStatus::Published,
                OutboxStatusArg::Parked => OutboxStatus::Parked,
            };
            outln!(
                "{:<36} {:<28} {:<9} {:>8}  {:<24} last error",
                "message id",
                "destination",
                "status",
                "attempts",
                "created"
            )?;
            for row in outbox.list(status, limit).await? {
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
        OutboxCommand::Show { message_id: id } => {
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

// ---------------------------------------------------------------------------------------------
// dead letters

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
        DeadLettersCommand::List { consumer, limit } => {
            let consumer = Name::new("consumer", consumer.clone())
                .with_context(|| format!("--consumer {consumer:?}"))?;
            let list = letters.list(&consumer, limit).await?;
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
        DeadLettersCommand::Show { id } => {
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
