//! idem's store on SQLite, PostgreSQL and (feature `mysql`) MySQL 8.0+ / MariaDB 10.6+, through
//! sqlx: the inbox (claims), the version guard,
//! fenced leases, the effect ledger and its worker ([`EffectLedger`], [`EffectWorker`]), the
//! transactional outbox ([`Outbox`]), broker consumers' dead letters ([`DeadLetters`]),
//! retention, a stopped consumer's reset for a rebuild ([`Store::reset_consumer`]), the
//! [`Runner`] that puts claim, version check and the application's writes (its effect intents
//! and outbox rows included) in one transaction, and the [`Replay`] that feeds an application's
//! event log through a runner (a new consumer version catching up).
//!
//! Most users depend on the `idem` facade crate, which re-exports this crate and `idem-core`;
//! its documentation is the tutorial.
//!
//! | feature | store | sqlx driver |
//! |---|---|---|
//! | `sqlite` (default) | `SqliteStore` | SQLite, bundled |
//! | `postgres` (default) | `PgStore` | PostgreSQL |
//! | `mysql` | `MySqlStore`: MySQL 8.0 or later, MariaDB 10.6 or later (tested on MariaDB 10.11) | MySQL |
//!
//! Every part works on each store, with the same guarantees (docs/design.md C1–C11). What MySQL
//! does differently, and why: the claim is a plain `INSERT` whose duplicate-key error (1062)
//! means "already there"; transactions run at READ COMMITTED whatever the session's default;
//! keys are `VARBINARY`, compared byte for byte whatever the database's collation; work is
//! claimed with `FOR UPDATE SKIP LOCKED`; deadlocks (1213) and lock-wait timeouts (1205) are
//! [`ErrorKind::Conflict`]; `connect` refuses a server older than the table above; `migrate`
//! runs a migration that an earlier failure left unfinished again (DDL commits statement by
//! statement there) and refuses tables made by another idem ([`Error::IncompatibleSchema`]).
//! `docs/mysql.md` is the operator's page.
//!
//! # The consumer registry
//!
//! Every consumer has a row in `idem_consumers` (its kind, first and last seen, its newest lag)
//! and counts per 5-minute bucket in `idem_consumer_counts` (claimed, duplicates, stale, gaps),
//! read as [`ConsumerReport`]s by [`Store::consumers`] (`idem consumers list|show`): counts
//! over 1 hour, 24 hours and 30 days, dead letters (read from `idem_dead_letters`), effects and
//! outbox rows by status (they record the consumer that wrote them:
//! [`Runner::enqueue_effect`], [`Runner::enqueue_outbox`]), what it still holds, its successor
//! and its [`ConsumerFlag`]s (superseded, orphaned, unhealthy, judged by [`Thresholds`]).
//!
//! [`Runner::new`] registers its consumer; the broker consumers, the [`EffectWorker`], the
//! outbox relay ([`Outbox::relay_name`]) and the Idempotency-Key layer register their kinds
//! under their names. The runner counts each outcome in memory (one mutex lock per event);
//! nothing is written on a duplicate's account. The counts are written by the consumer's own
//! commits: when a flush is due (something pending, the last flush at least
//! [`Store::counts_flush_interval`] ago, 5 s by default) one multi-row upsert of the counts and
//! one of the registry rows ride in the commit (or, for a duplicate, in a short transaction of
//! its own); a commit that fails keeps them for the next flush. No background task writes: on
//! SQLite a writer holds the database's only write lock, and a frozen process must not hold it
//! for a count. Consumers flush at shutdown ([`Store::flush_consumer_counts`]). A consumer that
//! commits its own transactions (the Kafka processor, a batched ingest) commits with
//! [`Store::commit_counting`]; one outside any transaction counts with
//! [`Store::count_consumer_events`] and flushes with [`Store::flush_consumer_counts_if_due`].
//!
//! **What a crash can lose**: the counts since the last flush of the process that crashed — at
//! most a flush interval of them — never an event: the events' claims, versions and effects
//! commit as before. Counts rows are per process (`instance`), so two processes never write
//! one row. Switch counting off with [`Store::consumer_counts`]`(false)`. A database of an
//! older idem is back-filled by migration 7 from the rows it holds, first seen "at or before"
//! (`first_seen_exact` false: retention may have deleted older rows).

mod any_store;
mod app_sql;
mod backend;
mod boxed_handler;
// Resetting a consumer's cursor for a rebuild
mod consumer_reset;
// The consumer registry and its counts (issue 34)
mod consumers;
mod cut_short;
mod database;
mod dead_letters;
mod effects;
mod error;
mod handler_error;
mod inbox;
// Kafka consumer offsets stored with the output, and the partition leases (idem-broker's consumer)
mod kafka_offsets;
mod lease_store;
mod lineage;
pub mod metric_definitions;
mod migrations;
mod outbox;
mod pool_options;
mod redact;
// replaying an application's event log into a consumer (issue 33)
mod replay;
mod retention;
mod runner;
mod store;
mod version_guard;

pub use any_store::AnyStore;
pub use app_sql::Sql;
pub use backend::Backend;
pub use boxed_handler::BoxedHandler;
pub use consumer_reset::{GATEWAY_INBOX_CONSUMER, LIVE_WINDOW, ResetOptions, ResetReport};
pub use consumers::{
    ConsumerFlag, ConsumerKind, ConsumerReport, Consumers, DEFAULT_COUNTS_FLUSH_INTERVAL,
    DEFAULT_ORPHAN_AFTER, EventCounts, Holds, Lag, ListOptions, Thresholds, WindowCounts,
};
pub use database::{DatabaseKind, same_database};
pub use dead_letters::{DeadLetter, DeadLetterRecord, DeadLetters};
pub use effects::{
    Applied, CallOutcome, DEFAULT_EFFECT_BATCH_SIZE, DEFAULT_EFFECT_CALL_TIMEOUT,
    DEFAULT_EFFECT_POLL_INTERVAL, DEFAULT_EFFECT_WORKER_NAME, DEFAULT_KEY_RETENTION,
    DEFAULT_MAX_EFFECT_ATTEMPTS, EFFECT_LEASE_MARGIN, EffectCall, EffectLedger, EffectRecord,
    EffectStatus, EffectWorker, Enqueued, Provider, Resolution, WorkerReport,
};
pub use error::{BoxError, Error, ErrorKind};
pub use handler_error::HandlerError;
pub use inbox::{Claim, Inbox};
// Kafka consumer offsets and partition fences
pub use kafka_offsets::{KafkaOffset, KafkaOffsets, PartitionClaim, PartitionFence};
pub use lease_store::LeaseStore;
pub use migrations::run_migrations;
pub use outbox::{
    ClaimToken, DEFAULT_OUTBOX_MAX_ATTEMPTS, DEFAULT_OUTBOX_RELAY_NAME, LockedBatch,
    MAX_MESSAGE_ID_BYTES, MessageId, Outbox, OutboxFailure, OutboxMessage, OutboxPolicy, OutboxRow,
    OutboxStatus,
};
pub use pool_options::{DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, PoolOptions};
pub use redact::redact_url;
pub use replay::{
    EventLog, HandlerEffects, JsonlLog, LogEntries, LoggedEvent, Replay, ReplayProgress,
    ReplayReport,
};
pub use retention::GcReport;
pub use runner::{BoxFuture, DEFAULT_MAX_ATTEMPTS, Event, Outcome, Runner};
#[cfg(feature = "mysql")]
pub use store::MySqlStore;
#[cfg(feature = "postgres")]
pub use store::PgStore;
#[cfg(feature = "sqlite")]
pub use store::SqliteStore;
pub use store::Store;
pub use version_guard::{Proposed, VersionGuard};

/// The sqlx this crate is built with, for opening transactions and writing queries with the same
/// types.
pub use sqlx;

/// What [`handler!`] expands to; not part of the API.
#[doc(hidden)]
pub use boxed_handler::boxed_handler as __boxed_handler;
