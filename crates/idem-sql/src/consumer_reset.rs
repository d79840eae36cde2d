//! Resetting a consumer for a rebuild (docs/design.md C9): its cursor — inbox keys, version
//! guard rows, parked-gap markers and stored Kafka offsets — is deleted in one transaction, so
//! the same consumer name reads history again from the start. Never its effects (the ledger
//! keeps their keys, docs/design.md C6), outbox rows, dead letters, lineage row or leases, and
//! never another consumer's rows.
//!
//! A consumer still running would claim again at once and mix two cursors, so a live one is
//! refused: one holding a lease that has not expired or been released (a Kafka consumer's
//! partition and member leases, scope `kafka/{consumer}`), or one that wrote a row within the
//! last minute. The check runs in the reset's transaction; it guards against mistakes, it does
//! not lock a consumer out: stop the consumer before resetting it.

use std::time::Duration;

use idem_core::{Name, Timestamp};

use crate::backend::Backend;
use crate::backend::consumer_reset_ops::CursorTable;
use crate::{Error, Store};

/// The gateway's inbox consumer: every event the gateway accepts is claimed under it, and
/// those rows are what keep its sources exactly-once. [`Store::reset_consumer`] always refuses
/// it.
pub const GATEWAY_INBOX_CONSUMER: &str = "idem-gateway";

/// How recently a consumer may have written a row and still be taken for stopped: one minute.
pub const LIVE_WINDOW: Duration = Duration::from_secs(60);

/// How [`Store::reset_consumer`] runs: for real or as a dry run, and which other consumers it
/// refuses.
#[derive(Debug, Clone, Default)]
pub struct ResetOptions {
    dry_run: bool,
    protected: Vec<(String, String)>,
}

impl ResetOptions {
    /// A reset that deletes, refusing only the gateway's inbox consumer.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `true`, nothing is deleted: the report counts the rows a reset would delete (the
    /// same refusals apply).
    #[must_use]
    pub fn dry_run(self, dry_run: bool) -> Self {
        Self { dry_run, ..self }
    }

    /// Refuses `consumer` too, with [`Error::ConsumerProtected`] carrying `reason` (say why, and
    /// what to do instead). The gateway protects its routes' version-guard consumers this way.
    #[must_use]
    pub fn protect(mut self, consumer: &str, reason: impl Into<String>) -> Self {
        self.protected.push((consumer.to_owned(), reason.into()));
        self
    }
}

/// What [`Store::reset_consumer`] deleted, or (dry run) would delete, per table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResetReport {
    /// The consumer.
    pub consumer: Name,
    /// Whether this was a dry run: the counts are of rows that would be deleted.
    pub dry_run: bool,
    /// Rows of `idem_inbox` (dedup keys the consumer processed).
    pub inbox: u64,
    /// Rows of `idem_versions` (the highest version applied per entity).
    pub versions: u64,
    /// Rows of `idem_parked` (events held back for a gap).
    pub parked: u64,
    /// Rows of `idem_kafka_offsets` (next offset per topic partition).
    pub kafka_offsets: u64,
    /// When the consumer last wrote one of these rows, if it ever did.
    pub last_seen: Option<Timestamp>,
}

impl ResetReport {
    /// `(table, rows)` for each table a reset deletes from, in a fixed order.
    pub fn tables(&self) -> [(&'static str, u64); 4] {
        CursorTable::ALL.map(|table| (table.name(), self.rows(table)))
    }

    /// The rows of every table together.
    pub fn total(&self) -> u64 {
        self.inbox + self.versions + self.parked + self.kafka_offsets
    }

    fn rows(&self, table: CursorTable) -> u64 {
        match table {
            CursorTable::Inbox => self.inbox,
            CursorTable::Versions => self.versions,
            CursorTable::Parked => self.parked,
            CursorTable::KafkaOffsets => self.kafka_offsets,
        }
    }

    fn set(&mut self, table: CursorTable, rows: u64) {
        match table {
            CursorTable::Inbox => self.inbox = rows,
            CursorTable::Versions => self.versions = rows,
            CursorTable::Parked => self.parked = rows,
            CursorTable::KafkaOffsets => self.kafka_offsets = rows,
        }
    }
}

impl<DB: Backend> Store<DB> {
    /// Deletes `consumer`'s inbox keys (`idem_inbox`), version-guard rows (`idem_versions`),
    /// parked-gap markers (`idem_parked`) and stored Kafka offsets (`idem_kafka_offsets`), in
    /// one transaction, so that the consumer reads its history again as if new. Its effects,
    /// outbox rows, dead letters, lineage row and leases, and every other consumer's rows, are
    /// left alone. With [`ResetOptions::dry_run`] nothing is deleted and the report counts what
    /// would be. Logged at INFO.
    ///
    /// # Errors
    /// Nothing is deleted on any error:
    /// [`Error::ConsumerProtected`] for [`GATEWAY_INBOX_CONSUMER`] and the consumers of
    /// [`ResetOptions::protect`];
    /// [`Error::ConsumerLive`] (kind [`InUse`](crate::ErrorKind::InUse)) when the consumer holds
    /// a live lease, or wrote a row within [`LIVE_WINDOW`] of [`Store::now`];
    /// [`Error::UnknownConsumer`] when no table holds a row of it (not even a dead letter, a
    /// lineage row or a lease), listing the known consumers;
    /// [`Error::Database`].
    pub async fn reset_consumer(
        &self,
        consumer: &Name,
        options: &ResetOptions,
    ) -> Result<ResetReport, Error> {
        refuse_protected(consumer, options)?;
        let mut tx = self.begin().await?;
        let last_seen = self.refuse_live(&mut tx, consumer).await?;
        let mut report = ResetReport {
            consumer: consumer.clone(),
            dry_run: options.dry_run,
            inbox: 0,
            versions: 0,
            parked: 0,
            kafka_offsets: 0,
            last_seen: last_seen.map(Timestamp),
        };
        for table in CursorTable::ALL {
            let rows = if options.dry_run {
                DB::cursor_count(&mut tx, table, consumer.as_str()).await?
            } else {
                DB::cursor_delete(&mut tx, table, consumer.as_str()).await?
            };
            report.set(table, rows);
        }
        if report.total() == 0 {
            refuse_unknown::<DB>(&mut tx, consumer).await?;
        }
        if options.dry_run {
            tx.rollback().await?;
        } else {
            tx.commit().await?;
        }
        log(&report);
        Ok(report)
    }

    /// `Err(ConsumerLive)` when `consumer` holds a live lease or wrote within [`LIVE_WINDOW`];
    /// else when it last wrote.
    async fn refuse_live(
        &self,
        conn: &mut DB::Connection,
        consumer: &Name,
    ) -> Result<Option<i64>, Error> {
        let now = self.now();
        let live = |reason: String| Error::ConsumerLive {
            consumer: consumer.to_string(),
            reason,
        };
        let scope = self.kafka_offsets(consumer).scope();
        let leases = DB::live_leases(conn, &scope, now.as_millis()).await?;
        if let Some((_, until)) = leases.iter().max_by_key(|(_, until)| *until) {
            let keys: Vec<&str> = leases.iter().map(|(key, _)| key.as_str()).collect();
            return Err(live(format!(
                "it holds {} live lease(s) of scope {scope} ({}) until {}",
                leases.len(),
                keys.join(", "),
                Timestamp(*until).rfc3339()
            )));
        }
        let last_seen = DB::cursor_last_seen(conn, consumer.as_str()).await?;
        let window = now.saturating_sub(LIVE_WINDOW).as_millis();
        match last_seen {
            Some(at) if at > window => Err(live(format!(
                "it wrote a row (a claim, a version or an offset) {} ms ago, within the last {} s",
                now.as_millis() - at,
                LIVE_WINDOW.as_secs()
            ))),
            _ => Ok(last_seen),
        }
    }
}

/// `Err(ConsumerProtected)` for the gateway's inbox consumer and the protected ones.
fn refuse_protected(consumer: &Name, options: &ResetOptions) -> Result<(), Error> {
    let refused = |reason: String| Error::ConsumerProtected {
        consumer: consumer.to_string(),
        reason,
    };
    if consumer.as_str() == GATEWAY_INBOX_CONSUMER {
        return Err(refused(
            "it is the gateway's inbox: its keys are what keep the gateway's sources \
             exactly-once, so resetting them would accept every redelivery as a new event. \
             To rebuild a destination, send a source's stored events again with \
             `idem replay --source S --since … --rebuild --destination D` instead"
                .to_owned(),
        ));
    }
    match options
        .protected
        .iter()
        .find(|(name, _)| name == consumer.as_str())
    {
        Some((_, reason)) => Err(refused(reason.clone())),
        None => Ok(()),
    }
}

/// `Err(UnknownConsumer)` unless some table holds a row of `consumer`.
async fn refuse_unknown<DB: Backend>(
    conn: &mut DB::Connection,
    consumer: &Name,
) -> Result<(), Error> {
    let (mut known, scopes) = DB::known_consumers(conn).await?;
    known.extend(
        scopes
            .iter()
            .filter_map(|scope| scope.strip_prefix(crate::kafka_offsets::LEASE_SCOPE_PREFIX))
            .map(str::to_owned),
    );
    known.sort_unstable();
    known.dedup();
    if known.iter().any(|name| name == consumer.as_str()) {
        return Ok(());
    }
    Err(Error::UnknownConsumer {
        consumer: consumer.to_string(),
        known,
    })
}

fn log(report: &ResetReport) {
    tracing::info!(
        consumer = %report.consumer,
        dry_run = report.dry_run,
        inbox = report.inbox,
        versions = report.versions,
        parked = report.parked,
        kafka_offsets = report.kafka_offsets,
        "{}",
        if report.dry_run {
            "consumer reset (dry run: nothing deleted)"
        } else {
            "consumer reset: its cursor rows are deleted"
        }
    );
}
