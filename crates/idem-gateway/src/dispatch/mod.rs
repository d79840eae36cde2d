//! Dispatch: one task per destination sends due deliveries, at most `concurrency` at once and
//! one per entity in version order.
//!
//! Due deliveries are claimed in batches, one transaction per batch, in delivery-id order (so
//! that the batches of several gateway processes on one PostgreSQL database cannot deadlock).
//! A claim marks the row in flight until the attempt's timeout plus [`LEASE_MARGIN`] and takes
//! the attempt's number as its fencing token; the row's lock makes it atomic, so two processes
//! never send one delivery at the same time, and a holder that outlived its claim cannot
//! overwrite its successor's outcome. No connection is held during the HTTP attempt: the claim
//! commits before the requests go out, and the outcomes are written in group commits
//! ([`outcomes`]), so each destination holds at most two connections (one claiming, one
//! writing outcomes), each for one transaction.
//!
//! A paused destination claims nothing, and a `rate_limit` bounds how many deliveries are
//! claimed per second, on both paths ([`throttle`]). Whether a destination's claims and
//! outcome writes work now is kept in memory for the console's overview (`health`).

mod attempted;
mod outcomes;
pub(crate) mod schedule;
pub mod send;
mod transport;

pub use crate::lanes::{LEASE_MARGIN, throttle};

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

use idem_core::Timestamp;

use crate::config::Destination;
use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::metric_definitions::{
    DESTINATION_PAUSED, DISPATCH_CLAIMS_TOTAL, DISPATCH_DURATION_SECONDS,
    DISPATCH_RATE_LIMITED_TOTAL, DISPATCH_TOTAL,
};
use crate::model::time::format_time;
use crate::store::{AttemptOutcome, DeliveryState, DueDelivery, Finished, GatewayDb};
use crate::traces;
use attempted::{AttemptResult, Attempted};
use outcomes::Outcomes;
use schedule::Next;
use transport::Transport;

/// The pause before claiming again after a claim failed or timed out.
const ERROR_PAUSE: Duration = Duration::from_millis(250);

/// The longest delay before a retry: the configuration's bound (7 days) plus the jitter.
const MAX_DELAY: Duration = Duration::from_secs(7 * 86_400 * 6 / 5);

/// Runs destination `index`'s dispatcher until `shutdown` turns true, then waits for the
/// attempts in flight to finish and be recorded.
pub(crate) async fn run<DB: GatewayDb>(
    gateway: Gateway<DB>,
    index: usize,
    client: reqwest::Client,
    mut shutdown: watch::Receiver<bool>,
) {
    let destination = gateway.destination(index).clone();
    let transport = Transport::of(&destination, client);
    let bounds = Bounds::new(destination.concurrency);
    let lane = gateway.wiring().lane_arc(index);
    let handoff = lane.handoff();
    // At least 1, at most `concurrency`: an idle destination always claims.
    let low_water = destination.concurrency.div_ceil(2);
    let mut handed = handoff.open(Arc::clone(&bounds.slots), low_water);
    let poll = gateway.config().poll_interval;
    // A claim lasts LEASE_MARGIN past the attempt's timeout: the time an outcome may wait.
    let claim_ttl = match lane.claim_ttl() {
        Ok(ttl) => ttl,
        Err(e) => {
            tracing::error!(destination = %destination.name, error = %e, "destination timeout too long for a claim; nothing is sent");
            return;
        }
    };
    let (outcomes, writer) = Outcomes::start(
        gateway.clone(),
        index,
        Arc::clone(&lane),
        LEASE_MARGIN,
        claim_ttl,
    );
    let mut tasks = JoinSet::new();
    let throttle = handoff.throttle();
    // Read before the first claim, so that a paused destination sends nothing after a restart;
    // then at least every second, for a pause or resume made through another process.
    let refresh_every = poll.min(throttle::PAUSE_REFRESH);
    refresh_pause(&gateway, index, &lane).await;
    let mut next_refresh = tokio::time::Instant::now() + refresh_every;
    loop {
        if *shutdown.borrow() {
            break;
        }
        while tasks.try_join_next().is_some() {}
        let mut wait = poll;
        // Claims go in batches: with attempts in flight, the next claim waits until half the
        // permits are free, so that a busy destination is not claimed for one delivery (one
        // transaction, one sync) at a time as each attempt ends.
        if throttle.paused() {
            // Nothing is claimed: a resume here wakes the dispatcher, one elsewhere is read at
            // the next refresh.
        } else if bounds.slots.available_permits() < low_water {
            handoff.owe_claim();
        } else {
            let deadline = gateway.config().database_timeout;
            let started = start_due(&gateway, index, &transport, &outcomes, &bounds, &mut tasks);
            let health = lane.health();
            match tokio::time::timeout(deadline, started).await {
                Ok(Ok(next)) => {
                    health.claimed();
                    wait = next.min(poll);
                }
                // Tried again soon, not at the next poll or wake: a retry falling due meanwhile
                // would otherwise wait for either.
                Ok(Err(e)) => {
                    tracing::warn!(destination = %destination.name, error = %e, "cannot read due deliveries; trying again");
                    health.claim_failed(e.to_string(), gateway.now().as_millis());
                    wait = poll.min(ERROR_PAUSE);
                }
                Err(_) => {
                    tracing::warn!(destination = %destination.name, "the database did not answer within {deadline:?}; trying again");
                    health.claim_failed(
                        format!("the database did not answer within {deadline:?}"),
                        gateway.now().as_millis(),
                    );
                    wait = poll.min(ERROR_PAUSE);
                }
            }
        }
        // Deliveries handed over by ingest are sent as they come, without a claim: only a wake,
        // the poll or the next due time makes the next claim.
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                Some(next) = handed.recv() => {
                    metrics::counter!(DISPATCH_CLAIMS_TOTAL, "destination" => destination.name.to_string(), "path" => next.path.label())
                        .increment(1);
                    let claimed = Claimed { delivery: next.delivery, attempt: next.attempt, until: next.until, slot: next.permit.start() };
                    start(&gateway, index, &transport, &outcomes, &bounds, claimed, &mut tasks);
                    continue;
                }
                () = tokio::time::sleep_until(next_refresh) => {
                    next_refresh = tokio::time::Instant::now() + refresh_every;
                    // Only a resume calls for a claim: a refresh must not stand in for the
                    // wake-ups the claims rely on.
                    if !refresh_pause(&gateway, index, &lane).await {
                        continue;
                    }
                }
                () = lane.waker().notified() => {}
                () = &mut sleep => {}
                _ = shutdown.changed() => {}
            }
            break;
        }
    }
    // What was handed over before the close is sent; what ingest claims after it waits for its
    // claim to lapse, as a dead process's would.
    handoff.close();
    while let Ok(next) = handed.try_recv() {
        let claimed = Claimed {
            delivery: next.delivery,
            attempt: next.attempt,
            until: next.until,
            slot: next.permit.start(),
        };
        start(
            &gateway, index, &transport, &outcomes, &bounds, claimed, &mut tasks,
        );
    }
    while tasks.join_next().await.is_some() {}
    drop(outcomes);
    let _ = writer.await;
}

/// Reads destination `index`'s pause from the database into its throttle (on `lane`; kept as it was when
/// the database does not answer within `database_timeout`); returns whether it was just
/// resumed.
async fn refresh_pause<DB: GatewayDb>(gateway: &Gateway<DB>, index: usize, lane: &Lane) -> bool {
    let name = gateway.destination(index).name.as_str();
    let throttle = lane.handoff().throttle();
    let started = throttle.read_started();
    let read = async {
        let _turn = gateway.dispatch_connection().await;
        let mut conn = gateway.store().pool().acquire().await?;
        Ok::<_, idem_sql::Error>(DB::paused_since(&mut conn, name).await?.is_some())
    };
    let paused = match tokio::time::timeout(gateway.config().database_timeout, read).await {
        Ok(Ok(paused)) => paused,
        Ok(Err(e)) => {
            tracing::warn!(destination = name, error = %e, "cannot read whether the destination is paused; keeping what was read last");
            return false;
        }
        Err(_) => {
            tracing::warn!(
                destination = name,
                "the database did not say within {:?} whether the destination is paused; keeping what was read last",
                gateway.config().database_timeout
            );
            return false;
        }
    };
    // A pause or resume made here while the read ran is newer than what it read.
    let Some(was) = throttle.apply_read(paused, started) else {
        return false;
    };
    metrics::gauge!(DESTINATION_PAUSED, "destination" => name.to_owned()).set(if paused {
        1.0
    } else {
        0.0
    });
    if was != paused {
        tracing::info!(
            destination = name,
            "destination {}",
            if paused {
                "paused: nothing is claimed until it is resumed"
            } else {
                "resumed"
            }
        );
    }
    was && !paused
}

/// What bounds a destination's attempts in this process: `slots`, the deliveries it holds a
/// claim on (waiting for a permit or being sent), twice `concurrency`, so that a batch is
/// claimed, or ingest hands a delivery over, while the last ones are still being sent; and
/// `permits`, the attempts being sent, `concurrency`. Both are fair (first come, first served),
/// so claimed deliveries start in the order they were claimed.
struct Bounds {
    slots: Arc<Semaphore>,
    permits: Arc<Semaphore>,
}

impl Bounds {
    fn new(concurrency: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(concurrency.saturating_mul(2))),
            permits: Arc::new(Semaphore::new(concurrency)),
        }
    }
}

/// A delivery this process claimed for attempt number `attempt`, until `until` (ms), under
/// `slot`.
struct Claimed {
    delivery: DueDelivery,
    attempt: i64,
    until: i64,
    slot: OwnedSemaphorePermit,
}

/// Claims every due delivery a free slot and a token of the rate limit allow, in one
/// transaction, and starts their attempts. Returns how long until the next delivery falls due
/// (the poll interval when one is due but held back), or until the next token when tokens
/// ran short.
async fn start_due<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
    transport: &Transport,
    outcomes: &Outcomes,
    bounds: &Bounds,
    tasks: &mut JoinSet<()>,
) -> Result<Duration, idem_sql::Error> {
    let destination = gateway.destination(index);
    let name = destination.name.as_str();
    let ttl = outcomes.lane().claim_ttl()?;
    let handoff = outcomes.lane().handoff();
    let throttle = handoff.throttle();
    let slots_free = bounds.slots.available_permits();
    let free = slots_free.min(throttle.available(gateway.now()));
    let token_bound = free < slots_free;
    if token_bound {
        metrics::counter!(DISPATCH_RATE_LIMITED_TOTAL, "destination" => name.to_owned())
            .increment(1);
    }
    if free == 0 {
        return Ok(throttle.next_token_in(gateway.now()));
    }
    let due_at = gateway.now().as_millis();
    let mut due = {
        let _turn = gateway.dispatch_connection().await;
        let mut conn = gateway.store().pool().acquire().await?;
        DB::due(&mut conn, name, due_at, i64::try_from(free).unwrap_or(1)).await?
    };
    if due.len() < free {
        handoff.due_query_done();
    }
    let mut taken: Vec<OwnedSemaphorePermit> = due
        .iter()
        .map_while(|_| Arc::clone(&bounds.slots).try_acquire_owned().ok())
        .collect();
    // Ingest may have taken tokens since they were counted.
    let tokens = throttle.take(taken.len(), gateway.now());
    taken.truncate(tokens);
    due.truncate(taken.len());
    due.sort_by_key(|delivery| delivery.id);
    let mut started = 0_u64;
    if !due.is_empty() {
        let ids: Vec<i64> = due.iter().map(|delivery| delivery.id).collect();
        let (claimed, until) = {
            let _connection = gateway.dispatch_connection().await;
            let _turn = gateway.writer().dispatch().await;
            let mut tx = gateway.begin_dispatch().await?;
            let now = gateway.now();
            let until = now.saturating_add(ttl.get()).as_millis();
            // Left out: delivered, rescheduled or taken by another process since it was read.
            let claimed = DB::start_attempts(&mut tx, &ids, until, now.as_millis()).await?;
            tx.commit().await?;
            (claimed, until)
        };
        // The tokens of rows no longer due go back.
        throttle.give_back(due.len() - claimed.len());
        let mut claimed = claimed.into_iter().peekable();
        // Slots of rows no longer due are freed here, with `taken`.
        for (delivery, slot) in due.into_iter().zip(taken.drain(..)) {
            let Some(attempt) = claimed
                .next_if(|(id, _)| *id == delivery.id)
                .map(|(_, a)| a)
            else {
                continue;
            };
            started += 1;
            // Its first attempt: a delivery ingest stored pending (retries, redrives and
            // replays are later attempts).
            if let (Some(entity), 1) = (&delivery.entity, attempt) {
                handoff.claimed(&delivery.route, entity);
            }
            let claimed = Claimed {
                delivery,
                attempt,
                until,
                slot,
            };
            start(gateway, index, transport, outcomes, bounds, claimed, tasks);
        }
    }
    metrics::counter!(DISPATCH_CLAIMS_TOTAL, "destination" => name.to_owned(), "path" => "due")
        .increment(started);
    // Every token taken: the next claim waits for the next token.
    if token_bound && started == free as u64 {
        return Ok(throttle.next_token_in(gateway.now()));
    }
    // Every slot taken: the end of an attempt wakes the next claim, so when the next one
    // falls due does not matter (and is not read: one query less per batch).
    if started == free as u64 {
        handoff.owe_claim();
        return Ok(gateway.config().poll_interval);
    }
    // Only deliveries not yet due when the due query ran count: one due then but held back
    // (its entity is busy, every slot is taken, or another process holds it) is brought by
    // the wake at the end of an attempt, or the poll, and must not push the others' retries
    // back to the poll. One that fell due since (a retry, a lapsed claim) is claimed at once:
    // measured from now instead, it was left out and waited for the poll.
    let next = {
        let _turn = gateway.dispatch_connection().await;
        let mut conn = gateway.store().pool().acquire().await?;
        DB::next_due(&mut conn, name, due_at).await?
    };
    let now = gateway.now().as_millis();
    Ok(match next {
        Some(at) => Duration::from_millis(u64::try_from(at - now).unwrap_or(0)),
        None => gateway.config().poll_interval,
    })
}

/// Starts `claimed`'s attempt once a permit is free. One that waited so long for it that the
/// attempt could outlast its claim is not sent: another holder may take it once the claim
/// lapses (a due query of this process or another's).
fn start<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
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
    tasks.spawn(async move {
        let Ok(permit) = permits.acquire_owned().await else {
            return;
        };
        let destination = gateway.destination(index);
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
            ..
        } = claimed;
        send_one(
            &gateway,
            index,
            &transport,
            &outcomes,
            delivery,
            attempt,
            (permit, slot),
        )
        .await;
    });
}

async fn send_one<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
    transport: &Transport,
    outcomes: &Outcomes,
    mut delivery: DueDelivery,
    attempt: i64,
    held: (OwnedSemaphorePermit, OwnedSemaphorePermit),
) {
    let destination = gateway.destination(index);
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
