//! Statements of the dead-letter table (`idem_dead_letters`), the same SQL on both databases.

// The SQL text and the macro below are SQLite's and PostgreSQL's; MySQL's are in `mysql/`, so a
// build with the `mysql` feature alone has no use for them.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;
#[cfg(feature = "postgres")]
use sqlx::Postgres;
#[cfg(feature = "sqlite")]
use sqlx::Sqlite;

type Res<T> = Result<T, sqlx::Error>;

/// The columns of one dead letter as written by a consumer.
#[derive(Debug)]
pub struct DeadLetterWrite<'a> {
    pub consumer: &'a str,
    pub source: &'a str,
    pub event_id: Option<&'a str>,
    pub dedup_key: Option<&'a str>,
    pub aggregate_type: Option<&'a str>,
    pub aggregate_id: Option<&'a str>,
    pub destination: &'a str,
    pub headers: &'a str,
    pub payload: &'a [u8],
    pub error: &'a str,
    pub delivery_count: i64,
    pub now: i64,
}

/// One stored row, in the column order of `select_dead_letters!`.
pub(crate) type DeadLetterRow = (
    i64,
    String,
    String,
    Option<String>,
    Option<String>,
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

/// `SELECT` of the columns read back, in the order of [`DeadLetterRow`].
macro_rules! select_dead_letters {
    () => {
        "SELECT id, consumer, source, event_id, dedup_key, aggregate_type, aggregate_id, \
         destination, headers, payload, error, delivery_count, first_failed_at, last_failed_at \
         FROM idem_dead_letters "
    };
}

const LIST: &str = concat!(
    select_dead_letters!(),
    "WHERE consumer = $1 ORDER BY id LIMIT $2"
);
const GET: &str = concat!(select_dead_letters!(), "WHERE id = $1");

/// Inserts a dead letter; the same (consumer, dedup key) again updates the row in place and keeps
/// its first failure time. A NULL dedup key never conflicts, so undecodable messages get a row each.
const RECORD: &str = "INSERT INTO idem_dead_letters \
     (consumer, source, event_id, dedup_key, aggregate_type, aggregate_id, destination, headers, \
      payload, error, delivery_count, first_failed_at, last_failed_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) \
     ON CONFLICT (consumer, dedup_key) DO UPDATE SET \
         source = excluded.source, event_id = excluded.event_id, \
         aggregate_type = excluded.aggregate_type, aggregate_id = excluded.aggregate_id, \
         destination = excluded.destination, headers = excluded.headers, \
         payload = excluded.payload, error = excluded.error, \
         delivery_count = excluded.delivery_count, last_failed_at = excluded.last_failed_at \
     RETURNING id";

const DELETE: &str = "DELETE FROM idem_dead_letters WHERE id = $1";

/// The per-database statements behind [`DeadLetters`](crate::DeadLetters).
pub trait DeadLetterOps: Database + Sized {
    /// Records a dead letter; returns its row id.
    fn record_dead_letter(
        conn: &mut Self::Connection,
        row: &DeadLetterWrite<'_>,
    ) -> impl Future<Output = Res<i64>> + Send;
    /// The oldest `limit` dead letters of `consumer`, by id.
    fn list_dead_letters(
        conn: &mut Self::Connection,
        consumer: &str,
        limit: i64,
    ) -> impl Future<Output = Res<Vec<DeadLetterRow>>> + Send;
    /// One dead letter by id.
    fn get_dead_letter(
        conn: &mut Self::Connection,
        id: i64,
    ) -> impl Future<Output = Res<Option<DeadLetterRow>>> + Send;
    /// Deletes one dead letter by id; returns whether it existed.
    fn delete_dead_letter(
        conn: &mut Self::Connection,
        id: i64,
    ) -> impl Future<Output = Res<bool>> + Send;
}

macro_rules! dead_letter_ops {
    ($db:ty) => {
        impl DeadLetterOps for $db {
            async fn record_dead_letter(
                conn: &mut Self::Connection,
                row: &DeadLetterWrite<'_>,
            ) -> Res<i64> {
                sqlx::query_scalar(RECORD)
                    .bind(row.consumer)
                    .bind(row.source)
                    .bind(row.event_id)
                    .bind(row.dedup_key)
                    .bind(row.aggregate_type)
                    .bind(row.aggregate_id)
                    .bind(row.destination)
                    .bind(row.headers)
                    .bind(row.payload)
                    .bind(row.error)
                    .bind(row.delivery_count)
                    .bind(row.now)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn list_dead_letters(
                conn: &mut Self::Connection,
                consumer: &str,
                limit: i64,
            ) -> Res<Vec<DeadLetterRow>> {
                sqlx::query_as(LIST)
                    .bind(consumer)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn get_dead_letter(
                conn: &mut Self::Connection,
                id: i64,
            ) -> Res<Option<DeadLetterRow>> {
                sqlx::query_as(GET)
                    .bind(id)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn delete_dead_letter(conn: &mut Self::Connection, id: i64) -> Res<bool> {
                let done = sqlx::query(DELETE).bind(id).execute(&mut *conn).await?;
                Ok(done.rows_affected() == 1)
            }
        }
    };
}

#[cfg(feature = "sqlite")]
dead_letter_ops!(Sqlite);
#[cfg(feature = "postgres")]
dead_letter_ops!(Postgres);
