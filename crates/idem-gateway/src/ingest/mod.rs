//! Ingest: verify a webhook on its raw bytes and read its event ([`accept`], C10), then claim
//! each event's dedup key and store it durably with its deliveries, in group commits, and
//! answer (docs/design.md C2, C3, C11). Webhooks (`http::webhooks`, which maps what is refused
//! to problem+json) and broker sources submit here.

pub(crate) mod answer;
pub(crate) mod backfill;
pub(crate) mod batch;
mod commit;
mod count;
mod decide;
mod filter;
pub(crate) mod unit;

use bytes::Bytes;
use http::HeaderMap;
use idem_core::{DedupKey, Timestamp};
use idem_http::verify::VerifyError;
use tokio::sync::{mpsc, oneshot};

use crate::config::{Intake, Source};
use crate::gateway::Gateway;
use crate::model::fields::ExtractError;
use crate::store::GatewayDb;
use crate::traces::{self, TraceHeaders};
use answer::Answer;
use unit::{Incoming, Pending, Unavailable, Unit};

/// How long past its deadline a request waits for the batcher before it gives up on its own.
const QUEUE_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Why a webhook is refused before anything of it is stored.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The source takes no webhooks (it reads a broker).
    NoWebhooks,
    /// The signature, or its timestamp, failed the check (C10).
    Signature(VerifyError),
    /// The event's id, type, entity or version cannot be read.
    Event(ExtractError),
}

/// Verifies a webhook of `source` (index `index`) on its raw `body` as received, before
/// anything is parsed or stored (C10), then reads its event and dedup key: what the group commit
/// takes. `now` is its arrival, `trace` the context to store, `span` its `ingest` span (which
/// gets the event id).
///
/// # Errors
/// [`Refused`]: nothing of it was stored.
pub(crate) fn accept(
    source: &Source,
    index: usize,
    headers: &HeaderMap,
    body: Bytes,
    now: Timestamp,
    trace: Option<TraceHeaders>,
    span: &tracing::Span,
) -> Result<Incoming, Refused> {
    let Intake::Webhook(verifier) = &source.intake else {
        return Err(Refused::NoWebhooks);
    };
    verifier
        .verify(headers, &body, now)
        .map_err(Refused::Signature)?;
    let event = source
        .fields
        .extract(headers, &body)
        .map_err(Refused::Event)?;
    span.record("idem.event_id", event.event_id.as_str());
    let key = DedupKey::from_event(&source.dedup_scope, &event.event_id);
    Ok(Incoming {
        source: index,
        key,
        event,
        body,
        received_at: now.as_millis(),
        trace,
        span: span.clone(),
        filtered: Vec::new(),
    })
}

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
    mut unit: Unit,
) -> Result<Vec<Answer>, Unavailable> {
    let wiring = gateway.wiring();
    filter::apply(gateway, &wiring, &mut unit);
    // The request's own deadline, from its arrival: a batch ahead of it that waits on the
    // database does not hold it past `database_timeout`.
    let timeout = wiring.config().database_timeout;
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
            batch::commit(gateway, &wiring, std::slice::from_ref(&unit))
                .await
                .map(|mut answers| answers.remove(0))
                .map_err(|_| Unavailable)
        })
        .await
        .unwrap_or(Err(Unavailable)),
    }
}
