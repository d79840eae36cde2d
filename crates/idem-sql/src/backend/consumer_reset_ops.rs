//! Statements of a consumer's reset (`Store::reset_consumer`): count and delete the rows that
//! are its cursor (inbox keys, version-guard rows, parked-gap markers, Kafka offsets), read when
//! it was last active and which of its leases are live, and list the consumers the tables know.
//! The same SQL on SQLite and PostgreSQL; MySQL's are in `mysql/consumer_reset.rs`.

#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;

type Res<T> = Result<T, sqlx::Error>;

/// The tables a reset deletes a consumer's rows from: each keys its rows by the consumer first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorTable {
    /// `idem_inbox`: the dedup keys it processed.
    Inbox,
    /// `idem_versions`: the highest version it applied per entity.
    Versions,
    /// `idem_parked`: the events it holds back for a gap.
    Parked,
    /// `idem_kafka_offsets`: its next offset per topic partition.
    KafkaOffsets,
}

impl CursorTable {
    /// Every table, in the order a reset reports them.
    pub const ALL: [Self; 4] = [
        Self::Inbox,
        Self::Versions,
        Self::Parked,
        Self::KafkaOffsets,
    ];

    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inbox => "idem_inbox",
            Self::Versions => "idem_versions",
            Self::Parked => "idem_parked",
            Self::KafkaOffsets => "idem_kafka_offsets",
        }
    }

    /// `SELECT COUNT(*) … WHERE consumer = $1` on SQLite and PostgreSQL.
    fn count_sql(self) -> &'static str {
        match self {
            Self::Inbox => "SELECT COUNT(*) FROM idem_inbox WHERE consumer = $1",
            Self::Versions => "SELECT COUNT(*) FROM idem_versions WHERE consumer = $1",
            Self::Parked => "SELECT COUNT(*) FROM idem_parked WHERE consumer = $1",
            Self::KafkaOffsets => "SELECT COUNT(*) FROM idem_kafka_offsets WHERE consumer = $1",
        }
    }

    /// `DELETE … WHERE consumer = $1` on SQLite and PostgreSQL.
    fn delete_sql(self) -> &'static str {
        match self {
            Self::Inbox => "DELETE FROM idem_inbox WHERE consumer = $1",
            Self::Versions => "DELETE FROM idem_versions WHERE consumer = $1",
            Self::Parked => "DELETE FROM idem_parked WHERE consumer = $1",
            Self::KafkaOffsets => "DELETE FROM idem_kafka_offsets WHERE consumer = $1",
        }
    }
}

/// The latest time consumer $1 wrote a row: a claim, a version, a parked marker, an offset.
const LAST_SEEN: &str = "SELECT MAX(t) FROM ( \
       SELECT MAX(processed_at) AS t FROM idem_inbox WHERE consumer = $1 \
       UNION ALL SELECT MAX(updated_at) FROM idem_versions WHERE consumer = $1 \
       UNION ALL SELECT MAX(first_seen) FROM idem_parked WHERE consumer = $1 \
       UNION ALL SELECT MAX(updated_at) FROM idem_kafka_offsets WHERE consumer = $1) AS seen";

/// The running leases of scope $1 that have not expired at $2: (key, expiry).
const LIVE_LEASES: &str = "SELECT lease_key, expires_at FROM idem_leases \
     WHERE scope = $1 AND state = 'running' AND expires_at > $2 ORDER BY lease_key";

/// Every consumer of a table whose primary key (or an index) starts with `consumer`: one index
/// probe per consumer (a loose scan), not a read of every row.
macro_rules! consumers_of {
    ($table:literal) => {
        concat!(
            "WITH RECURSIVE c(consumer) AS ( SELECT MIN(consumer) FROM ",
            $table,
            " UNION ALL SELECT (SELECT MIN(t.consumer) FROM ",
            $table,
            " t WHERE t.consumer > c.consumer) FROM c WHERE c.consumer IS NOT NULL) \
             SELECT consumer FROM c WHERE consumer IS NOT NULL"
        )
    };
}

/// The statements listing consumer names, one per table that names consumers (the dead letters
/// and the lineage included: a consumer with only those is known, and has nothing to reset).
const KNOWN: [&str; 6] = [
    consumers_of!("idem_inbox"),
    consumers_of!("idem_versions"),
    consumers_of!("idem_parked"),
    consumers_of!("idem_kafka_offsets"),
    consumers_of!("idem_dead_letters"),
    "SELECT consumer FROM idem_consumer_lineage",
];

/// The scopes of Kafka consumers' leases (`kafka/{consumer}`).
const KAFKA_LEASE_SCOPES: &str =
    "SELECT DISTINCT scope FROM idem_leases WHERE substr(scope, 1, 6) = 'kafka/'";

/// The statements behind a consumer's reset.
pub trait ConsumerResetOps: Database + Sized {
    /// How many rows of `consumer` `table` holds.
    fn cursor_count(
        conn: &mut Self::Connection,
        table: CursorTable,
        consumer: &str,
    ) -> impl Future<Output = Res<u64>> + Send;
    /// Deletes `consumer`'s rows of `table`; how many.
    fn cursor_delete(
        conn: &mut Self::Connection,
        table: CursorTable,
        consumer: &str,
    ) -> impl Future<Output = Res<u64>> + Send;
    /// The latest time (ms) `consumer` wrote a row of a [`CursorTable`], if any.
    fn cursor_last_seen(
        conn: &mut Self::Connection,
        consumer: &str,
    ) -> impl Future<Output = Res<Option<i64>>> + Send;
    /// The running leases of `scope` unexpired at `now`: (key, expiry), by key.
    fn live_leases(
        conn: &mut Self::Connection,
        scope: &str,
        now: i64,
    ) -> impl Future<Output = Res<Vec<(String, i64)>>> + Send;
    /// Every consumer name the tables hold rows of (unsorted, possibly repeated), and the
    /// scopes of Kafka consumers' leases.
    fn known_consumers(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Res<(Vec<String>, Vec<String>)>> + Send;
}

macro_rules! consumer_reset_ops {
    ($db:ty) => {
        impl ConsumerResetOps for $db {
            async fn cursor_count(
                conn: &mut Self::Connection,
                table: CursorTable,
                consumer: &str,
            ) -> Res<u64> {
                let n: i64 = sqlx::query_scalar(table.count_sql())
                    .bind(consumer)
                    .fetch_one(&mut *conn)
                    .await?;
                Ok(u64::try_from(n).unwrap_or_default())
            }

            async fn cursor_delete(
                conn: &mut Self::Connection,
                table: CursorTable,
                consumer: &str,
            ) -> Res<u64> {
                let done = sqlx::query(table.delete_sql())
                    .bind(consumer)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn cursor_last_seen(
                conn: &mut Self::Connection,
                consumer: &str,
            ) -> Res<Option<i64>> {
                sqlx::query_scalar(LAST_SEEN)
                    .bind(consumer)
                    .fetch_one(&mut *conn)
                    .await
            }

            async fn live_leases(
                conn: &mut Self::Connection,
                scope: &str,
                now: i64,
            ) -> Res<Vec<(String, i64)>> {
                sqlx::query_as(LIVE_LEASES)
                    .bind(scope)
                    .bind(now)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn known_consumers(
                conn: &mut Self::Connection,
            ) -> Res<(Vec<String>, Vec<String>)> {
                let mut names = Vec::new();
                for statement in KNOWN {
                    let found: Vec<String> =
                        sqlx::query_scalar(statement).fetch_all(&mut *conn).await?;
                    names.extend(found);
                }
                let scopes = sqlx::query_scalar(KAFKA_LEASE_SCOPES)
                    .fetch_all(&mut *conn)
                    .await?;
                Ok((names, scopes))
            }
        }
    };
}

#[cfg(feature = "sqlite")]
consumer_reset_ops!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
consumer_reset_ops!(sqlx::Postgres);
