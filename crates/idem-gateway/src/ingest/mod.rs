//! Ingest: claim each event's dedup key and store it durably with its deliveries, in group
//! commits, then answer (docs/design.md C2, C3, C11). Webhooks (`http::webhooks`, which
//! verifies and reads them first, C10) and broker sources submit here.

pub(crate) mod answer;
pub(crate) mod batch;
mod commit;
mod count;
mod decide;
pub(crate) mod unit;

use tokio::sync::{mpsc, oneshot};

use crate::gateway::Gateway;
use crate::store::GatewayDb;
use crate::traces;
use answer::Answer;
use unit::{Incoming, Pending, Unavailable, Unit};

/// How long past its deadline a request waits for the batcher before it gives up on its own.
const QUEUE_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Commits `incoming` through the group-commit `queue` (or alone, without one) and returns
/// its answer once committed: the one way webhooks and broker messages are stored.
///
/// # Errors
/// [`Unavailable`] when its batch could not be committed (logged once per batch) or the
/// batcher is gone (shutting down): nothing of it was stored.
pub(crate) async fn submit<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    queue: Option<&mpsc::Sender<Pending>>,
    incoming: Incoming,
) -> Result<Answer, Unavailable> {
    let mut answers = submit_unit(gateway, queue, Unit::one(incoming)).await?;
    answers.pop().ok_or(Unavailable)
}

/// Commits `unit` (its events, dead letters and offset advance, all or nothing) through the
/// group-commit `queue` (or alone, without one) and returns the answers of its events, in
/// order, once committed.
///
/// # Errors
/// As [`submit`]: nothing of the unit was stored.
pub(crate) async fn submit_unit<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    queue: Option<&mpsc::Sender<Pending>>,
    unit: Unit,
) -> Result<Vec<Answer>, Unavailable> {
    // The request's own deadline, from its arrival: a batch ahead of it that waits on the
    // database does not hold it past `database_timeout`.
    let timeout = gateway.config().database_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    match queue {
        Some(queue) => {
            let (reply, answer) = oneshot::channel();
            let queued = async {
                queue
                    .send(Pending {
                        unit,
                        reply,
                        deadline,
                    })
                    .await
                    .map_err(|_| Unavailable)?;
                answer.await.unwrap_or(Err(Unavailable))
            };
            // The batcher answers by the deadline (it leaves late requests out and ends its
            // commit in time); this bound is only for a queue that takes nothing, and a
            // request given up here is left out of any batch (its reply is closed).
            tokio::time::timeout_at(deadline + QUEUE_GRACE, queued)
                .await
                .unwrap_or(Err(Unavailable))
        }
        None => tokio::time::timeout_at(deadline, async {
            let span = traces::batch_span(unit.events.len());
            traces::link_to_batch(&span, unit.events.iter().map(|i| &i.span));
            batch::commit(gateway, std::slice::from_ref(&unit))
                .await
                .map(|mut answers| answers.remove(0))
                .map_err(|_| Unavailable)
        })
        .await
        .unwrap_or(Err(Unavailable)),
    }
}
