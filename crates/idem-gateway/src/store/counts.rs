//! The per-minute counts' statements (`idem_gateway_counts`, migration 0009), the same SQL on
//! SQLite and PostgreSQL.

use std::future::Future;

use crate::model::counts::{CountSeries, Counts, Metric, Scope};

/// Adds each count to its row, creating it at the first count of its minute.
const ADD_COUNTS: &str =
    "INSERT INTO idem_gateway_counts (minute, scope, name, metric, slot, count) ";
const ADD_COUNTS_END: &str = " ON CONFLICT (minute, scope, name, metric, slot) \
     DO UPDATE SET count = idem_gateway_counts.count + excluded.count";

/// Every count of a minute at or after $1, summed over slots.
const READ_COUNTS: &str = "SELECT minute, scope, name, metric, CAST(SUM(count) AS BIGINT) AS count \
     FROM idem_gateway_counts WHERE minute >= $1 GROUP BY minute, scope, name, metric";

/// Count rows of minutes before $1.
const DELETE_COUNTS: &str = "DELETE FROM idem_gateway_counts WHERE minute < $1";

/// The most rows one `INSERT` of counts carries (6 parameters each).
const ROWS_PER_STATEMENT: usize = 1_000;

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait CountOps: sqlx::Database + Sized {
        /// Adds `counts` to their rows, in their key order.
        fn add_counts(
            conn: &mut Self::Connection,
            counts: &Counts,
        ) -> impl Future<Output = Res<()>> + Send;
        /// The counts of the minutes from `since` (ms) on.
        fn read_counts(
            conn: &mut Self::Connection,
            since: i64,
        ) -> impl Future<Output = Res<CountSeries>> + Send;
        /// Deletes the counts of the minutes before `before` (ms); returns how many rows.
        fn delete_counts(
            conn: &mut Self::Connection,
            before: i64,
        ) -> impl Future<Output = Res<u64>> + Send;
    }
}

macro_rules! count_ops {
    ($db:ty) => {
        impl ops::CountOps for $db {
            async fn add_counts(
                conn: &mut Self::Connection,
                counts: &Counts,
            ) -> Result<(), sqlx::Error> {
                let rows: Vec<_> = counts.added.iter().collect();
                for chunk in <$db as crate::store::ops::Ops>::batches(&rows, ROWS_PER_STATEMENT) {
                    let mut query = sqlx::QueryBuilder::<Self>::new(ADD_COUNTS);
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
                conn: &mut Self::Connection,
                since: i64,
            ) -> Result<CountSeries, sqlx::Error> {
                let rows: Vec<(i64, String, String, String, i64)> = sqlx::query_as(READ_COUNTS)
                    .bind(since)
                    .fetch_all(&mut *conn)
                    .await?;
                let mut series = CountSeries::default();
                for (minute, scope, name, metric, count) in rows {
                    // Words the migration's CHECK constraints allow; nothing else is stored.
                    let (Some(scope), Some(metric)) =
                        (Scope::parse(&scope), Metric::parse(&metric))
                    else {
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

            async fn delete_counts(
                conn: &mut Self::Connection,
                before: i64,
            ) -> Result<u64, sqlx::Error> {
                let done = sqlx::query(DELETE_COUNTS)
                    .bind(before)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

count_ops!(sqlx::Sqlite);
count_ops!(sqlx::Postgres);
