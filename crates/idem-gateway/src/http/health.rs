//! `/healthz` and `/readyz`: alive, and ready (every task runs and the store takes work).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::problem::Problem;
use crate::error::{Error, Task};
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// Ready when every task runs and the store takes work, answered within `readyz_timeout`: while
/// ingest works, a connection and `SELECT 1`; once a commit failed (a full disk, a database
/// away), a probe write, so that readiness comes back only when ingest does.
pub(crate) async fn readyz<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    if let Some(failure) = gateway.failure() {
        let (code, title) = match &failure {
            Error::TaskStopped {
                task: Task::Dispatcher { .. },
                ..
            } => ("dispatcher-stopped", "Dispatcher stopped"),
            _ => ("task-stopped", "Task stopped"),
        };
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code,
            title,
            failure.to_string(),
        )
        .into_response();
    }
    let deadline = gateway.config().readyz_timeout;
    let unavailable = |detail: String| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Store unavailable",
            detail,
        )
        .into_response()
    };
    match tokio::time::timeout(deadline, probe(&gateway)).await {
        Ok(Ok(())) => "ready".into_response(),
        Ok(Err(detail)) => unavailable(detail),
        Err(_) => unavailable(format!("the database did not answer within {deadline:?}")),
    }
}

/// `/readyz`'s probe of the store; the reason it is not usable.
async fn probe<DB: GatewayDb>(gateway: &Gateway<DB>) -> Result<(), String> {
    let health = gateway.health();
    let Some(failing) = health.failing() else {
        let mut conn = gateway
            .store()
            .pool()
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        return DB::probe_read(&mut conn).await.map_err(|e| e.to_string());
    };
    let write = async {
        let mut tx = gateway.store().begin().await?;
        DB::probe_write(&mut tx, gateway.now().as_millis()).await?;
        tx.commit().await?;
        Ok::<_, idem_sql::Error>(())
    };
    match write.await {
        Ok(()) => {
            health.recovered();
            Ok(())
        }
        Err(e) => Err(format!("{e} (ingest is failing: {failing})")),
    }
}
