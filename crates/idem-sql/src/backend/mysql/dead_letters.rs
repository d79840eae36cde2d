//! Statements of the dead-letter table (`idem_dead_letters`) on MySQL.

use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, opt_text, text};
use crate::backend::dead_letter_ops::{DeadLetterOps, DeadLetterRow, DeadLetterWrite};

/// The columns read back, in the order of [`DeadLetterRow`].
const SELECT: &str = "SELECT id, consumer, source, event_id, dedup_key, aggregate_type, \
     aggregate_id, destination, headers, payload, error, delivery_count, first_failed_at, \
     last_failed_at FROM idem_dead_letters ";

/// A row as MySQL returns it: the key columns as bytes.
type Row = (
    i64,
    Vec<u8>,
    Vec<u8>,
    Option<String>,
    Option<Vec<u8>>,
    Option<String>,
    Option<String>,
    String,
    String,
    Vec<u8>,
    String,
    i64,
    i64,
    i64,
);

fn row(r: Row) -> Res<DeadLetterRow> {
    Ok((
        r.0,
        text(r.1)?,
        text(r.2)?,
        r.3,
        opt_text(r.4)?,
        r.5,
        r.6,
        r.7,
        r.8,
        r.9,
        r.10,
        r.11,
        r.12,
        r.13,
    ))
}

/// Inserts a dead letter; the same (consumer, dedup key) again updates the row in place, keeps
/// its first failure time and its id (`LAST_INSERT_ID(id)` hands it back as the insert id). The
/// update's values are bound a second time: `VALUES()` is deprecated on MySQL 8.0 and the row
/// alias that replaces it is not MariaDB's. A NULL dedup key never conflicts.
const RECORD: &str = "INSERT INTO idem_dead_letters \
     (consumer, source, event_id, dedup_key, aggregate_type, aggregate_id, destination, headers, \
      payload, error, delivery_count, first_failed_at, last_failed_at) \
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
     ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id), source = ?, event_id = ?, \
         aggregate_type = ?, aggregate_id = ?, destination = ?, headers = ?, payload = ?, \
         error = ?, delivery_count = ?, last_failed_at = ?";

const DELETE: &str = "DELETE FROM idem_dead_letters WHERE id = ?";

impl DeadLetterOps for MySql {
    async fn record_dead_letter(conn: &mut MySqlConnection, r: &DeadLetterWrite<'_>) -> Res<i64> {
        let done = sqlx::query(RECORD)
            .bind(r.consumer)
            .bind(r.source)
            .bind(r.event_id)
            .bind(r.dedup_key)
            .bind(r.aggregate_type)
            .bind(r.aggregate_id)
            .bind(r.destination)
            .bind(r.headers)
            .bind(r.payload)
            .bind(r.error)
            .bind(r.delivery_count)
            .bind(r.now)
            .bind(r.now)
            // the update
            .bind(r.source)
            .bind(r.event_id)
            .bind(r.aggregate_type)
            .bind(r.aggregate_id)
            .bind(r.destination)
            .bind(r.headers)
            .bind(r.payload)
            .bind(r.error)
            .bind(r.delivery_count)
            .bind(r.now)
            .execute(&mut *conn)
            .await?;
        i64::try_from(done.last_insert_id()).map_err(|e| sqlx::Error::Decode(Box::new(e)))
    }

    async fn list_dead_letters(
        conn: &mut MySqlConnection,
        consumer: &str,
        limit: i64,
    ) -> Res<Vec<DeadLetterRow>> {
        let sql = format!("{SELECT}WHERE consumer = ? ORDER BY id LIMIT ?");
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(consumer)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
        rows.into_iter().map(row).collect()
    }

    async fn get_dead_letter(conn: &mut MySqlConnection, id: i64) -> Res<Option<DeadLetterRow>> {
        let sql = format!("{SELECT}WHERE id = ?");
        let found: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        found.map(row).transpose()
    }

    async fn delete_dead_letter(conn: &mut MySqlConnection, id: i64) -> Res<bool> {
        let done = sqlx::query(DELETE).bind(id).execute(&mut *conn).await?;
        Ok(done.rows_affected() == 1)
    }
}
