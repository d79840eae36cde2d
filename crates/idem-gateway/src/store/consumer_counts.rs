//! What the consumer inventory reads of the gateway's per-minute counts (`idem_gateway_counts`,
//! migration 0009): totals over a window, and each source's and destination's first and last
//! counted minute. The same SQL on SQLite and PostgreSQL; read only.

use std::future::Future;

/// Per (scope, name, metric), the counts of the minutes starting in `[$1, $2]`.
const WINDOW_TOTALS: &str = "SELECT scope, name, metric, CAST(SUM(count) AS BIGINT) AS count \
     FROM idem_gateway_counts WHERE minute >= $1 AND minute <= $2 GROUP BY scope, name, metric";

/// Per (scope, name), the first and the last minute with a count, of the minutes from $1 on.
const COUNTED_MINUTES: &str = "SELECT scope, name, MIN(minute) AS first, MAX(minute) AS last \
     FROM idem_gateway_counts WHERE minute >= $1 GROUP BY scope, name";

/// (scope, name, metric, count): a total of [`ops::ConsumerCountOps::window_totals`].
pub(crate) type WindowTotal = (String, String, String, i64);

/// (scope, name, first minute, last minute) in ms: a row of
/// [`ops::ConsumerCountOps::counted_minutes`].
pub(crate) type CountedMinutes = (String, String, i64, i64);

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait ConsumerCountOps: sqlx::Database + Sized {
        /// The totals of the minutes starting from `from` to `to` (ms, both included).
        fn window_totals(
            conn: &mut Self::Connection,
            from: i64,
            to: i64,
        ) -> impl Future<Output = Res<Vec<WindowTotal>>> + Send;
        /// Each counted source's and destination's first and last minute, of the minutes from
        /// `since` (ms) on.
        fn counted_minutes(
            conn: &mut Self::Connection,
            since: i64,
        ) -> impl Future<Output = Res<Vec<CountedMinutes>>> + Send;
    }
}

macro_rules! consumer_count_ops {
    ($db:ty) => {
        impl ops::ConsumerCountOps for $db {
            async fn window_totals(
                conn: &mut Self::Connection,
                from: i64,
                to: i64,
            ) -> Result<Vec<WindowTotal>, sqlx::Error> {
                sqlx::query_as(WINDOW_TOTALS)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn counted_minutes(
                conn: &mut Self::Connection,
                since: i64,
            ) -> Result<Vec<CountedMinutes>, sqlx::Error> {
                sqlx::query_as(COUNTED_MINUTES)
                    .bind(since)
                    .fetch_all(&mut *conn)
                    .await
            }
        }
    };
}

consumer_count_ops!(sqlx::Sqlite);
consumer_count_ops!(sqlx::Postgres);
