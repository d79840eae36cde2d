//! Statements of the consumer registry (`idem_consumers`, `idem_consumer_counts`) and the
//! per-consumer figures read beside it, the same SQL on SQLite and PostgreSQL; MySQL's are in
//! `mysql/consumers.rs`.

#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;

type Res<T> = Result<T, sqlx::Error>;

/// One consumer's counts in one 5-minute bucket, as a flush adds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountRow {
    pub consumer: String,
    pub bucket: i64,
    pub claimed: i64,
    pub duplicates: i64,
    pub stale: i64,
    pub gaps: i64,
}

/// One consumer's registry row, as a flush writes it (first seen kept when the row exists).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryWrite {
    pub consumer: String,
    pub kind: &'static str,
    pub first_seen: i64,
    pub last_seen: i64,
    pub lag: Option<i64>,
    pub lag_at: Option<i64>,
}

/// A registry row read back: consumer, kind, first seen, exact, last seen, lag, lag at.
pub(crate) type RegistryRead = (String, String, i64, bool, i64, Option<i64>, Option<i64>);

/// Counts summed over a window: consumer, claimed, duplicates, stale, gaps.
pub(crate) type WindowRead = (String, i64, i64, i64, i64);

/// A figure grouped by consumer (and a second column where the figure has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouped {
    /// Dead letters whose last failure is within `[from, to]`: (consumer, "", count).
    DeadLetters { from: i64, to: i64 },
    /// Effects by the consumer that wrote them: (consumer, status, count).
    EffectsByStatus,
    /// Outbox rows by the consumer that wrote them: (consumer, status, count).
    OutboxByStatus,
    /// Running leases unexpired at `now`: (scope, "", count).
    Leases { now: i64 },
    /// Stored Kafka partition offsets: (consumer, "", count).
    KafkaOffsets,
    /// Declared successors: (predecessor, successor, declared at).
    Successors,
}

/// The registry's statements.
pub trait ConsumerOps: Database {
    /// Adds `counts` (rows of `instance`) in one statement and upserts `registry` in another;
    /// either may be empty (then not sent).
    fn consumers_flush(
        conn: &mut Self::Connection,
        instance: &str,
        counts: &[CountRow],
        registry: &[RegistryWrite],
    ) -> impl Future<Output = Res<()>> + Send;
    /// Every registry row, by name.
    fn consumers_registry(
        conn: &mut Self::Connection,
    ) -> impl Future<Output = Res<Vec<RegistryRead>>> + Send;
    /// Counts of buckets starting within `[from, to]`, summed per consumer.
    fn consumers_window(
        conn: &mut Self::Connection,
        from: i64,
        to: i64,
    ) -> impl Future<Output = Res<Vec<WindowRead>>> + Send;
    /// One grouped figure.
    fn consumers_grouped(
        conn: &mut Self::Connection,
        what: Grouped,
    ) -> impl Future<Output = Res<Vec<(String, String, i64)>>> + Send;
}

/// The registry upsert's tail: the kind becomes a more specific one (a back-filled `runner` or
/// `lineage` row is replaced by what registers), last seen only grows, a reported lag replaces
/// the stored one.
const REGISTRY_CONFLICT: &str = " ON CONFLICT (consumer) DO UPDATE SET \
     kind = CASE WHEN idem_consumers.kind IN ('runner', 'lineage') THEN excluded.kind \
                 ELSE idem_consumers.kind END, \
     last_seen = CASE WHEN excluded.last_seen > idem_consumers.last_seen THEN excluded.last_seen \
                      ELSE idem_consumers.last_seen END, \
     lag = COALESCE(excluded.lag, idem_consumers.lag), \
     lag_at = COALESCE(excluded.lag_at, idem_consumers.lag_at)";

const COUNTS_CONFLICT: &str = " ON CONFLICT (consumer, bucket, instance) DO UPDATE SET \
     claimed = idem_consumer_counts.claimed + excluded.claimed, \
     duplicates = idem_consumer_counts.duplicates + excluded.duplicates, \
     stale = idem_consumer_counts.stale + excluded.stale, \
     gaps = idem_consumer_counts.gaps + excluded.gaps";

const REGISTRY: &str = "SELECT consumer, kind, first_seen, first_seen_exact, last_seen, lag, \
     lag_at FROM idem_consumers ORDER BY consumer";

const WINDOW: &str = "SELECT consumer, CAST(SUM(claimed) AS BIGINT), \
     CAST(SUM(duplicates) AS BIGINT), CAST(SUM(stale) AS BIGINT), CAST(SUM(gaps) AS BIGINT) \
     FROM idem_consumer_counts WHERE bucket >= $1 AND bucket <= $2 GROUP BY consumer";

/// The SQL of a grouped figure, and its parameters.
fn grouped_sql(what: Grouped) -> (&'static str, Vec<i64>) {
    match what {
        Grouped::DeadLetters { from, to } => (
            "SELECT consumer, CAST('' AS TEXT), COUNT(*) FROM idem_dead_letters \
             WHERE last_failed_at >= $1 AND last_failed_at <= $2 GROUP BY consumer",
            vec![from, to],
        ),
        Grouped::EffectsByStatus => (
            "SELECT consumer, status, COUNT(*) FROM idem_effects WHERE consumer IS NOT NULL \
             GROUP BY consumer, status",
            vec![],
        ),
        Grouped::OutboxByStatus => (
            "SELECT consumer, status, COUNT(*) FROM idem_outbox WHERE consumer IS NOT NULL \
             GROUP BY consumer, status",
            vec![],
        ),
        Grouped::Leases { now } => (
            "SELECT scope, CAST('' AS TEXT), COUNT(*) FROM idem_leases \
             WHERE state = 'running' AND expires_at > $1 GROUP BY scope",
            vec![now],
        ),
        Grouped::KafkaOffsets => (
            "SELECT consumer, CAST('' AS TEXT), COUNT(*) FROM idem_kafka_offsets GROUP BY consumer",
            vec![],
        ),
        Grouped::Successors => (
            "SELECT predecessor, consumer, declared_at FROM idem_consumer_lineage \
             WHERE predecessor IS NOT NULL ORDER BY declared_at",
            vec![],
        ),
    }
}

macro_rules! consumer_ops {
    ($db:ty) => {
        impl ConsumerOps for $db {
            async fn consumers_flush(
                conn: &mut Self::Connection,
                instance: &str,
                counts: &[CountRow],
                registry: &[RegistryWrite],
            ) -> Res<()> {
                if !counts.is_empty() {
                    let mut q = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO idem_consumer_counts \
                         (consumer, instance, bucket, claimed, duplicates, stale, gaps) ",
                    );
                    q.push_values(counts, |mut b, row| {
                        b.push_bind(row.consumer.as_str())
                            .push_bind(instance)
                            .push_bind(row.bucket)
                            .push_bind(row.claimed)
                            .push_bind(row.duplicates)
                            .push_bind(row.stale)
                            .push_bind(row.gaps);
                    });
                    q.push(COUNTS_CONFLICT);
                    q.build().execute(&mut *conn).await?;
                }
                if !registry.is_empty() {
                    let mut q = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO idem_consumers \
                         (consumer, kind, first_seen, first_seen_exact, last_seen, lag, lag_at) ",
                    );
                    q.push_values(registry, |mut b, row| {
                        b.push_bind(row.consumer.as_str())
                            .push_bind(row.kind)
                            .push_bind(row.first_seen)
                            .push_bind(true)
                            .push_bind(row.last_seen)
                            .push_bind(row.lag)
                            .push_bind(row.lag_at);
                    });
                    q.push(REGISTRY_CONFLICT);
                    q.build().execute(&mut *conn).await?;
                }
                Ok(())
            }

            async fn consumers_registry(conn: &mut Self::Connection) -> Res<Vec<RegistryRead>> {
                sqlx::query_as(REGISTRY).fetch_all(&mut *conn).await
            }

            async fn consumers_window(
                conn: &mut Self::Connection,
                from: i64,
                to: i64,
            ) -> Res<Vec<WindowRead>> {
                sqlx::query_as(WINDOW)
                    .bind(from)
                    .bind(to)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn consumers_grouped(
                conn: &mut Self::Connection,
                what: Grouped,
            ) -> Res<Vec<(String, String, i64)>> {
                let (sql, params) = grouped_sql(what);
                let mut q = sqlx::query_as(sql);
                for p in params {
                    q = q.bind(p);
                }
                q.fetch_all(&mut *conn).await
            }
        }
    };
}

#[cfg(feature = "sqlite")]
consumer_ops!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
consumer_ops!(sqlx::Postgres);
