//! The console's statements, the same SQL on SQLite and PostgreSQL: its sessions
//! (`idem_gateway_console_sessions`, migration 0009), the event search with a cursor, an event's
//! stored content and deliveries, and the figures of the overview.

use std::future::Future;

use super::rows::StoredEvent;
use crate::model::state::DeliveryState;

/// Where a delivery stands, as the event search filters: the stored state, with `pending`
/// split into never tried and retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    /// Pending, no attempt failed since its last (re)drive.
    Pending,
    /// Pending after a failed attempt.
    Retrying,
    /// Any other stored state.
    Is(DeliveryState),
}

/// What the event search looks for; `None` is any.
#[derive(Debug, Default)]
pub struct EventFilter<'a> {
    pub source: Option<&'a str>,
    /// An exact type, or a prefix when it ends in `*`.
    pub event_type: Option<&'a str>,
    pub aggregate_type: Option<&'a str>,
    pub aggregate_id: Option<&'a str>,
    pub event_id: Option<&'a str>,
    /// Received at or after (ms).
    pub since: Option<i64>,
    /// Received before (ms).
    pub until: Option<i64>,
    /// Some delivery of the event (on `route`, when given) is in this state.
    pub state: Option<StateFilter>,
    pub route: Option<&'a str>,
    /// Only events after this `(received_at, id)` in newest-first order.
    pub after: Option<(i64, i64)>,
}

/// A stored event's content: what arrived.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct EventContent {
    pub dedup_key: String,
    /// `None` once body_retention dropped it.
    pub body: Option<Vec<u8>>,
    /// [`ForwardedHeaders`](crate::model::forwarded::ForwardedHeaders) as JSON.
    pub headers: String,
    pub version_secondary: Option<i64>,
}

/// A delivery as the event page shows it.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeliveryRecord {
    pub id: i64,
    pub route: String,
    pub destination: String,
    pub state: DeliveryState,
    /// `type:id` when the route kept the event's entity order.
    pub entity: Option<String>,
    pub version: Option<i64>,
    pub tie: bool,
    pub note: Option<String>,
    pub attempts: i64,
    pub failures: i64,
    pub next_attempt_at: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One destination's figures for the overview.
#[derive(Debug, Clone, Default, sqlx::FromRow)]
pub struct DestinationFigures {
    pub destination: String,
    /// Pending after a failed attempt.
    pub retrying: i64,
    /// When the oldest event pending or in flight for it was received (ms).
    pub oldest_undelivered: Option<i64>,
    /// When its delivery due the longest fell due (ms): pending and due, or in flight with a
    /// lapsed claim.
    pub oldest_due: Option<i64>,
}

const EVENT_COLUMNS: &str = "SELECT e.id, e.source, e.event_id, e.event_type, e.aggregate_type, \
     e.aggregate_id, e.version, e.received_at, e.body IS NOT NULL AS body_kept, e.filtered_routes \
     FROM idem_gateway_events e WHERE 1 = 1";

const EVENT_CONTENT: &str = "SELECT dedup_key, body, headers, version_secondary \
     FROM idem_gateway_events WHERE id = $1";

const DELIVERY_RECORDS: &str = "SELECT id, route, destination, state, entity, version, tie, \
     note, attempts, failures, next_attempt_at, created_at, updated_at \
     FROM idem_gateway_deliveries WHERE event = $1 ORDER BY id";

/// Per destination with open deliveries: how many retry, the oldest one's event time, and
/// since when the delivery due the longest at $1 is due.
const DESTINATION_FIGURES: &str = "SELECT d.destination, \
     SUM(CASE WHEN d.state = 'pending' AND d.failures > 0 THEN 1 ELSE 0 END) AS retrying, \
     MIN(e.received_at) AS oldest_undelivered, \
     MIN(CASE WHEN d.next_attempt_at <= $1 THEN d.next_attempt_at END) AS oldest_due \
     FROM idem_gateway_deliveries d JOIN idem_gateway_events e ON e.id = d.event \
     WHERE d.state IN ('pending', 'in_flight') GROUP BY d.destination";

const INSERT_SESSION: &str = "INSERT INTO idem_gateway_console_sessions \
     (cookie_hash, csrf, created_at, expires_at) VALUES ($1, $2, $3, $4)";

const FIND_SESSION: &str = "SELECT csrf, expires_at FROM idem_gateway_console_sessions \
     WHERE cookie_hash = $1 AND expires_at > $2";

const DELETE_SESSION: &str = "DELETE FROM idem_gateway_console_sessions WHERE cookie_hash = $1";

const DELETE_EXPIRED_SESSIONS: &str =
    "DELETE FROM idem_gateway_console_sessions WHERE expires_at <= $1";

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait ConsoleOps: sqlx::Database + Sized {
        /// At most `limit` events matching `filter`, newest first (by received time, then id).
        fn search_events(
            conn: &mut Self::Connection,
            filter: &EventFilter<'_>,
            limit: i64,
        ) -> impl Future<Output = Res<Vec<StoredEvent>>> + Send;
        /// The content of event row `id`.
        fn event_content(
            conn: &mut Self::Connection,
            id: i64,
        ) -> impl Future<Output = Res<Option<EventContent>>> + Send;
        /// The deliveries of event row `event`, by id.
        fn delivery_records(
            conn: &mut Self::Connection,
            event: i64,
        ) -> impl Future<Output = Res<Vec<DeliveryRecord>>> + Send;
        /// The overview's figures at `now` (ms) of each destination with open deliveries.
        fn destination_figures(
            conn: &mut Self::Connection,
            now: i64,
        ) -> impl Future<Output = Res<Vec<DestinationFigures>>> + Send;
        fn insert_session(
            conn: &mut Self::Connection,
            cookie_hash: &str,
            csrf: &str,
            now: i64,
            expires_at: i64,
        ) -> impl Future<Output = Res<()>> + Send;
        /// The CSRF token and end of the session `cookie_hash`, if it has not ended at `now`.
        fn find_session(
            conn: &mut Self::Connection,
            cookie_hash: &str,
            now: i64,
        ) -> impl Future<Output = Res<Option<(String, i64)>>> + Send;
        fn delete_session(
            conn: &mut Self::Connection,
            cookie_hash: &str,
        ) -> impl Future<Output = Res<()>> + Send;
        /// Deletes the sessions ended at `now`; returns how many.
        fn delete_expired_sessions(
            conn: &mut Self::Connection,
            now: i64,
        ) -> impl Future<Output = Res<u64>> + Send;
    }
}

macro_rules! console_ops {
    ($db:ty) => {
        impl ops::ConsoleOps for $db {
            async fn search_events(
                conn: &mut Self::Connection,
                filter: &EventFilter<'_>,
                limit: i64,
            ) -> Result<Vec<StoredEvent>, sqlx::Error> {
                let mut query = sqlx::QueryBuilder::<Self>::new(EVENT_COLUMNS);
                if let Some(source) = filter.source {
                    query.push(" AND e.source = ").push_bind(source);
                }
                match filter.event_type.map(|t| (t, t.strip_suffix('*'))) {
                    Some((_, Some(prefix))) => {
                        query
                            .push(" AND substr(e.event_type, 1, length(")
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
                    query.push(
                        " AND EXISTS (SELECT 1 FROM idem_gateway_deliveries d WHERE d.event = e.id",
                    );
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
                query
                    .build_query_as()
                    .persistent(<$db as crate::store::ops::Ops>::KEEP_BATCH_STATEMENTS)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn event_content(
                conn: &mut Self::Connection,
                id: i64,
            ) -> Result<Option<EventContent>, sqlx::Error> {
                sqlx::query_as(EVENT_CONTENT)
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn delivery_records(
                conn: &mut Self::Connection,
                event: i64,
            ) -> Result<Vec<DeliveryRecord>, sqlx::Error> {
                sqlx::query_as(DELIVERY_RECORDS)
                    .bind(event)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn destination_figures(
                conn: &mut Self::Connection,
                now: i64,
            ) -> Result<Vec<DestinationFigures>, sqlx::Error> {
                sqlx::query_as(DESTINATION_FIGURES)
                    .bind(now)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn insert_session(
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
                cookie_hash: &str,
            ) -> Result<(), sqlx::Error> {
                sqlx::query(DELETE_SESSION)
                    .bind(cookie_hash)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            async fn delete_expired_sessions(
                conn: &mut Self::Connection,
                now: i64,
            ) -> Result<u64, sqlx::Error> {
                let done = sqlx::query(DELETE_EXPIRED_SESSIONS)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

console_ops!(sqlx::Sqlite);
console_ops!(sqlx::Postgres);
