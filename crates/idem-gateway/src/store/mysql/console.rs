//! The console's statements on MySQL: the event search (the same filters, `?` parameters), an
//! event's content and deliveries, the overview's figures, the sessions.

use sqlx::mysql::MySqlConnection;
use sqlx::{MySql, QueryBuilder};

use super::sql::{event_columns, text};
use crate::store::console::ops::ConsoleOps;
use crate::store::console::{DestinationFigures, StateFilter};
use crate::store::{DeliveryRecord, EventContent, EventFilter, StoredEvent};

const EVENT_SEARCH: &str = concat!(event_columns!(), "WHERE 1 = 1");

const EVENT_CONTENT: &str = concat!(
    "SELECT ",
    text!("dedup_key", "dedup_key"),
    ", body, headers, version_secondary FROM idem_gateway_events WHERE id = ?"
);

const DELIVERY_RECORDS: &str = concat!(
    "SELECT id, ",
    text!("route", "route"),
    ", ",
    text!("destination", "destination"),
    ", state, ",
    text!("entity", "entity"),
    ", version, tie, note, attempts, failures, next_attempt_at, created_at, updated_at \
     FROM idem_gateway_deliveries WHERE event = ? ORDER BY id"
);

/// now.
const DESTINATION_FIGURES: &str = concat!(
    "SELECT ",
    text!("d.destination", "destination"),
    ", CAST(SUM(CASE WHEN d.state = 'pending' AND d.failures > 0 THEN 1 ELSE 0 END) AS SIGNED) \
       AS retrying, \
     MIN(e.received_at) AS oldest_undelivered, \
     MIN(CASE WHEN d.next_attempt_at <= ? THEN d.next_attempt_at END) AS oldest_due \
     FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state IN ('pending', 'in_flight') GROUP BY d.destination"
);

const INSERT_SESSION: &str = "INSERT INTO idem_gateway_console_sessions \
     (cookie_hash, csrf, created_at, expires_at) VALUES (?, ?, ?, ?)";

const FIND_SESSION: &str = "SELECT csrf, expires_at FROM idem_gateway_console_sessions \
     WHERE cookie_hash = ? AND expires_at > ?";

const DELETE_SESSION: &str = "DELETE FROM idem_gateway_console_sessions WHERE cookie_hash = ?";

const DELETE_EXPIRED_SESSIONS: &str =
    "DELETE FROM idem_gateway_console_sessions WHERE expires_at <= ?";

impl ConsoleOps for MySql {
    async fn search_events(
        conn: &mut MySqlConnection,
        filter: &EventFilter<'_>,
        limit: i64,
    ) -> Result<Vec<StoredEvent>, sqlx::Error> {
        let mut query = QueryBuilder::<MySql>::new(EVENT_SEARCH);
        if let Some(source) = filter.source {
            query.push(" AND e.source = ").push_bind(source);
        }
        match filter.event_type.map(|t| (t, t.strip_suffix('*'))) {
            // Byte for byte, as every key column: a prefix of the stored bytes.
            Some((_, Some(prefix))) => {
                query
                    .push(" AND LEFT(e.event_type, LENGTH(")
                    .push_bind(prefix)
                    .push(")) = ")
                    .push_bind(prefix);
            }
            Some((exact, None)) => {
                query.push(" AND e.event_type = ").push_bind(exact);
            }
            None => {}
        }
        if let Some(t) = filter.aggregate_type {
            query.push(" AND e.aggregate_type = ").push_bind(t);
        }
        if let Some(id) = filter.aggregate_id {
            query.push(" AND e.aggregate_id = ").push_bind(id);
        }
        if let Some(id) = filter.event_id {
            query.push(" AND e.event_id = ").push_bind(id);
        }
        if let Some(since) = filter.since {
            query.push(" AND e.received_at >= ").push_bind(since);
        }
        if let Some(until) = filter.until {
            query.push(" AND e.received_at < ").push_bind(until);
        }
        if filter.state.is_some() || filter.route.is_some() {
            query.push(" AND EXISTS (SELECT 1 FROM idem_gateway_deliveries d WHERE d.event = e.id");
            match filter.state {
                Some(StateFilter::Pending) => {
                    query.push(" AND d.state = 'pending' AND d.failures = 0");
                }
                Some(StateFilter::Retrying) => {
                    query.push(" AND d.state = 'pending' AND d.failures > 0");
                }
                Some(StateFilter::Is(state)) => {
                    query.push(" AND d.state = ").push_bind(state);
                }
                None => {}
            }
            if let Some(route) = filter.route {
                query.push(" AND d.route = ").push_bind(route);
            }
            query.push(")");
        }
        if let Some((at, id)) = filter.after {
            query
                .push(" AND (e.received_at < ")
                .push_bind(at)
                .push(" OR (e.received_at = ")
                .push_bind(at)
                .push(" AND e.id < ")
                .push_bind(id)
                .push("))");
        }
        query
            .push(" ORDER BY e.received_at DESC, e.id DESC LIMIT ")
            .push_bind(limit);
        query.build_query_as().fetch_all(&mut *conn).await
    }

    async fn event_content(
        conn: &mut MySqlConnection,
        id: i64,
    ) -> Result<Option<EventContent>, sqlx::Error> {
        sqlx::query_as(EVENT_CONTENT)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn delivery_records(
        conn: &mut MySqlConnection,
        event: i64,
    ) -> Result<Vec<DeliveryRecord>, sqlx::Error> {
        sqlx::query_as(DELIVERY_RECORDS)
            .bind(event)
            .fetch_all(&mut *conn)
            .await
    }

    async fn destination_figures(
        conn: &mut MySqlConnection,
        now: i64,
    ) -> Result<Vec<DestinationFigures>, sqlx::Error> {
        sqlx::query_as(DESTINATION_FIGURES)
            .bind(now)
            .fetch_all(&mut *conn)
            .await
    }

    async fn insert_session(
        conn: &mut MySqlConnection,
        cookie_hash: &str,
        csrf: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(INSERT_SESSION)
            .bind(cookie_hash)
            .bind(csrf)
            .bind(now)
            .bind(expires_at)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn find_session(
        conn: &mut MySqlConnection,
        cookie_hash: &str,
        now: i64,
    ) -> Result<Option<(String, i64)>, sqlx::Error> {
        sqlx::query_as(FIND_SESSION)
            .bind(cookie_hash)
            .bind(now)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn delete_session(
        conn: &mut MySqlConnection,
        cookie_hash: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(DELETE_SESSION)
            .bind(cookie_hash)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn delete_expired_sessions(
        conn: &mut MySqlConnection,
        now: i64,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(DELETE_EXPIRED_SESSIONS)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    }
}
