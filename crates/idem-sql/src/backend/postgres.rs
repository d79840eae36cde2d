//! PostgreSQL: transactions at READ COMMITTED, where a second claim of one key waits for the
//! first transaction and then sees its row (under REPEATABLE READ it would fail with 40001);
//! version rows locked with `FOR UPDATE`; batched claims as one `UNNEST` insert.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, Pool, Postgres};

use super::ops::{Acquired, GcTable, LeaseRow, Ops, VersionRow, VersionWrite};
use super::{VERSION_ROWS_PER_STATEMENT, bind_version, push_version, shared_ops, sql};
use crate::redact::redact_url as redact;
use crate::{Error, PoolOptions};

impl Ops for Postgres {
    const BEGIN: &'static str = "BEGIN ISOLATION LEVEL READ COMMITTED";

    async fn connect(url: &str, pool: &PoolOptions) -> Result<Pool<Self>, Error> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::InvalidUrl {
                url: redact(url),
                expected: "a PostgreSQL URL, postgres://user@host:5432/database".into(),
            });
        }
        let options = PgConnectOptions::from_str(url).map_err(|e| Error::InvalidUrl {
            url: redact(url),
            expected: format!("a valid PostgreSQL URL ({e})"),
        })?;
        let connect_error = |source| Error::Connect {
            url: redact(url),
            hint: crate::error::connect_hint(&source, &redact(url)),
            source,
        };
        // One direct connection first: the pool retries a refused connection until its acquire
        // timeout (30 s) and then reports only "pool timed out"; this reports the cause at once.
        tokio::time::timeout(pool.acquire_timeout, PgConnection::connect_with(&options))
            .await
            .map_err(|_| {
                connect_error(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer within {:?}", pool.acquire_timeout),
                )))
            })?
            .map_err(connect_error)?
            .close()
            .await
            .ok();
        // No ping before each checkout: it is one more round trip per transaction (about a
        // fifth of a duplicate's cost). A connection that broke while idle fails its first
        // statement instead, an `Unavailable` error the sender retries.
        PgPoolOptions::new()
            .max_connections(pool.max_connections)
            .acquire_timeout(pool.acquire_timeout)
            .test_before_acquire(false)
            .before_acquire(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(options)
            .await
            .map_err(connect_error)
    }

    async fn migrate(pool: &Pool<Self>) -> Result<(), Error> {
        let mut migrator = sqlx::migrate!("migrations/postgres");
        migrator.dangerous_set_table_name(super::MIGRATIONS_TABLE);
        Ok(crate::run_migrations(migrator, pool).await?)
    }

    /// The row lock holds other transactions of this entity until this one ends.
    const LOAD_VERSION: &'static str = "SELECT version_kind, version, version_secondary, dedup_key \
         FROM idem_versions WHERE consumer = $1 AND aggregate_type = $2 AND aggregate_id = $3 \
         FOR UPDATE";

    const LOCK_ROWS: &'static str = " FOR UPDATE";

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
