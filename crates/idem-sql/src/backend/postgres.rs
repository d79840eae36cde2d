//! PostgreSQL: transactions at READ COMMITTED, where a second claim of one key waits for the
//! first transaction and then sees its row (under REPEATABLE READ it would fail with 40001);
//! version rows locked with `FOR UPDATE`; batched claims as one `UNNEST` insert.

use sqlx::migrate::MigrateError;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, Pool, Postgres};

use super::ops::{Acquired, GcTable, LeaseRow, Ops, VersionRow, VersionWrite};
use super::{bind_version, shared_ops, sql};

impl Ops for Postgres {
    const BEGIN: &'static str = "BEGIN ISOLATION LEVEL READ COMMITTED";

    async fn connect(url: &str, max_connections: u32) -> Result<Pool<Self>, sqlx::Error> {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(url)
            .await
    }

    async fn migrate(pool: &Pool<Self>) -> Result<(), MigrateError> {
        let mut migrator = sqlx::migrate!("migrations/postgres");
        migrator.dangerous_set_table_name(super::MIGRATIONS_TABLE);
        migrator.run(pool).await
    }

    /// The row lock holds other transactions of this entity until this one ends.
    const LOAD_VERSION: &'static str = "SELECT version_kind, version, version_secondary \
         FROM idem_versions WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 \
         FOR UPDATE";

    shared_ops!();

    async fn claim_many(
        conn: &mut PgConnection,
        consumer: &str,
        keys: &[&str],
        now: i64,
    ) -> Result<Vec<String>, sqlx::Error> {
        sqlx::query_scalar(
            "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) \
             SELECT $1, k, $2 FROM UNNEST($3::text[]) AS k \
             ON CONFLICT (consumer, dedup_key) DO NOTHING RETURNING dedup_key",
        )
        .bind(consumer)
        .bind(now)
        .bind(keys)
        .fetch_all(&mut *conn)
        .await
    }
}
