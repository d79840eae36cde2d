//! [`Ops`] on MySQL and MariaDB: the gateway's core statements (`sql.rs`); the writes MySQL
//! makes in several statements (new rows' ids, claims, fenced outcomes) are in `writes.rs`.

use sqlx::mysql::MySqlConnection;
use sqlx::{MySql, Pool, QueryBuilder};

use super::writes::push_ids;
use super::{sql, writes};
use crate::store::ops::Ops;
use crate::store::{
    BackfillRow, DueDelivery, Finished, NewDelivery, NewEvent, ReplayCandidate, StateCount,
    StoredAttempt, StoredDelivery, StoredEvent,
};

type Res<T> = Result<T, sqlx::Error>;

impl Ops for MySql {
    /// InnoDB flushes the redo log of concurrent commits together (group commit), as
    /// PostgreSQL does its WAL.
    const CONCURRENT_COMMITS: usize = 4;
    const KEEP_BATCH_STATEMENTS: bool = true;

    async fn migrate_gateway(pool: &Pool<Self>) -> Result<(), sqlx::migrate::MigrateError> {
        super::migrate::migrate(pool).await
    }

    async fn database_file(_: &Pool<Self>) -> Res<Option<String>> {
        Ok(None)
    }

    async fn insert_events(
        conn: &mut MySqlConnection,
        rows: &[NewEvent<'_>],
    ) -> Res<Vec<Option<i64>>> {
        writes::insert_events(conn, rows).await
    }

    async fn insert_deliveries(
        conn: &mut MySqlConnection,
        rows: &[NewDelivery<'_>],
    ) -> Res<Vec<i64>> {
        writes::insert_deliveries(conn, rows).await
    }

    async fn open_entities(
        conn: &mut MySqlConnection,
        keys: &[(&str, &str, &str)],
    ) -> Res<Vec<(String, String, String)>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = QueryBuilder::<MySql>::new(sql::OPEN_ENTITIES);
        for (n, (destination, route, entity)) in keys.iter().enumerate() {
            if n == 0 {
                query
                    .push("SELECT ")
                    .push_bind(*destination)
                    .push(" AS c1, ");
                query.push_bind(*route).push(" AS c2, ");
                query.push_bind(*entity).push(" AS c3");
            } else {
                query
                    .push(" UNION ALL SELECT ")
                    .push_bind(*destination)
                    .push(", ");
                query.push_bind(*route).push(", ").push_bind(*entity);
            }
        }
        query.push(sql::OPEN_ENTITIES_END);
        query.build_query_as().fetch_all(&mut *conn).await
    }

    async fn due(
        conn: &mut MySqlConnection,
        destination: &str,
        now: i64,
        limit: i64,
    ) -> Res<Vec<DueDelivery>> {
        sqlx::query_as(sql::DUE)
            .bind(destination)
            .bind(now)
            .bind(limit)
            .bind(destination)
            .bind(now)
            .bind(limit)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await
    }

    async fn due_successors(
        conn: &mut MySqlConnection,
        keys: &[(&str, &str)],
        now: i64,
    ) -> Res<Vec<DueDelivery>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut query = QueryBuilder::<MySql>::new(sql::DUE_SUCCESSORS);
        for (n, (route, entity)) in keys.iter().enumerate() {
            if n == 0 {
                query.push("SELECT ").push_bind(*route).push(" AS c1, ");
                query.push_bind(*entity).push(" AS c2");
            } else {
                query
                    .push(" UNION ALL SELECT ")
                    .push_bind(*route)
                    .push(", ");
                query.push_bind(*entity);
            }
        }
        query
            .push(sql::DUE_SUCCESSORS_DUE)
            .push_bind(now)
            .push(sql::DUE_SUCCESSORS_END);
        query.build_query_as().fetch_all(&mut *conn).await
    }

    async fn next_due(conn: &mut MySqlConnection, destination: &str, now: i64) -> Res<Option<i64>> {
        sqlx::query_scalar(sql::NEXT_DUE)
            .bind(destination)
            .bind(now)
            .fetch_one(&mut *conn)
            .await
    }

    /// MySQL has no per-transaction durability setting: every commit is as durable as the
    /// server makes them all.
    async fn relax_commit(_: &mut MySqlConnection) -> Res<()> {
        Ok(())
    }

    async fn lock_in_order(conn: &mut MySqlConnection, ids: &[i64]) -> Res<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let mut query = QueryBuilder::<MySql>::new(sql::LOCK_FOR_OUTCOME);
        push_ids(&mut query, ids, sql::LOCK_FOR_OUTCOME_END);
        query.build().execute(&mut *conn).await?;
        Ok(())
    }

    async fn start_attempts(
        conn: &mut MySqlConnection,
        ids: &[i64],
        until: i64,
        now: i64,
    ) -> Res<Vec<(i64, i64)>> {
        writes::start_attempts(conn, ids, until, now).await
    }

    async fn finish_attempts(conn: &mut MySqlConnection, rows: &[&Finished]) -> Res<Vec<i64>> {
        writes::finish_attempts(conn, rows).await
    }

    async fn count_by_state(conn: &mut MySqlConnection, open_only: bool) -> Res<Vec<StateCount>> {
        let statement = if open_only {
            sql::COUNT_OPEN_BY_STATE
        } else {
            sql::COUNT_BY_STATE
        };
        sqlx::query_as(statement).fetch_all(&mut *conn).await
    }

    async fn oldest_undelivered(conn: &mut MySqlConnection) -> Res<Option<i64>> {
        sqlx::query_scalar(sql::OLDEST_UNDELIVERED)
            .fetch_one(&mut *conn)
            .await
    }

    async fn count_failed_attempts(conn: &mut MySqlConnection) -> Res<i64> {
        sqlx::query_scalar(sql::COUNT_FAILED_ATTEMPTS)
            .fetch_one(&mut *conn)
            .await
    }

    async fn list_events(
        conn: &mut MySqlConnection,
        source: &str,
        limit: i64,
        unrouted: bool,
        before: (i64, i64),
    ) -> Res<Vec<StoredEvent>> {
        let statement = if unrouted {
            sql::LIST_UNROUTED
        } else {
            sql::LIST_EVENTS
        };
        sqlx::query_as(statement)
            .bind(source)
            .bind(source)
            .bind(before.0)
            .bind(before.0)
            .bind(before.1)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await
    }

    async fn backfill_candidates(
        conn: &mut MySqlConnection,
        source: &str,
        since: i64,
        until: i64,
    ) -> Res<Vec<BackfillRow>> {
        sqlx::query_as(sql::BACKFILL_CANDIDATES)
            .bind(source)
            .bind(since)
            .bind(until)
            .fetch_all(&mut *conn)
            .await
    }

    async fn delivered_routes(
        conn: &mut MySqlConnection,
        source: &str,
        since: i64,
        until: i64,
    ) -> Res<Vec<(i64, String)>> {
        sqlx::query_as(sql::DELIVERED_ROUTES)
            .bind(source)
            .bind(since)
            .bind(until)
            .fetch_all(&mut *conn)
            .await
    }

    async fn find_event(
        conn: &mut MySqlConnection,
        source: &str,
        event_id: &str,
    ) -> Res<Option<StoredEvent>> {
        sqlx::query_as(sql::FIND_EVENT)
            .bind(source)
            .bind(event_id)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn deliveries_of(conn: &mut MySqlConnection, event: i64) -> Res<Vec<StoredDelivery>> {
        sqlx::query_as(sql::DELIVERIES_OF)
            .bind(event)
            .fetch_all(&mut *conn)
            .await
    }

    async fn attempts_of(conn: &mut MySqlConnection, delivery: i64) -> Res<Vec<StoredAttempt>> {
        sqlx::query_as(sql::ATTEMPTS_OF)
            .bind(delivery)
            .fetch_all(&mut *conn)
            .await
    }

    async fn dead_letters(
        conn: &mut MySqlConnection,
        destination: &str,
        limit: i64,
        after: (i64, i64),
    ) -> Res<Vec<StoredDelivery>> {
        sqlx::query_as(sql::DEAD_LETTERS)
            .bind(destination)
            .bind(destination)
            .bind(after.0)
            .bind(after.0)
            .bind(after.1)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await
    }

    async fn redrive_candidates(
        conn: &mut MySqlConnection,
        destination: Option<&str>,
        ids: &[i64],
    ) -> Res<Vec<ReplayCandidate>> {
        let mut query = QueryBuilder::<MySql>::new(sql::REDRIVE_CANDIDATES);
        if let Some(destination) = destination {
            query.push(" AND d.destination = ").push_bind(destination);
        }
        if !ids.is_empty() {
            query.push(" AND d.id IN (");
            push_ids(&mut query, ids, ")");
        }
        query.push(sql::REDRIVE_ORDER);
        query.build_query_as().fetch_all(&mut *conn).await
    }

    async fn replay_candidates(
        conn: &mut MySqlConnection,
        source: &str,
        since: i64,
        until: i64,
    ) -> Res<Vec<ReplayCandidate>> {
        sqlx::query_as(sql::REPLAY_CANDIDATES)
            .bind(source)
            .bind(since)
            .bind(until)
            .fetch_all(&mut *conn)
            .await
    }

    async fn resend_candidates(
        conn: &mut MySqlConnection,
        source: &str,
        event_id: &str,
    ) -> Res<Vec<ReplayCandidate>> {
        sqlx::query_as(sql::RESEND_CANDIDATES)
            .bind(source)
            .bind(event_id)
            .fetch_all(&mut *conn)
            .await
    }

    async fn requeue(
        conn: &mut MySqlConnection,
        delivery: i64,
        now: i64,
        keep_rebuild: bool,
    ) -> Res<bool> {
        let done = sqlx::query(sql::REQUEUE)
            .bind(now)
            .bind(now)
            .bind(keep_rebuild)
            .bind(delivery)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn filter_input(
        conn: &mut MySqlConnection,
        event: i64,
    ) -> Res<Option<(Vec<u8>, String)>> {
        sqlx::query_as(sql::FILTER_INPUT)
            .bind(event)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn collect_events(conn: &mut MySqlConnection, cutoff: i64, limit: i64) -> Res<u64> {
        let ids: Vec<i64> = sqlx::query_scalar(sql::COLLECTABLE_EVENTS)
            .bind(cutoff)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        if ids.is_empty() {
            return Ok(0);
        }
        for (statement, end) in [
            (
                "DELETE FROM idem_gateway_attempts WHERE delivery IN \
                 (SELECT id FROM idem_gateway_deliveries WHERE event IN (",
                "))",
            ),
            ("DELETE FROM idem_gateway_deliveries WHERE event IN (", ")"),
            ("DELETE FROM idem_gateway_events WHERE id IN (", ")"),
        ] {
            let mut query = QueryBuilder::<MySql>::new(statement);
            push_ids(&mut query, &ids, end);
            query.build().execute(&mut *conn).await?;
        }
        Ok(ids.len() as u64)
    }

    async fn probe_read(conn: &mut MySqlConnection) -> Res<()> {
        sqlx::query("SELECT 1").execute(&mut *conn).await?;
        Ok(())
    }

    async fn probe_write(conn: &mut MySqlConnection, now: i64) -> Res<()> {
        sqlx::query(sql::PROBE_WRITE)
            .bind(now)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn drop_bodies(conn: &mut MySqlConnection, cutoff: i64, limit: i64) -> Res<u64> {
        let ids: Vec<i64> = sqlx::query_scalar(sql::DROPPABLE_BODIES)
            .bind(cutoff)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        if ids.is_empty() {
            return Ok(0);
        }
        let mut query = QueryBuilder::<MySql>::new(sql::DROP_BODIES);
        push_ids(&mut query, &ids, ")");
        query.build().execute(&mut *conn).await?;
        Ok(ids.len() as u64)
    }
}
