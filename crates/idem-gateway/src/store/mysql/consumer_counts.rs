//! What the consumer inventory reads of the per-minute counts, on MySQL.

use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::sql::text;
use crate::store::consumer_counts::ops::ConsumerCountOps;
use crate::store::consumer_counts::{CountedMinutes, WindowTotal};

/// from, to.
const WINDOW_TOTALS: &str = concat!(
    "SELECT scope, ",
    text!("name", "name"),
    ", metric, CAST(SUM(count) AS SIGNED) AS count \
     FROM idem_gateway_counts WHERE minute >= ? AND minute <= ? GROUP BY scope, name, metric"
);

/// since.
const COUNTED_MINUTES: &str = concat!(
    "SELECT scope, ",
    text!("name", "name"),
    ", MIN(minute) AS first, MAX(minute) AS last \
     FROM idem_gateway_counts WHERE minute >= ? GROUP BY scope, name"
);

impl ConsumerCountOps for MySql {
    async fn window_totals(
        conn: &mut MySqlConnection,
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
        conn: &mut MySqlConnection,
        since: i64,
    ) -> Result<Vec<CountedMinutes>, sqlx::Error> {
        sqlx::query_as(COUNTED_MINUTES)
            .bind(since)
            .fetch_all(&mut *conn)
            .await
    }
}
