//! The databases idem keeps its tables in, and the statements each runs.
//!
//! Almost every statement is the same SQL on SQLite and PostgreSQL (see `sql.rs`); the
//! differences are in `sqlite.rs` and `postgres.rs`: connection settings, how a transaction
//! begins, row locking for the version guard, and the batched claim. MySQL and MariaDB have
//! their own statements (`?` parameters, no `ON CONFLICT`, no `RETURNING`), all in `mysql/`.

pub(crate) mod consumer_ops;
pub(crate) mod consumer_reset_ops;
pub(crate) mod dead_letter_ops;
pub(crate) mod effect_ops;
pub(crate) mod kafka_offset_ops;
pub(crate) mod lineage_ops;
#[cfg(feature = "mysql")]
mod mysql;
pub(crate) mod outbox_ops;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "sqlite")]
pub(crate) use sqlite::open_existing as sqlite_open_existing;

use std::future::Future;

use sqlx::{Database, Pool};

/// idem's own migrations table, apart from the application's `_sqlx_migrations`, so that both can
/// migrate one database without either seeing the other's versions as unknown.
const MIGRATIONS_TABLE: &str = "idem_migrations";

/// A database that can hold idem's tables: [`sqlx::Sqlite`], [`sqlx::Postgres`] or
/// `sqlx::MySql` (MySQL and MariaDB; feature `mysql`).
///
/// Sealed: the statements idem needs are implemented for these only.
pub trait Backend:
    Database
    + ops::Ops
    + effect_ops::EffectOps
    + dead_letter_ops::DeadLetterOps
    + outbox_ops::OutboxOps
    + kafka_offset_ops::KafkaOffsetOps
    + lineage_ops::LineageOps
    + consumer_reset_ops::ConsumerResetOps
    + consumer_ops::ConsumerOps
{
}

#[cfg(feature = "sqlite")]
impl Backend for sqlx::Sqlite {}
#[cfg(feature = "postgres")]
impl Backend for sqlx::Postgres {}
#[cfg(feature = "mysql")]
impl Backend for sqlx::MySql {}

/// The operations behind [`Backend`]; unnameable outside the crate.
pub(crate) mod ops {
    use super::*;

    /// An entity's stored version as read from `idem_versions`.
    #[derive(Debug)]
    pub struct VersionRow {
        pub kind: String,
        pub version: i64,
        pub secondary: Option<i64>,
        pub dedup_key: String,
    }

    /// A lease as read from `idem_leases`.
    #[derive(Debug)]
    pub struct LeaseRow {
        pub state: String,
        pub expires_at: i64,
        pub record: Option<Vec<u8>>,
        pub fingerprint: Vec<u8>,
    }

    /// A lease just taken: its token, its expiry, and whether it was taken over.
    #[derive(Debug)]
    pub struct Acquired {
        pub token: i64,
        pub expires_at: i64,
        pub takeover: bool,
    }

    /// The columns of one version guard row.
    #[derive(Debug)]
    pub struct VersionWrite<'a> {
        pub consumer: &'a str,
        pub aggregate_type: &'a str,
        pub aggregate_id: &'a str,
        pub kind: &'static str,
        pub version: i64,
        pub secondary: Option<i64>,
        pub dedup_key: &'a str,
        pub now: i64,
    }

    type Res<T> = Result<T, sqlx::Error>;

    pub trait Ops: Database + Sized {
        /// Checks `url` and opens a pool with idem's settings for this database.
        fn connect(
            url: &str,
            options: &crate::PoolOptions,
        ) -> impl Future<Output = Result<Pool<Self>, crate::Error>> + Send;
        /// Runs the embedded migrations for this database, recorded in [`MIGRATIONS_TABLE`].
        fn migrate(pool: &Pool<Self>) -> impl Future<Output = Result<(), crate::Error>> + Send;
        /// The statement that opens a write transaction.
        const BEGIN: &'static str;

        fn claim(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
            now: i64,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// Whether `key` is in the inbox (committed), without a transaction.
        fn is_claimed(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// Claims `keys` (distinct, sorted) in one statement; returns the keys that were fresh.
        fn claim_many(
            conn: &mut Self::Connection,
            consumer: &str,
            keys: &[&str],
            now: i64,
        ) -> impl Future<Output = Res<Vec<String>>> + Send;

        /// Reads an entity's version, locking the row until the transaction ends where the
        /// database locks rows (PostgreSQL); SQLite's write transaction already excludes others.
        const LOAD_VERSION: &'static str;

        fn load_version(
            conn: &mut Self::Connection,
            consumer: &str,
            aggregate_type: &str,
            aggregate_id: &str,
        ) -> impl Future<Output = Res<Option<VersionRow>>> + Send;
        fn insert_version(
            conn: &mut Self::Connection,
            row: &VersionWrite<'_>,
        ) -> impl Future<Output = Res<bool>> + Send;
        fn update_version(
            conn: &mut Self::Connection,
            row: &VersionWrite<'_>,
        ) -> impl Future<Output = Res<()>> + Send;
        /// What ends [`sql::LOAD_VERSIONS_END`] here: ` FOR UPDATE` where the database locks
        /// rows (PostgreSQL), nothing on SQLite, whose write transaction excludes other writers.
        const LOCK_ROWS: &'static str;
        /// The stored versions of `entities` (`(aggregate_type, aggregate_id)`) of `consumer`,
        /// in key order, locked as [`Ops::LOCK_ROWS`] says; an entity without a row is left out.
        fn load_versions(
            conn: &mut Self::Connection,
            consumer: &str,
            entities: &[(&str, &str)],
        ) -> impl Future<Output = Res<Vec<(String, String, VersionRow)>>> + Send;
        /// Inserts `rows` where their entity has no row; returns the entities inserted.
        fn insert_versions(
            conn: &mut Self::Connection,
            rows: &[VersionWrite<'_>],
        ) -> impl Future<Output = Res<Vec<(String, String)>>> + Send;
        /// Writes `rows` over their entities' existing rows.
        fn update_versions(
            conn: &mut Self::Connection,
            rows: &[VersionWrite<'_>],
        ) -> impl Future<Output = Res<()>> + Send;

        fn acquire_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            fingerprint: &[u8],
            now: i64,
            ttl_ms: i64,
        ) -> impl Future<Output = Res<Option<Acquired>>> + Send;
        fn load_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
        ) -> impl Future<Output = Res<Option<LeaseRow>>> + Send;
        fn complete_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            token: i64,
            record: &[u8],
            now: i64,
        ) -> impl Future<Output = Res<bool>> + Send;
        fn release_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            token: i64,
            now: i64,
        ) -> impl Future<Output = Res<bool>> + Send;
        fn extend_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            token: i64,
            now: i64,
            ttl_ms: i64,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;

        fn parked_since(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;
        fn park(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
            now: i64,
        ) -> impl Future<Output = Res<()>> + Send;

        /// Deletes up to `limit` rows of `table` older than `cutoff`; returns how many.
        fn gc_batch(
            conn: &mut Self::Connection,
            table: GcTable,
            cutoff: i64,
            limit: i64,
        ) -> impl Future<Output = Res<u64>> + Send;
    }

    /// The tables retention deletes from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum GcTable {
        Inbox,
        Leases,
        Parked,
    }
}

/// The statements that are the same SQL on SQLite and PostgreSQL, implemented once for `Self`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
macro_rules! shared_ops {
    () => {
        async fn claim(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(sql::CLAIM)
                .bind(consumer)
                .bind(key)
                .bind(now)
                .execute(&mut *conn)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn load_version(
            conn: &mut Self::Connection,
            consumer: &str,
            aggregate_type: &str,
            aggregate_id: &str,
        ) -> Result<Option<VersionRow>, sqlx::Error> {
            let row: Option<(String, i64, Option<i64>, String)> =
                sqlx::query_as(Self::LOAD_VERSION)
                    .bind(consumer)
                    .bind(aggregate_type)
                    .bind(aggregate_id)
                    .fetch_optional(&mut *conn)
                    .await?;
            Ok(row.map(|(kind, version, secondary, dedup_key)| VersionRow {
                kind,
                version,
                secondary,
                dedup_key,
            }))
        }

        async fn is_claimed(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
        ) -> Result<bool, sqlx::Error> {
            let row: Option<i32> = sqlx::query_scalar(sql::IS_CLAIMED)
                .bind(consumer)
                .bind(key)
                .fetch_optional(&mut *conn)
                .await?;
            Ok(row.is_some())
        }

        async fn insert_version(
            conn: &mut Self::Connection,
            row: &VersionWrite<'_>,
        ) -> Result<bool, sqlx::Error> {
            let done = bind_version(sqlx::query(sql::INSERT_VERSION), row)
                .execute(&mut *conn)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn update_version(
            conn: &mut Self::Connection,
            row: &VersionWrite<'_>,
        ) -> Result<(), sqlx::Error> {
            bind_version(sqlx::query(sql::UPDATE_VERSION), row)
                .execute(&mut *conn)
                .await?;
            Ok(())
        }

        async fn load_versions(
            conn: &mut Self::Connection,
            consumer: &str,
            entities: &[(&str, &str)],
        ) -> Result<Vec<(String, String, VersionRow)>, sqlx::Error> {
            let mut rows = Vec::with_capacity(entities.len());
            for chunk in entities.chunks(VERSION_ROWS_PER_STATEMENT) {
                let mut query = sqlx::QueryBuilder::<Self>::new(sql::LOAD_VERSIONS);
                query.push_bind(consumer).push(sql::LOAD_VERSIONS_IN);
                query.push_values(chunk, |mut values, (aggregate_type, aggregate_id)| {
                    values.push_bind(*aggregate_type).push_bind(*aggregate_id);
                });
                query.push(sql::LOAD_VERSIONS_END).push(Self::LOCK_ROWS);
                let found: Vec<(String, String, String, i64, Option<i64>, String)> =
                    query.build_query_as().fetch_all(&mut *conn).await?;
                rows.extend(found.into_iter().map(
                    |(aggregate_type, aggregate_id, kind, version, secondary, dedup_key)| {
                        (
                            aggregate_type,
                            aggregate_id,
                            VersionRow {
                                kind,
                                version,
                                secondary,
                                dedup_key,
                            },
                        )
                    },
                ));
            }
            Ok(rows)
        }

        async fn insert_versions(
            conn: &mut Self::Connection,
            rows: &[VersionWrite<'_>],
        ) -> Result<Vec<(String, String)>, sqlx::Error> {
            let mut inserted = Vec::with_capacity(rows.len());
            for chunk in rows.chunks(VERSION_ROWS_PER_STATEMENT) {
                let mut query = sqlx::QueryBuilder::<Self>::new(sql::INSERT_VERSIONS);
                query.push_values(chunk, push_version);
                query.push(sql::INSERT_VERSIONS_END);
                let done: Vec<(String, String)> =
                    query.build_query_as().fetch_all(&mut *conn).await?;
                inserted.extend(done);
            }
            Ok(inserted)
        }

        async fn update_versions(
            conn: &mut Self::Connection,
            rows: &[VersionWrite<'_>],
        ) -> Result<(), sqlx::Error> {
            for chunk in rows.chunks(VERSION_ROWS_PER_STATEMENT) {
                let mut query = sqlx::QueryBuilder::<Self>::new(sql::UPDATE_VERSIONS);
                query.push_values(chunk, push_version);
                query.push(sql::UPDATE_VERSIONS_END);
                query.build().execute(&mut *conn).await?;
            }
            Ok(())
        }

        async fn acquire_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            fingerprint: &[u8],
            now: i64,
            ttl_ms: i64,
        ) -> Result<Option<Acquired>, sqlx::Error> {
            let row: Option<(i64, i64, bool)> = sqlx::query_as(sql::ACQUIRE_LEASE)
                .bind(scope)
                .bind(key)
                .bind(now)
                .bind(ttl_ms)
                .bind(fingerprint)
                .fetch_optional(&mut *conn)
                .await?;
            Ok(row.map(|(token, expires_at, takeover)| Acquired {
                token,
                expires_at,
                takeover,
            }))
        }

        async fn load_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
        ) -> Result<Option<LeaseRow>, sqlx::Error> {
            let row: Option<(String, i64, Option<Vec<u8>>, Vec<u8>)> =
                sqlx::query_as(sql::LOAD_LEASE)
                    .bind(scope)
                    .bind(key)
                    .fetch_optional(&mut *conn)
                    .await?;
            Ok(
                row.map(|(state, expires_at, record, fingerprint)| LeaseRow {
                    state,
                    expires_at,
                    record,
                    fingerprint,
                }),
            )
        }

        async fn complete_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            token: i64,
            record: &[u8],
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(sql::COMPLETE_LEASE)
                .bind(scope)
                .bind(key)
                .bind(token)
                .bind(record)
                .bind(now)
                .execute(&mut *conn)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn release_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            token: i64,
            now: i64,
        ) -> Result<bool, sqlx::Error> {
            let done = sqlx::query(sql::RELEASE_LEASE)
                .bind(scope)
                .bind(key)
                .bind(token)
                .bind(now)
                .execute(&mut *conn)
                .await?;
            Ok(done.rows_affected() == 1)
        }

        async fn extend_lease(
            conn: &mut Self::Connection,
            scope: &str,
            key: &str,
            token: i64,
            now: i64,
            ttl_ms: i64,
        ) -> Result<Option<i64>, sqlx::Error> {
            sqlx::query_scalar(sql::EXTEND_LEASE)
                .bind(scope)
                .bind(key)
                .bind(token)
                .bind(now)
                .bind(ttl_ms)
                .fetch_optional(&mut *conn)
                .await
        }

        async fn parked_since(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
        ) -> Result<Option<i64>, sqlx::Error> {
            sqlx::query_scalar(sql::PARKED_SINCE)
                .bind(consumer)
                .bind(key)
                .fetch_optional(&mut *conn)
                .await
        }

        async fn park(
            conn: &mut Self::Connection,
            consumer: &str,
            key: &str,
            now: i64,
        ) -> Result<(), sqlx::Error> {
            sqlx::query(sql::PARK)
                .bind(consumer)
                .bind(key)
                .bind(now)
                .execute(&mut *conn)
                .await?;
            Ok(())
        }

        async fn gc_batch(
            conn: &mut Self::Connection,
            table: GcTable,
            cutoff: i64,
            limit: i64,
        ) -> Result<u64, sqlx::Error> {
            let statement = match table {
                GcTable::Inbox => sql::GC_INBOX,
                GcTable::Leases => sql::GC_LEASES,
                GcTable::Parked => sql::GC_PARKED,
            };
            let done = sqlx::query(statement)
                .bind(cutoff)
                .bind(limit)
                .execute(&mut *conn)
                .await?;
            Ok(done.rows_affected())
        }
    };
}
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use shared_ops;

/// The most version rows one statement carries: 8 parameters a row, well within SQLite's 32,766
/// and PostgreSQL's and MySQL's 65,535 bound parameters per statement.
const VERSION_ROWS_PER_STATEMENT: usize = 1_000;

/// Pushes the eight columns of a version guard row as one `VALUES` row, in the order of
/// `sql::INSERT_VERSION`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn push_version<DB>(
    mut values: sqlx::query_builder::Separated<'_, DB, &'static str>,
    row: &ops::VersionWrite<'_>,
) where
    DB: Database,
    for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    values
        .push_bind(row.consumer)
        .push_bind(row.aggregate_type)
        .push_bind(row.aggregate_id)
        .push_bind(row.kind)
        .push_bind(row.version)
        .push_bind(row.secondary)
        .push_bind(row.dedup_key)
        .push_bind(row.now);
}

/// Binds the eight columns of a version guard row in the order of `sql::INSERT_VERSION`.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn bind_version<'q, DB>(
    query: sqlx::query::Query<'q, DB, DB::Arguments>,
    row: &ops::VersionWrite<'_>,
) -> sqlx::query::Query<'q, DB, DB::Arguments>
where
    DB: Database,
    for<'a> &'a str: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    for<'a> Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    query
        .bind(row.consumer)
        .bind(row.aggregate_type)
        .bind(row.aggregate_id)
        .bind(row.kind)
        .bind(row.version)
        .bind(row.secondary)
        .bind(row.dedup_key)
        .bind(row.now)
}
