//! Statements of the Kafka offsets table (`idem_kafka_offsets`) and the member count read from
//! `idem_leases`, the same SQL on both databases.

// The SQL text and the macro below are SQLite's and PostgreSQL's; MySQL's are in `mysql/`, so a
// build with the `mysql` feature alone has no use for them.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;

type Res<T> = Result<T, sqlx::Error>;

/// The row's key and the fence its writer presents: (consumer, topic, partition, token, holder).
#[derive(Debug)]
pub struct FenceKey<'a> {
    pub consumer: &'a str,
    pub topic: &'a str,
    pub partition: i32,
    pub token: i64,
    pub holder: &'a str,
}

/// One stored row: (partition, next_offset, fencing_token, holder, attempts, last_error,
/// updated_at).
pub(crate) type OffsetRow = (i32, Option<i64>, i64, String, i32, Option<String>, i64);

/// Writes the new holder's token and member id (creating the row at "not started" the first
/// time); returns the stored position and the failed deliveries of the message there.
const FENCE: &str = "INSERT INTO idem_kafka_offsets \
     (consumer, topic, kafka_partition, next_offset, fencing_token, holder, attempts, last_error, updated_at) \
     VALUES ($1, $2, $3, NULL, $4, $5, 0, NULL, $6) \
     ON CONFLICT (consumer, topic, kafka_partition) DO UPDATE SET \
         fencing_token = excluded.fencing_token, holder = excluded.holder, \
         updated_at = excluded.updated_at \
     RETURNING next_offset, attempts";

/// Every fenced write matches the holder's token and member id.
macro_rules! fenced {
    () => {
        " WHERE consumer = $1 AND topic = $2 AND kafka_partition = $3 \
          AND fencing_token = $4 AND holder = $5 "
    };
}

/// Sets the first position of a partition that has none.
const START: &str = concat!(
    "UPDATE idem_kafka_offsets SET next_offset = $6, updated_at = $7",
    fenced!(),
    "AND next_offset IS NULL"
);

/// The compare-and-set advance: from `$6` to `$7` (never back), clearing the failure count
/// when the offset moves.
const ADVANCE: &str = concat!(
    "UPDATE idem_kafka_offsets SET next_offset = $7, \
     attempts = CASE WHEN $7 = $6 THEN attempts ELSE 0 END, \
     last_error = CASE WHEN $7 = $6 THEN last_error ELSE NULL END, updated_at = $8",
    fenced!(),
    "AND next_offset = $6 AND $7 >= $6"
);

/// Counts a failed delivery of the message at `$6`.
const FAIL: &str = concat!(
    "UPDATE idem_kafka_offsets SET attempts = attempts + 1, last_error = $7, updated_at = $8",
    fenced!(),
    "AND next_offset = $6 RETURNING attempts"
);

macro_rules! select_offsets {
    () => {
        "SELECT kafka_partition, next_offset, fencing_token, holder, attempts, last_error, updated_at \
         FROM idem_kafka_offsets WHERE consumer = $1 AND topic = $2 "
    };
}

const GET: &str = concat!(select_offsets!(), "AND kafka_partition = $3");
const LIST: &str = concat!(select_offsets!(), "ORDER BY kafka_partition");

/// The keys of the live leases of `$1` that start with `$2` (a topic's member leases).
const LIVE_MEMBERS: &str = "SELECT lease_key FROM idem_leases \
     WHERE scope = $1 AND substr(lease_key, 1, length($2)) = $2 \
       AND state = 'running' AND expires_at > $3 \
     ORDER BY lease_key";

/// The per-database statements behind [`KafkaOffsets`](crate::KafkaOffsets).
pub trait KafkaOffsetOps: Database + Sized {
    /// Writes the fence of a new holder; returns (next_offset, attempts).
    fn kafka_fence(
        conn: &mut Self::Connection,
        key: &FenceKey<'_>,
        now: i64,
    ) -> impl Future<Output = Res<(Option<i64>, i32)>> + Send;
    /// Sets the first position; whether the row changed.
    fn kafka_start(
        conn: &mut Self::Connection,
        key: &FenceKey<'_>,
        offset: i64,
        now: i64,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Advances from `from` to `to`; whether the row changed.
    fn kafka_advance(
        conn: &mut Self::Connection,
        key: &FenceKey<'_>,
        from: i64,
        to: i64,
        now: i64,
    ) -> impl Future<Output = Res<bool>> + Send;
    /// Counts a failed delivery at `at`; the new count, or `None` when the row did not match.
    fn kafka_fail(
        conn: &mut Self::Connection,
        key: &FenceKey<'_>,
        at: i64,
        error: &str,
        now: i64,
    ) -> impl Future<Output = Res<Option<i32>>> + Send;
    /// One partition's row.
    fn kafka_get(
        conn: &mut Self::Connection,
        consumer: &str,
        topic: &str,
        partition: i32,
    ) -> impl Future<Output = Res<Option<OffsetRow>>> + Send;
    /// Every partition's row of a topic, by partition.
    fn kafka_list(
        conn: &mut Self::Connection,
        consumer: &str,
        topic: &str,
    ) -> impl Future<Output = Res<Vec<OffsetRow>>> + Send;
    /// The live lease keys of `scope` starting with `prefix`, sorted.
    fn kafka_live_members(
        conn: &mut Self::Connection,
        scope: &str,
        prefix: &str,
        now: i64,
    ) -> impl Future<Output = Res<Vec<String>>> + Send;
}

macro_rules! kafka_offset_ops {
    ($db:ty) => {
        impl KafkaOffsetOps for $db {
            async fn kafka_fence(
                conn: &mut Self::Connection,
                key: &FenceKey<'_>,
                now: i64,
            ) -> Res<(Option<i64>, i32)> {
                sqlx::query_as(FENCE)
                    .bind(key.consumer)
                    .bind(key.topic)
                    .bind(key.partition)
                    .bind(key.token)
                    .bind(key.holder)
                    .bind(now)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn kafka_start(
                conn: &mut Self::Connection,
                key: &FenceKey<'_>,
                offset: i64,
                now: i64,
            ) -> Res<bool> {
                let done = sqlx::query(START)
                    .bind(key.consumer)
                    .bind(key.topic)
                    .bind(key.partition)
                    .bind(key.token)
                    .bind(key.holder)
                    .bind(offset)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn kafka_advance(
                conn: &mut Self::Connection,
                key: &FenceKey<'_>,
                from: i64,
                to: i64,
                now: i64,
            ) -> Res<bool> {
                let done = sqlx::query(ADVANCE)
                    .bind(key.consumer)
                    .bind(key.topic)
                    .bind(key.partition)
                    .bind(key.token)
                    .bind(key.holder)
                    .bind(from)
                    .bind(to)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn kafka_fail(
                conn: &mut Self::Connection,
                key: &FenceKey<'_>,
                at: i64,
                error: &str,
                now: i64,
            ) -> Res<Option<i32>> {
                sqlx::query_scalar(FAIL)
                    .bind(key.consumer)
                    .bind(key.topic)
                    .bind(key.partition)
                    .bind(key.token)
                    .bind(key.holder)
                    .bind(at)
                    .bind(error)
                    .bind(now)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn kafka_get(
                conn: &mut Self::Connection,
                consumer: &str,
                topic: &str,
                partition: i32,
            ) -> Res<Option<OffsetRow>> {
                sqlx::query_as(GET)
                    .bind(consumer)
                    .bind(topic)
                    .bind(partition)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn kafka_list(
                conn: &mut Self::Connection,
                consumer: &str,
                topic: &str,
            ) -> Res<Vec<OffsetRow>> {
                sqlx::query_as(LIST)
                    .bind(consumer)
                    .bind(topic)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn kafka_live_members(
                conn: &mut Self::Connection,
                scope: &str,
                prefix: &str,
                now: i64,
            ) -> Res<Vec<String>> {
                sqlx::query_scalar(LIVE_MEMBERS)
                    .bind(scope)
                    .bind(prefix)
                    .bind(now)
                    .fetch_all(&mut *conn)
                    .await
            }
        }
    };
}

#[cfg(feature = "sqlite")]
kafka_offset_ops!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
kafka_offset_ops!(sqlx::Postgres);
