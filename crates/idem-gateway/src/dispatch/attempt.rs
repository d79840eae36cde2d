//! One attempt of a claimed delivery: wait for a permit, send it through the destination's
//! transport, decide its next state (delivered, retried on the schedule, or dead), queue the
//! outcome for the group-committed write, log it, and wake the dispatcher when there is more
//! to claim.

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::Timestamp;
use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tracing::Instrument;

use super::attempted::{AttemptResult, Attempted};
use super::outcomes::Outcomes;
use super::schedule::{self, Next};
use super::transport::Transport;
use crate::config::Destination;
use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::lanes::probe::ProbeResult;
use crate::metric_definitions::{DISPATCH_DURATION_SECONDS, DISPATCH_TOTAL};
use crate::model::time::format_time;
use crate::store::{AttemptOutcome, DeliveryState, DueDelivery, Finished, GatewayDb};
use crate::traces;

/// The longest delay before a retry: the configuration's bound (7 days) plus the jitter.
const MAX_DELAY: Duration = Duration::from_secs(7 * 86_400 * 6 / 5);

/// What bounds a destination's attempts in this process: `slots`, the deliveries it holds a
/// claim on (waiting for a permit or being sent), twice `concurrency`, so that a batch is
/// claimed, or ingest hands a delivery over, while the last ones are still being sent; and
/// `permits`, the attempts being sent, `concurrency`. Both are fair (first come, first served),
/// so claimed deliveries start in the order they were claimed.
pub(super) struct Bounds {
    pub(super) slots: Arc<Semaphore>,
    pub(super) permits: Arc<Semaphore>,
}

impl Bounds {
    pub(super) fn new(concurrency: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(concurrency.saturating_mul(2))),
            permits: Arc::new(Semaphore::new(concurrency)),
        }
    }
}

/// A delivery this process claimed for attempt number `attempt`, until `until` (ms), under
/// `slot`.
pub(super) struct Claimed {
    pub(super) delivery: DueDelivery,
    pub(super) attempt: i64,
    pub(super) until: i64,
    pub(super) slot: OwnedSemaphorePermit,
    /// Sent as the circuit breaker's probe of a paused destination: its end is reported to the
    /// lane's probe.
    pub(super) probe: bool,
}

/// Starts `claimed`'s attempt once a permit is free. One that waited so long for it that the
/// attempt could outlast its claim is not sent: another holder may take it once the claim
/// lapses (a due query of this process or another's). The attempts that ended are reaped from
/// `tasks` first: a task's memory stays in the set until it is, and under a steady hand-off
/// the dispatcher can start thousands before its loop next comes round to reap them.
pub(super) fn start<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    transport: &Transport,
    outcomes: &Outcomes,
    bounds: &Bounds,
    claimed: Claimed,
    tasks: &mut JoinSet<()>,
) {
    let gateway = gateway.clone();
    let transport = transport.clone();
    let outcomes = outcomes.clone();
    let permits = Arc::clone(&bounds.permits);
    while tasks.try_join_next().is_some() {}
    tasks.spawn(async move {
        let Ok(permit) = permits.acquire_owned().await else {
            return;
        };
        let destination = outcomes.lane().destination();
        let timeout = i64::try_from(destination.timeout.as_millis()).unwrap_or(i64::MAX);
        if gateway.now().as_millis().saturating_add(timeout) > claimed.until {
            tracing::warn!(
                destination = %destination.name, source = %claimed.delivery.source,
                event_id = %claimed.delivery.event_id,
                "claimed delivery waited too long for a free attempt to be sent within its claim; it is sent again once the claim lapses"
            );
            drop(claimed);
            if outcomes.lane().handoff().take_owed_claim() {
                outcomes.lane().wake();
            }
            return;
        }
        let Claimed {
            delivery,
            attempt,
            slot,
            probe,
            ..
        } = claimed;
        send_one(
            &gateway,
            &transport,
            &outcomes,
            (delivery, attempt, probe),
            (permit, slot),
        )
        .await;
    });
}

async fn send_one<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    transport: &Transport,
    outcomes: &Outcomes,
    (mut delivery, attempt, probe): (DueDelivery, i64, bool),
    held: (OwnedSemaphorePermit, OwnedSemaphorePermit),
) {
    let destination = outcomes.lane().destination();
    let span = traces::dispatch_span(
        destination.name.as_str(),
        &delivery.source,
        &delivery.event_id,
        attempt,
    );
    let trace = traces::start_dispatch(
        &span,
        delivery.traceparent.take(),
        delivery.tracestate.take(),
    );
    let started_at = gateway.now();
    let clock = Instant::now();
    let attempted = transport
        .attempt(destination, &delivery, attempt, started_at, trace.as_ref())
        .instrument(span.clone())
        .await;
    let elapsed = clock.elapsed();
    let now = gateway.now();
    let (state, outcome, failures, next_attempt_at) =
        next_state(destination, &delivery, &attempted, now);
    traces::attempt_ended(&span, attempted.status, outcome.as_str());
    drop(span);
    let row = Finished {
        delivery: delivery.id,
        source: delivery.source.clone(),
        route: delivery.route.clone(),
        entity: delivery.entity.clone(),
        token: attempt,
        attempt,
        state,
        failures,
        next_attempt_at: next_attempt_at.as_millis(),
        started_at: started_at.as_millis(),
        duration_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        status: attempted.status.map(i64::from),
        outcome,
        excerpt: attempted.excerpt.clone(),
        now: now.as_millis(),
    };
    let logged = Logged {
        attempt,
        outcome,
        next_attempt_at: row.next_attempt_at,
    };
    // The permit and the slot bound the attempts at the destination: they are free once the
    // outcome is queued, while the queue (bounded) holds the attempts back if the writer falls
    // behind. The delivery stays in flight in its row until the outcome commits, so its
    // entity's next delivery still waits for that.
    let in_queue = outcomes.queue(row).await;
    drop(held);
    match in_queue.committed().await {
        Ok(true) => log_outcome(destination.name.as_str(), &delivery, &logged, &attempted),
        Ok(false) => tracing::info!(
            destination = %destination.name, source = %delivery.source, event_id = %delivery.event_id,
            "attempt outcome not recorded: the delivery's claim lapsed and another holder took it"
        ),
        Err(e) => tracing::error!(
            destination = %destination.name, source = %delivery.source, event_id = %delivery.event_id,
            error = %e, "attempt outcome not recorded; the delivery is tried again when its claim lapses"
        ),
    }
    if probe {
        outcomes
            .lane()
            .probe()
            .report(if outcome == AttemptOutcome::Delivered {
                ProbeResult::Delivered
            } else {
                ProbeResult::Failed(attempted.status.map(i64::from), attempted.excerpt.clone())
            });
    }
    metrics::counter!(DISPATCH_TOTAL, "destination" => destination.name.to_string(), "outcome" => outcome.as_str())
        .increment(1);
    metrics::histogram!(DISPATCH_DURATION_SECONDS, "destination" => destination.name.to_string())
        .record(elapsed.as_secs_f64());
    wake_if_needed(outcomes.lane(), &delivery, outcome);
}

/// Where `delivery` stands after `attempted` ended at `now`: its state, the attempt's
/// outcome, its failures and when it is next due (a retry on the schedule, with jitter).
fn next_state(
    destination: &Destination,
    delivery: &DueDelivery,
    attempted: &Attempted,
    now: Timestamp,
) -> (DeliveryState, AttemptOutcome, i64, Timestamp) {
    let dead = (
        DeliveryState::Dead,
        AttemptOutcome::Dead,
        delivery.failures + 1,
        now,
    );
    if attempted.result == AttemptResult::Delivered {
        (
            DeliveryState::Delivered,
            AttemptOutcome::Delivered,
            delivery.failures,
            now,
        )
    } else if attempted.result == AttemptResult::Permanent {
        dead
    } else {
        let jitter = rand::rng().random_range(-1.0..=1.0);
        match schedule::after_failure(
            &destination.retry_schedule,
            delivery.failures,
            attempted.retry_after,
            destination.retry_after_cap,
            jitter,
        ) {
            // Bounded, so that no delay (a destination built in code, a saturated jitter)
            // holds its entity for ever or overflows the clock.
            Next::Retry(delay) => (
                DeliveryState::Pending,
                AttemptOutcome::Retry,
                delivery.failures + 1,
                now.saturating_add(delay.min(MAX_DELAY)),
            ),
            Next::Dead => dead,
        }
    }
}

/// Wakes the dispatcher when there is something to claim after an attempt ended with
/// `outcome`.
fn wake_if_needed(lane: &Lane, delivery: &DueDelivery, outcome: AttemptOutcome) {
    // The dispatcher claims again when there is something to claim: deliveries stored pending
    // (the freed permit may take one), the next of this entity, or a new due time (a retry).
    let handoff = lane.handoff();
    let next_of_entity = (delivery.entity.as_deref())
        .is_some_and(|entity| handoff.is_waited_for(&delivery.route, entity));
    let owed = handoff.take_owed_claim();
    if outcome != AttemptOutcome::Delivered || next_of_entity || owed || handoff.backlog() {
        lane.wake();
    }
}

/// What the log says of a recorded attempt.
struct Logged {
    attempt: i64,
    outcome: AttemptOutcome,
    next_attempt_at: i64,
}

fn log_outcome(destination: &str, delivery: &DueDelivery, row: &Logged, attempted: &Attempted) {
    let status = attempted
        .status
        .map_or_else(|| "none".to_owned(), |s| s.to_string());
    match row.outcome {
        AttemptOutcome::Delivered => tracing::debug!(
            destination, source = %delivery.source, event_id = %delivery.event_id, attempt = row.attempt,
            "delivered"
        ),
        AttemptOutcome::Retry => tracing::warn!(
            destination, source = %delivery.source, event_id = %delivery.event_id, attempt = row.attempt,
            %status, excerpt = %attempted.excerpt, next_attempt_at = %format_time(row.next_attempt_at),
            "attempt failed; will retry"
        ),
        AttemptOutcome::Dead if attempted.result == AttemptResult::Retryable => tracing::error!(
            destination, source = %delivery.source, event_id = %delivery.event_id, attempt = row.attempt,
            %status, excerpt = %attempted.excerpt, "dead letter: every attempt of the schedule failed"
        ),
        AttemptOutcome::Dead => match attempted.status {
            Some(status) => tracing::error!(
                destination, source = %delivery.source, event_id = %delivery.event_id, attempt = row.attempt,
                status, excerpt = %attempted.excerpt,
                "dead letter at once: the destination refused the request with a 4xx that is not retried (only 408, 409, 425 and 429 are, unless the destination sets retry_4xx = true)"
            ),
            None => tracing::error!(
                destination, source = %delivery.source, event_id = %delivery.event_id, attempt = row.attempt,
                excerpt = %attempted.excerpt, "dead letter at once: the delivery cannot be sent"
            ),
        },
    }
}
