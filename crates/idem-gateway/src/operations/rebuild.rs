//! [`Gateway::rebuild`]: `idem replay --rebuild`, `POST /admin/replay` with `"rebuild": true`
//! (docs/gateway.md "Rebuild a consumer from stored events"). Every stored event of a source's
//! range goes to one destination again — delivered ones, stale ones (never sent), and those
//! with no delivery there yet — as a rebuild's deliveries: each attempt carries
//! `Idem-Replay: rebuild`, under the event's own Idempotency-Key, one delivery per entity at a
//! time in the entity's version order (the dispatcher's entity order, which a rebuild's
//! deliveries keep on every route), events without an entity queued in arrival order.

use serde::Serialize;

use super::ReplayRequest;
use crate::Error;
use crate::config::Route;
use crate::error::RequestError;
use crate::gateway::Gateway;
use crate::store::{DeliveryState, GatewayDb, RebuildRow, RebuildWrite};

/// A rebuild's writes per transaction: a commit holds SQLite's one writer, so it is kept short
/// for live ingest.
const BATCH: usize = 200;

/// What to rebuild: the events of `source` received in the range, sent again to
/// `destination`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RebuildRequest {
    /// The source whose stored events are sent; it must be configured.
    pub source: String,
    /// From this time (ms since the epoch), inclusive.
    pub since: i64,
    /// Up to this time (ms since the epoch), exclusive; `None` = now. It must be after `since`.
    pub until: Option<i64>,
    /// Only events of this type (an exact type, or a prefix ending in `*`); `None`: every event.
    pub event_type: Option<String>,
    /// The destination rebuilt; it must be configured, and a route of `source` must lead to it.
    pub destination: String,
    /// Count only; change nothing (and refuse nothing: the counts say what would be refused).
    pub dry_run: bool,
    /// Skip (and count) the events whose body body_retention dropped, instead of refusing the
    /// rebuild.
    pub skip_missing_bodies: bool,
}

/// What a rebuild did (or, dry, would do). `matched` = `queued` + `no_body` + `filtered` +
/// `in_progress`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RebuildReport {
    /// Stored events of the source in the range (of the event type, when given).
    pub matched: u64,
    /// Queued to the destination as the rebuild's deliveries (dry: would be).
    pub queued: u64,
    /// Of `queued`, events that had no delivery to the destination: a new delivery each.
    pub created: u64,
    /// Of `queued`, events the version guard had recorded stale there (never sent before).
    pub stale_included: u64,
    /// Not sent: the raw body was dropped by body_retention (the rebuild is refused unless they
    /// are skipped).
    pub no_body: u64,
    /// Not sent: no route from the source to the destination takes them as configured now (its
    /// `event_types` or `filter`).
    pub filtered: u64,
    /// Not sent: their delivery to the destination is still pending or in flight (the rebuild
    /// is refused when there is any).
    pub in_progress: u64,
}

/// One event the rebuild queues, on the route of its delivery (or of the route that takes it).
struct Planned {
    row: RebuildRow,
    route: String,
}

impl<DB: GatewayDb> Gateway<DB> {
    /// Sends every stored event of `request.source` received in the range (of
    /// `request.event_type`, when given) to `request.destination` again, as a rebuild: see the
    /// module's documentation. Exempt from the stale and older refusal of replay and redrive
    /// (a rebuild is explicit); the version guard is neither read nor written. A route from the
    /// source to the destination must take each event (its `event_types` and `filter` as
    /// configured now); the others are counted, not sent. Writes in batches of whole
    /// transactions, each entity's events in version order, waking the dispatchers after each.
    ///
    /// # Errors
    /// [`Error::Request`] before anything is changed: as [`replay`](Self::replay) for the
    /// source, event type and range; [`RequestError::UnknownDestination`];
    /// [`RequestError::NoRoute`] when no route of the source leads to the destination;
    /// without `dry_run`, [`RequestError::BodiesMissing`] when an event of the range has no
    /// body (unless `skip_missing_bodies`) and [`RequestError::DeliveriesInProgress`] when a
    /// delivery of the range to the destination is pending or in flight. [`Error::Store`]:
    /// batches committed before the error stay queued.
    pub async fn rebuild(&self, request: &RebuildRequest) -> Result<RebuildReport, Error> {
        let until = self.replay_range(&ReplayRequest {
            source: request.source.clone(),
            since: request.since,
            until: request.until,
            event_type: request.event_type.clone(),
            dry_run: request.dry_run,
            force: false,
        })?;
        self.known_destination(&request.destination)?;
        let routes = self.rebuild_routes(request)?;
        let mut conn = self.store().pool().acquire().await?;
        let rows = DB::rebuild_candidates(
            &mut conn,
            &request.source,
            request.since,
            until,
            &request.destination,
        )
        .await?;
        let mut report = RebuildReport::default();
        let mut planned = Vec::new();
        for row in rows {
            if let Some(pattern) = &request.event_type
                && !crate::config::type_matches(pattern, row.event_type.as_deref())
            {
                continue;
            }
            report.matched += 1;
            if row.state.is_some_and(DeliveryState::is_open) {
                report.in_progress += 1;
            } else if !row.body_kept {
                report.no_body += 1;
            } else if let Some(route) = taking_route::<DB>(&mut conn, &routes, &row).await? {
                report.queued += 1;
                report.created += u64::from(row.delivery.is_none());
                report.stale_included += u64::from(row.state == Some(DeliveryState::Stale));
                let route = row.route.clone().unwrap_or(route);
                planned.push(Planned { row, route });
            } else {
                report.filtered += 1;
            }
        }
        drop(conn);
        if !request.dry_run {
            refusal(request, &report)?;
            self.queue_rebuild(request, planned, &mut report).await?;
        }
        crate::audit::done("rebuild", request.dry_run, &report);
        Ok(report)
    }

    /// The routes from `request.source` to `request.destination`, or
    /// [`RequestError::NoRoute`] naming the source's routes.
    fn rebuild_routes(&self, request: &RebuildRequest) -> Result<Vec<Route>, RequestError> {
        let config = self.config();
        let of_source = config
            .routes
            .iter()
            .filter(|r| r.source.as_str() == request.source);
        let routes: Vec<Route> = of_source
            .clone()
            .filter(|r| r.destination.as_str() == request.destination)
            .cloned()
            .collect();
        if routes.is_empty() {
            return Err(RequestError::NoRoute {
                source_name: request.source.clone(),
                destination: request.destination.clone(),
                routes: of_source
                    .map(|r| format!("{} -> {}", r.name, r.destination))
                    .collect(),
            });
        }
        Ok(routes)
    }

    /// Writes `planned` in batches, each entity's events in version order (events without an
    /// entity first, in arrival order), waking the dispatchers after each batch; an event
    /// whose delivery became open since it was read moves from `queued` to `in_progress`.
    async fn queue_rebuild(
        &self,
        request: &RebuildRequest,
        mut planned: Vec<Planned>,
        report: &mut RebuildReport,
    ) -> Result<(), Error> {
        planned.sort_by_cached_key(|p| {
            let row = &p.row;
            let entity = row.entity();
            let version = entity.as_ref().and(row.version);
            let secondary = entity.as_ref().and(row.version_secondary);
            (entity, version, secondary, row.received_at, row.event)
        });
        for batch in planned.chunks(BATCH) {
            let _turn = self.writer().ingest().await;
            let now = self.now().as_millis();
            let mut tx = self.store().begin().await?;
            for p in batch {
                let write = RebuildWrite {
                    row: &p.row,
                    route: &p.route,
                    destination: &request.destination,
                    now,
                };
                if !DB::rebuild_write(&mut tx, &write).await? {
                    report.queued -= 1;
                    report.in_progress += 1;
                    report.created -= u64::from(p.row.delivery.is_none());
                    report.stale_included -= u64::from(p.row.state == Some(DeliveryState::Stale));
                }
            }
            tx.commit().await.map_err(idem_sql::Error::from)?;
            self.wake_all();
        }
        Ok(())
    }
}

/// Why a rebuild with `report`'s counts is refused, if it is: bodies missing (unless skipped),
/// then deliveries still open.
fn refusal(request: &RebuildRequest, report: &RebuildReport) -> Result<(), RequestError> {
    if report.no_body > 0 && !request.skip_missing_bodies {
        return Err(RequestError::BodiesMissing {
            count: report.no_body,
        });
    }
    if report.in_progress > 0 {
        return Err(RequestError::DeliveriesInProgress {
            destination: request.destination.clone(),
            count: report.in_progress,
        });
    }
    Ok(())
}

/// The first of `routes` that takes `row`'s event as configured now: its type matches the
/// route's `event_types` and its `filter` (if any) gives true on the stored body and headers
/// (a filter that fails, or reads a header the event was kept without, takes nothing, as at
/// ingest). `None`: none does.
async fn taking_route<DB: GatewayDb>(
    conn: &mut DB::Connection,
    routes: &[Route],
    row: &RebuildRow,
) -> Result<Option<String>, Error> {
    // Read once, at the first route with a filter.
    let mut input: Option<Option<(Vec<u8>, String)>> = None;
    for route in routes {
        if !route.matches(row.event_type.as_deref()) {
            continue;
        }
        let Some(filter) = &route.filter else {
            return Ok(Some(route.name.to_string()));
        };
        if input.is_none() {
            input = Some(DB::filter_input(&mut *conn, row.event).await?);
        }
        let stored = input.as_ref().and_then(Option::as_ref);
        if super::filter_takes(filter, stored, row.event_type.as_deref()) {
            return Ok(Some(route.name.to_string()));
        }
    }
    Ok(None)
}
