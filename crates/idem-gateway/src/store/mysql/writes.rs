//! The gateway's writes that MySQL cannot make in one statement as PostgreSQL does, made in
//! several inside the caller's transaction:
//!
//! - **no `RETURNING`**: the ids of new events and deliveries are read back by their unique
//!   keys (dedup key; event and destination) after a multi-row `INSERT`. `LAST_INSERT_ID()` of a
//!   multi-row insert gives consecutive ids only under `innodb_autoinc_lock_mode` 0 or 1
//!   (MariaDB's default is 1, MySQL 8's is 2, interleaved), and MariaDB's `INSERT … RETURNING`
//!   is not MySQL 8's: one indexed read works on both, whatever the server's settings;
//! - **no `ON CONFLICT DO NOTHING`**: the events already stored (by either unique key) are read
//!   first and left out of the `INSERT`; should another transaction store one in between (error
//!   1062), the batch is inserted row by row, each 1062 meaning "already there";
//! - **claims** lock the rows with `SELECT … FOR UPDATE SKIP LOCKED` in id order, and update
//!   those still due: a row another process is claiming or finishing is left out, as taken;
//! - **outcomes** lock their rows with `FOR UPDATE` in id order (waiting: an outcome must be
//!   written), compare each holder's fencing token, and write the ones still held with one
//!   `UPDATE … CASE id …`.

use std::collections::HashMap;

use sqlx::mysql::MySqlConnection;
use sqlx::{MySql, QueryBuilder};

use super::sql;
use super::{inserted, is_duplicate_key};
use crate::store::{DeliveryState, Finished, NewDelivery, NewEvent, ROWS_PER_INSERT};

type Res<T> = Result<T, sqlx::Error>;

/// Appends `?, ?, …` bound to `ids`, and `end`.
pub(super) fn push_ids(query: &mut QueryBuilder<MySql>, ids: &[i64], end: &str) {
    let mut list = query.separated(", ");
    for id in ids {
        list.push_bind(*id);
    }
    query.push(end);
}

fn push_event_values(query: &mut QueryBuilder<MySql>, rows: &[&NewEvent<'_>]) {
    query.push_values(rows, |mut values, row| {
        values
            .push_bind(row.source)
            .push_bind(row.event_id)
            .push_bind(row.event_type)
            .push_bind(row.aggregate_type)
            .push_bind(row.aggregate_id)
            .push_bind(row.version)
            .push_bind(row.body)
            .push_bind(row.headers)
            .push_bind(row.received_at)
            .push_bind(row.dedup_key)
            .push_bind(row.version_secondary)
            .push_bind(row.traceparent)
            .push_bind(row.tracestate)
            .push_bind(row.filtered_routes);
    });
}

/// Inserts one chunk of events; returns the dedup keys inserted.
async fn insert_event_chunk<'a>(
    conn: &mut MySqlConnection,
    chunk: &'a [NewEvent<'a>],
) -> Res<Vec<&'a str>> {
    let mut stored = QueryBuilder::<MySql>::new(sql::STORED_KEYS);
    let mut keys = stored.separated(", ");
    for row in chunk {
        keys.push_bind(row.dedup_key);
    }
    stored.push(") OR (source, event_id) IN (");
    let mut pairs = stored.separated(", ");
    for row in chunk {
        pairs
            .push("(")
            .push_bind_unseparated(row.source)
            .push_unseparated(", ")
            .push_bind_unseparated(row.event_id)
            .push_unseparated(")");
    }
    stored.push(")");
    let found: Vec<(String, String, String)> =
        stored.build_query_as().fetch_all(&mut *conn).await?;
    let fresh: Vec<&NewEvent<'_>> = chunk
        .iter()
        .filter(|row| {
            !found.iter().any(|(source, event_id, key)| {
                key == row.dedup_key || (source == row.source && event_id == row.event_id)
            })
        })
        .collect();
    if fresh.is_empty() {
        return Ok(Vec::new());
    }
    let mut insert = QueryBuilder::<MySql>::new(sql::INSERT_EVENTS);
    push_event_values(&mut insert, &fresh);
    match insert.build().execute(&mut *conn).await {
        Ok(_) => Ok(fresh.iter().map(|row| row.dedup_key).collect()),
        // Stored by another transaction since the read: InnoDB rolled back this statement
        // only; one row at a time, each duplicate left out.
        Err(e) if is_duplicate_key(&e) => {
            let mut keys = Vec::with_capacity(fresh.len());
            for row in fresh {
                let mut one = QueryBuilder::<MySql>::new(sql::INSERT_EVENTS);
                push_event_values(&mut one, &[row]);
                if inserted(one.build().execute(&mut *conn).await)? {
                    keys.push(row.dedup_key);
                }
            }
            Ok(keys)
        }
        Err(e) => Err(e),
    }
}

/// `Ops::insert_events`: each row's new id in `rows`' order, `None` where it is stored already.
pub(super) async fn insert_events(
    conn: &mut MySqlConnection,
    rows: &[NewEvent<'_>],
) -> Res<Vec<Option<i64>>> {
    let mut ids = HashMap::with_capacity(rows.len());
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let keys = insert_event_chunk(conn, chunk).await?;
        if keys.is_empty() {
            continue;
        }
        let mut query = QueryBuilder::<MySql>::new(sql::EVENT_IDS);
        let mut list = query.separated(", ");
        for key in &keys {
            list.push_bind(*key);
        }
        query.push(")");
        let stored: Vec<(i64, String)> = query.build_query_as().fetch_all(&mut *conn).await?;
        ids.extend(stored.into_iter().map(|(id, key)| (key, id)));
    }
    Ok(rows
        .iter()
        .map(|row| ids.get(row.dedup_key).copied())
        .collect())
}

/// `Ops::insert_deliveries`: each row's new id in `rows`' order.
pub(super) async fn insert_deliveries(
    conn: &mut MySqlConnection,
    rows: &[NewDelivery<'_>],
) -> Res<Vec<i64>> {
    let mut ids = HashMap::with_capacity(rows.len());
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut query = QueryBuilder::<MySql>::new(sql::INSERT_DELIVERIES);
        query.push_values(chunk, |mut values, row| {
            let (state, attempts, next_attempt_at, token) = match row.claimed_until {
                Some(until) => (DeliveryState::InFlight, 1_i64, until, Some(1_i64)),
                None => (row.state, 0, row.now, None),
            };
            values
                .push_bind(row.event)
                .push_bind(row.route)
                .push_bind(row.destination)
                .push_bind(state)
                .push_bind(row.entity)
                .push_bind(row.version)
                .push_bind(row.tie)
                .push_bind(row.note)
                .push_bind(attempts)
                .push_bind(0_i64)
                .push_bind(next_attempt_at)
                .push_bind(row.now)
                .push_bind(row.now)
                .push_bind(row.version_secondary)
                .push_bind(token);
        });
        query.build().execute(&mut *conn).await?;
        let mut events: Vec<i64> = chunk.iter().map(|row| row.event).collect();
        events.sort_unstable();
        events.dedup();
        let mut read = QueryBuilder::<MySql>::new(sql::DELIVERY_IDS);
        push_ids(&mut read, &events, ")");
        let stored: Vec<(i64, i64, String)> = read.build_query_as().fetch_all(&mut *conn).await?;
        ids.extend(
            stored
                .into_iter()
                .map(|(id, event, destination)| ((event, destination), id)),
        );
    }
    rows.iter()
        .map(|row| {
            ids.get(&(row.event, row.destination.to_owned()))
                .copied()
                .ok_or(sqlx::Error::RowNotFound)
        })
        .collect()
}

/// `Ops::start_attempts`: `(delivery, attempt)` of those of `ids` still due at `now` and not
/// locked by another transaction, each claimed until `until`.
pub(super) async fn start_attempts(
    conn: &mut MySqlConnection,
    ids: &[i64],
    until: i64,
    now: i64,
) -> Res<Vec<(i64, i64)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut lock = QueryBuilder::<MySql>::new(sql::LOCK_FOR_CLAIM);
    push_ids(&mut lock, ids, sql::LOCK_FOR_CLAIM_END);
    let rows: Vec<(i64, i64, String, i64)> = lock.build_query_as().fetch_all(&mut *conn).await?;
    let mut claimed: Vec<(i64, i64)> = rows
        .into_iter()
        .filter(|(_, _, state, due_at)| {
            (state == "pending" || state == "in_flight") && *due_at <= now
        })
        .map(|(id, attempts, _, _)| (id, attempts + 1))
        .collect();
    if claimed.is_empty() {
        return Ok(claimed);
    }
    claimed.sort_unstable();
    let ids: Vec<i64> = claimed.iter().map(|(id, _)| *id).collect();
    let mut update = QueryBuilder::<MySql>::new(sql::START_ATTEMPTS);
    update
        .push_bind(until)
        .push(", updated_at = ")
        .push_bind(now);
    update.push(" WHERE id IN (");
    push_ids(&mut update, &ids, ")");
    update.build().execute(&mut *conn).await?;
    Ok(claimed)
}

/// `Ops::finish_attempts`: the deliveries whose outcome was written (their holder still held
/// the claim), ascending.
pub(super) async fn finish_attempts(
    conn: &mut MySqlConnection,
    rows: &[&Finished],
) -> Res<Vec<i64>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<i64> = rows.iter().map(|row| row.delivery).collect();
    let mut lock = QueryBuilder::<MySql>::new(sql::LOCK_FOR_OUTCOME);
    push_ids(&mut lock, &ids, sql::LOCK_FOR_OUTCOME_END);
    let held: Vec<(i64, Option<i64>, String)> = lock.build_query_as().fetch_all(&mut *conn).await?;
    // Fenced by each holder's token: a holder whose claim lapsed and was taken over
    // changes nothing.
    let kept: Vec<&Finished> = rows
        .iter()
        .copied()
        .filter(|row| {
            held.iter().any(|(id, token, state)| {
                *id == row.delivery && *token == Some(row.token) && state == "in_flight"
            })
        })
        .collect();
    if kept.is_empty() {
        return Ok(Vec::new());
    }
    let mut update =
        QueryBuilder::<MySql>::new("UPDATE idem_gateway_deliveries SET state = CASE id");
    for row in &kept {
        update.push(" WHEN ").push_bind(row.delivery);
        update.push(" THEN ").push_bind(row.state);
    }
    update.push(" END, failures = CASE id");
    for row in &kept {
        update.push(" WHEN ").push_bind(row.delivery);
        update.push(" THEN ").push_bind(row.failures);
    }
    update.push(" END, next_attempt_at = CASE id");
    for row in &kept {
        update.push(" WHEN ").push_bind(row.delivery);
        update.push(" THEN ").push_bind(row.next_attempt_at);
    }
    update.push(" END, updated_at = CASE id");
    for row in &kept {
        update.push(" WHEN ").push_bind(row.delivery);
        update.push(" THEN ").push_bind(row.now);
    }
    update.push(" END, lease_token = NULL WHERE state = 'in_flight' AND id IN (");
    let written: Vec<i64> = kept.iter().map(|row| row.delivery).collect();
    push_ids(&mut update, &written, ")");
    update.build().execute(&mut *conn).await?;
    let mut insert = QueryBuilder::<MySql>::new(sql::INSERT_ATTEMPTS);
    insert.push_values(&kept, |mut values, row| {
        values
            .push_bind(row.delivery)
            .push_bind(row.attempt)
            .push_bind(row.started_at)
            .push_bind(row.duration_ms)
            .push_bind(row.status)
            .push_bind(row.outcome)
            .push_bind(row.excerpt.as_str());
    });
    insert.build().execute(&mut *conn).await?;
    let mut written = written;
    written.sort_unstable();
    Ok(written)
}
