//! The per-minute counts' statements (`idem_gateway_counts`) on MySQL: the upsert adds with
//! `ON DUPLICATE KEY UPDATE … VALUES(count)` (MySQL 8.0 deprecates `VALUES()` there, with a
//! warning, and MariaDB has not its row alias: `VALUES()` runs on both).

use sqlx::mysql::MySqlConnection;
use sqlx::{MySql, QueryBuilder};

use super::sql::text;
use crate::model::counts::{CountSeries, Counts, Metric, Scope};
use crate::store::counts::ops::CountOps;

const ADD_COUNTS: &str =
    "INSERT INTO idem_gateway_counts (minute, scope, name, metric, slot, count) ";
const ADD_COUNTS_END: &str = " ON DUPLICATE KEY UPDATE count = count + VALUES(count)";

/// Every count of a minute at or after the time, summed over slots.
const READ_COUNTS: &str = concat!(
    "SELECT minute, scope, ",
    text!("name", "name"),
    ", metric, CAST(SUM(count) AS SIGNED) AS count \
     FROM idem_gateway_counts WHERE minute >= ? GROUP BY minute, scope, name, metric"
);

const DELETE_COUNTS: &str = "DELETE FROM idem_gateway_counts WHERE minute < ?";

/// The most rows one `INSERT` of counts carries (6 parameters each).
const ROWS_PER_STATEMENT: usize = 1_000;

impl CountOps for MySql {
    async fn add_counts(conn: &mut MySqlConnection, counts: &Counts) -> Result<(), sqlx::Error> {
        let rows: Vec<_> = counts.added.iter().collect();
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            let mut query = QueryBuilder::<MySql>::new(ADD_COUNTS);
            query.push_values(chunk, |mut values, ((minute, scope, name, metric), n)| {
                values
                    .push_bind(*minute)
                    .push_bind(scope.as_str())
                    .push_bind(name.as_str())
                    .push_bind(metric.as_str())
                    .push_bind(counts.slot)
                    .push_bind(**n);
            });
            query.push(ADD_COUNTS_END);
            query.build().execute(&mut *conn).await?;
        }
        Ok(())
    }

    async fn read_counts(
        conn: &mut MySqlConnection,
        since: i64,
    ) -> Result<CountSeries, sqlx::Error> {
        let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(READ_COUNTS)
            .bind(since)
            .fetch_all(&mut *conn)
            .await?;
        let mut series = CountSeries::default();
        for (minute, scope, name, metric, count) in rows {
            let (Some(scope), Some(metric)) = (Scope::parse(&scope), Metric::parse(&metric)) else {
                continue;
            };
            series
                .series
                .entry((scope, name, metric))
                .or_default()
                .insert(minute, u64::try_from(count).unwrap_or(0));
        }
        Ok(series)
    }

    async fn delete_counts(conn: &mut MySqlConnection, before: i64) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(DELETE_COUNTS)
            .bind(before)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    }
}
