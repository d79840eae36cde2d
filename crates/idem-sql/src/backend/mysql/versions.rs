//! The version guard's statements on MySQL (docs/design.md C5): rows locked with `FOR UPDATE`
//! until the transaction ends, so two events of one entity are compared one after the other.

use std::collections::HashSet;

use sqlx::mysql::{MySql, MySqlConnection};
use sqlx::{MySqlExecutor, QueryBuilder};

use super::{Ops, Res, text};
use crate::backend::VERSION_ROWS_PER_STATEMENT;
use crate::backend::ops::{VersionRow, VersionWrite};

/// The head of the insert of entities' first rows; `VALUES` rows follow, then [`MARK_EXISTING`].
const INSERT_VERSIONS: &str = "INSERT INTO idem_versions (consumer, aggregate_type, \
     aggregate_id, version_kind, version, version_secondary, dedup_key, updated_at) ";

/// A row that exists already is marked instead (its dedup key prefixed with the byte 0xFF, which
/// no UTF-8 text starts with), then found and unmarked by [`insert_absent`]. Unlike a plain INSERT's duplicate-key
/// error, which leaves a shared lock on the row that two transactions then both upgrade to lock
/// it for the update and deadlock, the update locks the row exclusively at once: a transaction
/// that meets another's uncommitted first row of an entity waits for it and goes on, as on
/// PostgreSQL.
const MARK_EXISTING: &str = " ON DUPLICATE KEY UPDATE dedup_key = CONCAT(X'FF', dedup_key)";

/// The condition that picks the rows [`MARK_EXISTING`] marked.
const MARKED: &str = " AND SUBSTRING(dedup_key, 1, 1) = X'FF'";

const UPDATE_VERSION: &str = "UPDATE idem_versions \
     SET version_kind = ?, version = ?, version_secondary = ?, dedup_key = ?, updated_at = ? \
     WHERE consumer = ? AND aggregate_type = ? AND aggregate_id = ?";

/// The entity's row as (kind, version, secondary, dedup key).
type Row = (String, i64, Option<i64>, Vec<u8>);

/// An entity's row read in a batch: its (aggregate type, aggregate id), then [`Row`]'s columns.
type EntityRow = (Vec<u8>, Vec<u8>, String, i64, Option<i64>, Vec<u8>);

fn version_row((kind, version, secondary, dedup_key): Row) -> Res<VersionRow> {
    Ok(VersionRow {
        kind,
        version,
        secondary,
        dedup_key: text(dedup_key)?,
    })
}

pub(super) async fn load_version(
    conn: &mut MySqlConnection,
    consumer: &str,
    aggregate_type: &str,
    aggregate_id: &str,
) -> Res<Option<VersionRow>> {
    let row: Option<Row> = sqlx::query_as(<MySql as Ops>::LOAD_VERSION)
        .bind(consumer)
        .bind(aggregate_type)
        .bind(aggregate_id)
        .fetch_optional(&mut *conn)
        .await?;
    row.map(version_row).transpose()
}

/// Inserts the entity's first row; `false` when it has one already (written meanwhile by a
/// transaction this one waited for).
pub(super) async fn insert_version(
    conn: &mut MySqlConnection,
    row: &VersionWrite<'_>,
) -> Res<bool> {
    Ok(!insert_absent(conn, &[row]).await?.is_empty())
}

pub(super) async fn update_version(conn: &mut MySqlConnection, row: &VersionWrite<'_>) -> Res<()> {
    sqlx::query(UPDATE_VERSION)
        .bind(row.kind)
        .bind(row.version)
        .bind(row.secondary)
        .bind(row.dedup_key)
        .bind(row.now)
        .bind(row.consumer)
        .bind(row.aggregate_type)
        .bind(row.aggregate_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// `head` (ending in `WHERE consumer = `), then `consumer` and `AND (aggregate_type,
/// aggregate_id) IN ((?, ?), …)` for `entities`: the row constructor both servers read.
fn where_entities<'a>(
    head: &str,
    consumer: &'a str,
    entities: &'a [(&'a str, &'a str)],
) -> QueryBuilder<MySql> {
    let mut query = QueryBuilder::new(head);
    query
        .push_bind(consumer)
        .push(" AND (aggregate_type, aggregate_id) IN (");
    let mut list = query.separated(", ");
    for (aggregate_type, aggregate_id) in entities {
        list.push("(")
            .push_bind_unseparated(*aggregate_type)
            .push_unseparated(", ")
            .push_bind_unseparated(*aggregate_id)
            .push_unseparated(")");
    }
    query.push(")");
    query
}

/// The rows of `entities` of `consumer`, locked, in key order.
fn select_locked<'a>(
    columns: &str,
    consumer: &'a str,
    entities: &'a [(&'a str, &'a str)],
) -> QueryBuilder<MySql> {
    let head = format!("SELECT {columns} FROM idem_versions WHERE consumer = ");
    let mut query = where_entities(&head, consumer, entities);
    query.push(" ORDER BY aggregate_type, aggregate_id FOR UPDATE");
    query
}

pub(super) async fn load_versions(
    conn: &mut MySqlConnection,
    consumer: &str,
    entities: &[(&str, &str)],
) -> Res<Vec<(String, String, VersionRow)>> {
    let mut rows = Vec::with_capacity(entities.len());
    for chunk in entities.chunks(VERSION_ROWS_PER_STATEMENT) {
        let mut query = select_locked(
            "aggregate_type, aggregate_id, version_kind, version, version_secondary, dedup_key",
            consumer,
            chunk,
        );
        let found: Vec<EntityRow> = query.build_query_as().fetch_all(&mut *conn).await?;
        for (aggregate_type, aggregate_id, kind, version, secondary, dedup_key) in found {
            let row = version_row((kind, version, secondary, dedup_key))?;
            rows.push((text(aggregate_type)?, text(aggregate_id)?, row));
        }
    }
    Ok(rows)
}

/// Inserts `rows` (in key order) whose entity has no row yet; returns the entities inserted.
///
/// The existing rows are locked first (`FOR UPDATE`, in key order, as the batch then reads
/// them) and only the others are inserted, by [`insert_absent`].
pub(super) async fn insert_versions(
    conn: &mut MySqlConnection,
    rows: &[VersionWrite<'_>],
) -> Res<Vec<(String, String)>> {
    let mut inserted_rows = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(VERSION_ROWS_PER_STATEMENT) {
        let Some(first) = chunk.first() else {
            continue;
        };
        let entities: Vec<(&str, &str)> = chunk
            .iter()
            .map(|row| (row.aggregate_type, row.aggregate_id))
            .collect();
        let there = locked_entities(&mut *conn, first.consumer, &entities).await?;
        let absent: Vec<&VersionWrite<'_>> = chunk
            .iter()
            .filter(|row| {
                !there.contains(&(row.aggregate_type.to_owned(), row.aggregate_id.to_owned()))
            })
            .collect();
        for row in insert_absent(conn, &absent).await? {
            inserted_rows.push((row.aggregate_type.to_owned(), row.aggregate_id.to_owned()));
        }
    }
    Ok(inserted_rows)
}

/// Inserts `rows` (one consumer's, in key order), each an entity's first row, in one statement;
/// a row another transaction inserted meanwhile is marked ([`MARK_EXISTING`]), found and
/// unmarked. Returns the rows inserted. Every row is locked by this transaction afterwards.
async fn insert_absent<'r, 'a>(
    conn: &mut MySqlConnection,
    rows: &[&'r VersionWrite<'a>],
) -> Res<Vec<&'r VersionWrite<'a>>> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let mut insert = QueryBuilder::<MySql>::new(INSERT_VERSIONS);
    insert.push_values(rows, |mut values, row| {
        values
            .push_bind(row.consumer)
            .push_bind(row.aggregate_type)
            .push_bind(row.aggregate_id)
            .push_bind(row.kind)
            .push_bind(row.version)
            .push_bind(row.secondary)
            .push_bind(row.dedup_key)
            .push_bind(row.now);
    });
    insert.push(MARK_EXISTING);
    // sqlx's connections count found rows: 1 per row inserted, 2 per row marked.
    let affected = insert.build().execute(&mut *conn).await?.rows_affected();
    if affected == rows.len() as u64 {
        return Ok(rows.to_vec());
    }
    let entities: Vec<(&str, &str)> = rows
        .iter()
        .map(|row| (row.aggregate_type, row.aggregate_id))
        .collect();
    // This transaction holds every one of these rows now: its plain reads see its own marks.
    let mut marked = where_entities(
        "SELECT aggregate_type, aggregate_id FROM idem_versions WHERE consumer = ",
        first.consumer,
        &entities,
    );
    marked.push(MARKED);
    let found: Vec<(Vec<u8>, Vec<u8>)> = marked.build_query_as().fetch_all(&mut *conn).await?;
    let existing = found
        .into_iter()
        .map(|(aggregate_type, aggregate_id)| Ok((text(aggregate_type)?, text(aggregate_id)?)))
        .collect::<Res<HashSet<(String, String)>>>()?;
    let mut unmark = where_entities(
        "UPDATE idem_versions SET dedup_key = SUBSTRING(dedup_key, 2) WHERE consumer = ",
        first.consumer,
        &entities,
    );
    unmark.push(MARKED);
    unmark.build().execute(&mut *conn).await?;
    Ok(rows
        .iter()
        .filter(|row| {
            !existing.contains(&(row.aggregate_type.to_owned(), row.aggregate_id.to_owned()))
        })
        .copied()
        .collect())
}

/// The entities of `entities` that have a row, locked until the transaction ends.
async fn locked_entities(
    conn: impl MySqlExecutor<'_>,
    consumer: &str,
    entities: &[(&str, &str)],
) -> Res<HashSet<(String, String)>> {
    let mut query = select_locked("aggregate_type, aggregate_id", consumer, entities);
    let found: Vec<(Vec<u8>, Vec<u8>)> = query.build_query_as().fetch_all(conn).await?;
    found
        .into_iter()
        .map(|(aggregate_type, aggregate_id)| Ok((text(aggregate_type)?, text(aggregate_id)?)))
        .collect()
}

/// Writes `rows` over their entities' rows: one UPDATE joined with the new values, given as a
/// derived table of `SELECT … UNION ALL SELECT …` (MySQL 8.0 and MariaDB spell `VALUES` rows
/// differently).
pub(super) async fn update_versions(
    conn: &mut MySqlConnection,
    rows: &[VersionWrite<'_>],
) -> Res<()> {
    const FIRST: &str =
        "SELECT ? AS c1, ? AS c2, ? AS c3, ? AS c4, ? AS c5, ? AS c6, ? AS c7, ? AS c8";
    const NEXT: &str = " UNION ALL SELECT ?, ?, ?, ?, ?, ?, ?, ?";
    for chunk in rows.chunks(VERSION_ROWS_PER_STATEMENT) {
        if chunk.is_empty() {
            continue;
        }
        let sql = format!(
            "UPDATE idem_versions AS v JOIN ({FIRST}{}) AS w \
             ON v.consumer = w.c1 AND v.aggregate_type = w.c2 AND v.aggregate_id = w.c3 \
             SET v.version_kind = w.c4, v.version = w.c5, v.version_secondary = w.c6, \
                 v.dedup_key = w.c7, v.updated_at = w.c8",
            NEXT.repeat(chunk.len() - 1)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for row in chunk {
            query = query
                .bind(row.consumer)
                .bind(row.aggregate_type)
                .bind(row.aggregate_id)
                .bind(row.kind)
                .bind(row.version)
                .bind(row.secondary)
                .bind(row.dedup_key)
                .bind(row.now);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}
