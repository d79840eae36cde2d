//! A route's rename on MySQL: the guard rows are merged with a self-join `UPDATE` and `DELETE`
//! (MySQL cannot read the table a statement changes in a subquery of it, error 1093).

use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::sql::text;
use crate::store::renames::ops::RenameOps;

/// route.
const ROUTE_DESTINATIONS: &str = concat!(
    "SELECT ",
    text!("destination", "destination"),
    ", COUNT(*) FROM idem_gateway_deliveries WHERE route = ? GROUP BY destination"
);

/// new, old.
const MOVE_DELIVERIES: &str = "UPDATE idem_gateway_deliveries SET route = ? WHERE route = ?";

/// new, old: the new name's rows take the old name's higher versions.
const MERGE_HIGHER_GUARD_ROWS: &str = "UPDATE idem_versions AS n JOIN idem_versions AS o \
       ON o.aggregate_type = n.aggregate_type AND o.aggregate_id = n.aggregate_id \
       AND o.version_kind = n.version_kind AND o.version > n.version \
     SET n.version = o.version, n.version_secondary = o.version_secondary, \
         n.dedup_key = o.dedup_key, n.updated_at = o.updated_at \
     WHERE n.consumer = ? AND o.consumer = ?";

/// old, new: the old name's rows the new name has a row of.
const DROP_MERGED_GUARD_ROWS: &str = "DELETE o FROM idem_versions AS o JOIN idem_versions AS n \
       ON n.aggregate_type = o.aggregate_type AND n.aggregate_id = o.aggregate_id \
     WHERE o.consumer = ? AND n.consumer = ?";

/// new, old.
const MOVE_GUARD_ROWS: &str = "UPDATE idem_versions SET consumer = ? WHERE consumer = ?";

const OPEN_ROUTES: &str = concat!(
    "SELECT ",
    text!("route", "route"),
    ", ",
    text!("destination", "destination"),
    ", COUNT(*) FROM idem_gateway_deliveries \
     WHERE state IN ('pending', 'in_flight', 'dead') GROUP BY route, destination"
);

/// Every consumer of the guard's rows, read off the primary key's first column.
const GUARD_CONSUMERS: &str = "SELECT CONVERT(c.consumer USING utf8mb4) \
     FROM (SELECT DISTINCT consumer FROM idem_versions) AS c ORDER BY c.consumer";

/// consumer.
const GATEWAY_GUARD: &str = concat!(
    "SELECT ",
    text!("v.dedup_key", "dedup_key"),
    " FROM idem_versions v JOIN idem_gateway_events e ON e.dedup_key = v.dedup_key \
     WHERE v.consumer = ? LIMIT 1"
);

const GUARD_ROWS: &str = "SELECT COUNT(*) FROM idem_versions WHERE consumer = ?";

const INBOX_ROWS: &str = "SELECT COUNT(*) FROM idem_inbox WHERE consumer = ?";

impl RenameOps for MySql {
    async fn route_destinations(
        conn: &mut MySqlConnection,
        route: &str,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        sqlx::query_as(ROUTE_DESTINATIONS)
            .bind(route)
            .fetch_all(&mut *conn)
            .await
    }

    async fn carry_route(
        conn: &mut MySqlConnection,
        old: &str,
        new: &str,
    ) -> Result<(u64, u64), sqlx::Error> {
        let deliveries = sqlx::query(MOVE_DELIVERIES)
            .bind(new)
            .bind(old)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        sqlx::query(MERGE_HIGHER_GUARD_ROWS)
            .bind(new)
            .bind(old)
            .execute(&mut *conn)
            .await?;
        let merged = sqlx::query(DROP_MERGED_GUARD_ROWS)
            .bind(old)
            .bind(new)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        let moved = sqlx::query(MOVE_GUARD_ROWS)
            .bind(new)
            .bind(old)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        // Each old row was merged into the new name's (dropped) or renamed.
        Ok((deliveries, merged + moved))
    }

    async fn open_routes(
        conn: &mut MySqlConnection,
    ) -> Result<Vec<(String, String, i64)>, sqlx::Error> {
        sqlx::query_as(OPEN_ROUTES).fetch_all(&mut *conn).await
    }

    async fn guard_consumers(conn: &mut MySqlConnection) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(GUARD_CONSUMERS)
            .fetch_all(&mut *conn)
            .await
    }

    async fn gateway_guard_rows(
        conn: &mut MySqlConnection,
        consumer: &str,
    ) -> Result<i64, sqlx::Error> {
        let ours: Option<String> = sqlx::query_scalar(GATEWAY_GUARD)
            .bind(consumer)
            .fetch_optional(&mut *conn)
            .await?;
        if ours.is_none() {
            return Ok(0);
        }
        sqlx::query_scalar(GUARD_ROWS)
            .bind(consumer)
            .fetch_one(&mut *conn)
            .await
    }

    async fn consumer_rows(
        conn: &mut MySqlConnection,
        consumer: &str,
    ) -> Result<(i64, i64), sqlx::Error> {
        let inbox: i64 = sqlx::query_scalar(INBOX_ROWS)
            .bind(consumer)
            .fetch_one(&mut *conn)
            .await?;
        let guard: i64 = sqlx::query_scalar(GUARD_ROWS)
            .bind(consumer)
            .fetch_one(&mut *conn)
            .await?;
        Ok((inbox, guard))
    }
}
