//! A rebuild replay's statements on MySQL: the new delivery's `INSERT` treats a duplicate key
//! (1062) as "already there", as PostgreSQL's `ON CONFLICT DO NOTHING`.

use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::inserted;
use super::sql::text;
use crate::store::rebuild::ops::RebuildOps;
use crate::store::{RebuildRow, RebuildWrite};

/// destination, source, since, until.
const CANDIDATES: &str = concat!(
    "SELECT e.id AS event, ",
    text!("e.event_type", "event_type"),
    ", ",
    text!("e.aggregate_type", "aggregate_type"),
    ", ",
    text!("e.aggregate_id", "aggregate_id"),
    ", e.version, e.version_secondary, e.received_at, e.body IS NOT NULL AS body_kept, \
     d.id AS delivery, ",
    text!("d.route", "route"),
    ", d.state FROM idem_gateway_events e \
     LEFT JOIN idem_gateway_deliveries d ON d.event = e.id AND d.destination = ? \
     WHERE e.source = ? AND e.received_at >= ? AND e.received_at < ? \
     ORDER BY e.received_at, e.id"
);

/// now, now, entity, version, secondary, delivery.
const REQUEUE: &str = "UPDATE idem_gateway_deliveries \
     SET state = 'pending', failures = 0, next_attempt_at = ?, updated_at = ?, rebuild = TRUE, \
         entity = ?, version = ?, version_secondary = ? \
     WHERE id = ? AND state IN ('delivered', 'stale', 'dead')";

/// event, route, destination, entity, version, now ×3, secondary.
const INSERT: &str = "INSERT INTO idem_gateway_deliveries \
     (event, route, destination, state, entity, version, tie, note, attempts, failures, \
      next_attempt_at, created_at, updated_at, version_secondary, lease_token, rebuild) \
     VALUES (?, ?, ?, 'pending', ?, ?, FALSE, NULL, 0, 0, ?, ?, ?, ?, NULL, TRUE)";

impl RebuildOps for MySql {
    async fn rebuild_candidates(
        conn: &mut MySqlConnection,
        source: &str,
        since: i64,
        until: i64,
        destination: &str,
    ) -> Result<Vec<RebuildRow>, sqlx::Error> {
        sqlx::query_as(CANDIDATES)
            .bind(destination)
            .bind(source)
            .bind(since)
            .bind(until)
            .fetch_all(&mut *conn)
            .await
    }

    async fn rebuild_write(
        conn: &mut MySqlConnection,
        write: &RebuildWrite<'_>,
    ) -> Result<bool, sqlx::Error> {
        let row = write.row;
        let entity = row.entity();
        let (version, secondary) = match entity {
            Some(_) => (row.version, row.version_secondary),
            None => (None, None),
        };
        match row.delivery {
            Some(delivery) => {
                let done = sqlx::query(REQUEUE)
                    .bind(write.now)
                    .bind(write.now)
                    .bind(entity)
                    .bind(version)
                    .bind(secondary)
                    .bind(delivery)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }
            None => inserted(
                sqlx::query(INSERT)
                    .bind(row.event)
                    .bind(write.route)
                    .bind(write.destination)
                    .bind(entity)
                    .bind(version)
                    .bind(write.now)
                    .bind(write.now)
                    .bind(write.now)
                    .bind(secondary)
                    .execute(&mut *conn)
                    .await,
            ),
        }
    }
}
