//! Destination health, the circuit breaker, refused requests and alerts on MySQL. What must
//! happen once for the whole database is still a conditional write whose outcome says who did
//! it: the breaker's pause and an alert's firing are `INSERT`s whose duplicate key (1062) means
//! "someone did already", the probe's and a notification's claims are `UPDATE`s whose matched
//! row count says who holds them (their `WHERE` no longer matches once claimed).

use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::inserted;
use super::sql::text;
use crate::store::monitor::ops::MonitorOps;
use crate::store::monitor::{AlertRecord, AttemptRow};
use crate::store::{AlertChange, DueSend, PauseRow};

/// destination, since, limit.
const RECENT_ATTEMPTS: &str = "SELECT a.started_at, a.duration_ms, a.outcome, a.status, a.excerpt \
     FROM idem_gateway_attempts a JOIN idem_gateway_deliveries d ON d.id = a.delivery \
     WHERE d.destination = ? AND a.started_at >= ? \
     ORDER BY a.started_at DESC LIMIT ?";

/// destination, now.
const OLDEST_DUE: &str = "SELECT MIN(next_attempt_at) FROM idem_gateway_deliveries \
     WHERE destination = ? AND state IN ('pending', 'in_flight') AND next_attempt_at <= ?";

const PAUSE_ROW: &str = concat!(
    "SELECT paused_at, auto, reason, last_errors, probe_at, cooldown_ms, ",
    text!("probe_owner", "probe_owner"),
    ", probe_until FROM idem_gateway_paused_destinations WHERE destination = ?"
);

/// destination, now, reason, last errors, probe at, cool-down.
const AUTO_PAUSE: &str = "INSERT INTO idem_gateway_paused_destinations \
     (destination, paused_at, auto, reason, last_errors, probe_at, cooldown_ms) \
     VALUES (?, ?, TRUE, ?, ?, ?, ?)";

/// owner, until, destination, now, now.
const CLAIM_PROBE: &str = "UPDATE idem_gateway_paused_destinations \
     SET probe_owner = ?, probe_until = ? \
     WHERE destination = ? AND auto AND probe_at <= ? \
     AND (probe_until IS NULL OR probe_until < ?)";

/// destination, owner.
const AUTO_RESUME: &str = "DELETE FROM idem_gateway_paused_destinations \
     WHERE destination = ? AND auto AND probe_owner = ?";

/// probe at, cool-down, last errors, destination, owner.
const PROBE_FAILED: &str = "UPDATE idem_gateway_paused_destinations \
     SET probe_at = ?, cooldown_ms = ?, last_errors = ?, probe_owner = NULL, probe_until = NULL \
     WHERE destination = ? AND auto AND probe_owner = ?";

/// destination, owner.
const RELEASE_PROBE: &str = "UPDATE idem_gateway_paused_destinations \
     SET probe_owner = NULL, probe_until = NULL WHERE destination = ? AND probe_owner = ?";

/// destination, now, now.
const NOTE_RESUME: &str = "INSERT INTO idem_gateway_destination_resumes (destination, resumed_at) \
     VALUES (?, ?) ON DUPLICATE KEY UPDATE resumed_at = ?";

const RESUMED_AT: &str =
    "SELECT resumed_at FROM idem_gateway_destination_resumes WHERE destination = ?";

/// second, source, reason, count, count.
const ADD_REJECTIONS: &str = "INSERT INTO idem_gateway_rejections (at, source, reason, count) \
     VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE count = count + ?";

const REJECTIONS_SINCE: &str = concat!(
    "SELECT at, ",
    text!("source", "source"),
    ", reason, count FROM idem_gateway_rejections WHERE at >= ? ORDER BY at"
);

const DEAD_SINCE: &str = concat!(
    "SELECT ",
    text!("d.destination", "destination"),
    ", COUNT(*) FROM idem_gateway_attempts a \
     JOIN idem_gateway_deliveries d ON d.id = a.delivery \
     WHERE a.outcome = 'dead' AND a.started_at >= ? GROUP BY d.destination"
);

const FIRE: &str = "INSERT INTO idem_gateway_alerts (`condition`, subject, fired_at, detail) \
     VALUES (?, ?, ?, ?)";

const CLEAR: &str = "DELETE FROM idem_gateway_alerts WHERE `condition` = ? AND subject = ?";

const FIRING: &str = concat!(
    "SELECT ",
    text!("`condition`", "`condition`"),
    ", ",
    text!("subject", "subject"),
    ", fired_at, detail FROM idem_gateway_alerts"
);

const LOG: &str = "INSERT INTO idem_gateway_alert_log (`condition`, subject, state, at, detail) \
     VALUES (?, ?, ?, ?, ?)";

const QUEUE_SEND: &str = "INSERT INTO idem_gateway_alert_sends (alert, sink, attempts, next_at) \
     VALUES (?, ?, 0, ?)";

const RECENT_ALERTS: &str = concat!(
    "SELECT id, ",
    text!("`condition`", "`condition`"),
    ", ",
    text!("subject", "subject"),
    ", state, at, detail FROM idem_gateway_alert_log ORDER BY id DESC LIMIT ?"
);

/// now, now, limit (as PostgreSQL's: per sink only the oldest unsent one).
const DUE_SENDS: &str = concat!(
    "SELECT s.alert, ",
    text!("s.sink", "sink"),
    ", s.attempts, ",
    text!("l.`condition`", "`condition`"),
    ", ",
    text!("l.subject", "subject"),
    ", l.state, l.at, l.detail FROM idem_gateway_alert_sends s \
     JOIN idem_gateway_alert_log l ON l.id = s.alert \
     WHERE s.sent_at IS NULL AND s.next_at <= ? \
     AND (s.claimed_until IS NULL OR s.claimed_until < ?) \
     AND NOT EXISTS (SELECT 1 FROM idem_gateway_alert_sends o \
       WHERE o.sink = s.sink AND o.sent_at IS NULL AND o.alert < s.alert) \
     ORDER BY s.alert LIMIT ?"
);

/// until, alert, sink, now.
const CLAIM_SEND: &str = "UPDATE idem_gateway_alert_sends SET claimed_until = ? \
     WHERE alert = ? AND sink = ? AND sent_at IS NULL \
     AND (claimed_until IS NULL OR claimed_until < ?)";

/// now, alert, sink.
const SEND_DONE: &str = "UPDATE idem_gateway_alert_sends \
     SET sent_at = ?, attempts = attempts + 1, claimed_until = NULL, last_error = NULL \
     WHERE alert = ? AND sink = ?";

/// next at, error, alert, sink.
const SEND_FAILED: &str = "UPDATE idem_gateway_alert_sends \
     SET attempts = attempts + 1, next_at = ?, claimed_until = NULL, last_error = ? \
     WHERE alert = ? AND sink = ?";

const DELETE_OLD_REJECTIONS: &str = "DELETE FROM idem_gateway_rejections WHERE at < ?";
const DELETE_OLD_SENDS: &str = "DELETE FROM idem_gateway_alert_sends WHERE sent_at IS NOT NULL \
     AND alert IN (SELECT id FROM idem_gateway_alert_log WHERE at < ?)";
const DELETE_OLD_ALERTS: &str = "DELETE FROM idem_gateway_alert_log WHERE at < ? \
     AND id NOT IN (SELECT alert FROM idem_gateway_alert_sends)";

impl MonitorOps for MySql {
    async fn recent_attempts(
        conn: &mut MySqlConnection,
        destination: &str,
        since: i64,
        limit: i64,
    ) -> Result<Vec<AttemptRow>, sqlx::Error> {
        sqlx::query_as(RECENT_ATTEMPTS)
            .bind(destination)
            .bind(since)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await
    }

    async fn oldest_due(
        conn: &mut MySqlConnection,
        destination: &str,
        now: i64,
    ) -> Result<Option<i64>, sqlx::Error> {
        sqlx::query_scalar(OLDEST_DUE)
            .bind(destination)
            .bind(now)
            .fetch_one(&mut *conn)
            .await
    }

    async fn pause_row(
        conn: &mut MySqlConnection,
        destination: &str,
    ) -> Result<Option<PauseRow>, sqlx::Error> {
        sqlx::query_as(PAUSE_ROW)
            .bind(destination)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn auto_pause(
        conn: &mut MySqlConnection,
        destination: &str,
        (now, reason, last_errors, probe_at, cooldown_ms): (i64, &str, &str, i64, i64),
    ) -> Result<bool, sqlx::Error> {
        inserted(
            sqlx::query(AUTO_PAUSE)
                .bind(destination)
                .bind(now)
                .bind(reason)
                .bind(last_errors)
                .bind(probe_at)
                .bind(cooldown_ms)
                .execute(&mut *conn)
                .await,
        )
    }

    async fn claim_probe(
        conn: &mut MySqlConnection,
        destination: &str,
        owner: &str,
        now: i64,
        until: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(CLAIM_PROBE)
            .bind(owner)
            .bind(until)
            .bind(destination)
            .bind(now)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn auto_resume(
        conn: &mut MySqlConnection,
        destination: &str,
        owner: &str,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(AUTO_RESUME)
            .bind(destination)
            .bind(owner)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn probe_failed(
        conn: &mut MySqlConnection,
        destination: &str,
        owner: &str,
        (probe_at, cooldown_ms, last_errors): (i64, i64, &str),
    ) -> Result<(), sqlx::Error> {
        sqlx::query(PROBE_FAILED)
            .bind(probe_at)
            .bind(cooldown_ms)
            .bind(last_errors)
            .bind(destination)
            .bind(owner)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn release_probe(
        conn: &mut MySqlConnection,
        destination: &str,
        owner: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(RELEASE_PROBE)
            .bind(destination)
            .bind(owner)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn note_resume(
        conn: &mut MySqlConnection,
        destination: &str,
        now: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(NOTE_RESUME)
            .bind(destination)
            .bind(now)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn resumed_at(
        conn: &mut MySqlConnection,
        destination: &str,
    ) -> Result<Option<i64>, sqlx::Error> {
        sqlx::query_scalar(RESUMED_AT)
            .bind(destination)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn add_rejections(
        conn: &mut MySqlConnection,
        rows: &[(i64, String, &'static str, i64)],
    ) -> Result<(), sqlx::Error> {
        for (second, source, reason, count) in rows {
            sqlx::query(ADD_REJECTIONS)
                .bind(*second)
                .bind(source.as_str())
                .bind(*reason)
                .bind(*count)
                .bind(*count)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    async fn rejections_since(
        conn: &mut MySqlConnection,
        since: i64,
    ) -> Result<Vec<(i64, String, String, i64)>, sqlx::Error> {
        sqlx::query_as(REJECTIONS_SINCE)
            .bind(since)
            .fetch_all(&mut *conn)
            .await
    }

    async fn dead_since(
        conn: &mut MySqlConnection,
        since: i64,
    ) -> Result<Vec<(String, i64)>, sqlx::Error> {
        sqlx::query_as(DEAD_SINCE)
            .bind(since)
            .fetch_all(&mut *conn)
            .await
    }

    async fn fire(
        conn: &mut MySqlConnection,
        change: &AlertChange<'_>,
    ) -> Result<bool, sqlx::Error> {
        let fired = inserted(
            sqlx::query(FIRE)
                .bind(change.condition)
                .bind(change.subject)
                .bind(change.at)
                .bind(change.detail)
                .execute(&mut *conn)
                .await,
        )?;
        if !fired {
            return Ok(false);
        }
        Self::log_and_queue(conn, change, "fired").await?;
        Ok(true)
    }

    async fn clear(
        conn: &mut MySqlConnection,
        change: &AlertChange<'_>,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(CLEAR)
            .bind(change.condition)
            .bind(change.subject)
            .execute(&mut *conn)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        Self::log_and_queue(conn, change, "cleared").await?;
        Ok(true)
    }

    async fn firing(
        conn: &mut MySqlConnection,
    ) -> Result<Vec<(String, String, i64, String)>, sqlx::Error> {
        sqlx::query_as(FIRING).fetch_all(&mut *conn).await
    }

    async fn recent_alerts(
        conn: &mut MySqlConnection,
        limit: i64,
    ) -> Result<Vec<AlertRecord>, sqlx::Error> {
        sqlx::query_as(RECENT_ALERTS)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await
    }

    async fn delete_old(conn: &mut MySqlConnection, before: i64) -> Result<u64, sqlx::Error> {
        let done = sqlx::query(DELETE_OLD_REJECTIONS)
            .bind(before)
            .execute(&mut *conn)
            .await?;
        for statement in [DELETE_OLD_SENDS, DELETE_OLD_ALERTS] {
            sqlx::query(statement)
                .bind(before)
                .execute(&mut *conn)
                .await?;
        }
        Ok(done.rows_affected())
    }

    async fn log_and_queue(
        conn: &mut MySqlConnection,
        change: &AlertChange<'_>,
        state: &'static str,
    ) -> Result<(), sqlx::Error> {
        // One row: its id is the statement's own `LAST_INSERT_ID()`, whatever the lock mode.
        let done = sqlx::query(LOG)
            .bind(change.condition)
            .bind(change.subject)
            .bind(state)
            .bind(change.at)
            .bind(change.detail)
            .execute(&mut *conn)
            .await?;
        let id =
            i64::try_from(done.last_insert_id()).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        for sink in change.sinks {
            sqlx::query(QUEUE_SEND)
                .bind(id)
                .bind(*sink)
                .bind(change.at)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    async fn due_sends(
        conn: &mut MySqlConnection,
        now: i64,
        limit: i64,
    ) -> Result<Vec<DueSend>, sqlx::Error> {
        sqlx::query_as(DUE_SENDS)
            .bind(now)
            .bind(now)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await
    }

    async fn claim_send(
        conn: &mut MySqlConnection,
        (alert, sink): (i64, &str),
        now: i64,
        until: i64,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(CLAIM_SEND)
            .bind(until)
            .bind(alert)
            .bind(sink)
            .bind(now)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn send_done(
        conn: &mut MySqlConnection,
        (alert, sink): (i64, &str),
        now: i64,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(SEND_DONE)
            .bind(now)
            .bind(alert)
            .bind(sink)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    async fn send_failed(
        conn: &mut MySqlConnection,
        (alert, sink): (i64, &str),
        next_at: i64,
        error: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(SEND_FAILED)
            .bind(next_at)
            .bind(error)
            .bind(alert)
            .bind(sink)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
