//! The gateway's tables (events, deliveries, attempts) on SQLite, PostgreSQL and MySQL/MariaDB,
//! beside idem's own (inbox, version guard, leases), in the same database. SQLite and PostgreSQL
//! share one SQL text (`sql.rs` and each concern's module); MySQL's dialect has its own
//! (`mysql/`, a file per concern).

#[cfg(test)]
mod batch_tests;
mod batches;
mod console;
mod consumer_counts;
mod counts;
mod monitor;
mod mysql;
mod pauses;
mod rebuild;
mod relaxed;
mod renames;
mod rows;
mod sql;

use std::future::Future;

use idem_sql::Backend;
use sqlx::Pool;

pub use crate::model::state::{AttemptOutcome, DeliveryState};
pub(crate) use console::{DeliveryRecord, EventContent, EventFilter, StateFilter};
pub(crate) use monitor::{AlertChange, DueSend, PauseRow, destination_health};
pub(crate) use rebuild::{RebuildRow, RebuildWrite};
pub(crate) use rows::{
    BackfillRow, DueDelivery, Finished, NewDelivery, NewEvent, ReplayCandidate, SharedBody,
    StateCount, StoredAttempt, StoredDelivery, StoredEvent,
};

/// The gateway's own migrations table, apart from idem's `idem_migrations` and an application's
/// `_sqlx_migrations`, so each set of migrations is checked against its own history.
pub(crate) const MIGRATIONS_TABLE: &str = "idem_gateway_migrations";

/// The most rows (or ids) one batch statement carries (a multi-row `INSERT`, a `VALUES` list, an
/// `IN` list; SQLite's are shorter still, see [`ops::Ops::batches`]): at 15 parameters a row at
/// most, well within SQLite's 32,766 and PostgreSQL's 65,535 bound parameters per statement.
pub(crate) const ROWS_PER_INSERT: usize = 1_000;

/// Which database a URL names: idem-sql's, the one every opener of the workspace reads.
pub use idem_sql::DatabaseKind;

/// A database that can hold the gateway's tables: [`sqlx::Sqlite`], [`sqlx::Postgres`] or
/// [`sqlx::MySql`] (MySQL 8.0 or later, MariaDB 10.6 or later).
///
/// Sealed: the statements the gateway needs are implemented for these three only.
pub trait GatewayDb:
    Backend
    + ops::Ops
    + counts::ops::CountOps
    + consumer_counts::ops::ConsumerCountOps
    + console::ops::ConsoleOps
    + pauses::ops::PauseOps
    + rebuild::ops::RebuildOps
    + monitor::ops::MonitorOps
    + relaxed::ops::RelaxedOps
    + renames::ops::RenameOps
{
}

impl GatewayDb for sqlx::Sqlite {}
impl GatewayDb for sqlx::Postgres {}
impl GatewayDb for sqlx::MySql {}

/// The operations behind [`GatewayDb`]; unnameable outside the crate.
pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait Ops: sqlx::Database + Sized {
        /// How many group-commit transactions ingest keeps in flight at once: PostgreSQL
        /// flushes the WAL of concurrent commits together, so several batches share one sync;
        /// SQLite has one writer, and its next batch is gathered while the previous one syncs.
        const CONCURRENT_COMMITS: usize;
        /// Whether a statement built for a batch (a row or an id per element, so its text
        /// changes with its length) is kept prepared in sqlx's per-connection cache whatever its
        /// length. PostgreSQL and MySQL: yes, the server holds the plans and a statement
        /// prepared per execution cost its CPU. SQLite: no, the cache (100 a connection) filled
        /// with large programs rarely run again and held much of the gateway's memory
        /// (docs/gateway.md, "Where the peak is: the allocations"): its hot batches are cut into
        /// a few fixed lengths kept prepared ([`Ops::batches`]), its rare ones prepared for
        /// their one execution.
        const KEEP_BATCH_STATEMENTS: bool;
        /// `items` cut into the chunks a batch statement carries, in order: up to `most` rows
        /// each where every length is kept prepared, else the fixed lengths of
        /// [`batches::SQLITE_LENGTHS`]; statements built over these chunks are kept prepared.
        fn batches<T>(items: &[T], most: usize) -> impl Iterator<Item = &[T]> {
            batches::chunks(items, most, Self::KEEP_BATCH_STATEMENTS)
        }
        fn migrate_gateway(
            pool: &Pool<Self>,
        ) -> impl Future<Output = Result<(), sqlx::migrate::MigrateError>> + Send;
        /// The file of a database that belongs to one process (SQLite's main database), or
        /// `None` (PostgreSQL; SQLite in memory).
        fn database_file(pool: &Pool<Self>) -> impl Future<Output = Res<Option<String>>> + Send;
        /// Inserts `rows` in multi-row statements of at most [`ROWS_PER_INSERT`]; returns each
        /// row's new id, in `rows`' order, or `None` where its source and event id, or its dedup
        /// key, is already stored. The dedup keys of `rows` must differ.
        fn insert_events(
            conn: &mut Self::Connection,
            rows: &[NewEvent<'_>],
        ) -> impl Future<Output = Res<Vec<Option<i64>>>> + Send;
        /// Inserts `rows` in multi-row statements of at most [`ROWS_PER_INSERT`]; returns each
        /// row's new id, in `rows`' order.
        fn insert_deliveries(
            conn: &mut Self::Connection,
            rows: &[NewDelivery<'_>],
        ) -> impl Future<Output = Res<Vec<i64>>> + Send;
        /// Which of `keys` (destination, route, entity) have a delivery pending or in flight.
        fn open_entities(
            conn: &mut Self::Connection,
            keys: &[(&str, &str, &str)],
        ) -> impl Future<Output = Res<Vec<(String, String, String)>>> + Send;
        fn due(
            conn: &mut Self::Connection,
            destination: &str,
            now: i64,
            limit: i64,
        ) -> impl Future<Output = Res<Vec<DueDelivery>>> + Send;
        /// The next delivery of each of `keys` (route, entity) if it is pending and due at
        /// `now` (see `sql::DUE_SUCCESSORS`), ascending by id: what the end of an attempt of
        /// that entity lets go next.
        fn due_successors(
            conn: &mut Self::Connection,
            keys: &[(&str, &str)],
            now: i64,
        ) -> impl Future<Output = Res<Vec<DueDelivery>>> + Send;
        /// The earliest `next_attempt_at` after `now` of destination's open deliveries (may be
        /// past by the time it is read).
        fn next_due(
            conn: &mut Self::Connection,
            destination: &str,
            now: i64,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;
        /// Lets the open transaction on `conn` commit without waiting for the disk, on
        /// PostgreSQL (`SET LOCAL synchronous_commit = off`); nothing on SQLite (whose dispatch
        /// transactions run on a connection that never waits, see `relaxed`). For attempt
        /// outcomes only: one lost in a crash of the database leaves its delivery in flight, and
        /// it is sent again, with the same keys, once its claim lapses (at least once, as for a
        /// crash between the attempt and the outcome's commit). A lost outcome never lets two
        /// holders send at once: the claim that fences them stays synchronous.
        fn relax_commit(conn: &mut Self::Connection) -> impl Future<Output = Res<()>> + Send;
        /// Locks deliveries `ids` in id order on PostgreSQL (`FOR UPDATE`), so that two
        /// transactions writing overlapping sets wait for each other instead of deadlocking;
        /// nothing on SQLite, whose one writer at a time cannot deadlock.
        fn lock_in_order(
            conn: &mut Self::Connection,
            ids: &[i64],
        ) -> impl Future<Output = Res<()>> + Send;
        /// Claims those of deliveries `ids` (ascending) still due at `now`: each in flight
        /// until `until`, its attempt number (the fencing token) raised by one. Returns
        /// `(delivery, attempt)` of the ones claimed; a delivery delivered, rescheduled or taken
        /// by another process since it was read is left out. On PostgreSQL the rows are locked
        /// in id order first, so that concurrent claims and outcome writes cannot deadlock.
        fn start_attempts(
            conn: &mut Self::Connection,
            ids: &[i64],
            until: i64,
            now: i64,
        ) -> impl Future<Output = Res<Vec<(i64, i64)>>> + Send;
        /// Writes the outcomes `rows` (ascending by delivery) whose holder still holds the
        /// claim, with their attempt rows, in two statements; returns the deliveries written
        /// (the others were fenced off: nothing written for them).
        fn finish_attempts(
            conn: &mut Self::Connection,
            rows: &[&Finished],
        ) -> impl Future<Output = Res<Vec<i64>>> + Send;
        /// All states, or with `open_only` only pending, in flight and dead.
        fn count_by_state(
            conn: &mut Self::Connection,
            open_only: bool,
        ) -> impl Future<Output = Res<Vec<StateCount>>> + Send;
        fn oldest_undelivered(
            conn: &mut Self::Connection,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;
        fn count_failed_attempts(
            conn: &mut Self::Connection,
        ) -> impl Future<Output = Res<i64>> + Send;
        /// The newest `limit` events of `source` ('' for every source) before `before`
        /// ((received_at, id) in newest-first order; `(i64::MAX, i64::MAX)` for the first
        /// page); with `unrouted`, only those with no delivery.
        fn list_events(
            conn: &mut Self::Connection,
            source: &str,
            limit: i64,
            unrouted: bool,
            before: (i64, i64),
        ) -> impl Future<Output = Res<Vec<StoredEvent>>> + Send;
        /// Source `source`'s events received in [`since`, `until`), in arrival order, as
        /// backfill reads them again.
        fn backfill_candidates(
            conn: &mut Self::Connection,
            source: &str,
            since: i64,
            until: i64,
        ) -> impl Future<Output = Res<Vec<BackfillRow>>> + Send;
        /// (event row, route) of every delivery of those events.
        fn delivered_routes(
            conn: &mut Self::Connection,
            source: &str,
            since: i64,
            until: i64,
        ) -> impl Future<Output = Res<Vec<(i64, String)>>> + Send;
        fn find_event(
            conn: &mut Self::Connection,
            source: &str,
            event_id: &str,
        ) -> impl Future<Output = Res<Option<StoredEvent>>> + Send;
        fn deliveries_of(
            conn: &mut Self::Connection,
            event: i64,
        ) -> impl Future<Output = Res<Vec<StoredDelivery>>> + Send;
        fn attempts_of(
            conn: &mut Self::Connection,
            delivery: i64,
        ) -> impl Future<Output = Res<Vec<StoredAttempt>>> + Send;
        /// Dead letters oldest first after `after` ((updated_at, id); `(i64::MIN, i64::MIN)`
        /// for the first page).
        fn dead_letters(
            conn: &mut Self::Connection,
            destination: &str,
            limit: i64,
            after: (i64, i64),
        ) -> impl Future<Output = Res<Vec<StoredDelivery>>> + Send;
        /// Dead letters, oldest first, of `destination` (`None`: every one) among `ids` (empty:
        /// all).
        fn redrive_candidates(
            conn: &mut Self::Connection,
            destination: Option<&str>,
            ids: &[i64],
        ) -> impl Future<Output = Res<Vec<ReplayCandidate>>> + Send;
        fn replay_candidates(
            conn: &mut Self::Connection,
            source: &str,
            since: i64,
            until: i64,
        ) -> impl Future<Output = Res<Vec<ReplayCandidate>>> + Send;
        /// The deliveries of one event, for a resend.
        fn resend_candidates(
            conn: &mut Self::Connection,
            source: &str,
            event_id: &str,
        ) -> impl Future<Output = Res<Vec<ReplayCandidate>>> + Send;
        /// Makes finished delivery `delivery` due at `now` again (see `sql::REQUEUE`); a
        /// rebuild's delivery stays one only with `keep_rebuild`. Returns whether it was
        /// finished (a pending or in-flight one is left alone).
        fn requeue(
            conn: &mut Self::Connection,
            delivery: i64,
            now: i64,
            keep_rebuild: bool,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// The raw body and stored headers (JSON) of event `event`, for a route's filter;
        /// `None` when the body was dropped or the event is gone.
        fn filter_input(
            conn: &mut Self::Connection,
            event: i64,
        ) -> impl Future<Output = Res<Option<(Vec<u8>, String)>>> + Send;
        /// Deletes up to `limit` finished events received before `cutoff`, with their
        /// deliveries and attempts; returns how many events.
        fn collect_events(
            conn: &mut Self::Connection,
            cutoff: i64,
            limit: i64,
        ) -> impl Future<Output = Res<u64>> + Send;
        /// `/readyz`'s probe of a connection: `SELECT 1`.
        fn probe_read(conn: &mut Self::Connection) -> impl Future<Output = Res<()>> + Send;
        /// `/readyz`'s probe write (see `sql::PROBE_WRITE`).
        fn probe_write(
            conn: &mut Self::Connection,
            now: i64,
        ) -> impl Future<Output = Res<()>> + Send;
        fn drop_bodies(
            conn: &mut Self::Connection,
            cutoff: i64,
            limit: i64,
        ) -> impl Future<Output = Res<u64>> + Send;
    }
}

macro_rules! gateway_ops {
    ($db:ty, $migrations:literal, $commits:literal, $keep:literal, $locks:literal, $relax:expr, $file:expr) => {
        impl ops::Ops for $db {
            const CONCURRENT_COMMITS: usize = $commits;
            const KEEP_BATCH_STATEMENTS: bool = $keep;

            async fn database_file(pool: &Pool<Self>) -> Result<Option<String>, sqlx::Error> {
                let Some(query) = $file else { return Ok(None) };
                let file: Option<String> = sqlx::query_scalar(query).fetch_optional(pool).await?;
                Ok(file.filter(|file| !file.is_empty()))
            }

            async fn migrate_gateway(pool: &Pool<Self>) -> Result<(), sqlx::migrate::MigrateError> {
                let mut migrator = sqlx::migrate!($migrations);
                migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
                idem_sql::run_migrations(migrator, pool).await
            }

            async fn insert_events(
                conn: &mut Self::Connection,
                rows: &[NewEvent<'_>],
            ) -> Result<Vec<Option<i64>>, sqlx::Error> {
                let mut ids = std::collections::HashMap::with_capacity(rows.len());
                for chunk in Self::batches(rows, ROWS_PER_INSERT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(sql::INSERT_EVENTS);
                    query.push_values(chunk, |mut values, row| {
                        values
                            .push_bind(row.source)
                            .push_bind(row.event_id)
                            .push_bind(row.event_type)
                            .push_bind(row.aggregate_type)
                            .push_bind(row.aggregate_id)
                            .push_bind(row.version)
                            .push_bind(row.body)
                            .push_bind(row.headers)
                            .push_bind(row.received_at)
                            .push_bind(row.dedup_key)
                            .push_bind(row.version_secondary)
                            .push_bind(row.traceparent)
                            .push_bind(row.tracestate)
                            .push_bind(row.filtered_routes);
                    });
                    query.push(sql::INSERT_EVENTS_END);
                    let inserted: Vec<(i64, String)> =
                        query.build_query_as().fetch_all(&mut *conn).await?;
                    ids.extend(inserted.into_iter().map(|(id, key)| (key, id)));
                }
                Ok(rows
                    .iter()
                    .map(|row| ids.get(row.dedup_key).copied())
                    .collect())
            }

            async fn insert_deliveries(
                conn: &mut Self::Connection,
                rows: &[NewDelivery<'_>],
            ) -> Result<Vec<i64>, sqlx::Error> {
                let mut ids = std::collections::HashMap::with_capacity(rows.len());
                for chunk in Self::batches(rows, ROWS_PER_INSERT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(sql::INSERT_DELIVERIES);
                    query.push_values(chunk, |mut values, row| {
                        let (state, attempts, next_attempt_at, token) = match row.claimed_until {
                            Some(until) => (DeliveryState::InFlight, 1_i64, until, Some(1_i64)),
                            None => (row.state, 0_i64, row.now, None),
                        };
                        values
                            .push_bind(row.event)
                            .push_bind(row.route)
                            .push_bind(row.destination)
                            .push_bind(state)
                            .push_bind(row.entity)
                            .push_bind(row.version)
                            .push_bind(row.tie)
                            .push_bind(row.note)
                            .push_bind(attempts)
                            .push_bind(0_i64)
                            .push_bind(next_attempt_at)
                            .push_bind(row.now)
                            .push_bind(row.now)
                            .push_bind(row.version_secondary)
                            .push_bind(token);
                    });
                    query.push(sql::INSERT_DELIVERIES_END);
                    let inserted: Vec<(i64, i64, String)> =
                        query.build_query_as().fetch_all(&mut *conn).await?;
                    ids.extend(
                        inserted
                            .into_iter()
                            .map(|(id, event, destination)| ((event, destination), id)),
                    );
                }
                rows.iter()
                    .map(|row| {
                        ids.get(&(row.event, row.destination.to_owned()))
                            .copied()
                            .ok_or_else(|| {
                                sqlx::Error::Protocol(format!(
                                    "no id came back for the delivery of event {} to {}",
                                    row.event, row.destination
                                ))
                            })
                    })
                    .collect()
            }

            async fn open_entities(
                conn: &mut Self::Connection,
                keys: &[(&str, &str, &str)],
            ) -> Result<Vec<(String, String, String)>, sqlx::Error> {
                let mut open = Vec::new();
                for chunk in Self::batches(keys, ROWS_PER_INSERT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(sql::OPEN_ENTITIES);
                    query.push_values(chunk, |mut values, (destination, route, entity)| {
                        values
                            .push_bind(*destination)
                            .push_bind(*route)
                            .push_bind(*entity);
                    });
                    query.push(sql::OPEN_ENTITIES_END);
                    let found: Vec<(String, String, String)> =
                        query.build_query_as().fetch_all(&mut *conn).await?;
                    open.extend(found);
                }
                Ok(open)
            }

            async fn due(
                conn: &mut Self::Connection,
                destination: &str,
                now: i64,
                limit: i64,
            ) -> Result<Vec<DueDelivery>, sqlx::Error> {
                sqlx::query_as(sql::DUE)
                    .bind(destination)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn due_successors(
                conn: &mut Self::Connection,
                keys: &[(&str, &str)],
                now: i64,
            ) -> Result<Vec<DueDelivery>, sqlx::Error> {
                if keys.is_empty() {
                    return Ok(Vec::new());
                }
                let mut due = Vec::new();
                for chunk in Self::batches(keys, ROWS_PER_INSERT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(sql::DUE_SUCCESSORS);
                    query.push_values(chunk, |mut values, (route, entity)| {
                        values.push_bind(*route).push_bind(*entity);
                    });
                    query
                        .push(sql::DUE_SUCCESSORS_DUE)
                        .push_bind(now)
                        .push(sql::DUE_SUCCESSORS_END);
                    let found: Vec<DueDelivery> =
                        query.build_query_as().fetch_all(&mut *conn).await?;
                    due.extend(found);
                }
                due.sort_unstable_by_key(|delivery| delivery.id);
                Ok(due)
            }

            async fn next_due(
                conn: &mut Self::Connection,
                destination: &str,
                now: i64,
            ) -> Result<Option<i64>, sqlx::Error> {
                sqlx::query_scalar(sql::NEXT_DUE)
                    .bind(destination)
                    .bind(now)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn relax_commit(conn: &mut Self::Connection) -> Result<(), sqlx::Error> {
                let relax: Option<&'static str> = $relax;
                if let Some(relax) = relax {
                    sqlx::query(relax).execute(&mut *conn).await?;
                }
                Ok(())
            }

            async fn lock_in_order(
                conn: &mut Self::Connection,
                ids: &[i64],
            ) -> Result<(), sqlx::Error> {
                // SQLite has one writer at a time: nothing to order.
                if !$locks || ids.is_empty() {
                    return Ok(());
                }
                let mut query = sqlx::QueryBuilder::<Self>::new(
                    "SELECT id FROM idem_gateway_deliveries WHERE id IN (",
                );
                let mut list = query.separated(", ");
                for id in ids {
                    list.push_bind(*id);
                }
                query.push(") ORDER BY id FOR UPDATE");
                query
                    .build()
                    .persistent(Self::KEEP_BATCH_STATEMENTS)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            async fn start_attempts(
                conn: &mut Self::Connection,
                ids: &[i64],
                until: i64,
                now: i64,
            ) -> Result<Vec<(i64, i64)>, sqlx::Error> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                Self::lock_in_order(conn, ids).await?;
                let mut claimed = Vec::with_capacity(ids.len());
                for chunk in Self::batches(ids, ROWS_PER_INSERT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(sql::START_ATTEMPTS);
                    query
                        .push_bind(until)
                        .push(", attempts = attempts + 1, updated_at = ");
                    query
                        .push_bind(now)
                        .push(" WHERE state IN ('pending', 'in_flight') AND next_attempt_at <= ");
                    query.push_bind(now).push(" AND id IN (");
                    let mut list = query.separated(", ");
                    for id in chunk {
                        list.push_bind(*id);
                    }
                    query.push(") RETURNING id, attempts");
                    let taken: Vec<(i64, i64)> =
                        query.build_query_as().fetch_all(&mut *conn).await?;
                    claimed.extend(taken);
                }
                claimed.sort_unstable();
                Ok(claimed)
            }

            async fn finish_attempts(
                conn: &mut Self::Connection,
                rows: &[&Finished],
            ) -> Result<Vec<i64>, sqlx::Error> {
                if rows.is_empty() {
                    return Ok(Vec::new());
                }
                let ids: Vec<i64> = rows.iter().map(|row| row.delivery).collect();
                Self::lock_in_order(conn, &ids).await?;
                let mut written = Vec::with_capacity(rows.len());
                for chunk in Self::batches(rows, ROWS_PER_INSERT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(sql::FINISH_ATTEMPTS);
                    query.push_values(chunk, |mut values, row| {
                        values
                            .push_bind(row.delivery)
                            .push_bind(row.state)
                            .push_bind(row.failures)
                            .push_bind(row.next_attempt_at)
                            .push_bind(row.now)
                            .push_bind(row.token);
                    });
                    query.push(sql::FINISH_ATTEMPTS_WHERE);
                    let ended: Vec<i64> = query.build_query_scalar().fetch_all(&mut *conn).await?;
                    written.extend(ended);
                }
                if written.is_empty() {
                    return Ok(written);
                }
                written.sort_unstable();
                let kept: Vec<&&Finished> = rows
                    .iter()
                    .filter(|row| written.binary_search(&row.delivery).is_ok())
                    .collect();
                for chunk in Self::batches(&kept, ROWS_PER_INSERT) {
                    let mut insert = sqlx::QueryBuilder::<Self>::new(sql::INSERT_ATTEMPTS);
                    insert.push_values(chunk, |mut values, row| {
                        values
                            .push_bind(row.delivery)
                            .push_bind(row.attempt)
                            .push_bind(row.started_at)
                            .push_bind(row.duration_ms)
                            .push_bind(row.status)
                            .push_bind(row.outcome)
                            .push_bind(row.excerpt.as_str());
                    });
                    insert.build().execute(&mut *conn).await?;
                }
                Ok(written)
            }

            async fn count_by_state(
                conn: &mut Self::Connection,
                open_only: bool,
            ) -> Result<Vec<StateCount>, sqlx::Error> {
                let statement = if open_only {
                    sql::COUNT_OPEN_BY_STATE
                } else {
                    sql::COUNT_BY_STATE
                };
                sqlx::query_as(statement).fetch_all(&mut *conn).await
            }

            async fn oldest_undelivered(
                conn: &mut Self::Connection,
            ) -> Result<Option<i64>, sqlx::Error> {
                sqlx::query_scalar(sql::OLDEST_UNDELIVERED)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn count_failed_attempts(
                conn: &mut Self::Connection,
            ) -> Result<i64, sqlx::Error> {
                sqlx::query_scalar(sql::COUNT_FAILED_ATTEMPTS)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn list_events(
                conn: &mut Self::Connection,
                source: &str,
                limit: i64,
                unrouted: bool,
                before: (i64, i64),
            ) -> Result<Vec<StoredEvent>, sqlx::Error> {
                let sql = if unrouted {
                    sql::LIST_UNROUTED
                } else {
                    sql::LIST_EVENTS
                };
                sqlx::query_as(sql)
                    .bind(source)
                    .bind(limit)
                    .bind(before.0)
                    .bind(before.1)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn backfill_candidates(
                conn: &mut Self::Connection,
                source: &str,
                since: i64,
                until: i64,
            ) -> Result<Vec<BackfillRow>, sqlx::Error> {
                sqlx::query_as(sql::BACKFILL_CANDIDATES)
                    .bind(source)
                    .bind(since)
                    .bind(until)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn delivered_routes(
                conn: &mut Self::Connection,
                source: &str,
                since: i64,
                until: i64,
            ) -> Result<Vec<(i64, String)>, sqlx::Error> {
                sqlx::query_as(sql::DELIVERED_ROUTES)
                    .bind(source)
                    .bind(since)
                    .bind(until)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn find_event(
                conn: &mut Self::Connection,
                source: &str,
                event_id: &str,
            ) -> Result<Option<StoredEvent>, sqlx::Error> {
                sqlx::query_as(sql::FIND_EVENT)
                    .bind(source)
                    .bind(event_id)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn deliveries_of(
                conn: &mut Self::Connection,
                event: i64,
            ) -> Result<Vec<StoredDelivery>, sqlx::Error> {
                sqlx::query_as(sql::DELIVERIES_OF)
                    .bind(event)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn attempts_of(
                conn: &mut Self::Connection,
                delivery: i64,
            ) -> Result<Vec<StoredAttempt>, sqlx::Error> {
                sqlx::query_as(sql::ATTEMPTS_OF)
                    .bind(delivery)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn dead_letters(
                conn: &mut Self::Connection,
                destination: &str,
                limit: i64,
                after: (i64, i64),
            ) -> Result<Vec<StoredDelivery>, sqlx::Error> {
                sqlx::query_as(sql::DEAD_LETTERS)
                    .bind(destination)
                    .bind(limit)
                    .bind(after.0)
                    .bind(after.1)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn redrive_candidates(
                conn: &mut Self::Connection,
                destination: Option<&str>,
                ids: &[i64],
            ) -> Result<Vec<ReplayCandidate>, sqlx::Error> {
                let mut query = sqlx::QueryBuilder::<Self>::new(sql::REDRIVE_CANDIDATES);
                if let Some(destination) = destination {
                    query.push(" AND d.destination = ").push_bind(destination);
                }
                if !ids.is_empty() {
                    query.push(" AND d.id IN (");
                    let mut list = query.separated(", ");
                    for id in ids {
                        list.push_bind(*id);
                    }
                    query.push(")");
                }
                query.push(sql::REDRIVE_ORDER);
                query
                    .build_query_as()
                    .persistent(Self::KEEP_BATCH_STATEMENTS)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn resend_candidates(
                conn: &mut Self::Connection,
                source: &str,
                event_id: &str,
            ) -> Result<Vec<ReplayCandidate>, sqlx::Error> {
                sqlx::query_as(sql::RESEND_CANDIDATES)
                    .bind(source)
                    .bind(event_id)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn replay_candidates(
                conn: &mut Self::Connection,
                source: &str,
                since: i64,
                until: i64,
            ) -> Result<Vec<ReplayCandidate>, sqlx::Error> {
                sqlx::query_as(sql::REPLAY_CANDIDATES)
                    .bind(source)
                    .bind(since)
                    .bind(until)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn requeue(
                conn: &mut Self::Connection,
                delivery: i64,
                now: i64,
                keep_rebuild: bool,
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(sql::REQUEUE)
                    .bind(delivery)
                    .bind(now)
                    .bind(keep_rebuild)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn filter_input(
                conn: &mut Self::Connection,
                event: i64,
            ) -> Result<Option<(Vec<u8>, String)>, sqlx::Error> {
                sqlx::query_as(sql::FILTER_INPUT)
                    .bind(event)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn collect_events(
                conn: &mut Self::Connection,
                cutoff: i64,
                limit: i64,
            ) -> Result<u64, sqlx::Error> {
                let ids: Vec<i64> = sqlx::query_scalar(sql::COLLECTABLE_EVENTS)
                    .bind(cutoff)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await?;
                if ids.is_empty() {
                    return Ok(0);
                }
                for statement in [
                    "DELETE FROM idem_gateway_attempts WHERE delivery IN \
                     (SELECT id FROM idem_gateway_deliveries WHERE event IN (",
                    "DELETE FROM idem_gateway_deliveries WHERE event IN (",
                    "DELETE FROM idem_gateway_events WHERE id IN (",
                ] {
                    let mut query = sqlx::QueryBuilder::<Self>::new(statement);
                    let mut list = query.separated(", ");
                    for id in &ids {
                        list.push_bind(*id);
                    }
                    query.push(if statement.contains("SELECT") {
                        "))"
                    } else {
                        ")"
                    });
                    query
                        .build()
                        .persistent(Self::KEEP_BATCH_STATEMENTS)
                        .execute(&mut *conn)
                        .await?;
                }
                Ok(ids.len() as u64)
            }

            async fn probe_read(conn: &mut Self::Connection) -> Result<(), sqlx::Error> {
                sqlx::query("SELECT 1").execute(&mut *conn).await?;
                Ok(())
            }

            async fn probe_write(conn: &mut Self::Connection, now: i64) -> Result<(), sqlx::Error> {
                sqlx::query(sql::PROBE_WRITE)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            async fn drop_bodies(
                conn: &mut Self::Connection,
                cutoff: i64,
                limit: i64,
            ) -> Result<u64, sqlx::Error> {
                let done = sqlx::query(sql::DROP_BODIES)
                    .bind(cutoff)
                    .bind(limit)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

gateway_ops!(
    sqlx::Sqlite,
    "migrations/sqlite",
    1,
    false,
    false,
    None,
    Some("SELECT file FROM pragma_database_list WHERE name = 'main'")
);
gateway_ops!(
    sqlx::Postgres,
    "migrations/postgres",
    4,
    true,
    true,
    Some("SET LOCAL synchronous_commit = off"),
    None::<&'static str>
);
