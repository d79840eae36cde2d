//! # idem: exactly one effect per event under at-least-once delivery
//!
//! Every webhook sender and message broker delivers at least once: duplicates, replays,
//! reordering, and crashes between the work and the acknowledgement are the contract. idem makes
//! a handler apply each event once, in the handler's own database transaction:
//!
//! 1. **claim** the event's [`DedupKey`] in the inbox: an `INSERT … ON CONFLICT DO NOTHING` (on
//!    MySQL a plain `INSERT`, whose duplicate-key error means "already there"),
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
//! use idem::{DedupKey, Entity, Event, EventId, Name, OutboxMessage, Runner, SqliteStore, Version};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("app.db").display());
//! let store = SqliteStore::connect(&url).await?; // or PgStore::connect("postgres://…"), MySqlStore
//! // (feature `mysql`)
//! store.migrate().await?;
//! sqlx::query("CREATE TABLE subscriptions (id TEXT PRIMARY KEY, status TEXT NOT NULL)")
//!     .execute(store.pool())
//!     .await?;
//!
//! let runner = Runner::new(store.clone(), &Name::new("consumer", "billing_v1")?);
//! let outbox = store.outbox();
//! let stripe = Name::new("source", "stripe")?;
//!
//! // `customer.subscription.updated` (created 1623979266, active) arrives first, then a
//! // redelivery of it, then the older `customer.subscription.created` (1623979265, incomplete).
//! let deliveries = [
//!     ("evt_2", 1_623_979_266, r#"{"id": "sub_1", "status": "active"}"#),
//!     ("evt_2", 1_623_979_266, r#"{"id": "sub_1", "status": "active"}"#),
//!     ("evt_1", 1_623_979_265, r#"{"id": "sub_1", "status": "incomplete"}"#),
//! ];
//! let mut outcomes = Vec::new();
//! for (id, created, object) in deliveries {
//!     let event = Event::new(DedupKey::from_event(&stripe, &EventId::new(id)?))
//!         .with_entity(Entity::new("subscription", "sub_1")?, Version::timestamp(created));
//!     let outcome = runner
//!         .run(&event, async |tx| {
//!             // `?` on any error, here a serde_json::Error
//!             let object: serde_json::Value = serde_json::from_str(object)?;
//!             // one transaction for your SQL and for idem's writes: `&mut *tx`
//!             sqlx::query(
//!                 "INSERT INTO subscriptions (id, status) VALUES ($1, $2) \
//!                  ON CONFLICT (id) DO UPDATE SET status = excluded.status",
//!             )
//!             .bind(object["id"].as_str())
//!             .bind(object["status"].as_str())
//!             .execute(&mut *tx)
//!             .await?;
//!             let message = OutboxMessage::new("subscription.changed", object.to_string());
//!             outbox.enqueue(&mut *tx, &message).await?;
//!             Ok(())
//!         })
//!         .await?; // Err: nothing was committed; answer 5xx / nack so the sender retries
//!     outcomes.push(outcome.name());
//! }
//! assert_eq!(outcomes, ["applied", "duplicate", "stale"]);
//!
//! let status: String = sqlx::query_scalar("SELECT status FROM subscriptions WHERE id = 'sub_1'")
//!     .fetch_one(store.pool())
//!     .await?;
//! assert_eq!(status, "active");
//! assert_eq!(outbox.list(idem::OutboxStatus::Pending, 10).await?.len(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! ## Handlers
//!
//! A handler is an async closure, `async |tx| { … }`. `tx` is the open transaction's connection
//! (`&mut SqliteConnection`, `&mut PgConnection`): pass `&mut *tx` to sqlx and to idem's writes
//! ([`Outbox::enqueue`], [`EffectLedger::enqueue`], [`Inbox::claim`]) alike, as you would with a
//! transaction of your own from [`Store::begin`]. The handler runs only for a fresh, non-stale
//! event, and may run more than once (a conflict is retried in a new transaction), so it does
//! nothing outside the transaction: external calls are effect intents, messages are outbox
//! rows. It may borrow what it uses from the code around it, as above.
//!
//! Where the future must be `Send` (an axum handler, a spawned task), write `async move |tx|`
//! and let the closure own what it uses, cloning once what the code after it still needs: the
//! compiler cannot yet prove `Send` for a future whose async closure borrows from its
//! surroundings (it reports that a borrowed value "does not live long enough", or that an
//! implementation "is not general enough": rust-lang/rust#138494). The closure's own values are
//! borrowed by each run, so nothing is cloned per run. `examples/webhook_axum.rs` shows it
//! ([`_examples`]).
//!
//! What the handler's error becomes, and what to answer (branch on [`Error::kind`]):
//!
//! | inside the handler | [`Runner::run`] returns | kind | answer the sender |
//! |---|---|---|---|
//! | `?` on an application error (`serde_json`, your own type) | [`Error::Handler`] | [`ErrorKind::Handler`], retryable | 5xx / nack: it delivers again |
//! | `Err(HandlerError::permanent(e))`, `.map_err(HandlerError::permanent)?` | [`Error::Permanent`] | [`ErrorKind::Permanent`] | 4xx / dead letter: it never will apply |
//! | `?` on a `sqlx::Error` | [`Error::Database`] | [`ErrorKind::Conflict`] (retried by the runner first), `Unavailable` or `Database` | 5xx / nack |
//! | `?` on an idem [`Error`] | that error | its own | as its kind says |
//!
//! The broker consumers, the Kafka processor and the effect worker's apply hook keep their
//! handler and run it on tasks of their own; write it as the same async closure inside
//! [`handler!`]: `handler!(async move |tx, delivery: &Delivery| { … })`. A handler of the form
//! before async closures, `|tx| Box::pin(async move { … })` with `&mut **tx` as the connection,
//! runs unchanged with [`Runner::run_boxed`].
//!
//! ## One handler for every store
//!
//! Write `DB: Sql` on a handler or helper generic over the store, and sqlx's queries work on
//! `&mut *tx` with the common column types, with no other bound ([`Sql`] lists them):
//!
//! ```
//! use idem::{Error, Event, Outcome, Runner, Sql, sqlx};
//!
//! /// The application's write, for SQLite, PostgreSQL and any later backend.
//! async fn activate<DB: Sql>(tx: &mut DB::Connection, id: &str) -> Result<i64, sqlx::Error> {
//!     sqlx::query("UPDATE subscriptions SET status = 'active' WHERE id = $1")
//!         .bind(id)
//!         .execute(&mut *tx)
//!         .await?;
//!     sqlx::query_scalar("SELECT COUNT(*) FROM subscriptions WHERE status = 'active'")
//!         .fetch_one(&mut *tx)
//!         .await
//! }
//!
//! async fn apply<DB: Sql>(runner: &Runner<DB>, event: &Event, id: &str) -> Result<Outcome<i64>, Error> {
//!     runner.run(event, async |tx| Ok(activate::<DB>(tx, id).await?)).await
//! }
//! ```
//!
//! ## On MySQL or MariaDB
//!
//! With the `mysql` feature, `MySqlStore` keeps the inbox in the MySQL 8.0 (or later) or
//! MariaDB 10.6 (or later) database the application already has, so the claim commits with the
//! application's own writes there. `connect` reads `SELECT VERSION()` and refuses older servers,
//! naming the version found; `migrate` creates idem's tables (`VARBINARY` keys, compared byte for
//! byte whatever the database's collation; InnoDB) and runs a migration that an earlier failure
//! left unfinished again (MySQL commits each DDL statement on its own). idem's transactions run
//! at READ COMMITTED whatever the session's default; deadlocks (1213) and lock-wait timeouts
//! (1205) are [`ErrorKind::Conflict`], which the runner retries. A handler writes with MySQL's
//! own SQL (`?` parameters, `ON DUPLICATE KEY UPDATE`):
//!
//! ```no_run
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! use idem::{DedupKey, EventId, Event, MySqlStore, Name, Runner, sqlx};
//!
//! let store = MySqlStore::connect("mysql://app:secret@127.0.0.1:3306/app").await?;
//! store.migrate().await?;
//! let runner = Runner::new(store.clone(), &Name::new("consumer", "billing_v1")?);
//! let event = Event::new(DedupKey::from_event(&Name::new("source", "stripe")?, &EventId::new("evt_1")?));
//! let outcome = runner
//!     .run(&event, async |tx| {
//!         sqlx::query(
//!             "INSERT INTO subscriptions (id, status) VALUES (?, ?) \
//!              ON DUPLICATE KEY UPDATE status = ?",
//!         )
//!         .bind("sub_1")
//!         .bind("active")
//!         .bind("active")
//!         .execute(&mut *tx)
//!         .await?;
//!         Ok(())
//!     })
//!     .await?;
//! println!("{}", outcome.name());
//! # Ok(()) }
//! ```
//!
//! `docs/mysql.md` is the operator's page: what a MySQL 8.0 user runs to check idem on their
//! server, what a failed migration leaves and how to go on.
//!
//! ## Without the runner
//!
//! ```no_run
//! # async fn f(store: idem::PgStore, key: idem::DedupKey) -> Result<(), idem::Error> {
//! let consumer = idem::Name::new("consumer", "billing_v1")?;
//! let mut tx = store.begin().await?; // READ COMMITTED; BEGIN IMMEDIATE on SQLite
//! match store.inbox(&consumer).claim(&mut *tx, &key).await? {
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
//! ## Effects and the outbox: work the database cannot roll back
//!
//! A charge, an email or an API call cannot join the transaction. Record it as an effect intent
//! instead, with [`EffectLedger::enqueue`] inside the handler (docs/design.md C2, C6). Its
//! [`EffectKey`] is derived from the consumer, the event's dedup key and the effect's name, or
//! is a business intent key such as `charge:order:50266` that every code path shares; what
//! `enqueue` answers ([`Enqueued`]) says whether the intent is new or was decided before. After
//! the commit an [`EffectWorker`] calls the provider at least once, always with that key as the
//! provider's idempotency key, and stores the outcome: a timeout is `unknown` and retried with
//! the same key while the provider keeps keys (24 h by default, as Stripe does), then parked
//! for an operator. Messages for other services go in the same transaction with
//! [`Outbox::enqueue`]; a relay of `idem-broker` (feature `broker`: `idem::broker`) publishes
//! them to NATS JetStream, RabbitMQ, Kafka or HTTP with their stable message ids (C7), and its
//! consumers run this same runner and acknowledge only after the commit.
//!
//! ```
//! use idem::{
//!     CallOutcome, DedupKey, EffectCall, EffectWorker, Enqueued, Event, EventId, Name, Outcome,
//!     Runner, SqliteStore,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("effects.db").display());
//! let store = SqliteStore::connect(&url).await?;
//! store.migrate().await?;
//! let consumer = Name::new("consumer", "billing_v2")?;
//! let send_receipt = Name::new("effect", "send_receipt")?;
//! let event = Event::new(DedupKey::from_event(&Name::new("source", "stripe")?, &EventId::new("evt_C")?));
//! let request = br#"{"to":"c@example.com","template":"upgraded"}"#;
//!
//! let runner = Runner::new(store.clone(), &consumer);
//! // `EffectKey::derive` under the consumer's effects scope: its own name here; the version it
//! // succeeds when it declares one (next section), so that a new version derives the same key.
//! let key = runner.effect_key(&event, &send_receipt)?;
//! let effects = store.effects();
//! for delivery in 1..=2 {
//!     let outcome = runner
//!         .run(&event, async |tx| {
//!             // … the application's own writes, with `&mut *tx` …
//!             match effects.enqueue(&mut *tx, &send_receipt, &key, request).await? {
//!                 Enqueued::Created | Enqueued::Pending { .. } => {} // sent after the commit
//!                 Enqueued::Completed { .. } | Enqueued::Failed { .. } => {} // decided before
//!             }
//!             Ok(())
//!         })
//!         .await?;
//!     // The second delivery is a duplicate: the handler does not run, no second intent.
//!     assert_eq!(outcome == Outcome::Duplicate, delivery == 2);
//! }
//!
//! // After the commit, the worker makes the call with the effect key as the idempotency key
//! // (`examples/effect_provider.rs` calls an HTTP provider). `drain` runs every due effect.
//! let worker = EffectWorker::new(store.clone(), |call: EffectCall| async move {
//!     CallOutcome::Succeeded(format!("queued as {}", call.key).into_bytes())
//! });
//! assert_eq!(worker.drain().await?.succeeded, 1);
//!
//! // The same key enqueued again (a replay, another code path) gets the stored outcome.
//! let mut tx = store.begin().await?;
//! let again = effects.enqueue(&mut *tx, &send_receipt, &key, request).await?;
//! assert_eq!(again, Enqueued::Completed { outcome: format!("queued as {key}").into_bytes() });
//! # Ok(())
//! # }
//! ```
//!
//! ## A new consumer version: replay history, run no effect twice
//!
//! Give every deployed consumer version a name of its own (`billing_v1`, then `billing_v2`): a
//! new name is a new cursor, with an empty inbox and version guard, so `billing_v2` can read
//! history from the start to rebuild its projection. Its effects must not run again, so let it
//! succeed the version before ([`Runner::succeeds`]) and take effect keys from the runner
//! ([`Runner::effect_key`], [`Runner::enqueue_effect`]): the same handler code then derives the
//! same keys in both versions (docs/design.md C6). Ship `billing_v2` beside `billing_v1`, let it
//! catch up, compare the two projections, then cut over and stop `billing_v1`.
//!
//! ```
//! use idem::{CallOutcome, DedupKey, EffectCall, EffectWorker, Enqueued, Event, EventId, Name, Outcome, Runner, SqliteStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("versions.db").display());
//! let store = SqliteStore::connect(&url).await?;
//! store.migrate().await?;
//! let (v1, v2) = (Name::new("consumer", "billing_v1")?, Name::new("consumer", "billing_v2")?);
//! let send_receipt = Name::new("effect", "send_receipt")?;
//! let event = Event::new(DedupKey::from_event(&Name::new("source", "stripe")?, &EventId::new("evt_C")?));
//! let effects = store.effects();
//! let worker = EffectWorker::new(store.clone(), |call: EffectCall| async move {
//!     CallOutcome::Succeeded(call.key.to_string().into_bytes())
//! });
//!
//! // The one handler both versions run: the key comes from the runner.
//! async fn handle(runner: &Runner<idem::sqlx::Sqlite>, effects: &idem::EffectLedger<idem::sqlx::Sqlite>,
//!                 event: &Event, effect: &Name) -> Result<Outcome<Enqueued>, idem::Error> {
//!     runner
//!         .run(event, async |tx| {
//!             // … the projection's writes, with `&mut *tx` …
//!             Ok(runner.enqueue_effect(tx, effects, event, effect, b"receipt").await?)
//!         })
//!         .await
//! }
//!
//! let first = Runner::new(store.clone(), &v1);
//! assert_eq!(handle(&first, &effects, &event, &send_receipt).await?, Outcome::Applied(Enqueued::Created));
//! assert_eq!(worker.drain().await?.succeeded, 1); // the receipt is sent once
//!
//! // billing_v2 replays the same event: it applies it (a new cursor), and the receipt is found
//! // sent under billing_v1's key, so nothing is sent again.
//! let second = Runner::new(store.clone(), &v2).succeeds(&v1);
//! let replayed = handle(&second, &effects, &event, &send_receipt).await?;
//! assert!(matches!(replayed, Outcome::Applied(Enqueued::Completed { .. })));
//! assert_eq!(worker.drain().await?.claimed, 0);
//! # Ok(())
//! # }
//! ```
//!
//! ## Replaying history into a new version
//!
//! The events `billing_v2` must catch up on live in the application's own log (a table, a JSONL
//! file). [`Replay`] feeds that log through the runner in the log's order — taken as the
//! original order, so each entity's events arrive as the log holds them — and reports what
//! became of each event and effect ([`ReplayReport`]). Run it as a dry run first: it changes
//! nothing and counts the events it would apply, the duplicates, the effects the lineage
//! already recorded, and the events past the effects' retention. [`Store::gc`] deletes finished
//! effects after the retention it is given; an event older than that would run its effects
//! again whatever the keys, so a run refuses the log while it holds one
//! ([`Error::EffectsPastRetention`], nothing applied) unless [`Replay::allow_effects_rerun`].
//! Pass the [`RetentionPolicy`] your `gc` runs with.
//!
//! ```
//! use std::time::Duration;
//! use idem::{CallOutcome, EffectCall, EffectWorker, JsonlLog, LoggedEvent, Name, Replay, RetentionPolicy, Runner, SqliteStore};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("replay.db").display());
//! let store = SqliteStore::connect(&url).await?;
//! store.migrate().await?;
//! let (v1, v2) = (Name::new("consumer", "billing_v1")?, Name::new("consumer", "billing_v2")?);
//! let send_receipt = Name::new("effect", "send_receipt")?;
//! let policy = RetentionPolicy::new(Duration::from_secs(30 * 86_400), idem::horizon::STRIPE)?;
//! let now = store.now().as_millis();
//! // The application's log: one JSON object per line (`JsonlLog` lists the fields), such as
//! // {"source":"stripe","event_id":"evt_1","occurred_at":1764595758000,"payload":{"to":"a@example.com"}}
//! let line = |id: &str, to: &str| {
//!     serde_json::json!({"source": "stripe", "event_id": id, "occurred_at": now, "payload": {"to": to}})
//!         .to_string()
//! };
//! let log = JsonlLog::from_text([line("evt_1", "a@example.com"), line("evt_2", "b@example.com")].join("\n"));
//! let effects = store.effects();
//! let worker = EffectWorker::new(store.clone(), |_: EffectCall| async { CallOutcome::Succeeded(b"sent".to_vec()) });
//!
//! // The one handler both versions run; the effect key comes from the runner.
//! async fn handle(runner: &Runner<idem::sqlx::Sqlite>, effects: &idem::EffectLedger<idem::sqlx::Sqlite>,
//!                 effect: &Name, tx: &mut idem::sqlx::SqliteConnection,
//!                 logged: &LoggedEvent<serde_json::Value>) -> Result<idem::Enqueued, idem::HandlerError> {
//!     // … the projection's writes, from `logged.payload` …
//!     let request = logged.payload.to_string();
//!     Ok(runner.enqueue_effect(tx, effects, &logged.event, effect, request.as_bytes()).await?)
//! }
//!
//! // billing_v1 handled the events when they happened: two receipts sent.
//! let first = Runner::new(store.clone(), &v1);
//! Replay::new(&first, &policy).run(&log, async |tx, logged| handle(&first, &effects, &send_receipt, tx, logged).await).await?;
//! assert_eq!(worker.drain().await?.succeeded, 2);
//!
//! // billing_v2 succeeds it. First the dry run: both events to apply, both receipts recorded.
//! let second = Runner::new(store.clone(), &v2).succeeds(&v1);
//! let handler = async |tx: &mut idem::sqlx::SqliteConnection, logged: &LoggedEvent<serde_json::Value>| {
//!     handle(&second, &effects, &send_receipt, tx, logged).await
//! };
//! let preview = Replay::new(&second, &policy).dry_run(true).run(&log, handler).await?;
//! assert_eq!((preview.applied, preview.past_retention, preview.effects_recorded), (2, 0, 2));
//!
//! // Then the run: both applied to billing_v2's projection, no receipt sent again.
//! let report = Replay::new(&second, &policy).run(&log, handler).await?;
//! assert_eq!((report.applied, report.effects_created, report.effects_existing), (2, 0, 2));
//! assert_eq!(worker.drain().await?.claimed, 0);
//! # Ok(())
//! # }
//! ```
//!
//! ## Examples
//!
//! [`_examples`] shows, in full, the programs that `cargo run -p idem --example NAME` runs: a
//! webhook endpoint with axum, an effect with a real provider call, a NATS JetStream consumer,
//! a Kafka consumer, and the Stripe corpus of `testdata/`.
//!
//! ## Crates
//!
//! | crate | holds |
//! |---|---|
//! | `idem-core` | keys, versions and the C5 rule, leases, retention, clock; no I/O |
//! | `idem-sql` | the store on SQLite, PostgreSQL and (feature `mysql`) MySQL/MariaDB (sqlx 0.9), migrations, runner, metrics |
//! | `idem-broker` | NATS JetStream, RabbitMQ and Kafka consumers, outbox relays (feature `broker`) |
//! | `idem` | this facade: re-exports `idem-core` and `idem-sql`, and `idem-broker` as `idem::broker` with the `broker` feature |
//!
//! Metrics are recorded through the `metrics` facade; their names and meanings are in
//! [`metric_definitions`].

pub use idem_core::{
    Acquire, Advance, Clock, DedupKey, Entity, EventId, FencingToken, GapPolicy, LeaseKey,
    MAX_ID_BYTES, MAX_NAME_LEN, ManualClock, Name, RetentionPolicy, SystemClock, Timestamp, Ttl,
    Version, VersionValue, decide, horizon,
};
/// A store on MySQL 8.0+ or MariaDB 10.6+ (feature `mysql`).
#[cfg(feature = "mysql")]
pub use idem_sql::MySqlStore;
pub use idem_sql::{
    Backend, BoxError, BoxFuture, BoxedHandler, Claim, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_CONNECTIONS, Error, ErrorKind, Event, GcReport, HandlerError, Inbox, LeaseStore,
    Outcome, PgStore, Runner, Sql, SqliteStore, Store, VersionGuard, handler, metric_definitions,
    sqlx,
};

/// The transactional outbox (`Store::outbox`); relays that publish it are in `idem-broker`.
pub use idem_sql::{
    ClaimToken, DEFAULT_OUTBOX_MAX_ATTEMPTS, DEFAULT_OUTBOX_RELAY_NAME, LockedBatch,
    MAX_MESSAGE_ID_BYTES, MessageId, Outbox, OutboxFailure, OutboxMessage, OutboxPolicy, OutboxRow,
    OutboxStatus,
};

/// The effect ledger (`Store::effects`) and its worker.
pub use idem_core::{Backoff, EffectKey, MAX_EFFECT_KEY_BYTES};
pub use idem_sql::{
    Applied, CallOutcome, DEFAULT_EFFECT_BATCH_SIZE, DEFAULT_EFFECT_CALL_TIMEOUT,
    DEFAULT_EFFECT_POLL_INTERVAL, DEFAULT_EFFECT_WORKER_NAME, DEFAULT_KEY_RETENTION,
    DEFAULT_MAX_EFFECT_ATTEMPTS, EFFECT_LEASE_MARGIN, EffectCall, EffectLedger, EffectRecord,
    EffectStatus, EffectWorker, Enqueued, Provider, Resolution, WorkerReport,
};

/// NATS JetStream and RabbitMQ consumers that acknowledge after the commit, and the outbox
/// relays (NATS JetStream, RabbitMQ, HTTP): the `idem-broker` crate.
#[cfg(feature = "broker")]
pub use idem_broker as broker;

/// Replaying an application's event log through a runner: a new consumer version catching up
/// (`Replay`, `JsonlLog`).
pub use idem_sql::{
    EventLog, HandlerEffects, JsonlLog, LogEntries, LoggedEvent, Replay, ReplayProgress,
    ReplayReport,
};

/// Dead letters of broker consumers (`Store::dead_letters`); the consumers are in `idem-broker`.
pub use idem_sql::{DeadLetter, DeadLetterRecord, DeadLetters};

/// The consumer registry: every consumer's kind, first and last seen, counts, holds and flags
/// (`Store::consumers`, `Store::register_consumer`, `Store::flush_consumer_counts`).
pub use idem_sql::{
    ConsumerFlag, ConsumerKind, ConsumerReport, Consumers, DEFAULT_COUNTS_FLUSH_INTERVAL,
    DEFAULT_ORPHAN_AFTER, Holds, Lag, ListOptions, Thresholds, WindowCounts,
};

/// Resetting a stopped consumer's cursor for a rebuild (`Store::reset_consumer`).
pub use idem_sql::{GATEWAY_INBOX_CONSUMER, LIVE_WINDOW, ResetOptions, ResetReport};

/// Errors of `idem-core` (invalid ids, names, ttls, retention, version kinds), also reachable as
/// [`Error::Invalid`].
pub use idem_core::Error as RuleError;

pub mod _examples;

/// The README's Rust snippets, compiled as doc tests (`cargo test -p idem --doc`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeSnippets;
