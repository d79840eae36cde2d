//! The transactional outbox (docs/design.md C2, C7, C9): messages written in the same transaction as
//! the state change, published later by a relay with each row's stable message id.
//!
//! # Order
//!
//! The relay guarantees order **per aggregate**, and nothing across aggregates:
//!
//! - a row with an aggregate (`aggregate_type`, `aggregate_id`) is claimable only when no older
//!   row (lower `seq`) of the same aggregate is still unpublished (pending or parked). So at most
//!   one row per aggregate is in flight at a time, and a relay publishes an aggregate's rows one
//!   per cycle, in `seq` order;
//! - rows without an aggregate are unordered: they are published as soon as they are due, in
//!   batches, by any relay;
//! - `seq` is taken at INSERT, not at commit. Per-aggregate `seq` order therefore equals commit
//!   order only when the writers of one aggregate are serialized, for example by the version
//!   guard's row lock (`VersionGuard::advance` locks the entity's row until commit on PostgreSQL
//!   and MySQL;
//!   SQLite has one writer at a time). Two unserialized transactions writing rows of one
//!   aggregate may commit in the other order than their `seq`s, and the later-`seq` row may be
//!   published first if it commits first.
//! - A **parked** row blocks the later rows of its aggregate until it is requeued
//!   ([`Outbox::requeue`]) and published, or discarded ([`Outbox::discard`]). Rows of other
//!   aggregates and rows without an aggregate are not affected.
//!
//! Relays never select rows by "seq greater than the last one seen": a transaction that took a
//! lower `seq` may commit after one with a higher `seq`, and such a row would be skipped forever.
//! They select by status and due time.

use std::fmt;
use std::time::Duration;

use idem_core::{Backoff, Entity, Name, Timestamp};
use sqlx::Transaction;

use crate::backend::Backend;
use crate::backend::outbox_ops::{NewOutboxRow, RawOutboxRow};
use crate::cut_short::ClosedIfCutShort;
use crate::error::in_transaction;
use crate::{Error, Store};

/// The longest message id accepted, in bytes: it goes into a NATS header, an AMQP `message_id`
/// (a short string, at most 255 bytes) and an HTTP `Idempotency-Key`.
pub const MAX_MESSAGE_ID_BYTES: usize = 255;

/// The default number of failed attempts after which a row is parked (see [`OutboxPolicy`]).
pub const DEFAULT_OUTBOX_MAX_ATTEMPTS: u32 = 10;

/// A message's stable id: the same on every publish of its row (NATS `Nats-Msg-Id`, AMQP
/// `message_id`, HTTP `Idempotency-Key`), so that a republished copy is recognisable downstream
/// (C7: re-publishing is allowed, a new id per attempt is not).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(String);

impl MessageId {
    /// Wraps a given id: 1 to [`MAX_MESSAGE_ID_BYTES`] bytes of visible ASCII (`!` to `~`, no
    /// spaces or control characters), since it travels in headers.
    ///
    /// # Errors
    /// [`Error::InvalidOutboxMessage`] otherwise.
    pub fn new(value: impl Into<String>) -> Result<Self, Error> {
        let value = value.into();
        if value.is_empty() || value.len() > MAX_MESSAGE_ID_BYTES {
            return Err(invalid(format!(
                "message id is {} bytes long; expected 1 to {MAX_MESSAGE_ID_BYTES} bytes",
                value.len()
            )));
        }
        if !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(format!(
                "message id {value:?} has characters other than visible ASCII ('!' to '~')"
            )));
        }
        Ok(Self(value))
    }

    /// A new id, a UUID version 7 (RFC 9562 §5.7): 48 bits of `now` in ms, then 74 random bits.
    /// Time-ordered, so the unique index is appended to rather than written at random places.
    pub fn generate(now: Timestamp) -> Self {
        let random: u128 = rand::random();
        let ms = (now.as_millis().max(0) as u128) & ((1 << 48) - 1);
        let rand_a = (random >> 64) & 0xfff;
        let rand_b = random & ((1 << 62) - 1);
        let v = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b;
        let hex = format!("{v:032x}");
        Self(format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn invalid(reason: String) -> Error {
    Error::InvalidOutboxMessage { reason }
}

/// A message to write with [`Outbox::enqueue`].
///
/// The destination is read by the relay's publisher: a NATS subject (`orders.created`), an AMQP
/// `exchange/routing_key` (no `/`: the default exchange, routing key = queue name), or an HTTP
/// URL path (`/hooks/orders`) or full URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxMessage {
    message_id: Option<MessageId>,
    destination: String,
    aggregate: Option<Entity>,
    headers: Vec<(String, String)>,
    payload: Vec<u8>,
}

impl OutboxMessage {
    /// A message to `destination` with `payload` bytes, no aggregate (unordered), no headers,
    /// and an id generated at enqueue.
    pub fn new(destination: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            message_id: None,
            destination: destination.into(),
            aggregate: None,
            headers: Vec::new(),
            payload: payload.into(),
        }
    }

    /// Uses `id` as the message id instead of generating one: for ids derived from the
    /// business fact (`order-50266-created`), stable even if the handler runs again.
    pub fn with_message_id(self, id: MessageId) -> Self {
        Self {
            message_id: Some(id),
            ..self
        }
    }

    /// Puts the message in `aggregate`'s order (see the module docs on order).
    pub fn with_aggregate(self, aggregate: Entity) -> Self {
        Self {
            aggregate: Some(aggregate),
            ..self
        }
    }

    /// Adds a header, sent as a NATS header, an AMQP header table entry or an HTTP header.
    /// Names are 1 to 255 bytes of visible ASCII without `:`; values have no control
    /// characters (checked at enqueue). Publishers set the id headers themselves
    /// (`Nats-Msg-Id`, `Idempotency-Key`): headers of those names are replaced.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn check(&self) -> Result<(), Error> {
        if self.destination.trim().is_empty() || self.destination.len() > 1024 {
            return Err(invalid(format!(
                "destination {:?} is blank or longer than 1024 bytes",
                self.destination
            )));
        }
        for (name, value) in &self.headers {
            if name.is_empty()
                || name.len() > 255
                || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
            {
                return Err(invalid(format!(
                    "header name {name:?} is not 1 to 255 bytes of visible ASCII without ':'"
                )));
            }
            if value.chars().any(char::is_control) {
                return Err(invalid(format!(
                    "header {name} has a control character in its value"
                )));
            }
        }
        Ok(())
    }
}

/// Where a row stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutboxStatus {
    /// Not yet confirmed by the broker: due now, backing off after a failure, or claimed by a
    /// relay.
    Pending,
    /// Confirmed by the broker and marked by id. Deleted by retention after the cutoff.
    Published,
    /// Failed [`OutboxPolicy::max_attempts`] times: left alone until an operator requeues or
    /// discards it. Blocks the later rows of its aggregate. Never deleted by retention.
    Parked,
}

impl OutboxStatus {
    /// `pending`, `published` or `parked`, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Published => "published",
            Self::Parked => "parked",
        }
    }

    fn parse(s: &str) -> Result<Self, Error> {
        match s {
            "pending" => Ok(Self::Pending),
            "published" => Ok(Self::Published),
            "parked" => Ok(Self::Parked),
            other => Err(corrupt(format!("unknown status {other:?}"))),
        }
    }
}

fn corrupt(detail: String) -> Error {
    Error::CorruptRow {
        table: "idem_outbox",
        detail,
    }
}

/// The token of one claim: only its holder may record the row's failure or defer it, so a relay
/// whose claim expired cannot disturb the next one's (the row's publication by id stays allowed:
/// it is a fact either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClaimToken(i64);

/// A row of `idem_outbox`, as claimed by a relay or listed by an operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxRow {
    /// Insertion sequence: rough order only (taken at INSERT, not at commit).
    pub seq: i64,
    /// The stable message id.
    pub message_id: MessageId,
    /// The destination (subject, `exchange/routing_key`, URL path).
    pub destination: String,
    /// The aggregate whose order the row keeps, if any.
    pub aggregate: Option<Entity>,
    /// Headers, in the order they were added.
    pub headers: Vec<(String, String)>,
    /// The payload bytes.
    pub payload: Vec<u8>,
    /// Where the row stands.
    pub status: OutboxStatus,
    /// Publish attempts so far that did not get the message confirmed: failures and deferrals
    /// ([`Outbox::defer`], such as HTTP 409) alike.
    pub attempts: u32,
    /// When the row is next due; while claimed, when the claim expires.
    pub next_attempt_at: Timestamp,
    /// The claim, on rows returned by [`Outbox::claim`]; on listed rows, the last claim if the
    /// row is claimed or its claim expired unreported.
    pub claim: Option<ClaimToken>,
    /// The reason of the last failure or deferral.
    pub last_error: Option<String>,
    /// When the row was written (store clock).
    pub created_at: Timestamp,
    /// When the row was marked published.
    pub published_at: Option<Timestamp>,
}

impl OutboxRow {
    fn from_raw(raw: RawOutboxRow) -> Result<Self, Error> {
        let (
            seq,
            message_id,
            destination,
            aggregate_type,
            aggregate_id,
            headers,
            payload,
            status,
            attempts,
            next_attempt_at,
            claim_token,
            last_error,
            created_at,
            published_at,
        ) = raw;
        let aggregate = match (aggregate_type, aggregate_id) {
            (Some(t), Some(id)) => Some(
                Entity::new(&t, id)
                    .map_err(|e| corrupt(format!("row {seq} has a bad aggregate: {e}")))?,
            ),
            _ => None,
        };
        Ok(Self {
            seq,
            message_id: MessageId::new(message_id)
                .map_err(|e| corrupt(format!("row {seq}: {e}")))?,
            destination,
            aggregate,
            headers: decode_headers(&headers)
                .ok_or_else(|| corrupt(format!("row {seq} has unreadable headers {headers:?}")))?,
            payload,
            status: OutboxStatus::parse(&status)?,
            attempts: u32::try_from(attempts).unwrap_or(u32::MAX),
            next_attempt_at: Timestamp(next_attempt_at),
            claim: claim_token.map(ClaimToken),
            last_error,
            created_at: Timestamp(created_at),
            published_at: published_at.map(Timestamp),
        })
    }
}

/// Headers are stored as a JSON array of `[name, value]` pairs, readable by operators.
fn encode_headers(headers: &[(String, String)]) -> String {
    serde_json::to_string(headers).unwrap_or_else(|_| "[]".to_owned())
}

fn decode_headers(text: &str) -> Option<Vec<(String, String)>> {
    serde_json::from_str(text).ok()
}

/// Retries of failed publishes: exponential backoff from `backoff_base`, doubling per failed
/// attempt up to `backoff_max`, and parking after `max_attempts` attempts. A deferral
/// ([`Outbox::defer`]) counts as an attempt and waits at least the backoff too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxPolicy {
    /// Attempts (failures and deferrals) after which a row is parked (at least 1).
    pub max_attempts: u32,
    /// The wait after the first failure.
    pub backoff_base: Duration,
    /// The longest wait between attempts.
    pub backoff_max: Duration,
}

impl Default for OutboxPolicy {
    /// [`DEFAULT_OUTBOX_MAX_ATTEMPTS`] attempts, 1 s doubling up to 5 min: about 17 minutes from the
    /// first failure to the park.
    fn default() -> Self {
        Self {
            max_attempts: DEFAULT_OUTBOX_MAX_ATTEMPTS,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
        }
    }
}

impl OutboxPolicy {
    /// The wait after failure number `failures` (1-based): `backoff_base × 2^(failures − 1)`,
    /// capped at `backoff_max`.
    pub fn backoff(&self, failures: u32) -> Duration {
        // A base above the cap waits the cap.
        Backoff::exponential(self.backoff_base.min(self.backoff_max), self.backoff_max)
            .delay(failures)
    }
}

/// What [`Outbox::mark_failed`] or [`Outbox::defer`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboxFailure {
    /// The row backs off and is due again at `at`.
    Retry {
        /// When it is due again.
        at: Timestamp,
        /// Failed attempts so far.
        attempts: u32,
    },
    /// This failure (or deferral) was the last allowed attempt: the row is parked.
    Parked {
        /// Failed attempts so far.
        attempts: u32,
    },
    /// Nothing was written: the claim is no longer held (it expired and another relay claimed
    /// the row, or the row was published meanwhile).
    NotHeld,
}

/// The outbox of a store. Made by [`Store::outbox`].
#[derive(Debug)]
pub struct Outbox<DB: Backend> {
    store: Store<DB>,
    policy: OutboxPolicy,
    /// The relay's name in the consumer registry.
    relay: String,
}

/// The name an outbox's relay has in the consumer registry unless
/// [`Outbox::relay_name`] sets one.
pub const DEFAULT_OUTBOX_RELAY_NAME: &str = "outbox_relay";

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for Outbox<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            policy: self.policy,
            relay: self.relay.clone(),
        }
    }
}

impl<DB: Backend> Outbox<DB> {
    pub(crate) fn new(store: Store<DB>) -> Self {
        Self {
            store,
            policy: OutboxPolicy::default(),
            relay: DEFAULT_OUTBOX_RELAY_NAME.to_owned(),
        }
    }

    /// Names the relay that publishes through this outbox `name` in the consumer registry
    /// (default [`DEFAULT_OUTBOX_RELAY_NAME`]), registered as
    /// [`ConsumerKind::Relay`](crate::ConsumerKind::Relay) now: its claims and marks update that
    /// row's last seen. Give each relay of a fleet that serves other destinations its own name.
    pub fn relay_name(self, name: &Name) -> Self {
        self.store
            .register_consumer(name, crate::ConsumerKind::Relay);
        Self {
            relay: name.to_string(),
            ..self
        }
    }

    /// As [`enqueue`](Self::enqueue), recording `consumer` as the row's writer (its
    /// `consumer` column, counted per consumer by [`Store::consumers`]). `enqueue` leaves it
    /// NULL; [`Runner::enqueue_outbox`](crate::Runner::enqueue_outbox) records the runner's
    /// consumer.
    ///
    /// # Errors
    /// As [`enqueue`](Self::enqueue).
    pub async fn enqueue_for(
        &self,
        tx: &mut DB::Connection,
        consumer: &Name,
        message: &OutboxMessage,
    ) -> Result<MessageId, Error> {
        self.enqueue_with(tx, Some(consumer.as_str()), message)
            .await
    }

    /// The same outbox with another retry policy (used by [`mark_failed`](Self::mark_failed)).
    pub fn with_policy(self, policy: OutboxPolicy) -> Self {
        Self {
            policy: OutboxPolicy {
                max_attempts: policy.max_attempts.max(1),
                ..policy
            },
            ..self
        }
    }

    /// The retry policy.
    pub fn policy(&self) -> OutboxPolicy {
        self.policy
    }

    /// The store.
    pub fn store(&self) -> &Store<DB> {
        &self.store
    }

    /// Writes `message` as a pending row inside the caller's open transaction (C2): it exists
    /// only if that transaction commits, together with the state change it announces. Taking
    /// the transaction is what makes a write after the commit impossible: `commit` consumes
    /// it.
    ///
    /// ```compile_fail,E0382
    /// # use idem_sql::{OutboxMessage, SqliteStore, Error};
    /// async fn handler(store: SqliteStore) -> Result<(), Error> {
    ///     let mut tx = store.begin().await?;
    ///     // … the state change …
    ///     tx.commit().await?;
    ///     // A task spawned after the commit cannot write the outbox row: `tx` was moved
    ///     // into `commit`, and there is no other way to enqueue.
    ///     tokio::spawn(async move {
    ///         store.outbox().enqueue(&mut tx, &OutboxMessage::new("orders.created", "{}")).await
    ///     });
    ///     Ok(())
    /// }
    /// ```
    ///
    /// The same task compiles when it takes the open transaction along and commits it after
    /// the enqueue:
    ///
    /// ```no_run
    /// # use idem_sql::{OutboxMessage, SqliteStore, Error};
    /// async fn handler(store: SqliteStore) -> Result<(), Error> {
    ///     let mut tx = store.begin().await?;
    ///     // … the state change …
    ///     tokio::spawn(async move {
    ///         store.outbox().enqueue(&mut tx, &OutboxMessage::new("orders.created", "{}")).await?;
    ///         tx.commit().await?;
    ///         Ok::<(), Error>(())
    ///     })
    ///     .await
    ///     .expect("the task ran")
    /// }
    /// ```
    ///
    /// Returns the message id: the given one, or one generated now ([`MessageId::generate`])
    /// and stored, so every publish of the row carries it.
    ///
    /// # Errors
    /// [`Error::InvalidOutboxMessage`] for a blank or oversized destination or a bad header;
    /// [`Error::DuplicateMessageId`] when a row with the given id exists (committed, or written
    /// by this transaction); [`Error::NoTransaction`] when `tx` has no transaction open (a
    /// pooled connection): the row would commit on its own; [`Error::Database`] otherwise, of kind
    /// [`Conflict`](crate::ErrorKind::Conflict) on a serialization failure or SQLITE_BUSY.
    pub async fn enqueue(
        &self,
        tx: &mut DB::Connection,
        message: &OutboxMessage,
    ) -> Result<MessageId, Error> {
        self.enqueue_with(tx, None, message).await
    }

    /// [`enqueue`](Self::enqueue) with the writer's name, if known.
    async fn enqueue_with(
        &self,
        tx: &mut DB::Connection,
        consumer: Option<&str>,
        message: &OutboxMessage,
    ) -> Result<MessageId, Error> {
        in_transaction(tx, "Outbox::enqueue")?;
        message.check()?;
        let now = self.store.now();
        let id = message
            .message_id
            .clone()
            .unwrap_or_else(|| MessageId::generate(now));
        let headers = encode_headers(&message.headers);
        let row = NewOutboxRow {
            message_id: id.as_str(),
            destination: &message.destination,
            aggregate_type: message
                .aggregate
                .as_ref()
                .map(|e| e.aggregate_type().as_str()),
            aggregate_id: message.aggregate.as_ref().map(Entity::aggregate_id),
            headers: &headers,
            payload: &message.payload,
            now: now.as_millis(),
            consumer,
        };
        if DB::outbox_insert(tx, &row).await? {
            Ok(id)
        } else {
            Err(Error::DuplicateMessageId { message_id: id })
        }
    }

    /// Claims up to `limit` due rows for `claim_ttl`, oldest `seq` first, in its own short
    /// statement. Due: pending, past its backoff and any earlier claim, and first in its
    /// aggregate (module docs). Rows are selected by status and due time, never by "seq greater
    /// than the last one seen".
    ///
    /// A claimed row is not due again until `claim_ttl` passes: the relay must publish it and
    /// report ([`mark_published`](Self::mark_published), [`mark_failed`](Self::mark_failed),
    /// [`defer`](Self::defer)) within it, else another relay takes it and publishes it again
    /// with the same id. On PostgreSQL and MySQL rows being claimed by another relay at the same moment
    /// are skipped (`FOR UPDATE SKIP LOCKED`), so concurrent relays never claim one row twice;
    /// SQLite has one writer at a time.
    ///
    /// # Errors
    /// [`Error::Database`] (a conflict or an unreachable database);
    /// [`Error::CorruptRow`] for a row idem did not write.
    pub async fn claim(&self, limit: u32, claim_ttl: Duration) -> Result<Vec<OutboxRow>, Error> {
        let token: i64 = rand::random();
        let now = self.store.now().as_millis();
        let ttl = i64::try_from(claim_ttl.as_millis()).unwrap_or(i64::MAX / 4);
        let mut conn = ClosedIfCutShort::acquire(self.store.pool()).await?;
        let raw = DB::outbox_claim(&mut conn, now, ttl, i64::from(limit), token).await;
        conn.finished();
        let raw = raw?;
        // The relay's last seen, at most every flush interval, in a transaction of its own.
        (self.store.tally()).seen(&self.relay, crate::ConsumerKind::Relay, now);
        crate::consumers::flush_if_due(&self.store).await;
        let mut rows = raw
            .into_iter()
            .map(OutboxRow::from_raw)
            .collect::<Result<Vec<_>, _>>()?;
        rows.sort_by_key(|r| r.seq);
        Ok(rows)
    }

    /// Marks the rows of `ids` published, after the broker confirmed them (C7). By message id
    /// and without a claim check: a row whose copy the broker confirmed is published, whoever
    /// sent it. Rows already published are left as they are.
    ///
    /// Returns how many rows changed.
    ///
    /// # Errors
    /// [`Error::Database`]. Nothing is lost then: the rows stay pending and are published again
    /// with the same ids after their claim expires.
    pub async fn mark_published(&self, ids: &[MessageId]) -> Result<u64, Error> {
        if ids.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = ids.iter().map(MessageId::as_str).collect();
        let mut conn = self.store.pool().acquire().await?;
        Ok(DB::outbox_mark_published(&mut conn, &ids, self.store.now().as_millis()).await?)
    }

    /// Records a failed publish of a claimed `row` with `reason`: counts the attempt, then backs
    /// off ([`OutboxPolicy::backoff`]) or parks the row after
    /// [`OutboxPolicy::max_attempts`] failures. Fenced by the row's claim token.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn mark_failed(&self, row: &OutboxRow, reason: &str) -> Result<OutboxFailure, Error> {
        self.count_attempt(row, reason, Duration::ZERO).await
    }

    /// Counts a failed attempt of the claimed `row` (fenced by its claim token): due again
    /// after the policy's backoff, or `at_least`, whichever is later; parked on the last
    /// allowed attempt.
    async fn count_attempt(
        &self,
        row: &OutboxRow,
        reason: &str,
        at_least: Duration,
    ) -> Result<OutboxFailure, Error> {
        let Some(ClaimToken(token)) = row.claim else {
            return Ok(OutboxFailure::NotHeld);
        };
        let at = self.due_after(row, at_least);
        let mut conn = ClosedIfCutShort::acquire(self.store.pool()).await?;
        let result = DB::outbox_fail(
            &mut conn,
            row.message_id.as_str(),
            token,
            i64::from(self.policy.max_attempts),
            at.as_millis(),
            reason,
        )
        .await;
        conn.finished();
        failure(result?, at)
    }

    /// When a row that failed an attempt now is due again: after the policy's backoff for the
    /// attempt, or after `at_least`, whichever is later.
    fn due_after(&self, row: &OutboxRow, at_least: Duration) -> Timestamp {
        let backoff = self.policy.backoff(row.attempts.saturating_add(1));
        self.store.now().saturating_add(at_least.max(backoff))
    }

    /// Whether [`lock_due`](Self::lock_due) claims rows by row locks that other relays skip
    /// (PostgreSQL, MySQL: `true`), rather than by the database's single write lock (SQLite: `false`,
    /// where holding it across a publish would stall every writer, so relays
    /// [`claim`](Self::claim) instead).
    pub fn locks_rows(&self) -> bool {
        DB::LOCKS_ROWS
    }

    /// Claims up to `limit` due rows (as [`claim`](Self::claim) selects them, oldest `seq`
    /// first; none when nothing is due) by locking them in a transaction that the returned
    /// [`LockedBatch`] holds until
    /// [`commit`](LockedBatch::commit): the relay publishes while holding it and records the
    /// outcomes in it. Nothing is written to claim a row, so a cycle costs one write per row
    /// instead of two; a relay that dies releases its rows with its connection, and other
    /// relays skip them meanwhile (`FOR UPDATE SKIP LOCKED`). For PostgreSQL and MySQL: on SQLite the
    /// transaction holds the database's write lock, which blocks every other writer while it is
    /// open (see [`locks_rows`](Self::locks_rows)).
    ///
    /// On PostgreSQL the transaction does not wait for its commit to reach the disk
    /// (`synchronous_commit = off`): an outcome lost in a database crash leaves the row pending,
    /// and it is published again with the same message id (C7). MySQL has no such setting per
    /// transaction: its commits are as durable as the server makes them all.
    ///
    /// # Errors
    /// [`Error::Database`]; [`Error::CorruptRow`] for a row idem did not write.
    pub async fn lock_due(&self, limit: u32) -> Result<(LockedBatch<DB>, Vec<OutboxRow>), Error> {
        let mut tx = self.store.begin().await?;
        let now = self.store.now().as_millis();
        // Written with the batch's commit when a flush is due.
        (self.store.tally()).seen(&self.relay, crate::ConsumerKind::Relay, now);
        let rows = DB::outbox_lock_due(&mut tx, now, i64::from(limit))
            .await?
            .into_iter()
            .map(OutboxRow::from_raw)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            LockedBatch {
                outbox: self.clone(),
                tx,
            },
            rows,
        ))
    }

    /// Records that the destination answered "not now" for a claimed `row` (HTTP 409 for an
    /// idempotency key still in flight) with `reason`, asking to wait `delay`. It counts as an
    /// attempt, so that a destination answering "not now" forever gets the row parked after
    /// [`OutboxPolicy::max_attempts`] rather than retried forever; the row is due again after
    /// the longer of `delay` and the policy's backoff for this attempt
    /// ([`OutboxPolicy::backoff`]). Fenced by the row's claim token, as
    /// [`mark_failed`](Self::mark_failed).
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn defer(
        &self,
        row: &OutboxRow,
        delay: Duration,
        reason: &str,
    ) -> Result<OutboxFailure, Error> {
        self.count_attempt(row, reason, delay).await
    }

    /// Up to `limit` rows with `status`, oldest first: for operators (`parked` ones to requeue).
    ///
    /// # Errors
    /// [`Error::Database`]; [`Error::CorruptRow`] for a row idem did not write.
    pub async fn list(&self, status: OutboxStatus, limit: u32) -> Result<Vec<OutboxRow>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::outbox_list(&mut conn, status.as_str(), i64::from(limit))
            .await?
            .into_iter()
            .map(OutboxRow::from_raw)
            .collect()
    }

    /// The row of `id`, if it exists (published rows until retention deletes them).
    ///
    /// # Errors
    /// As [`list`](Self::list).
    pub async fn get(&self, id: &MessageId) -> Result<Option<OutboxRow>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::outbox_get(&mut conn, id.as_str())
            .await?
            .map(OutboxRow::from_raw)
            .transpose()
    }

    /// Puts the parked row `id` back to pending, due now, with its attempts reset to 0 (its last
    /// error is kept until the next attempt). Returns `false` when there is no parked row `id`.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn requeue(&self, id: &MessageId) -> Result<bool, Error> {
        let mut conn = self.store.pool().acquire().await?;
        Ok(DB::outbox_requeue(&mut conn, id.as_str(), self.store.now().as_millis()).await?)
    }

    /// Deletes the parked row `id`, never to be published, unblocking its aggregate. Returns
    /// `false` when there is no parked row `id`.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn discard(&self, id: &MessageId) -> Result<bool, Error> {
        let mut conn = self.store.pool().acquire().await?;
        Ok(DB::outbox_discard(&mut conn, id.as_str()).await?)
    }
}

/// Outbox rows claimed by lock ([`Outbox::lock_due`]): an open transaction holding them, in
/// which their outcomes are recorded. Dropping it without [`commit`](Self::commit) rolls back:
/// the rows are due again at once and published again with the same message ids.
#[derive(Debug)]
pub struct LockedBatch<DB: Backend> {
    outbox: Outbox<DB>,
    tx: Transaction<'static, DB>,
}

impl<DB: Backend> LockedBatch<DB> {
    /// Marks `ids` published (as [`Outbox::mark_published`]), effective at the commit.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn mark_published(&mut self, ids: &[MessageId]) -> Result<u64, Error> {
        if ids.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = ids.iter().map(MessageId::as_str).collect();
        let now = self.outbox.store.now().as_millis();
        Ok(DB::outbox_mark_published_locked(&mut self.tx, &ids, now).await?)
    }

    /// Records a failed publish of `row` (as [`Outbox::mark_failed`]; the lock is the fence),
    /// effective at the commit.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn mark_failed(
        &mut self,
        row: &OutboxRow,
        reason: &str,
    ) -> Result<OutboxFailure, Error> {
        self.count_attempt(row, reason, Duration::ZERO).await
    }

    /// Records a "not now" answer for `row` (as [`Outbox::defer`]: counts an attempt, due again
    /// after the longer of `delay` and the policy's backoff, parked at the last attempt; the
    /// lock is the fence), effective at the commit.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn defer(
        &mut self,
        row: &OutboxRow,
        delay: Duration,
        reason: &str,
    ) -> Result<OutboxFailure, Error> {
        self.count_attempt(row, reason, delay).await
    }

    /// [`Outbox::count_attempt`] for a row this transaction holds by lock.
    async fn count_attempt(
        &mut self,
        row: &OutboxRow,
        reason: &str,
        at_least: Duration,
    ) -> Result<OutboxFailure, Error> {
        let at = self.outbox.due_after(row, at_least);
        let max_attempts = i64::from(self.outbox.policy.max_attempts);
        let result = DB::outbox_fail_locked(
            &mut self.tx,
            row.message_id.as_str(),
            max_attempts,
            at.as_millis(),
            reason,
        )
        .await?;
        failure(result, at)
    }

    /// Commits the recorded outcomes and releases the rows.
    ///
    /// # Errors
    /// [`Error::Database`]: nothing recorded in this batch is kept; its rows are due again and
    /// published again with the same ids.
    pub async fn commit(self) -> Result<(), Error> {
        // The consumer registry's pending rows ride in this commit when a flush is due.
        crate::consumers::commit(&self.outbox.store, self.tx).await
    }
}

/// What a failure statement's result means: the row's new state, or not held.
fn failure(result: Option<(String, i64)>, at: Timestamp) -> Result<OutboxFailure, Error> {
    Ok(match result {
        None => OutboxFailure::NotHeld,
        Some((status, attempts)) => {
            let attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
            if OutboxStatus::parse(&status)? == OutboxStatus::Parked {
                OutboxFailure::Parked { attempts }
            } else {
                OutboxFailure::Retry { at, attempts }
            }
        }
    })
}

impl<DB: Backend> Store<DB> {
    /// The transactional outbox (`idem_outbox`): rows written in the application's
    /// transaction, published by a relay.
    pub fn outbox(&self) -> Outbox<DB> {
        Outbox::new(self.clone())
    }
}
