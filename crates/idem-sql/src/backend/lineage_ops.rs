//! Statements of the consumer lineage table (`idem_consumer_lineage`), the same SQL on SQLite
//! and PostgreSQL; MySQL's are in `mysql/lineage.rs`.

#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_macros)
)]

use std::future::Future;

use sqlx::Database;

type Res<T> = Result<T, sqlx::Error>;

/// A consumer's stored lineage: (predecessor, effects scope).
pub(crate) type LineageRow = (Option<String>, String);

const GET: &str =
    "SELECT predecessor, effects_scope FROM idem_consumer_lineage WHERE consumer = $1";

/// Records a lineage once: a consumer already recorded keeps its row.
const INSERT: &str = "INSERT INTO idem_consumer_lineage \
     (consumer, predecessor, effects_scope, declared_at) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (consumer) DO NOTHING";

/// The lineage table's statements.
pub trait LineageOps: Database {
    /// `consumer`'s row, if recorded.
    fn lineage_get(
        conn: &mut Self::Connection,
        consumer: &str,
    ) -> impl Future<Output = Res<Option<LineageRow>>> + Send;
    /// Records `consumer`'s row unless one is stored; whether it was written.
    fn lineage_insert(
        conn: &mut Self::Connection,
        consumer: &str,
        predecessor: Option<&str>,
        scope: &str,
        now: i64,
    ) -> impl Future<Output = Res<bool>> + Send;
}

macro_rules! lineage_ops {
    ($db:ty) => {
        impl LineageOps for $db {
            async fn lineage_get(
                conn: &mut Self::Connection,
                consumer: &str,
            ) -> Res<Option<LineageRow>> {
                sqlx::query_as(GET)
                    .bind(consumer)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn lineage_insert(
                conn: &mut Self::Connection,
                consumer: &str,
                predecessor: Option<&str>,
                scope: &str,
                now: i64,
            ) -> Res<bool> {
                let done = sqlx::query(INSERT)
                    .bind(consumer)
                    .bind(predecessor)
                    .bind(scope)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }
        }
    };
}

#[cfg(feature = "sqlite")]
lineage_ops!(sqlx::Sqlite);
#[cfg(feature = "postgres")]
lineage_ops!(sqlx::Postgres);
