//! Statements of the consumer registry on MySQL: `?` parameters, `ON DUPLICATE KEY UPDATE`,
//! names read back as bytes (the columns are `VARBINARY`).

use sqlx::mysql::{MySql, MySqlConnection};

use super::{Res, opt_text, text};
use crate::backend::consumer_ops::{
    ConsumerOps, CountRow, Grouped, RegistryRead, RegistryWrite, WindowRead,
};

/// See the SQLite and PostgreSQL statement: MySQL assigns left to right, and each assignment
/// below reads only its own column.
const REGISTRY_CONFLICT: &str = " ON DUPLICATE KEY UPDATE \
     kind = IF(kind IN ('runner', 'lineage'), VALUES(kind), kind), \
     last_seen = GREATEST(last_seen, VALUES(last_seen)), \
     lag = COALESCE(VALUES(lag), lag), \
     lag_at = COALESCE(VALUES(lag_at), lag_at)";

const COUNTS_CONFLICT: &str = " ON DUPLICATE KEY UPDATE \
     claimed = claimed + VALUES(claimed), duplicates = duplicates + VALUES(duplicates), \
     stale = stale + VALUES(stale), gaps = gaps + VALUES(gaps)";

const REGISTRY: &str = "SELECT consumer, CAST(kind AS BINARY), first_seen, first_seen_exact, \
     last_seen, lag, lag_at FROM idem_consumers ORDER BY consumer";

const WINDOW: &str = "SELECT consumer, CAST(SUM(claimed) AS SIGNED), \
     CAST(SUM(duplicates) AS SIGNED), CAST(SUM(stale) AS SIGNED), CAST(SUM(gaps) AS SIGNED) \
     FROM idem_consumer_counts WHERE bucket >= ? AND bucket <= ? GROUP BY consumer";

fn grouped_sql(what: Grouped) -> (&'static str, Vec<i64>) {
    match what {
        Grouped::DeadLetters { from, to } => (
            "SELECT consumer, CAST('' AS BINARY), COUNT(*) FROM idem_dead_letters \
             WHERE last_failed_at >= ? AND last_failed_at <= ? GROUP BY consumer",
            vec![from, to],
        ),
        Grouped::EffectsByStatus => (
            "SELECT consumer, CAST(status AS BINARY), COUNT(*) FROM idem_effects \
             WHERE consumer IS NOT NULL GROUP BY consumer, status",
            vec![],
        ),
        Grouped::OutboxByStatus => (
            "SELECT consumer, CAST(status AS BINARY), COUNT(*) FROM idem_outbox \
             WHERE consumer IS NOT NULL GROUP BY consumer, status",
            vec![],
        ),
        Grouped::Leases { now } => (
            "SELECT scope, CAST('' AS BINARY), COUNT(*) FROM idem_leases \
             WHERE state = 'running' AND expires_at > ? GROUP BY scope",
            vec![now],
        ),
        Grouped::KafkaOffsets => (
            "SELECT consumer, CAST('' AS BINARY), COUNT(*) FROM idem_kafka_offsets \
             GROUP BY consumer",
            vec![],
        ),
        Grouped::Successors => (
            "SELECT predecessor, consumer, declared_at FROM idem_consumer_lineage \
             WHERE predecessor IS NOT NULL ORDER BY declared_at",
            vec![],
        ),
    }
}

type RawRegistry = (Vec<u8>, Vec<u8>, i64, bool, i64, Option<i64>, Option<i64>);

impl ConsumerOps for MySql {
    async fn consumers_flush(
        conn: &mut MySqlConnection,
        instance: &str,
        counts: &[CountRow],
        registry: &[RegistryWrite],
    ) -> Res<()> {
        if !counts.is_empty() {
            let mut q = sqlx::QueryBuilder::<MySql>::new(
                "INSERT INTO idem_consumer_counts \
                 (consumer, instance, bucket, claimed, duplicates, stale, gaps) ",
            );
            q.push_values(counts, |mut b, row| {
                b.push_bind(row.consumer.as_bytes())
                    .push_bind(instance.as_bytes())
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
            let mut q = sqlx::QueryBuilder::<MySql>::new(
                "INSERT INTO idem_consumers \
                 (consumer, kind, first_seen, first_seen_exact, last_seen, lag, lag_at) ",
            );
            q.push_values(registry, |mut b, row| {
                b.push_bind(row.consumer.as_bytes())
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

    async fn consumers_registry(conn: &mut MySqlConnection) -> Res<Vec<RegistryRead>> {
        let rows: Vec<RawRegistry> = sqlx::query_as(REGISTRY).fetch_all(&mut *conn).await?;
        rows.into_iter()
            .map(|(name, kind, first, exact, last, lag, lag_at)| {
                Ok((text(name)?, text(kind)?, first, exact, last, lag, lag_at))
            })
            .collect()
    }

    async fn consumers_window(
        conn: &mut MySqlConnection,
        from: i64,
        to: i64,
    ) -> Res<Vec<WindowRead>> {
        let rows: Vec<(Vec<u8>, i64, i64, i64, i64)> = sqlx::query_as(WINDOW)
            .bind(from)
            .bind(to)
            .fetch_all(&mut *conn)
            .await?;
        rows.into_iter()
            .map(|(name, c, d, s, g)| Ok((text(name)?, c, d, s, g)))
            .collect()
    }

    async fn consumers_grouped(
        conn: &mut MySqlConnection,
        what: Grouped,
    ) -> Res<Vec<(String, String, i64)>> {
        let (sql, params) = grouped_sql(what);
        let mut q = sqlx::query_as(sql);
        for p in params {
            q = q.bind(p);
        }
        let rows: Vec<(Option<Vec<u8>>, Vec<u8>, i64)> = q.fetch_all(&mut *conn).await?;
        rows.into_iter()
            .map(|(a, b, n)| Ok((opt_text(a)?.unwrap_or_default(), text(b)?, n)))
            .collect()
    }
}
