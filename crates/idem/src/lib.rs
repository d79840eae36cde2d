//! # idem: exactly one effect per event under at-least-once delivery
//!
//! Every webhook sender and message broker delivers at least once: duplicates, replays,
//! reordering, and crashes between the work and the acknowledgement are the contract. idem makes
//! a handler apply each event once, in the handler's own database transaction:
//!
//! 1. **claim** the event's [`DedupKey`] in the inbox: an `INSERT … ON CONFLICT DO NOTHING`,
//!    [`Claim::Fresh`] or [`Claim::Duplicate`], with no read before the write;
//! 2. **advance** the entity's [`Version`]: [`Advance::Applied`], [`Advance::Stale`] (older than
//!    what was applied: recorded, never applied), [`Advance::Tie`] (same version, another event:
//!    applied and reported) or [`Advance::Gap`] (a dense sequence skipped numbers);
//! 3. make the application's own writes, and **commit**. A crash anywhere before the commit
//!    leaves nothing behind; the next delivery runs again.
//!
//! The [`Runner`] does the three steps in one call and returns an [`Outcome`]. For work that
//! cannot live in one transaction (an HTTP Idempotency-Key, an external call), the
//! [`LeaseStore`] hands out leases with [`FencingToken`]s. [`Store::gc`] deletes old keys in
//! batches, never sooner than the sender's redelivery horizon ([`RetentionPolicy`]).
//!
//! ## Example: Stripe subscription events, delivered out of order and twice
//!
//! ```
//! use idem::sqlx;
//! use idem::{DedupKey, Entity, Event, EventId, Name, Outcome, Runner, SqliteStore, Version};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("app.db").display());
//! let store = SqliteStore::connect(&url).await?; // or PgStore::connect("postgres://…")
//! store.migrate().await?;
//! sqlx::query("CREATE TABLE subscriptions (id TEXT PRIMARY KEY, status TEXT NOT NULL)")
//!     .execute(store.pool())
//!     .await?;
//!
//! let runner = Runner::new(store.clone(), &Name::new("consumer", "billing_v1")?);
//! let stripe = Name::new("source", "stripe")?;
//!
//! // `customer.subscription.updated` (created 1623979266, active) arrives first, then a
//! // redelivery of it, then the older `customer.subscription.created` (1623979265, incomplete).
//! let deliveries = [
//!     ("evt_2", 1_623_979_266, "active"),
//!     ("evt_2", 1_623_979_266, "active"),
//!     ("evt_1", 1_623_979_265, "incomplete"),
//! ];
//! let mut outcomes = Vec::new();
//! for (id, created, status) in deliveries {
//!     let event = Event::new(DedupKey::from_event(&stripe, &EventId::new(id)?))
//!         .with_entity(Entity::new("subscription", "sub_1")?, Version::timestamp(created));
//!     let outcome = runner
//!         .run(&event, |tx| {
//!             Box::pin(async move {
//!                 sqlx::query(
//!                     "INSERT INTO subscriptions (id, status) VALUES ('sub_1', $1) \
//!                      ON CONFLICT (id) DO UPDATE SET status = excluded.status",
//!                 )
//!                 .bind(status)
//!                 .execute(&mut **tx)
//!                 .await?;
//!                 Ok(())
//!             })
//!         })
//!         .await?;
//!     outcomes.push(outcome.name());
//! }
//! assert_eq!(outcomes, ["applied", "duplicate", "stale"]);
//!
//! let status: String = sqlx::query_scalar("SELECT status FROM subscriptions WHERE id = 'sub_1'")
//!     .fetch_one(store.pool())
//!     .await?;
//! assert_eq!(status, "active");
//! # Ok(())
//! # }
//! ```
//!
//! Inside a handler, `&mut **tx` is the open connection; `?` turns a `sqlx::Error` into an
//! [`Error`] whose [`kind`](Error::kind) says whether it is retryable, and
//! [`Error::handler`] wraps the application's own errors. The runner retries conflicts
//! (serialization failures, deadlocks, SQLITE_BUSY) itself; on any other error nothing was
//! committed and the delivery should be answered with a 5xx or a nack.
//!
//! ## Without the runner
//!
//! ```no_run
//! # async fn f(store: idem::PgStore, key: idem::DedupKey) -> Result<(), idem::Error> {
//! let consumer = idem::Name::new("consumer", "billing_v1")?;
//! let mut tx = store.begin().await?; // READ COMMITTED; BEGIN IMMEDIATE on SQLite
//! match store.inbox(&consumer).claim(&mut tx, &key).await? {
//!     idem::Claim::Duplicate => return Ok(()), // acknowledge, do nothing (C3)
//!     idem::Claim::Fresh => { /* the application's writes with &mut *tx */ }
//! }
//! tx.commit().await?; // acknowledge only after this
//! # Ok(()) }
//! ```
//!
//! ## Ties and gaps
//!
//! Stripe's `created` has one-second resolution, so two events of one object can carry the same
//! version. A [`Advance::Tie`] is never stale: it is applied and reported ([`Outcome::Tie`]) so
//! that the application can refetch the object; a secondary value
//! ([`Version::with_secondary`]) decides instead when both events carry one. Dense integer
//! sequences ([`Version::sequence`]) also report gaps: applied and reported by default, or held
//! back with [`GapPolicy::Reject`] / [`GapPolicy::Park`] (`Runner::gap_policy`), in which case
//! the outcome says not to acknowledge ([`Outcome::acknowledge`]) and the sender's retry comes
//! back later.
//!
//! ## Leases, for work outside one transaction
//!
//! An HTTP Idempotency-Key, an email or a forwarded request cannot commit with the database.
//! [`LeaseStore`] hands out a lease per key with a [`FencingToken`]; only the current token can
//! complete or release it, so a holder that stalled past its expiry cannot overwrite its
//! successor. Time comes from the store's clock, injectable for tests:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use idem::{Acquire, ErrorKind, FencingToken, LeaseKey, ManualClock, SqliteStore, Timestamp, Ttl};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("leases.db").display());
//! let clock = ManualClock::new(Timestamp(1_700_000_000_000));
//! let store = SqliteStore::connect(&url).await?.with_clock(Arc::new(clock.clone()));
//! store.migrate().await?;
//! let leases = store.leases();
//! let key = LeaseKey::new("mailer", "receipt:evt_1")?;
//! let ttl = Ttl::new(Duration::from_secs(30))?;
//!
//! let Acquire::Acquired { token: a, .. } = leases.acquire(&key, ttl).await? else { panic!() };
//! clock.advance(Duration::from_secs(31)); // A stalls past its expiry; B takes over
//! let Acquire::Acquired { token: b, takeover, .. } = leases.acquire(&key, ttl).await? else { panic!() };
//! assert_eq!((a, b, takeover), (FencingToken(1), FencingToken(2), true));
//! assert_eq!(leases.complete(&key, a, b"late").await.unwrap_err().kind(), ErrorKind::Fenced);
//! leases.complete(&key, b, b"sent").await?;
//! assert_eq!(leases.acquire(&key, ttl).await?, Acquire::Completed { record: b"sent".to_vec() });
//! # Ok(())
//! # }
//! ```
//!
//! ## Retention
//!
//! Inbox keys must outlive every redelivery: [`RetentionPolicy::new`] refuses a retention shorter
//! than the sender's horizon ([`horizon::STRIPE`] is 3 days), naming both, and [`Store::gc`]
//! deletes older keys in batches, never version rows or live leases:
//!
//! ```no_run
//! # async fn f(store: idem::PgStore) -> Result<(), idem::Error> {
//! use std::num::NonZeroU32;
//! use std::time::Duration;
//! let policy = idem::RetentionPolicy::new(Duration::from_secs(30 * 86_400), idem::horizon::STRIPE)?;
//! let report = store.gc(&policy, NonZeroU32::new(1_000).expect("non-zero")).await?;
//! println!("deleted {} inbox keys", report.inbox);
//! # Ok(()) }
//! ```
//!
//! ## Crates
//!
//! | crate | holds |
//! |---|---|
//! | `idem-core` | keys, versions and the C5 rule, leases, retention, clock; no I/O |
//! | `idem-sql` | the store on SQLite and PostgreSQL (sqlx 0.9), migrations, runner, metrics |
//! | `idem` | this facade: re-exports both |
//!
//! Metrics are recorded through the `metrics` facade; their names and meanings are in
//! [`metric_definitions`].

pub use idem_core::{
    Acquire, Advance, Clock, DedupKey, Entity, EventId, FencingToken, GapPolicy, LeaseKey,
    MAX_ID_BYTES, MAX_NAME_LEN, ManualClock, Name, RetentionPolicy, SystemClock, Timestamp, Ttl,
    Version, VersionValue, decide, horizon,
};
pub use idem_sql::{
    Backend, BoxError, BoxFuture, Claim, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_CONNECTIONS, Error,
    ErrorKind, Event, GcReport, Inbox, LeaseStore, Outcome, PgStore, Runner, SqliteStore, Store,
    VersionGuard, metric_definitions, sqlx,
};
/// The transactional outbox (`Store::outbox`); relays that publish it are in `idem-broker`.
pub use idem_sql::{
    ClaimToken, DEFAULT_OUTBOX_MAX_ATTEMPTS, MAX_MESSAGE_ID_BYTES, MessageId, Outbox,
    OutboxFailure, OutboxMessage, OutboxPolicy, OutboxRow, OutboxStatus,
};

/// Dead letters of broker consumers (`Store::dead_letters`); the consumers are in `idem-broker`.
pub use idem_sql::{DeadLetter, DeadLetterRecord, DeadLetters};

/// Errors of `idem-core` (invalid ids, names, ttls, retention, version kinds), also reachable as
/// [`Error::Invalid`].
pub use idem_core::Error as RuleError;
