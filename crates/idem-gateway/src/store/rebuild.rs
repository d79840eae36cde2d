//! A rebuild replay's statements (`idem replay --rebuild`): every stored event of a source's
//! range with its delivery to one destination (if any), and the writes that make each a
//! rebuild's delivery (column `rebuild`, migration 0015). The same SQL on SQLite and
//! PostgreSQL.

use std::future::Future;

use crate::model::state::DeliveryState;

/// Source $1's events received in [$2, $3), in arrival order, each with its delivery to
/// destination $4 (NULLs when it has none: a delivery is unique per event and destination).
const CANDIDATES: &str = "SELECT e.id AS event, e.event_type, e.aggregate_type, e.aggregate_id, \
     e.version, e.version_secondary, e.received_at, e.body IS NOT NULL AS body_kept, \
     d.id AS delivery, d.route, d.state \
     FROM idem_gateway_events e \
     LEFT JOIN idem_gateway_deliveries d ON d.event = e.id AND d.destination = $4 \
     WHERE e.source = $1 AND e.received_at >= $2 AND e.received_at < $3 \
     ORDER BY e.received_at, e.id";

/// Makes finished delivery $1 a rebuild's, due at $2 with a fresh schedule, keeping the order
/// of entity $3 at version $4 (secondary $5): its attempts carry `Idem-Replay: rebuild` and go
/// one at a time per entity in version order, whatever the route's `ordering`. A delivery
/// pending or in flight is left alone.
const REQUEUE: &str = "UPDATE idem_gateway_deliveries \
     SET state = 'pending', failures = 0, next_attempt_at = $2, updated_at = $2, rebuild = TRUE, \
         entity = $3, version = $4, version_secondary = $5 \
     WHERE id = $1 AND state IN ('delivered', 'stale', 'dead')";

/// A rebuild's new delivery of event $1 on route $2 to destination $3, due at $6, keeping the
/// order of entity $4 at version $5 (secondary $7); nothing when the event has a delivery to
/// the destination already (one made since it was read).
const INSERT: &str = "INSERT INTO idem_gateway_deliveries \
     (event, route, destination, state, entity, version, tie, note, attempts, failures, \
      next_attempt_at, created_at, updated_at, version_secondary, lease_token, rebuild) \
     VALUES ($1, $2, $3, 'pending', $4, $5, FALSE, NULL, 0, 0, $6, $6, $6, $7, NULL, TRUE) \
     ON CONFLICT (event, destination) DO NOTHING";

/// A stored event of a rebuild's range, with its delivery to the rebuild's destination.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct RebuildRow {
    /// The event's row id.
    pub event: i64,
    pub event_type: Option<String>,
    pub aggregate_type: Option<String>,
    pub aggregate_id: Option<String>,
    pub version: Option<i64>,
    pub version_secondary: Option<i64>,
    pub received_at: i64,
    /// Whether the raw body is still kept (body_retention drops it).
    pub body_kept: bool,
    /// Its delivery to the destination, with that delivery's route and state; `None` when it
    /// has none.
    pub delivery: Option<i64>,
    pub route: Option<String>,
    pub state: Option<DeliveryState>,
}

impl RebuildRow {
    /// The entity (`type:id`) whose order the event keeps, when it has one and a version.
    pub(crate) fn entity(&self) -> Option<String> {
        match (&self.aggregate_type, &self.aggregate_id, self.version) {
            (Some(t), Some(i), Some(_)) => Some(format!("{t}:{i}")),
            _ => None,
        }
    }
}

/// Where a rebuild puts one event: its delivery to the destination made a rebuild's, or a new
/// one on `route`.
#[derive(Debug, Clone)]
pub struct RebuildWrite<'a> {
    pub row: &'a RebuildRow,
    /// The route of a new delivery (ignored when the event has one).
    pub route: &'a str,
    pub destination: &'a str,
    pub now: i64,
}

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait RebuildOps: sqlx::Database + Sized {
        /// Source `source`'s events received in [`since`, `until`), in arrival order, each
        /// with its delivery to `destination`, if any.
        fn rebuild_candidates(
            conn: &mut Self::Connection,
            source: &str,
            since: i64,
            until: i64,
            destination: &str,
        ) -> impl Future<Output = Res<Vec<RebuildRow>>> + Send;
        /// Writes `write` (see [`RebuildWrite`]); returns whether it was written: `false` when
        /// the event's delivery is pending or in flight (or, for a new one, when a delivery to
        /// the destination was made since the row was read).
        fn rebuild_write(
            conn: &mut Self::Connection,
            write: &RebuildWrite<'_>,
        ) -> impl Future<Output = Res<bool>> + Send;
    }
}

macro_rules! rebuild_ops {
    ($db:ty) => {
        impl ops::RebuildOps for $db {
            async fn rebuild_candidates(
                conn: &mut Self::Connection,
                source: &str,
                since: i64,
                until: i64,
                destination: &str,
            ) -> Result<Vec<RebuildRow>, sqlx::Error> {
                sqlx::query_as(CANDIDATES)
                    .bind(source)
                    .bind(since)
                    .bind(until)
                    .bind(destination)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn rebuild_write(
                conn: &mut Self::Connection,
                write: &RebuildWrite<'_>,
            ) -> Result<bool, sqlx::Error> {
                let row = write.row;
                let entity = row.entity();
                let (version, secondary) = match entity {
                    Some(_) => (row.version, row.version_secondary),
                    None => (None, None),
                };
                let done = match row.delivery {
                    Some(delivery) => {
                        sqlx::query(REQUEUE)
                            .bind(delivery)
                            .bind(write.now)
                            .bind(entity)
                            .bind(version)
                            .bind(secondary)
                            .execute(&mut *conn)
                            .await?
                    }
                    None => {
                        sqlx::query(INSERT)
                            .bind(row.event)
                            .bind(write.route)
                            .bind(write.destination)
                            .bind(entity)
                            .bind(version)
                            .bind(write.now)
                            .bind(secondary)
                            .execute(&mut *conn)
                            .await?
                    }
                };
                Ok(done.rows_affected() == 1)
            }
        }
    };
}

rebuild_ops!(sqlx::Sqlite);
rebuild_ops!(sqlx::Postgres);
