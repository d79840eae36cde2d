//! The statements of destination health, the circuit breaker, refused requests and alerts
//! (issue 31, migration 0014), the same SQL on SQLite and PostgreSQL.
//!
//! Everything that must happen once for the whole database is a conditional write whose row
//! count says who did it: the breaker's pause is an `INSERT … ON CONFLICT DO NOTHING`, a probe
//! is an `UPDATE` that claims the pause row until a time, an alert fires with the `INSERT` that
//! adds its row and clears with the `DELETE` that removes it, and a notification is sent by the
//! process whose `UPDATE` claimed it.

use std::future::Future;

use crate::model::health::{Assessment, Health, Sample, Thresholds, assess};

/// A destination's attempts started at $2 or later, newest first, at most $3.
const RECENT_ATTEMPTS: &str = "SELECT a.started_at, a.duration_ms, a.outcome, a.status, a.excerpt \
     FROM idem_gateway_attempts a JOIN idem_gateway_deliveries d ON d.id = a.delivery \
     WHERE d.destination = $1 AND a.started_at >= $2 \
     ORDER BY a.started_at DESC LIMIT $3";

/// Since when destination $1's delivery due the longest at $2 is due.
const OLDEST_DUE: &str = "SELECT MIN(next_attempt_at) FROM idem_gateway_deliveries \
     WHERE destination = $1 AND state IN ('pending', 'in_flight') AND next_attempt_at <= $2";

/// Destination $1's pause, as the breaker reads it.
const PAUSE_ROW: &str = "SELECT paused_at, auto, reason, last_errors, probe_at, cooldown_ms, \
     probe_owner, probe_until FROM idem_gateway_paused_destinations WHERE destination = $1";

/// The breaker pauses destination $1 at $2, unless it is paused already (by anyone).
const AUTO_PAUSE: &str = "INSERT INTO idem_gateway_paused_destinations \
     (destination, paused_at, auto, reason, last_errors, probe_at, cooldown_ms) \
     VALUES ($1, $2, TRUE, $3, $4, $5, $6) ON CONFLICT (destination) DO NOTHING";

/// Process $2 claims the probe of auto-paused destination $1 at $3 until $4: only when it is
/// due and no other holds it.
const CLAIM_PROBE: &str = "UPDATE idem_gateway_paused_destinations \
     SET probe_owner = $2, probe_until = $4 \
     WHERE destination = $1 AND auto AND probe_at <= $3 \
     AND (probe_until IS NULL OR probe_until < $3)";

/// The probe of $2 succeeded: the automatic pause ends, unless an operator took it over.
const AUTO_RESUME: &str = "DELETE FROM idem_gateway_paused_destinations \
     WHERE destination = $1 AND auto AND probe_owner = $2";

/// The probe of $2 failed: the next one at $3 after a cool-down of $4 ms; $5 the last errors.
const PROBE_FAILED: &str = "UPDATE idem_gateway_paused_destinations \
     SET probe_at = $3, cooldown_ms = $4, last_errors = $5, probe_owner = NULL, probe_until = NULL \
     WHERE destination = $1 AND auto AND probe_owner = $2";

/// $2 gives its probe back unused (nothing waited): the next tick claims it again.
const RELEASE_PROBE: &str = "UPDATE idem_gateway_paused_destinations \
     SET probe_owner = NULL, probe_until = NULL \
     WHERE destination = $1 AND probe_owner = $2";

/// Destination $1 was resumed at $2.
const NOTE_RESUME: &str = "INSERT INTO idem_gateway_destination_resumes (destination, resumed_at) \
     VALUES ($1, $2) ON CONFLICT (destination) DO UPDATE SET resumed_at = excluded.resumed_at";

/// When destination $1 was last resumed.
const RESUMED_AT: &str =
    "SELECT resumed_at FROM idem_gateway_destination_resumes WHERE destination = $1";

/// Adds $4 refusals of source $2 for reason $3 in the second starting at $1.
const ADD_REJECTIONS: &str = "INSERT INTO idem_gateway_rejections (at, source, reason, count) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (at, source, reason) \
     DO UPDATE SET count = idem_gateway_rejections.count + excluded.count";

/// Refusals per second, source and reason from $1 on.
const REJECTIONS_SINCE: &str = "SELECT at, source, reason, count FROM idem_gateway_rejections \
     WHERE at >= $1 ORDER BY at";

/// Dead letters made per destination since $1: attempts whose outcome made one.
const DEAD_SINCE: &str = "SELECT d.destination, COUNT(*) FROM idem_gateway_attempts a \
     JOIN idem_gateway_deliveries d ON d.id = a.delivery \
     WHERE a.outcome = 'dead' AND a.started_at >= $1 GROUP BY d.destination";

const FIRE: &str = "INSERT INTO idem_gateway_alerts (condition, subject, fired_at, detail) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (condition, subject) DO NOTHING";

const CLEAR: &str = "DELETE FROM idem_gateway_alerts WHERE condition = $1 AND subject = $2";

const FIRING: &str = "SELECT condition, subject, fired_at, detail FROM idem_gateway_alerts";

const LOG: &str = "INSERT INTO idem_gateway_alert_log (condition, subject, state, at, detail) \
     VALUES ($1, $2, $3, $4, $5) RETURNING id";

const QUEUE_SEND: &str = "INSERT INTO idem_gateway_alert_sends (alert, sink, attempts, next_at) \
     VALUES ($1, $2, 0, $3)";

const RECENT_ALERTS: &str = "SELECT id, condition, subject, state, at, detail \
     FROM idem_gateway_alert_log ORDER BY id DESC LIMIT $1";

/// Notifications due at $1, unclaimed (or their claim lapsed), oldest first: per sink only the
/// oldest unsent one, so that a sink gets its notifications in the order the alerts changed
/// (a "cleared" never before its "fired"), whatever the retries in between.
const DUE_SENDS: &str = "SELECT s.alert, s.sink, s.attempts, l.condition, l.subject, l.state, \
     l.at, l.detail FROM idem_gateway_alert_sends s \
     JOIN idem_gateway_alert_log l ON l.id = s.alert \
     WHERE s.sent_at IS NULL AND s.next_at <= $1 \
     AND (s.claimed_until IS NULL OR s.claimed_until < $1) \
     AND NOT EXISTS (SELECT 1 FROM idem_gateway_alert_sends o \
       WHERE o.sink = s.sink AND o.sent_at IS NULL AND o.alert < s.alert) \
     ORDER BY s.alert LIMIT $2";

const CLAIM_SEND: &str = "UPDATE idem_gateway_alert_sends SET claimed_until = $4 \
     WHERE alert = $1 AND sink = $2 AND sent_at IS NULL \
     AND (claimed_until IS NULL OR claimed_until < $3)";

const SEND_DONE: &str = "UPDATE idem_gateway_alert_sends \
     SET sent_at = $3, attempts = attempts + 1, claimed_until = NULL, last_error = NULL \
     WHERE alert = $1 AND sink = $2";

const SEND_FAILED: &str = "UPDATE idem_gateway_alert_sends \
     SET attempts = attempts + 1, next_at = $3, claimed_until = NULL, last_error = $4 \
     WHERE alert = $1 AND sink = $2";

/// `idem gc`: refusals from before $1, and alerts logged before $1 once every notification of
/// theirs was sent (an unsent one is kept, still retried).
const DELETE_OLD_REJECTIONS: &str = "DELETE FROM idem_gateway_rejections WHERE at < $1";
const DELETE_OLD_SENDS: &str = "DELETE FROM idem_gateway_alert_sends WHERE sent_at IS NOT NULL \
     AND alert IN (SELECT id FROM idem_gateway_alert_log WHERE at < $1)";
const DELETE_OLD_ALERTS: &str = "DELETE FROM idem_gateway_alert_log WHERE at < $1 \
     AND id NOT IN (SELECT alert FROM idem_gateway_alert_sends)";

/// One attempt as the health reads it: (started at, duration ms, outcome, status, excerpt).
pub(crate) type AttemptRow = (i64, i64, String, Option<i64>, String);

/// A destination's pause as the breaker reads it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PauseRow {
    pub paused_at: i64,
    /// Made by the circuit breaker (not an operator).
    pub auto: bool,
    pub reason: Option<String>,
    /// A JSON list of the last errors.
    pub last_errors: Option<String>,
    pub probe_at: Option<i64>,
    pub cooldown_ms: Option<i64>,
    pub probe_owner: Option<String>,
    pub probe_until: Option<i64>,
}

/// One alert firing or clearing.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AlertRecord {
    pub id: i64,
    pub condition: String,
    pub subject: String,
    /// `fired` or `cleared`.
    pub state: String,
    pub at: i64,
    pub detail: String,
}

/// A notification due: its alert and sink, attempts so far, and the alert.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DueSend {
    pub alert: i64,
    pub sink: String,
    pub attempts: i64,
    pub condition: String,
    pub subject: String,
    pub state: String,
    pub at: i64,
    pub detail: String,
}

/// An alert's change: (condition, subject, at, detail), and the sinks to notify.
#[derive(Debug)]
pub struct AlertChange<'a> {
    pub condition: &'a str,
    pub subject: &'a str,
    pub at: i64,
    pub detail: &'a str,
    pub sinks: &'a [&'a str],
}

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait MonitorOps: sqlx::Database + Sized {
        /// `destination`'s attempts started at `since` or later, newest first, at most `limit`.
        fn recent_attempts(
            conn: &mut Self::Connection,
            destination: &str,
            since: i64,
            limit: i64,
        ) -> impl Future<Output = Res<Vec<AttemptRow>>> + Send;
        /// Since when `destination`'s delivery due the longest at `now` is due.
        fn oldest_due(
            conn: &mut Self::Connection,
            destination: &str,
            now: i64,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;
        /// `destination`'s pause row, if paused.
        fn pause_row(
            conn: &mut Self::Connection,
            destination: &str,
        ) -> impl Future<Output = Res<Option<PauseRow>>> + Send;
        /// The breaker pauses `destination`; returns whether this call did (it was running).
        /// `pause` is (now, reason, last errors, probe at, cool-down ms).
        fn auto_pause(
            conn: &mut Self::Connection,
            destination: &str,
            pause: (i64, &str, &str, i64, i64),
        ) -> impl Future<Output = Res<bool>> + Send;
        /// `owner` claims `destination`'s due probe at `now` until `until`; whether it did.
        fn claim_probe(
            conn: &mut Self::Connection,
            destination: &str,
            owner: &str,
            now: i64,
            until: i64,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// `owner`'s probe delivered: ends the automatic pause; whether it did.
        fn auto_resume(
            conn: &mut Self::Connection,
            destination: &str,
            owner: &str,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// `owner`'s probe failed: the next at `probe_at` after `cooldown_ms`.
        fn probe_failed(
            conn: &mut Self::Connection,
            destination: &str,
            owner: &str,
            probe: (i64, i64, &str),
        ) -> impl Future<Output = Res<()>> + Send;
        /// `owner` gives its probe back unused.
        fn release_probe(
            conn: &mut Self::Connection,
            destination: &str,
            owner: &str,
        ) -> impl Future<Output = Res<()>> + Send;
        /// Notes that `destination` was resumed at `now`.
        fn note_resume(
            conn: &mut Self::Connection,
            destination: &str,
            now: i64,
        ) -> impl Future<Output = Res<()>> + Send;
        /// When `destination` was last resumed.
        fn resumed_at(
            conn: &mut Self::Connection,
            destination: &str,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;
        /// Adds refusals: (second, source, reason, count).
        fn add_rejections(
            conn: &mut Self::Connection,
            rows: &[(i64, String, &'static str, i64)],
        ) -> impl Future<Output = Res<()>> + Send;
        /// Refusals per (second, source, reason) from `since` on.
        fn rejections_since(
            conn: &mut Self::Connection,
            since: i64,
        ) -> impl Future<Output = Res<Vec<(i64, String, String, i64)>>> + Send;
        /// Dead letters made per destination since `since`.
        fn dead_since(
            conn: &mut Self::Connection,
            since: i64,
        ) -> impl Future<Output = Res<Vec<(String, i64)>>> + Send;
        /// Fires `change` once for the database: whether this call fired it (then it is
        /// logged and queued for every sink, in the same statements' transaction).
        fn fire(
            conn: &mut Self::Connection,
            change: &AlertChange<'_>,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// Clears `change` once for the database: whether this call cleared it.
        fn clear(
            conn: &mut Self::Connection,
            change: &AlertChange<'_>,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// The alerts firing now: (condition, subject, fired at, detail).
        fn firing(
            conn: &mut Self::Connection,
        ) -> impl Future<Output = Res<Vec<(String, String, i64, String)>>> + Send;
        /// The latest `limit` firings and clearings, newest first.
        fn recent_alerts(
            conn: &mut Self::Connection,
            limit: i64,
        ) -> impl Future<Output = Res<Vec<AlertRecord>>> + Send;
        /// Deletes refusals and finished alerts from before `before`; returns the refusal rows
        /// deleted.
        fn delete_old(
            conn: &mut Self::Connection,
            before: i64,
        ) -> impl Future<Output = Res<u64>> + Send;
        /// Logs `change` as `state` (`fired`, `cleared`) and queues it for every sink.
        fn log_and_queue(
            conn: &mut Self::Connection,
            change: &AlertChange<'_>,
            state: &'static str,
        ) -> impl Future<Output = Res<()>> + Send;
        /// Notifications due at `now`, at most `limit`.
        fn due_sends(
            conn: &mut Self::Connection,
            now: i64,
            limit: i64,
        ) -> impl Future<Output = Res<Vec<DueSend>>> + Send;
        /// Claims a notification at `now` until `until`; whether this call did.
        fn claim_send(
            conn: &mut Self::Connection,
            send: (i64, &str),
            now: i64,
            until: i64,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// Records a notification sent at `now`.
        fn send_done(
            conn: &mut Self::Connection,
            send: (i64, &str),
            now: i64,
        ) -> impl Future<Output = Res<()>> + Send;
        /// Records a failed notification, due again at `next_at`.
        fn send_failed(
            conn: &mut Self::Connection,
            send: (i64, &str),
            next_at: i64,
            error: &str,
        ) -> impl Future<Output = Res<()>> + Send;
    }
}

macro_rules! monitor_ops {
    ($db:ty) => {
        impl ops::MonitorOps for $db {
            async fn recent_attempts(
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
                destination: &str,
            ) -> Result<Option<PauseRow>, sqlx::Error> {
                sqlx::query_as(PAUSE_ROW)
                    .bind(destination)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn auto_pause(
                conn: &mut Self::Connection,
                destination: &str,
                (now, reason, last_errors, probe_at, cooldown_ms): (i64, &str, &str, i64, i64),
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(AUTO_PAUSE)
                    .bind(destination)
                    .bind(now)
                    .bind(reason)
                    .bind(last_errors)
                    .bind(probe_at)
                    .bind(cooldown_ms)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn claim_probe(
                conn: &mut Self::Connection,
                destination: &str,
                owner: &str,
                now: i64,
                until: i64,
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(CLAIM_PROBE)
                    .bind(destination)
                    .bind(owner)
                    .bind(now)
                    .bind(until)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn auto_resume(
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
                destination: &str,
                owner: &str,
                (probe_at, cooldown_ms, last_errors): (i64, i64, &str),
            ) -> Result<(), sqlx::Error> {
                sqlx::query(PROBE_FAILED)
                    .bind(destination)
                    .bind(owner)
                    .bind(probe_at)
                    .bind(cooldown_ms)
                    .bind(last_errors)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            async fn release_probe(
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
                destination: &str,
                now: i64,
            ) -> Result<(), sqlx::Error> {
                sqlx::query(NOTE_RESUME)
                    .bind(destination)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            async fn resumed_at(
                conn: &mut Self::Connection,
                destination: &str,
            ) -> Result<Option<i64>, sqlx::Error> {
                sqlx::query_scalar(RESUMED_AT)
                    .bind(destination)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn add_rejections(
                conn: &mut Self::Connection,
                rows: &[(i64, String, &'static str, i64)],
            ) -> Result<(), sqlx::Error> {
                for (minute, source, reason, count) in rows {
                    sqlx::query(ADD_REJECTIONS)
                        .bind(*minute)
                        .bind(source.as_str())
                        .bind(*reason)
                        .bind(*count)
                        .execute(&mut *conn)
                        .await?;
                }
                Ok(())
            }

            async fn rejections_since(
                conn: &mut Self::Connection,
                since: i64,
            ) -> Result<Vec<(i64, String, String, i64)>, sqlx::Error> {
                sqlx::query_as(REJECTIONS_SINCE)
                    .bind(since)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn dead_since(
                conn: &mut Self::Connection,
                since: i64,
            ) -> Result<Vec<(String, i64)>, sqlx::Error> {
                sqlx::query_as(DEAD_SINCE)
                    .bind(since)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn fire(
                conn: &mut Self::Connection,
                change: &AlertChange<'_>,
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(FIRE)
                    .bind(change.condition)
                    .bind(change.subject)
                    .bind(change.at)
                    .bind(change.detail)
                    .execute(&mut *conn)
                    .await?;
                if done.rows_affected() != 1 {
                    return Ok(false);
                }
                Self::log_and_queue(conn, change, "fired").await?;
                Ok(true)
            }

            async fn clear(
                conn: &mut Self::Connection,
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
                conn: &mut Self::Connection,
            ) -> Result<Vec<(String, String, i64, String)>, sqlx::Error> {
                sqlx::query_as(FIRING).fetch_all(&mut *conn).await
            }

            async fn recent_alerts(
                conn: &mut Self::Connection,
                limit: i64,
            ) -> Result<Vec<AlertRecord>, sqlx::Error> {
                sqlx::query_as(RECENT_ALERTS)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn delete_old(
                conn: &mut Self::Connection,
                before: i64,
            ) -> Result<u64, sqlx::Error> {
                let done = sqlx::query(DELETE_OLD_REJECTIONS)
                    .bind(before)
                    .execute(&mut *conn)
                    .await?;
                for sql in [DELETE_OLD_SENDS, DELETE_OLD_ALERTS] {
                    sqlx::query(sql).bind(before).execute(&mut *conn).await?;
                }
                Ok(done.rows_affected())
            }

            async fn log_and_queue(
                conn: &mut Self::Connection,
                change: &AlertChange<'_>,
                state: &'static str,
            ) -> Result<(), sqlx::Error> {
                let id: i64 = sqlx::query_scalar(LOG)
                    .bind(change.condition)
                    .bind(change.subject)
                    .bind(state)
                    .bind(change.at)
                    .bind(change.detail)
                    .fetch_one(&mut *conn)
                    .await?;
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
                conn: &mut Self::Connection,
                now: i64,
                limit: i64,
            ) -> Result<Vec<DueSend>, sqlx::Error> {
                sqlx::query_as(DUE_SENDS)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&mut *conn)
                    .await
            }

            async fn claim_send(
                conn: &mut Self::Connection,
                (alert, sink): (i64, &str),
                now: i64,
                until: i64,
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(CLAIM_SEND)
                    .bind(alert)
                    .bind(sink)
                    .bind(now)
                    .bind(until)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn send_done(
                conn: &mut Self::Connection,
                (alert, sink): (i64, &str),
                now: i64,
            ) -> Result<(), sqlx::Error> {
                sqlx::query(SEND_DONE)
                    .bind(alert)
                    .bind(sink)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }

            async fn send_failed(
                conn: &mut Self::Connection,
                (alert, sink): (i64, &str),
                next_at: i64,
                error: &str,
            ) -> Result<(), sqlx::Error> {
                sqlx::query(SEND_FAILED)
                    .bind(alert)
                    .bind(sink)
                    .bind(next_at)
                    .bind(error)
                    .execute(&mut *conn)
                    .await?;
                Ok(())
            }
        }
    };
}

monitor_ops!(sqlx::Sqlite);
monitor_ops!(sqlx::Postgres);

/// The most attempts the health reads per destination: the newest of its window.
const MAX_SAMPLES: i64 = 5_000;

/// How many failed attempts a pause keeps as its last errors.
const LAST_ERRORS: usize = 5;

/// Destination `name`'s health at `now` under `thresholds`, read from its attempts of the
/// window (since its last resume, if later) and its oldest due delivery, with the last failed attempts' errors (`503: …`,
/// newest first).
///
/// # Errors
/// The database's.
pub(crate) async fn destination_health<DB: super::GatewayDb>(
    conn: &mut DB::Connection,
    name: &str,
    thresholds: &Thresholds,
    now: i64,
) -> Result<(Assessment, Vec<String>), sqlx::Error> {
    let window = i64::try_from(thresholds.window.as_millis()).unwrap_or(i64::MAX);
    // Attempts before the last resume do not count: they paused it, or an operator judged them.
    let since = (now.saturating_sub(window)).max(DB::resumed_at(conn, name).await?.unwrap_or(0));
    let rows = DB::recent_attempts(conn, name, since, MAX_SAMPLES).await?;
    let oldest_due = DB::oldest_due(conn, name, now).await?;
    let samples: Vec<Sample> = rows
        .iter()
        .map(|(started_at, duration_ms, outcome, _, _)| Sample {
            started_at: *started_at,
            duration_ms: *duration_ms,
            delivered: outcome == "delivered",
        })
        .collect();
    let errors = rows
        .iter()
        .filter(|(_, _, outcome, _, _)| outcome != "delivered")
        .take(LAST_ERRORS)
        .map(|(_, _, _, status, excerpt)| match status {
            Some(status) => format!("{status}: {excerpt}"),
            None => excerpt.clone(),
        })
        .collect();
    let mut assessment = assess(&samples, oldest_due, thresholds, now);
    // While the breaker holds it paused, only its sparse probes are attempted: too few to
    // judge by, but a destination whose probes fail is still failing, not healthy. Its first
    // delivered probe resumes it.
    let latest_failed = samples
        .iter()
        .max_by_key(|s| s.started_at)
        .is_none_or(|s| !s.delivered);
    if assessment.health != Health::Failing
        && latest_failed
        && DB::pause_row(conn, name).await?.is_some_and(|row| row.auto)
    {
        assessment.health = Health::Failing;
        assessment.reason = Some("circuit breaker open: its probes have not been delivered".into());
    }
    Ok((assessment, errors))
}
