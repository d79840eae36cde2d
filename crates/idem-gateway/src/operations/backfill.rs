//! [`Gateway::backfill`]: `idem replay --backfill`, `POST /admin/replay` with `"backfill":
//! true`. The decisions are ingest's (`crate::ingest::backfill`); this reads the range and
//! counts.

use std::collections::HashMap;

use serde::Serialize;

use super::ReplayRequest;
use crate::Error;
use crate::gateway::Gateway;
use crate::ingest::backfill::{self, Skipped};
use crate::store::GatewayDb;

/// Stored events read again per backfill commit: a commit holds SQLite's one writer, so it is
/// kept short for live ingest.
const BATCH: usize = 200;

/// What a backfill did (or, dry, would do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BackfillReport {
    /// Stored events of the source in the range (of the event type, when given).
    pub matched: u64,
    /// Of them, events given at least one new delivery (dry: that would be).
    pub events: u64,
    /// New deliveries stored (dry: that would be), stale ones included.
    pub created: u64,
    /// Of the new deliveries, judged stale by the version guard: recorded, never sent (not
    /// counted in a dry run, which decides nothing).
    pub stale: u64,
    /// Skipped: every route that takes them has a delivery of them already.
    pub covered: u64,
    /// Skipped: their body was dropped by body_retention.
    pub no_body: u64,
    /// Skipped: today's fields cannot read them, or read another dedup key.
    pub unreadable: u64,
    /// Skipped: the routes without a delivery of them did not take them (their filters said
    /// no, or could not decide).
    pub not_taken: u64,
    /// Routes whose filter, as configured now, did not take a stored event that had no
    /// delivery there (one per event and route).
    pub filtered: u64,
    /// Routes whose filter reads a header a stored event was kept without (idem keeps a
    /// header only from when a filter reads it): not decided, no delivery (one per event and
    /// route).
    pub undecided: u64,
}

impl<DB: GatewayDb> Gateway<DB> {
    /// Gives the stored events of `request.source` received in the range (of
    /// `request.event_type`, when given) a delivery on every route of today's configuration
    /// that takes them and has none of them — a route added or fixed after they arrived — as
    /// ingest decides a new event's (the version guard of `drop-stale` routes, so an event
    /// older than its entity's newest on that route is recorded stale and never sent; entity
    /// order; a route's filter), in their arrival order. The one place replay creates
    /// deliveries. `dry_run` counts and changes nothing; `force` does not apply.
    ///
    /// # Errors
    /// As [`replay`](Self::replay); batches committed before an error stay done.
    pub async fn backfill(&self, request: &ReplayRequest) -> Result<BackfillReport, Error> {
        let until = self.replay_range(request)?;
        let config = self.config();
        let source = config
            .sources
            .iter()
            .position(|s| s.name.as_str() == request.source)
            .unwrap_or_default();
        let mut conn = self.store().pool().acquire().await?;
        let rows =
            DB::backfill_candidates(&mut conn, &request.source, request.since, until).await?;
        let mut delivered: HashMap<i64, Vec<String>> = HashMap::new();
        for (event, route) in
            DB::delivered_routes(&mut conn, &request.source, request.since, until).await?
        {
            delivered.entry(event).or_default().push(route);
        }
        drop(conn);
        let mut report = BackfillReport::default();
        let mut batch = Vec::new();
        for row in rows {
            if let Some(pattern) = &request.event_type
                && !crate::config::type_matches(pattern, row.event_type.as_deref())
            {
                continue;
            }
            let routes = delivered.remove(&row.id).unwrap_or_default();
            let plan = backfill::plan(self, source, row, &routes);
            report.matched += 1;
            report.filtered += plan.filtered;
            report.undecided += plan.undecided;
            match plan.outcome {
                Ok(planned) => {
                    report.events += 1;
                    if request.dry_run {
                        report.created += planned.routes.len() as u64;
                    } else {
                        batch.push(planned);
                    }
                }
                Err(Skipped::Covered) => report.covered += 1,
                Err(Skipped::NotTaken) => report.not_taken += 1,
                Err(Skipped::NoBody) => report.no_body += 1,
                Err(Skipped::Unreadable) => report.unreadable += 1,
            }
            if batch.len() >= BATCH {
                self.commit_backfill(std::mem::take(&mut batch), &mut report)
                    .await?;
            }
        }
        self.commit_backfill(batch, &mut report).await?;
        if report.created > 0 && !request.dry_run {
            self.wake_all();
        }
        crate::audit::done("backfill", request.dry_run, &report);
        Ok(report)
    }

    async fn commit_backfill(
        &self,
        batch: Vec<backfill::Planned>,
        report: &mut BackfillReport,
    ) -> Result<(), Error> {
        let created = backfill::commit(self, batch).await?;
        report.created += created.deliveries;
        report.stale += created.stale;
        Ok(())
    }
}
