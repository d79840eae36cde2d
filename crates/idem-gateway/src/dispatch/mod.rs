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

mod outcomes;
pub(crate) mod schedule;
pub mod send;

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::Ttl;
use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::gateway::Gateway;
use crate::metric_definitions::{DISPATCH_DURATION_SECONDS, DISPATCH_TOTAL};
use crate::store::{AttemptOutcome, DeliveryState, DueDelivery, Finished, GatewayDb};
use crate::time::format_time;
use outcomes::Outcomes;
use schedule::Next;

/// Added to a destination's timeout to make how long a claim holds its delivery: the claim must
/// outlive the attempt, or another process could take the delivery over while it is still
/// being sent (their clocks must agree to well within it).
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

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
    let permits = Arc::new(Semaphore::new(destination.concurrency));
    // At least 1, at most `concurrency`: an idle destination always claims.
    let low_water = destination.concurrency.div_ceil(2);
    let poll = gateway.config().poll_interval;
    // A claim lasts LEASE_MARGIN past the attempt's timeout: the time an outcome may wait.
    let (outcomes, writer) =
        Outcomes::start(gateway.clone(), destination.concurrency, LEASE_MARGIN);
    let mut tasks = JoinSet::new();
    loop {
        if *shutdown.borrow() {
            break;
        }
        while tasks.try_join_next().is_some() {}
        let mut wait = poll;
        // Claims go in batches: with attempts in flight, the next claim waits until half the
        // permits are free, so that a busy destination is not claimed for one delivery (one
        // transaction, one sync) at a time as each attempt ends.
        if permits.available_permits() >= low_water {
            let deadline = gateway.config().database_timeout;
            let started = start_due(&gateway, index, &client, &outcomes, &permits, &mut tasks);
            match tokio::time::timeout(deadline, started).await {
                Ok(Ok(next)) => wait = next.min(poll),
                // Tried again soon, not at the next poll or wake: a retry falling due meanwhile
                // would otherwise wait for either.
                Ok(Err(e)) => {
                    tracing::warn!(destination = %destination.name, error = %e, "cannot read due deliveries; trying again");
                    wait = poll.min(ERROR_PAUSE);
                }
                Err(_) => {
                    tracing::warn!(destination = %destination.name, "the database did not answer within {deadline:?}; trying again");
                    wait = poll.min(ERROR_PAUSE);
                }
            }
        }
        tokio::select! {
            () = gateway.waker(index).notified() => {}
            () = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => {}
        }
    }
    while tasks.join_next().await.is_some() {}
    drop(outcomes);
    let _ = writer.await;
}

/// Claims every due delivery a free permit allows, in one transaction, and starts their
/// attempts. Returns how long until the next delivery falls due (the poll interval when one is
/// due but held back).
async fn start_due<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
    client: &reqwest::Client,
    outcomes: &Outcomes,
    permits: &Arc<Semaphore>,
    tasks: &mut JoinSet<()>,
) -> Result<Duration, idem_sql::Error> {
    let destination = gateway.destination(index);
    let name = destination.name.as_str();
    let ttl = Ttl::new(destination.timeout + LEASE_MARGIN)?;
    let free = permits.available_permits();
    let mut due = {
        let mut conn = gateway.store().pool().acquire().await?;
        let now = gateway.now().as_millis();
        DB::due(&mut conn, name, now, i64::try_from(free).unwrap_or(1)).await?
    };
    let mut taken: Vec<OwnedSemaphorePermit> = due
        .iter()
        .map_while(|_| Arc::clone(permits).try_acquire_owned().ok())
        .collect();
    due.truncate(taken.len());
    due.sort_by_key(|delivery| delivery.id);
    let mut started = 0;
    if !due.is_empty() {
        let ids: Vec<i64> = due.iter().map(|delivery| delivery.id).collect();
        let turn = gateway.writer().dispatch().await;
        let mut tx = gateway.store().begin().await?;
        let now = gateway.now();
        let until = now.saturating_add(ttl.get()).as_millis();
        // Left out: delivered, rescheduled or taken by another process since it was read.
        let claimed = DB::start_attempts(&mut tx, &ids, until, now.as_millis()).await?;
        tx.commit().await?;
        drop(turn);
        let mut claimed = claimed.into_iter().peekable();
        // Permits of rows no longer due are freed here, with `taken`.
        for (delivery, permit) in due.into_iter().zip(taken.drain(..)) {
            let Some(attempt) = claimed
                .next_if(|(id, _)| *id == delivery.id)
                .map(|(_, a)| a)
            else {
                continue;
            };
            started += 1;
            let gateway = gateway.clone();
            let client = client.clone();
            let outcomes = outcomes.clone();
            tasks.spawn(async move {
                send_one(
                    &gateway, index, &client, &outcomes, delivery, attempt, permit,
                )
                .await;
            });
        }
    }
    // Every permit taken: the end of an attempt wakes the next claim, so when the next one
    // falls due does not matter (and is not read: one query less per batch).
    if started == free {
        return Ok(gateway.config().poll_interval);
    }
    // Only deliveries not yet due count: one due but held back (its entity is busy, every
    // permit is taken, or another process holds it) is brought by the wake at the end of an
    // attempt, or the poll, and must not push the others' retries back to the poll.
    let now = gateway.now().as_millis();
    let next = {
        let mut conn = gateway.store().pool().acquire().await?;
        DB::next_due(&mut conn, name, now).await?
    };
    Ok(match next {
        Some(at) if at > now => Duration::from_millis(u64::try_from(at - now).unwrap_or(0)),
        _ => gateway.config().poll_interval,
    })
}

async fn send_one<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
    client: &reqwest::Client,
    outcomes: &Outcomes,
    delivery: DueDelivery,
    attempt: i64,
    permit: OwnedSemaphorePermit,
) {
    let destination = gateway.destination(index);
    let started_at = gateway.now();
    let clock = Instant::now();
    let attempted = send::attempt(client, destination, &delivery, attempt, started_at).await;
    let elapsed = clock.elapsed();
    let now = gateway.now();
    let dead = (
        DeliveryState::Dead,
        AttemptOutcome::Dead,
        delivery.failures + 1,
        now,
    );
    let (state, outcome, failures, next_attempt_at) = if attempted.delivered {
        (
            DeliveryState::Delivered,
            AttemptOutcome::Delivered,
            delivery.failures,
            now,
        )
    } else if !attempted.retryable {
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
    };
    let row = Finished {
        delivery: delivery.id,
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
    match outcomes.record(row).await {
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
    drop(permit);
    // A freed permit, or a freed entity whose next event may now go.
    gateway.wake(index);
}

/// What the log says of a recorded attempt.
struct Logged {
    attempt: i64,
    outcome: AttemptOutcome,
    next_attempt_at: i64,
}

fn log_outcome(
    destination: &str,
    delivery: &DueDelivery,
    row: &Logged,
    attempted: &send::Attempted,
) {
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
        AttemptOutcome::Dead if attempted.retryable => tracing::error!(
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
