//! Statements of a consumer's reset on MySQL (see `consumer_reset_ops.rs`). Key columns are
//! `VARBINARY`: names are compared and read back as bytes.

use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, text};
use crate::backend::consumer_reset_ops::{ConsumerResetOps, CursorTable};

fn count_sql(table: CursorTable) -> &'static str {
    match table {
        CursorTable::Inbox => "SELECT COUNT(*) FROM idem_inbox WHERE consumer = ?",
        CursorTable::Versions => "SELECT COUNT(*) FROM idem_versions WHERE consumer = ?",
        CursorTable::Parked => "SELECT COUNT(*) FROM idem_parked WHERE consumer = ?",
        CursorTable::KafkaOffsets => "SELECT COUNT(*) FROM idem_kafka_offsets WHERE consumer = ?",
    }
}

fn delete_sql(table: CursorTable) -> &'static str {
    match table {
        CursorTable::Inbox => "DELETE FROM idem_inbox WHERE consumer = ?",
        CursorTable::Versions => "DELETE FROM idem_versions WHERE consumer = ?",
        CursorTable::Parked => "DELETE FROM idem_parked WHERE consumer = ?",
        CursorTable::KafkaOffsets => "DELETE FROM idem_kafka_offsets WHERE consumer = ?",
    }
}

/// The latest time the consumer (bound four times) wrote a row.
const LAST_SEEN: &str = "SELECT MAX(t) FROM ( \
       SELECT MAX(processed_at) AS t FROM idem_inbox WHERE consumer = ? \
       UNION ALL SELECT MAX(updated_at) FROM idem_versions WHERE consumer = ? \
       UNION ALL SELECT MAX(first_seen) FROM idem_parked WHERE consumer = ? \
       UNION ALL SELECT MAX(updated_at) FROM idem_kafka_offsets WHERE consumer = ?) AS seen";

const LIVE_LEASES: &str = "SELECT lease_key, expires_at FROM idem_leases \
     WHERE scope = ? AND state = 'running' AND expires_at > ? ORDER BY lease_key";

/// MySQL reads `DISTINCT` on an index's first column with a loose index scan.
const KNOWN: [&str; 6] = [
    "SELECT DISTINCT consumer FROM idem_inbox",
    "SELECT DISTINCT consumer FROM idem_versions",
    "SELECT DISTINCT consumer FROM idem_parked",
    "SELECT DISTINCT consumer FROM idem_kafka_offsets",
    "SELECT DISTINCT consumer FROM idem_dead_letters",
    "SELECT consumer FROM idem_consumer_lineage",
];

const KAFKA_LEASE_SCOPES: &str =
    "SELECT DISTINCT scope FROM idem_leases WHERE SUBSTRING(scope, 1, 6) = 'kafka/'";

async fn names(conn: &mut MySqlConnection, statement: &'static str) -> Res<Vec<String>> {
    let found: Vec<Vec<u8>> = sqlx::query_scalar(statement).fetch_all(&mut *conn).await?;
    found.into_iter().map(text).collect()
}

impl ConsumerResetOps for MySql {
    async fn cursor_count(
        conn: &mut MySqlConnection,
        table: CursorTable,
        consumer: &str,
    ) -> Res<u64> {
        let n: i64 = sqlx::query_scalar(count_sql(table))
            .bind(consumer.as_bytes())
            .fetch_one(&mut *conn)
            .await?;
        Ok(u64::try_from(n).unwrap_or_default())
    }

    async fn cursor_delete(
        conn: &mut MySqlConnection,
        table: CursorTable,
        consumer: &str,
    ) -> Res<u64> {
        let done = sqlx::query(delete_sql(table))
            .bind(consumer.as_bytes())
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected())
    }

    async fn cursor_last_seen(conn: &mut MySqlConnection, consumer: &str) -> Res<Option<i64>> {
        let name = consumer.as_bytes();
        sqlx::query_scalar(LAST_SEEN)
            .bind(name)
            .bind(name)
            .bind(name)
            .bind(name)
            .fetch_one(&mut *conn)
            .await
    }

    async fn live_leases(
        conn: &mut MySqlConnection,
        scope: &str,
        now: i64,
    ) -> Res<Vec<(String, i64)>> {
        let rows: Vec<(Vec<u8>, i64)> = sqlx::query_as(LIVE_LEASES)
            .bind(scope.as_bytes())
            .bind(now)
            .fetch_all(&mut *conn)
            .await?;
        rows.into_iter()
            .map(|(key, expires)| Ok((text(key)?, expires)))
            .collect()
    }

    async fn known_consumers(conn: &mut MySqlConnection) -> Res<(Vec<String>, Vec<String>)> {
        let mut found = Vec::new();
        for statement in KNOWN {
            found.extend(names(conn, statement).await?);
        }
        let scopes = names(conn, KAFKA_LEASE_SCOPES).await?;
        Ok((found, scopes))
    }
}
