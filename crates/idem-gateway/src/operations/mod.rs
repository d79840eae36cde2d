//! Operations on stored events, shared by the `idem` command line and the `/admin` HTTP API:
//! list and show events, list and redrive dead letters, replay a time range, collect old rows.

use std::num::NonZeroU32;
use std::time::Duration;

use idem_core::RetentionPolicy;
use serde::Serialize;

mod backfill;
mod consumer_reset;
mod pages;
mod rebuild;
mod renames;
pub use backfill::BackfillReport;
pub use consumer_reset::ConsumerResetReport;
pub use pages::Page;
pub use rebuild::{RebuildReport, RebuildRequest};
pub use renames::{RouteCarried, UnconfiguredRoute};

use crate::Error;
use crate::error::RequestError;
use crate::gateway::Gateway;
use crate::model::forwarded::ForwardedHeaders;
use crate::model::route_filter::{FilterInput, RouteFilter};
use crate::store::{
    AttemptOutcome, DeliveryState, GatewayDb, ReplayCandidate, StoredAttempt, StoredDelivery,
    StoredEvent,
};

/// Rows deleted or changed per statement by [`Gateway::gc`], so that ingest is never blocked
/// for long.
pub const GC_BATCH: u32 = 500;

/// A stored event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventSummary {
    /// The source name.
    pub source: String,
    /// The event id.
    pub event_id: String,
    /// The event type, when the source has one.
    pub event_type: Option<String>,
    /// `type:id` of the entity, when read.
    pub entity: Option<String>,
    /// The entity's version carried by this event.
    pub version: Option<i64>,
    /// When it was accepted, in ms since the epoch.
    pub received_at: i64,
    /// Whether the raw body is still kept (body_retention drops it).
    pub body_kept: bool,
    /// The routes whose `filter` did not take it at ingest: no delivery for them.
    pub filtered_by: Vec<String>,
}

/// One delivery of an event to a destination.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliverySummary {
    /// The delivery's id (for `dlq redrive --id`).
    pub id: i64,
    /// The route it came by.
    pub route: String,
    /// The destination.
    pub destination: String,
    /// Where it stands.
    pub state: DeliveryState,
    /// Sent with `Idem-Version-Tie: true`.
    pub tie: bool,
    /// The version guard's remark (docs/gateway.md, `GET /admin/events/…`): a stale event's
    /// two versions, `first event of its entity`, a version gap (`version gap: 3 was next, 5
    /// arrived`), or why its version could not be compared; `None` for a newer version, a tie
    /// or an unordered route.
    pub note: Option<String>,
    /// Attempts made so far.
    pub attempts: i64,
    /// When it is next due (pending), in ms since the epoch.
    pub next_attempt_at: i64,
    /// When its state last changed, in ms since the epoch.
    pub updated_at: i64,
    /// The event's source.
    pub source: String,
    /// The event id.
    pub event_id: String,
    /// The event type.
    pub event_type: Option<String>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// 1, 2, …
    pub attempt: i64,
    /// When it started, in ms since the epoch.
    pub started_at: i64,
    /// How long it took, in ms.
    pub duration_ms: i64,
    /// The HTTP status; `None` for a timeout or refused connection.
    pub status: Option<i64>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The start of the response body, or the transport error.
    pub excerpt: String,
}

/// An event with every delivery and attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventDetail {
    /// The event.
    pub event: EventSummary,
    /// Its deliveries, each with its attempts.
    pub deliveries: Vec<(DeliverySummary, Vec<AttemptRecord>)>,
}

/// Which dead letters to redrive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedriveRequest {
    /// Only this destination's; it must be configured.
    pub destination: Option<String>,
    /// Only these dead letters (delivery ids from [`Gateway::dead_letters`]); each must be one
    /// (of `destination`, when given). Empty: every dead letter (of `destination`).
    pub deliveries: Vec<i64>,
    /// On drop-stale routes, also redrive dead letters older than their entity's newest
    /// delivered event.
    pub force: bool,
    /// Count only (`redriven` says how many would be); change nothing.
    pub dry_run: bool,
}

/// What a redrive did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RedriveReport {
    /// Dead letters asked for.
    pub matched: u64,
    /// Made due again (new attempts, same Idempotency-Key); dry: would be.
    pub redriven: u64,
    /// Refused on a drop-stale route (without force): older than the newest event of their
    /// entity that was delivered (or is being sent); they stay dead letters.
    pub older: u64,
    /// Refused: their route's `filter`, as configured now, does not take the event; they stay
    /// dead letters.
    pub filtered: u64,
    /// Refused: their route is not configured (removed with its destination, or missing from
    /// the configuration the command runs with): no dispatcher would send them; they stay dead
    /// letters.
    pub not_configured: u64,
}

/// What to replay. [`parse_time`](crate::model::time::parse_time) reads times as the command line and `POST /admin/replay`
/// take them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayRequest {
    /// The source whose events are replayed; it must be configured.
    pub source: String,
    /// From this time (ms since the epoch), inclusive.
    pub since: i64,
    /// Up to this time (ms since the epoch), exclusive; `None` = now. It must be after `since`.
    pub until: Option<i64>,
    /// Only events of this type: an exact type (`invoice.paid`), or a prefix ending in `*`
    /// (`invoice.*`), as routes' `event_types` match. `None`: every event.
    pub event_type: Option<String>,
    /// Count only; change nothing.
    pub dry_run: bool,
    /// On drop-stale routes, also re-send stale events and events older than their entity's
    /// newest delivered one.
    pub force: bool,
}

/// What a replay did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    /// Deliveries of events in the range (of the event type, when given).
    pub matched: u64,
    /// Made due again (new attempts, same Idempotency-Key); dry: would be.
    pub requeued: u64,
    /// Skipped: still pending or in flight.
    pub in_progress: u64,
    /// Skipped on a drop-stale route (without force): stale, or older than the newest event of
    /// its entity that was delivered (or is being sent).
    pub older: u64,
    /// Skipped: the raw body was dropped by body_retention.
    pub no_body: u64,
    /// Skipped: their route's `filter`, as configured now, does not take the event.
    pub filtered: u64,
    /// Skipped: their route is not configured (removed with its destination, or missing from
    /// the configuration the command runs with): no dispatcher would send them.
    pub not_configured: u64,
}

/// How [`Gateway::requeue`] treats its rows.
#[derive(Debug, Clone, Copy)]
struct Requeueing {
    /// Also stale and older deliveries on drop-stale routes.
    force: bool,
    /// Count only.
    dry_run: bool,
    /// A redrive: a rebuild's dead letter stays the rebuild's (`Idem-Replay: rebuild`).
    redrive: bool,
}

/// What one [`Gateway::gc`] run removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    /// Inbox keys past the retention (idem's table).
    pub inbox_keys: u64,
    /// Finished events past the retention, with their deliveries and attempts.
    pub events: u64,
    /// Raw bodies past body_retention.
    pub bodies: u64,
    /// Per-minute count rows and per-second refusal rows older than
    /// [`COUNTS_KEPT`](crate::model::counts::COUNTS_KEPT) (ended console sessions, and alerts
    /// older than that whose notifications were all sent, are deleted too, uncounted).
    pub counts: u64,
}

impl From<StoredEvent> for EventSummary {
    fn from(row: StoredEvent) -> Self {
        let filtered_by = row.filtered_by();
        Self {
            source: row.source,
            event_id: row.event_id,
            event_type: row.event_type,
            entity: row
                .aggregate_type
                .zip(row.aggregate_id)
                .map(|(t, i)| format!("{t}:{i}")),
            version: row.version,
            received_at: row.received_at,
            body_kept: row.body_kept,
            filtered_by,
        }
    }
}

impl From<StoredDelivery> for DeliverySummary {
    fn from(row: StoredDelivery) -> Self {
        Self {
            id: row.id,
            route: row.route,
            destination: row.destination,
            state: row.state,
            tie: row.tie,
            note: row.note,
            attempts: row.attempts,
            next_attempt_at: row.next_attempt_at,
            updated_at: row.updated_at,
            source: row.source,
            event_id: row.event_id,
            event_type: row.event_type,
        }
    }
}

impl From<StoredAttempt> for AttemptRecord {
    fn from(row: StoredAttempt) -> Self {
        Self {
            attempt: row.attempt,
            started_at: row.started_at,
            duration_ms: row.duration_ms,
            status: row.status,
            outcome: row.outcome,
            excerpt: row.excerpt,
        }
    }
}

impl<DB: GatewayDb> Gateway<DB> {
    /// `Ok` when a source named `name` is configured; otherwise
    /// [`RequestError::UnknownSource`] naming the configured ones.
    fn known_source(&self, name: &str) -> Result<(), RequestError> {
        let known = &self.config().sources;
        if known.iter().any(|s| s.name.as_str() == name) {
            return Ok(());
        }
        Err(RequestError::UnknownSource {
            name: name.to_owned(),
            known: known.iter().map(|s| s.name.as_str().to_owned()).collect(),
        })
    }

    /// `Ok` when a destination named `name` is configured; otherwise
    /// [`RequestError::UnknownDestination`] naming the configured ones.
    pub(crate) fn known_destination(&self, name: &str) -> Result<(), RequestError> {
        let known = &self.config().destinations;
        if known.iter().any(|d| d.name.as_str() == name) {
            return Ok(());
        }
        Err(RequestError::UnknownDestination {
            name: name.to_owned(),
            known: known.iter().map(|d| d.name.as_str().to_owned()).collect(),
        })
    }

    /// The newest `limit` events, of `source` or of every source.
    ///
    /// # Errors
    /// [`Error::Request`] ([`RequestError::UnknownSource`]) when `source` is not configured;
    /// [`Error::Store`].
    pub async fn list_events(
        &self,
        source: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventSummary>, Error> {
        self.newest_events(source, limit, false).await
    }

    /// The newest `limit` events, of `source` or of every source, that no route took: stored,
    /// with no delivery (no route leaves the source, none matches the type, or every
    /// matching route's filter said no). `idem replay --backfill` gives them deliveries.
    ///
    /// # Errors
    /// As [`list_events`](Self::list_events).
    pub async fn list_unrouted_events(
        &self,
        source: Option<&str>,
        limit: u32,
    ) -> Result<Vec<EventSummary>, Error> {
        self.newest_events(source, limit, true).await
    }

    /// [`list_events`](Self::list_events), or with `unrouted` [`list_unrouted_events`](Self::list_unrouted_events).
    async fn newest_events(
        &self,
        source: Option<&str>,
        limit: u32,
        unrouted: bool,
    ) -> Result<Vec<EventSummary>, Error> {
        Ok(self.events_page(source, unrouted, limit, None).await?.items)
    }

    /// One page of [`list_events`](Self::list_events) (with `unrouted`,
    /// [`list_unrouted_events`](Self::list_unrouted_events)): newest first, at most `limit`,
    /// those after the cursor `after` (the `next` of the page before; `None` for the first).
    ///
    /// # Errors
    /// As [`list_events`](Self::list_events); [`Error::Request`]
    /// ([`RequestError::BadCursor`]) for an `after` no page gave.
    pub async fn events_page(
        &self,
        source: Option<&str>,
        unrouted: bool,
        limit: u32,
        after: Option<&str>,
    ) -> Result<Page<EventSummary>, Error> {
        if let Some(name) = source {
            self.known_source(name)?;
        }
        let before = after
            .map(pages::parse_cursor)
            .transpose()?
            .unwrap_or((i64::MAX, i64::MAX));
        let mut conn = self.store().pool().acquire().await?;
        let rows = DB::list_events(
            &mut conn,
            source.unwrap_or(""),
            i64::from(limit) + 1,
            unrouted,
            before,
        )
        .await?;
        Ok(pages::page_of(
            rows,
            limit,
            |row| (row.received_at, row.id),
            EventSummary::from,
        ))
    }

    /// The event `event_id` of `source` with its deliveries and attempts; `None` when unknown.
    ///
    /// # Errors
    /// [`Error::Store`].
    pub async fn show_event(
        &self,
        source: &str,
        event_id: &str,
    ) -> Result<Option<EventDetail>, Error> {
        let mut conn = self.store().pool().acquire().await?;
        let Some(row) = DB::find_event(&mut conn, source, event_id).await? else {
            return Ok(None);
        };
        let mut deliveries = Vec::new();
        for delivery in DB::deliveries_of(&mut conn, row.id).await? {
            let attempts = DB::attempts_of(&mut conn, delivery.id)
                .await?
                .into_iter()
                .map(AttemptRecord::from)
                .collect();
            deliveries.push((DeliverySummary::from(delivery), attempts));
        }
        Ok(Some(EventDetail {
            event: EventSummary::from(row),
            deliveries,
        }))
    }

    /// Dead letters, oldest first, of `destination` or of every destination, at most `limit`.
    ///
    /// # Errors
    /// [`Error::Request`] ([`RequestError::UnknownDestination`]) when `destination` is not
    /// configured; [`Error::Store`].
    pub async fn dead_letters(
        &self,
        destination: Option<&str>,
        limit: u32,
    ) -> Result<Vec<DeliverySummary>, Error> {
        Ok(self
            .dead_letters_page(destination, limit, None)
            .await?
            .items)
    }

    /// One page of [`dead_letters`](Self::dead_letters): oldest first, at most `limit`, those
    /// after the cursor `after` (the `next` of the page before; `None` for the first).
    ///
    /// # Errors
    /// As [`dead_letters`](Self::dead_letters); [`Error::Request`]
    /// ([`RequestError::BadCursor`]) for an `after` no page gave.
    pub async fn dead_letters_page(
        &self,
        destination: Option<&str>,
        limit: u32,
        after: Option<&str>,
    ) -> Result<Page<DeliverySummary>, Error> {
        if let Some(name) = destination {
            self.known_destination(name)?;
        }
        let after = after
            .map(pages::parse_cursor)
            .transpose()?
            .unwrap_or((i64::MIN, i64::MIN));
        let mut conn = self.store().pool().acquire().await?;
        let rows = DB::dead_letters(
            &mut conn,
            destination.unwrap_or(""),
            i64::from(limit) + 1,
            after,
        )
        .await?;
        Ok(pages::page_of(
            rows,
            limit,
            |row| (row.updated_at, row.id),
            DeliverySummary::from,
        ))
    }

    /// Makes dead letters due again with a fresh retry schedule: the dead letters
    /// `request.deliveries`, or every dead letter of `request.destination` (or of all
    /// destinations); with `dry_run`, counts them and changes nothing. Attempts keep their
    /// numbers and the Idempotency-Key stays the same. On a drop-stale route a dead letter older
    /// than the newest event of its entity that was delivered (or is being sent) is refused
    /// unless `force`: sending it would put the older state after the newer one (C5). The same
    /// rule as [`replay`](Self::replay), by the same code.
    ///
    /// # Errors
    /// [`Error::Request`] before anything is changed: [`RequestError::UnknownDestination`] when
    /// `destination` is not configured, [`RequestError::UnknownDeadLetter`] naming the first of
    /// `deliveries` that is not a dead letter (of `destination`, when given); [`Error::Store`]:
    /// the dead letters redriven before the error stay redriven.
    pub async fn redrive(&self, request: &RedriveRequest) -> Result<RedriveReport, Error> {
        if let Some(name) = &request.destination {
            self.known_destination(name)?;
        }
        let mut conn = self.store().pool().acquire().await?;
        let mut ids = request.deliveries.clone();
        ids.sort_unstable();
        ids.dedup();
        let rows = DB::redrive_candidates(&mut conn, request.destination.as_deref(), &ids).await?;
        if let Some(id) = ids.iter().find(|id| !rows.iter().any(|row| row.id == **id)) {
            return Err(RequestError::UnknownDeadLetter {
                id: *id,
                destination: request.destination.clone(),
            }
            .into());
        }
        let report = self
            .requeue(
                &mut conn,
                rows,
                Requeueing {
                    force: request.force,
                    dry_run: request.dry_run,
                    redrive: true,
                },
                &|_, _| {},
            )
            .await?;
        let report = RedriveReport {
            matched: report.matched,
            redriven: report.requeued,
            older: report.older,
            filtered: report.filtered,
            not_configured: report.not_configured,
        };
        crate::audit::done("redrive", request.dry_run, &report);
        Ok(report)
    }

    /// Replays the deliveries of `request.source`'s events received in the range (of
    /// `request.event_type`, when given): each finished
    /// delivery (delivered, stale, dead) becomes due again, a new attempt of the same event.
    /// On a drop-stale route, a stale event, or one older than the newest event of its entity
    /// that was delivered (or is being sent), is skipped unless `force`, as
    /// [`redrive`](Self::redrive) does. `progress(done, total)` is called after each delivery.
    ///
    /// # Errors
    /// [`Error::Request`] when the source is not configured
    /// ([`RequestError::UnknownSource`]), `event_type` is no pattern
    /// ([`RequestError::BadEventType`]) or `since` is not before `until`
    /// ([`RequestError::EmptyRange`]), before anything is changed; [`Error::Store`]: the
    /// deliveries requeued before the error stay requeued.
    pub async fn replay(
        &self,
        request: &ReplayRequest,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> Result<ReplayReport, Error> {
        let until = self.replay_range(request)?;
        let mut conn = self.store().pool().acquire().await?;
        let mut rows =
            DB::replay_candidates(&mut conn, &request.source, request.since, until).await?;
        if let Some(pattern) = &request.event_type {
            rows.retain(|row| crate::config::type_matches(pattern, row.event_type.as_deref()));
        }
        let report = self
            .requeue(
                &mut conn,
                rows,
                Requeueing {
                    force: request.force,
                    dry_run: request.dry_run,
                    redrive: false,
                },
                progress,
            )
            .await?;
        crate::audit::done("replay", request.dry_run, &report);
        Ok(report)
    }

    /// Sends one stored event again: each of its finished deliveries becomes due again under
    /// the same `Idempotency-Key`, by replay's rules (one still pending or in flight is left
    /// alone; on a `drop-stale` route a stale event, or one older than its entity's newest
    /// delivered, is refused unless `force`; a route's filter as configured now applies).
    /// `Ok(None)` when no such event is stored. What a provider's own "resend" button cannot
    /// do: its copy is a duplicate, answered 200 and not forwarded.
    ///
    /// # Errors
    /// [`Error::Request`] ([`RequestError::UnknownSource`]) when `source` is not configured;
    /// [`Error::Store`].
    pub async fn resend(
        &self,
        source: &str,
        event_id: &str,
        force: bool,
        dry_run: bool,
    ) -> Result<Option<ReplayReport>, Error> {
        self.known_source(source)?;
        let mut conn = self.store().pool().acquire().await?;
        if DB::find_event(&mut conn, source, event_id).await?.is_none() {
            return Ok(None);
        }
        let rows = DB::resend_candidates(&mut conn, source, event_id).await?;
        let report = self
            .requeue(
                &mut conn,
                rows,
                Requeueing {
                    force,
                    dry_run,
                    redrive: false,
                },
                &|_, _| {},
            )
            .await?;
        crate::audit::done("resend", dry_run, &report);
        Ok(Some(report))
    }

    /// Checks `request`'s source, event type and range as replay and backfill take them;
    /// returns the range's end (exclusive): `until`, or just after now.
    fn replay_range(&self, request: &ReplayRequest) -> Result<i64, Error> {
        self.known_source(&request.source)?;
        if let Some(pattern) = request
            .event_type
            .as_ref()
            .filter(|p| !crate::config::is_type_pattern(p))
        {
            return Err(RequestError::BadEventType {
                value: pattern.clone(),
            }
            .into());
        }
        let now = self.now().as_millis();
        // Without `until`, the range ends now, inclusive.
        let until = request.until.unwrap_or(now + 1);
        if request.since >= until {
            return Err(RequestError::EmptyRange {
                since: request.since,
                until: request.until.unwrap_or(now),
            }
            .into());
        }
        Ok(until)
    }

    /// The one path of redrive and replay: makes each finished delivery of `rows` due again
    /// (or, `dry_run`, counts it), except those still open, without a body, or, on a
    /// drop-stale route and without `force`, stale or older than the newest version of their
    /// entity that was delivered or is being sent. A rebuild's delivery stays one on a redrive
    /// (its dead letters finish the rebuild), not on a replay or resend.
    async fn requeue(
        &self,
        conn: &mut DB::Connection,
        rows: Vec<ReplayCandidate>,
        how: Requeueing,
        progress: &(dyn Fn(u64, u64) + Send + Sync),
    ) -> Result<ReplayReport, Error> {
        let mut report = ReplayReport {
            matched: rows.len() as u64,
            ..ReplayReport::default()
        };
        for (done, row) in rows.into_iter().enumerate() {
            // From the stored delivery, not from the configuration the command runs with (which
            // may lack the route or its destination): a delivery records its entity's version
            // exactly when its route kept entity order as it was stored, or when a rebuild sent
            // it in entity order (then only a route configured `ordering = "none"` tells).
            let drop_stale = row.version.is_some() && !self.route_unordered(&row.route);
            if row.state.is_open() {
                report.in_progress += 1;
            } else if !row.body_kept {
                report.no_body += 1;
            } else if !self.route_takes(&mut *conn, &row).await? {
                report.filtered += 1;
            } else if drop_stale
                && !how.force
                && (row.state == DeliveryState::Stale || row.is_older_than_delivered())
            {
                report.older += 1;
            } else if !self.route_configured(&row) {
                report.not_configured += 1;
            } else if how.dry_run
                || DB::requeue(&mut *conn, row.id, self.now().as_millis(), how.redrive).await?
            {
                report.requeued += 1;
            }
            progress(done as u64 + 1, report.matched);
        }
        if !how.dry_run && report.requeued > 0 {
            self.wake_all();
        }
        Ok(report)
    }

    /// Whether route `name` is configured (by name or as a route's `renamed_from`) with
    /// `ordering = "none"`.
    fn route_unordered(&self, name: &str) -> bool {
        self.config().routes.iter().any(|r| {
            (r.name.as_str() == name
                || r.renamed_from
                    .as_ref()
                    .is_some_and(|old| old.as_str() == name))
                && r.ordering == crate::config::Ordering::None
        })
    }

    /// Whether the route of `row` is configured, under its name or as a route's `renamed_from`.
    fn route_configured(&self, row: &ReplayCandidate) -> bool {
        let config = self.config();
        config.routes.iter().any(|r| {
            r.name.as_str() == row.route
                || r.renamed_from
                    .as_ref()
                    .is_some_and(|old| old.as_str() == row.route)
        })
    }

    /// Whether the route of `row` takes its event under the route's `filter` as configured
    /// now (true for a route without one, or one no longer configured): replay and redrive
    /// apply today's filter, not the one the event met at ingest. A failing filter takes
    /// nothing, as at ingest.
    async fn route_takes(
        &self,
        conn: &mut DB::Connection,
        row: &ReplayCandidate,
    ) -> Result<bool, Error> {
        let config = self.config();
        let Some(filter) = config
            .routes
            .iter()
            .find(|r| {
                r.name.as_str() == row.route
                    || r.renamed_from
                        .as_ref()
                        .is_some_and(|old| old.as_str() == row.route)
            })
            .and_then(|r| r.filter.as_ref())
        else {
            return Ok(true);
        };
        let input = DB::filter_input(&mut *conn, row.event).await?;
        Ok(filter_takes(
            filter,
            input.as_ref(),
            row.event_type.as_deref(),
        ))
    }

    /// Deletes what the retention no longer needs, in small batches (C9): inbox keys and
    /// finished events older than `retention` (never an event still to be sent or a dead
    /// letter, never version-guard rows), and raw bodies older than `body_retention`; and the
    /// console's count rows older than [`COUNTS_KEPT`](crate::model::counts::COUNTS_KEPT) and its
    /// ended sessions. With
    /// `retention = "forever"` no key, event or row of idem's tables is deleted: only bodies
    /// are dropped.
    ///
    /// # Errors
    /// [`Error::Store`]; batches before the error stay done.
    pub async fn gc(&self) -> Result<GcReport, Error> {
        let config = self.config();
        let batch = NonZeroU32::new(GC_BATCH).unwrap_or(NonZeroU32::MIN);
        let mut report = GcReport::default();
        if let Some(retention) = config.retention.duration() {
            self.gc_keys(retention, batch, &mut report).await?;
        }
        {
            let mut conn = self.store().pool().acquire().await?;
            let now = self.now();
            let before = now
                .saturating_sub(crate::model::counts::COUNTS_KEPT)
                .as_millis();
            report.counts = DB::delete_counts(&mut conn, before).await?
                + DB::delete_old(&mut conn, before).await?;
            DB::delete_expired_sessions(&mut conn, now.as_millis()).await?;
        }
        if let Some(keep) = config.body_retention {
            let cutoff = self.now().saturating_sub(keep).as_millis();
            loop {
                let mut conn = self.store().pool().acquire().await?;
                let n = DB::drop_bodies(&mut conn, cutoff, i64::from(GC_BATCH)).await?;
                report.bodies += n;
                if n < u64::from(GC_BATCH) {
                    break;
                }
            }
        }
        crate::audit::done("gc", false, &report);
        Ok(report)
    }

    /// Deletes the inbox keys (and idem's other rows) and the finished events older than
    /// `retention`, into `report`.
    async fn gc_keys(
        &self,
        retention: Duration,
        batch: NonZeroU32,
        report: &mut GcReport,
    ) -> Result<(), Error> {
        // Checked against every source's horizon when the configuration was loaded.
        let policy =
            RetentionPolicy::new(retention, Duration::ZERO).map_err(idem_sql::Error::from)?;
        report.inbox_keys = self.store().gc(&policy, batch).await?.inbox;
        let cutoff = self.now().saturating_sub(retention).as_millis();
        loop {
            let mut tx = self.store().begin().await?;
            let n = DB::collect_events(&mut tx, cutoff, i64::from(GC_BATCH)).await?;
            tx.commit().await.map_err(idem_sql::Error::from)?;
            report.events += n;
            if n < u64::from(GC_BATCH) {
                return Ok(());
            }
        }
    }

    fn wake_all(&self) {
        for lane in self.wiring().lanes() {
            lane.wake();
        }
    }
}

/// Whether `filter` takes a stored event: its body and stored headers (`input`, `None` when the
/// body was dropped: nothing is taken) and its type. A filter that fails takes nothing, as at
/// ingest.
pub(crate) fn filter_takes(
    filter: &RouteFilter,
    input: Option<&(Vec<u8>, String)>,
    event_type: Option<&str>,
) -> bool {
    let Some((body, headers)) = input else {
        return false;
    };
    let headers = ForwardedHeaders::from_json(headers).unwrap_or_default();
    let input = FilterInput::new(headers.pairs(), body, event_type);
    filter.matches(&input).unwrap_or(false)
}
