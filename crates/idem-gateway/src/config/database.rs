//! Which databases a `database_url` may name: the gateway's own and a relay's.

use idem_sql::DatabaseKind;

/// Whether `url` names a database the gateway's tables can live in: SQLite, PostgreSQL, MySQL
/// or MariaDB (every store of idem-sql).
pub(super) fn holds_gateway_tables(url: &str) -> bool {
    matches!(
        DatabaseKind::of(url),
        Some(DatabaseKind::Sqlite | DatabaseKind::Postgres | DatabaseKind::MySql)
    )
}

/// Whether `url` names a database an outbox relay can read `idem_outbox` from: any of
/// idem-sql's stores — SQLite, PostgreSQL, MySQL or MariaDB (the application's own database).
pub(super) fn holds_idem_tables(url: &str) -> bool {
    DatabaseKind::of(url).is_some()
}
