//! Statements of the Kafka offsets table (`idem_kafka_offsets`) and the member count read from
//! `idem_leases`, on MySQL. The callers run them in their transaction (the fence with the lease,
//! the advance with the output), so a statement and the read of its row see one state.

use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, text};
use crate::backend::kafka_offset_ops::{FenceKey, KafkaOffsetOps, OffsetRow};

/// Writes the new holder's token and member id, creating the row at "not started" the first
/// time (its values are bound twice: see `dead_letters.rs`).
const FENCE: &str = "INSERT INTO idem_kafka_offsets \
     (consumer, topic, kafka_partition, next_offset, fencing_token, holder, attempts, last_error, \
      updated_at) \
     VALUES (?, ?, ?, NULL, ?, ?, 0, NULL, ?) \
     ON DUPLICATE KEY UPDATE fencing_token = ?, holder = ?, updated_at = ?";

/// The row's key, then the fence its writer presents.
const FENCED: &str = " WHERE consumer = ? AND topic = ? AND kafka_partition = ? \
     AND fencing_token = ? AND holder = ?";

const POSITION: &str = "SELECT next_offset, attempts FROM idem_kafka_offsets \
     WHERE consumer = ? AND topic = ? AND kafka_partition = ?";

const SELECT: &str = "SELECT kafka_partition, next_offset, fencing_token, holder, attempts, \
     last_error, updated_at FROM idem_kafka_offsets WHERE consumer = ? AND topic = ? ";

/// The keys of the live leases of a scope that start with a prefix (a topic's member leases),
/// compared as bytes.
const LIVE_MEMBERS: &str = "SELECT lease_key FROM idem_leases \
     WHERE scope = ? AND SUBSTRING(lease_key, 1, LENGTH(?)) = ? \
       AND state = 'running' AND expires_at > ? \
     ORDER BY lease_key";

type Row = (i32, Option<i64>, i64, Vec<u8>, i32, Option<String>, i64);

fn row(r: Row) -> Res<OffsetRow> {
    Ok((r.0, r.1, r.2, text(r.3)?, r.4, r.5, r.6))
}

type Query<'q> = sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments>;

/// A fenced UPDATE's text: `set`, the fence, then `and`.
fn fenced(set: &str, and: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!("{set}{FENCED}{and}"))
}

/// Binds the fence of [`FENCED`]: the row's key, the token and the holder.
fn bind_fence<'q>(query: Query<'q>, key: &FenceKey<'q>) -> Query<'q> {
    query
        .bind(key.consumer)
        .bind(key.topic)
        .bind(key.partition)
        .bind(key.token)
        .bind(key.holder)
}

impl KafkaOffsetOps for MySql {
    async fn kafka_fence(
        conn: &mut MySqlConnection,
        key: &FenceKey<'_>,
        now: i64,
    ) -> Res<(Option<i64>, i32)> {
        sqlx::query(FENCE)
            .bind(key.consumer)
            .bind(key.topic)
            .bind(key.partition)
            .bind(key.token)
            .bind(key.holder)
            .bind(now)
            .bind(key.token)
            .bind(key.holder)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        sqlx::query_as(POSITION)
            .bind(key.consumer)
            .bind(key.topic)
            .bind(key.partition)
            .fetch_one(&mut *conn)
            .await
    }

    async fn kafka_start(
        conn: &mut MySqlConnection,
        key: &FenceKey<'_>,
        offset: i64,
        now: i64,
    ) -> Res<bool> {
        let sql = fenced(
            "UPDATE idem_kafka_offsets SET next_offset = ?, updated_at = ?",
            " AND next_offset IS NULL",
        );
        let query = sqlx::query(sql).bind(offset).bind(now);
        let done = bind_fence(query, key).execute(&mut *conn).await?;
        Ok(done.rows_affected() == 1)
    }

    /// The compare-and-set advance from `from` to `to` (never back), clearing the failure count
    /// when the offset moves.
    async fn kafka_advance(
        conn: &mut MySqlConnection,
        key: &FenceKey<'_>,
        from: i64,
        to: i64,
        now: i64,
    ) -> Res<bool> {
        let sql = fenced(
            "UPDATE idem_kafka_offsets SET next_offset = ?, \
             attempts = CASE WHEN ? = ? THEN attempts ELSE 0 END, \
             last_error = CASE WHEN ? = ? THEN last_error ELSE NULL END, updated_at = ?",
            " AND next_offset = ? AND ? >= ?",
        );
        let query = sqlx::query(sql)
            .bind(to)
            .bind(to)
            .bind(from)
            .bind(to)
            .bind(from)
            .bind(now);
        let done = bind_fence(query, key)
            .bind(from)
            .bind(to)
            .bind(from)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Counts a failed delivery of the message at `at`, then reads the count.
    async fn kafka_fail(
        conn: &mut MySqlConnection,
        key: &FenceKey<'_>,
        at: i64,
        error: &str,
        now: i64,
    ) -> Res<Option<i32>> {
        let sql = fenced(
            "UPDATE idem_kafka_offsets SET attempts = attempts + 1, last_error = ?, updated_at = ?",
            " AND next_offset = ?",
        );
        let query = sqlx::query(sql).bind(error).bind(now);
        let done = bind_fence(query, key).bind(at).execute(&mut *conn).await?;
        if done.rows_affected() != 1 {
            return Ok(None);
        }
        let (_, attempts): (Option<i64>, i32) = sqlx::query_as(POSITION)
            .bind(key.consumer)
            .bind(key.topic)
            .bind(key.partition)
            .fetch_one(&mut *conn)
            .await?;
        Ok(Some(attempts))
    }

    async fn kafka_get(
        conn: &mut MySqlConnection,
        consumer: &str,
        topic: &str,
        partition: i32,
    ) -> Res<Option<OffsetRow>> {
        let sql = format!("{SELECT}AND kafka_partition = ?");
        let found: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(consumer)
            .bind(topic)
            .bind(partition)
            .fetch_optional(&mut *conn)
            .await?;
        found.map(row).transpose()
    }

    async fn kafka_list(
        conn: &mut MySqlConnection,
        consumer: &str,
        topic: &str,
    ) -> Res<Vec<OffsetRow>> {
        let sql = format!("{SELECT}ORDER BY kafka_partition");
        let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(consumer)
            .bind(topic)
            .fetch_all(&mut *conn)
            .await?;
        rows.into_iter().map(row).collect()
    }

    async fn kafka_live_members(
        conn: &mut MySqlConnection,
        scope: &str,
        prefix: &str,
        now: i64,
    ) -> Res<Vec<String>> {
        let keys: Vec<Vec<u8>> = sqlx::query_scalar(LIVE_MEMBERS)
            .bind(scope)
            .bind(prefix)
            .bind(prefix)
            .bind(now)
            .fetch_all(&mut *conn)
            .await?;
        keys.into_iter().map(text).collect()
    }
}
