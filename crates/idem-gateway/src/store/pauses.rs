//! The paused destinations' statements (`idem_gateway_paused_destinations`, migration 0010),
//! the same SQL on SQLite and PostgreSQL.

use std::future::Future;

/// Pauses destination $1 at $2; pausing a paused destination keeps its first time. An
/// operator's pause of a destination the circuit breaker paused takes it over (`auto` turns
/// false), so that no automatic resume lifts it.
const PAUSE: &str = "INSERT INTO idem_gateway_paused_destinations (destination, paused_at) \
     VALUES ($1, $2) ON CONFLICT (destination) DO UPDATE SET auto = FALSE, probe_owner = NULL, \
     probe_until = NULL WHERE idem_gateway_paused_destinations.auto";

/// Resumes destination $1.
const RESUME: &str = "DELETE FROM idem_gateway_paused_destinations WHERE destination = $1";

/// Since when destination $1 is paused, if it is.
const PAUSED_SINCE: &str =
    "SELECT paused_at FROM idem_gateway_paused_destinations WHERE destination = $1";

/// Every paused destination with its time.
const PAUSED: &str = "SELECT destination, paused_at FROM idem_gateway_paused_destinations";

pub(crate) mod ops {
    use super::*;

    type Res<T> = Result<T, sqlx::Error>;

    pub trait PauseOps: sqlx::Database + Sized {
        /// Pauses `destination` at `now` (ms); returns whether it was running or paused by the
        /// circuit breaker only.
        fn pause(
            conn: &mut Self::Connection,
            destination: &str,
            now: i64,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// Resumes `destination`; returns whether it was paused.
        fn resume(
            conn: &mut Self::Connection,
            destination: &str,
        ) -> impl Future<Output = Res<bool>> + Send;
        /// Since when (ms) `destination` is paused, or `None` while it runs.
        fn paused_since(
            conn: &mut Self::Connection,
            destination: &str,
        ) -> impl Future<Output = Res<Option<i64>>> + Send;
        /// Every paused destination (those of this configuration or not) with its time.
        fn paused(
            conn: &mut Self::Connection,
        ) -> impl Future<Output = Res<Vec<(String, i64)>>> + Send;
    }
}

macro_rules! pause_ops {
    ($db:ty) => {
        impl ops::PauseOps for $db {
            async fn pause(
                conn: &mut Self::Connection,
                destination: &str,
                now: i64,
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(PAUSE)
                    .bind(destination)
                    .bind(now)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn resume(
                conn: &mut Self::Connection,
                destination: &str,
            ) -> Result<bool, sqlx::Error> {
                let done = sqlx::query(RESUME)
                    .bind(destination)
                    .execute(&mut *conn)
                    .await?;
                Ok(done.rows_affected() == 1)
            }

            async fn paused_since(
                conn: &mut Self::Connection,
                destination: &str,
            ) -> Result<Option<i64>, sqlx::Error> {
                sqlx::query_scalar(PAUSED_SINCE)
                    .bind(destination)
                    .fetch_optional(&mut *conn)
                    .await
            }

            async fn paused(
                conn: &mut Self::Connection,
            ) -> Result<Vec<(String, i64)>, sqlx::Error> {
                sqlx::query_as(PAUSED).fetch_all(&mut *conn).await
            }
        }
    };
}

pause_ops!(sqlx::Sqlite);
pause_ops!(sqlx::Postgres);
