//! A route's rename (`renamed_from`): the statements that carry its stored deliveries and its
//! version-guard rows (idem's `idem_versions`, consumer = the route's name) over to its new
//! name, and those that find stored route names the configuration no longer has. The same SQL
//! on SQLite and PostgreSQL.

use std::future::Future;

/// (destination, count) of the deliveries of route $1, in every state.
const ROUTE_DESTINATIONS: &str = "SELECT destination, COUNT(*) FROM idem_gateway_deliveries \
     WHERE route = $1 GROUP BY destination";

/// Moves every delivery of route $1 to route $2 (a route has one destination: the pair (event,
/// destination) stays unique).
const MOVE_DELIVERIES: &str = "UPDATE idem_gateway_deliveries SET route = $2 WHERE route = $1";

/// Where consumer $1 (the old name) and $2 (the new one) both hold a guard row of one entity
/// with versions of one kind, the new name's row takes the old one's when the old is higher.
const MERGE_HIGHER_GUARD_ROWS: &str = "UPDATE idem_versions AS n \
     SET version = o.version, version_secondary = o.version_secondary, \
         dedup_key = o.dedup_key, updated_at = o.updated_at \
     FROM idem_versions AS o \
     WHERE n.consumer = $2 AND o.consumer = $1 \
       AND o.aggregate_type = n.aggregate_type AND o.aggregate_id = n.aggregate_id \
       AND o.version_kind = n.version_kind AND o.version > n.version";

/// Then the old name's rows of entities the new name has a row of are dropped...
const DROP_MERGED_GUARD_ROWS: &str = "DELETE FROM idem_versions \
     WHERE consumer = $1 AND EXISTS (SELECT 1 FROM idem_versions n \
       WHERE n.consumer = $2 AND n.aggregate_type = idem_versions.aggregate_type \
         AND n.aggregate_id = idem_versions.aggregate_id)";

/// ...and the others renamed.
const MOVE_GUARD_ROWS: &str = "UPDATE idem_versions SET consumer = $2 WHERE consumer = $1";

/// (route, destination, count) of the deliveries still pending, in flight or dead.
const OPEN_ROUTES: &str = "SELECT route, destination, COUNT(*) FROM idem_gateway_deliveries \
     WHERE state IN ('pending', 'in_flight', 'dead') GROUP BY route, destination";

/// Every consumer with guard rows, one index probe each (a loose scan of the primary key's
/// first column, not a read of every row).
const GUARD_CONSUMERS: &str = "WITH RECURSIVE c(consumer) AS ( \
       SELECT MIN(consumer) FROM idem_versions \
       UNION ALL \
       SELECT (SELECT MIN(v.consumer) FROM idem_versions v WHERE v.consumer > c.consumer) \
       FROM c WHERE c.consumer IS NOT NULL) \
     SELECT consumer FROM c WHERE consumer IS NOT NULL";

/// Whether consumer $1's guard rows are a gateway route's: one of them was set by an event the
/// gateway stores (a consumer of an application sharing the database sets none).
const GATEWAY_GUARD: &str = "SELECT v.dedup_key FROM idem_versions v \
     JOIN idem_gateway_events e ON e.dedup_key = v.dedup_key WHERE v.consumer = $1 LIMIT 1";

/// How many guard rows consumer $1 has.
const GUARD_ROWS: &str = "SELECT COUNT(*) FROM idem_versions WHERE consumer = $1";

/// How many inbox keys consumer $1 has.
const INBOX_ROWS: &str = "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1";

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait RenameOps: sqlx::Database + Sized {
        /// (destination, deliveries) of route `route`'s deliveries, in every state.
        fn route_destinations(
            conn: &mut Self::Connection,
            route: &str,
        ) -> impl Future<Output = Res<Vec<(String, i64)>>> + Send;
        /// Moves route `old`'s deliveries and version-guard rows to `new`; returns (deliveries,
        /// guard rows) moved. Run in one transaction.
        fn carry_route(
            conn: &mut Self::Connection,
            old: &str,
            new: &str,
        ) -> impl Future<Output = Res<(u64, u64)>> + Send;
        /// (route, destination, deliveries) of those pending, in flight or dead.
        fn open_routes(
            conn: &mut Self::Connection,
        ) -> impl Future<Output = Res<Vec<(String, String, i64)>>> + Send;
        /// Every consumer with version-guard rows.
        fn guard_consumers(
            conn: &mut Self::Connection,
        ) -> impl Future<Output = Res<Vec<String>>> + Send;
        /// `consumer`'s number of guard rows when they are a gateway route's (set by events
        /// the gateway stores), else 0.
        fn gateway_guard_rows(
            conn: &mut Self::Connection,
            consumer: &str,
        ) -> impl Future<Output = Res<i64>> + Send;

        /// (inbox keys, version-guard rows) of consumer `consumer`: a route's guard has guard
        /// rows and never an inbox key (the gateway claims under its own inbox consumer).
        fn consumer_rows(
            conn: &mut Self::Connection,
            consumer: &str,
        ) -> impl Future<Output = Res<(i64, i64)>> + Send;
    }
}

macro_rules! rename_ops {
    ($db:ty) => {
        impl ops::RenameOps for $db {
            async fn route_destinations(
                conn: &mut Self::Connection,
                route: &str,
            ) -> Result<Vec<(String, i64)>, sqlx::Error> {
                sqlx::query_as(ROUTE_DESTINATIONS)
                    .bind(route)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn carry_route(
                conn: &mut Self::Connection,
                old: &str,
                new: &str,
            ) -> Result<(u64, u64), sqlx::Error> {
                let deliveries = sqlx::query(MOVE_DELIVERIES)
                    .bind(old)
                    .bind(new)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
                let mut carried = [0_u64; 3];
                for (n, statement) in [
                    MERGE_HIGHER_GUARD_ROWS,
                    DROP_MERGED_GUARD_ROWS,
                    MOVE_GUARD_ROWS,
                ]
                .into_iter()
                .enumerate()
                {
                    carried[n] = sqlx::query(statement)
                        .bind(old)
                        .bind(new)
                        .execute(&mut *conn)
                        .await?
                        .rows_affected();
                }
                // Each old row was merged into the new name's (dropped) or renamed.
                Ok((deliveries, carried[1] + carried[2]))
            }

            async fn open_routes(
                conn: &mut Self::Connection,
            ) -> Result<Vec<(String, String, i64)>, sqlx::Error> {
                sqlx::query_as(OPEN_ROUTES).fetch_all(&mut *conn).await
            }

            async fn guard_consumers(
                conn: &mut Self::Connection,
            ) -> Result<Vec<String>, sqlx::Error> {
                sqlx::query_scalar(GUARD_CONSUMERS)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn gateway_guard_rows(
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
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
    };
}

rename_ops!(sqlx::Sqlite);
rename_ops!(sqlx::Postgres);
