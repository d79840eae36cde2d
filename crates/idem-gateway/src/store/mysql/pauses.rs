//! The paused destinations' statements on MySQL. An operator's pause is an `UPDATE` of a row
//! the circuit breaker made (taking it over), else an `INSERT` whose duplicate key (1062) means
//! "paused already": `ON DUPLICATE KEY UPDATE` has no `WHERE`, and with the found-rows count
//! sqlx's connections use it cannot tell a row it changed from one it left alone.

use sqlx::MySql;
use sqlx::mysql::MySqlConnection;

use super::inserted;
use super::sql::text;
use crate::store::pauses::ops::PauseOps;

/// Takes over destination ?'s automatic pause.
const TAKE_OVER: &str = "UPDATE idem_gateway_paused_destinations \
     SET auto = FALSE, probe_owner = NULL, probe_until = NULL WHERE destination = ? AND auto";

const PAUSE: &str =
    "INSERT INTO idem_gateway_paused_destinations (destination, paused_at) VALUES (?, ?)";

const RESUME: &str = "DELETE FROM idem_gateway_paused_destinations WHERE destination = ?";

const PAUSED_SINCE: &str =
    "SELECT paused_at FROM idem_gateway_paused_destinations WHERE destination = ?";

const PAUSED: &str = concat!(
    "SELECT ",
    text!("destination", "destination"),
    ", paused_at FROM idem_gateway_paused_destinations"
);

async fn take_over(conn: &mut MySqlConnection, destination: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(TAKE_OVER)
        .bind(destination)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

impl PauseOps for MySql {
    async fn pause(
        conn: &mut MySqlConnection,
        destination: &str,
        now: i64,
    ) -> Result<bool, sqlx::Error> {
        if take_over(conn, destination).await? {
            return Ok(true);
        }
        let fresh = inserted(
            sqlx::query(PAUSE)
                .bind(destination)
                .bind(now)
                .execute(&mut *conn)
                .await,
        )?;
        // Paused by someone between the two statements: the breaker's pause is taken over.
        Ok(fresh || take_over(conn, destination).await?)
    }

    async fn resume(conn: &mut MySqlConnection, destination: &str) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(RESUME)
            .bind(destination)
            .execute(&mut *conn)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn paused_since(
        conn: &mut MySqlConnection,
        destination: &str,
    ) -> Result<Option<i64>, sqlx::Error> {
        sqlx::query_scalar(PAUSED_SINCE)
            .bind(destination)
            .fetch_optional(&mut *conn)
            .await
    }

    async fn paused(conn: &mut MySqlConnection) -> Result<Vec<(String, i64)>, sqlx::Error> {
        sqlx::query_as(PAUSED).fetch_all(&mut *conn).await
    }
}
