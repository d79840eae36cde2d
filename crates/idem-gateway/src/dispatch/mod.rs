//! Dispatch: one task per destination sends due deliveries, at most `concurrency` at once and
//! one per entity in version order. Each attempt holds its delivery with a fencing token kept
//! in the delivery row; on PostgreSQL, where several gateway processes may share the database,
//! the token comes from an idem lease per delivery, so two processes never send the same
//! delivery at the same time. SQLite is one process's alone: the lease would only add writes.

pub(crate) mod schedule;
pub mod send;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use idem_core::{Acquire, FencingToken, LeaseKey, Timestamp, Ttl};
use rand::Rng;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::gateway::Gateway;
use crate::metric_definitions::{DISPATCH_DURATION_SECONDS, DISPATCH_TOTAL};
use crate::store::{AttemptOutcome, DeliveryState, DueDelivery, Finished, GatewayDb};
use schedule::Next;

/// Added to a destination's timeout to make a delivery's lease ttl: the lease must outlive the
/// attempt, or another process could take the delivery over while it is still being sent.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

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
    let poll = gateway.config().poll_interval;
    let mut tasks = JoinSet::new();
    loop {
        if *shutdown.borrow() {
            break;
        }
        while tasks.try_join_next().is_some() {}
        let mut wait = poll;
        if permits.available_permits() > 0 {
            let deadline = gateway.config().database_timeout;
            let started = start_due(&gateway, index, &client, &permits, &mut tasks);
            match tokio::time::timeout(deadline, started).await {
                Ok(Ok(next)) => wait = next.min(poll),
                Ok(Err(e)) => {
                    tracing::warn!(destination = %destination.name, error = %e, "cannot read due deliveries; trying again");
                }
                Err(_) => {
                    tracing::warn!(destination = %destination.name, "the database did not answer within {deadline:?}; trying again");
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
}

/// What an attempt holds its delivery by: a fencing token, stored in the delivery row and
/// checked when the outcome is written, and on a shared database the idem lease it came from.
struct Hold {
    token: FencingToken,
    lease: Option<LeaseKey>,
}

/// Tokens of a process that owns its database alone (SQLite): milliseconds since the epoch
/// times 1000 plus a counter, so they grow across restarts as fencing tokens must.
fn local_token(now: Timestamp) -> FencingToken {
    static COUNTER: AtomicI64 = AtomicI64::new(0);
    let n = COUNTER
        .fetch_add(1, AtomicOrdering::Relaxed)
        .rem_euclid(1000);
    FencingToken(now.as_millis().saturating_mul(1000).saturating_add(n))
}

/// Starts every due delivery that a free permit (and, on a shared database, a lease) allows,
/// marking them in flight in one transaction. Returns how long until the next delivery falls
/// due (the poll interval when one is due but held back).
async fn start_due<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
    client: &reqwest::Client,
    permits: &Arc<Semaphore>,
    tasks: &mut JoinSet<()>,
) -> Result<Duration, idem_sql::Error> {
    let destination = gateway.destination(index);
    let name = destination.name.as_str();
    let ttl = Ttl::new(destination.timeout + LEASE_MARGIN)?;
    let free = permits.available_permits();
    let due = {
        let mut conn = gateway.store().pool().acquire().await?;
        let now = gateway.now().as_millis();
        DB::due(&mut conn, name, now, i64::try_from(free).unwrap_or(1)).await?
    };
    let mut held = Vec::new();
    for delivery in due {
        let Ok(permit) = Arc::clone(permits).try_acquire_owned() else {
            break;
        };
        let (hold, until) = if DB::SHARED {
            // Several processes may read the same due row: the lease decides who sends it.
            let lease = LeaseKey::new(format!("idem-gateway.{name}"), delivery.id.to_string())?;
            match gateway.store().leases().acquire(&lease, ttl).await? {
                Acquire::Acquired {
                    token, expires_at, ..
                } => (
                    Hold {
                        token,
                        lease: Some(lease),
                    },
                    expires_at,
                ),
                // Another process holds it and will record the outcome.
                _ => continue,
            }
        } else {
            let now = gateway.now();
            let hold = Hold {
                token: local_token(now),
                lease: None,
            };
            (hold, now.saturating_add(ttl.get()))
        };
        held.push((delivery, hold, until, permit));
    }
    if !held.is_empty() {
        let mut tx = gateway.store().begin().await?;
        let mut started = Vec::with_capacity(held.len());
        for (delivery, hold, until, permit) in held {
            let now = gateway.now().as_millis();
            let attempt =
                DB::start_attempt(&mut tx, delivery.id, hold.token.0, until.as_millis(), now)
                    .await?;
            started.push((delivery, hold, attempt, permit));
        }
        tx.commit().await?;
        for (delivery, hold, attempt, permit) in started {
            let Some(attempt) = attempt else {
                // Delivered or rescheduled by another process since it was read.
                release(gateway, &hold).await;
                continue;
            };
            let gateway = gateway.clone();
            let client = client.clone();
            tasks.spawn(async move {
                send_one(&gateway, index, &client, delivery, attempt, hold, permit).await;
            });
        }
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

async fn release<DB: GatewayDb>(gateway: &Gateway<DB>, hold: &Hold) {
    let Some(lease) = &hold.lease else { return };
    if let Err(e) = gateway.store().leases().release(lease, hold.token).await {
        // Fenced: the lease lapsed and changed hands, which the outcome write already noticed.
        tracing::debug!(%lease, error = %e, "lease not released");
    }
}

async fn send_one<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
    client: &reqwest::Client,
    delivery: DueDelivery,
    attempt: i64,
    hold: Hold,
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
        token: hold.token.0,
        attempt,
        state,
        failures,
        next_attempt_at: next_attempt_at.as_millis(),
        started_at: started_at.as_millis(),
        duration_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        status: attempted.status.map(i64::from),
        outcome,
        excerpt: &attempted.excerpt,
        now: now.as_millis(),
    };
    let deadline = gateway.config().database_timeout;
    let recorded = tokio::time::timeout(deadline, record(gateway, &row))
        .await
        .unwrap_or_else(|_| Err(idem_sql::Error::from(idem_sql::sqlx::Error::PoolTimedOut)));
    match recorded {
        Ok(true) => log_outcome(destination.name.as_str(), &delivery, &row, &attempted),
        Ok(false) => tracing::info!(
            destination = %destination.name, source = %delivery.source, event_id = %delivery.event_id,
            "attempt outcome not recorded: the delivery's lease lapsed and another holder took it"
        ),
        Err(e) => tracing::error!(
            destination = %destination.name, source = %delivery.source, event_id = %delivery.event_id,
            error = %e, "attempt outcome not recorded; the delivery is tried again when its lease lapses"
        ),
    }
    release(gateway, &hold).await;
    metrics::counter!(DISPATCH_TOTAL, "destination" => destination.name.to_string(), "outcome" => outcome.as_str())
        .increment(1);
    metrics::histogram!(DISPATCH_DURATION_SECONDS, "destination" => destination.name.to_string())
        .record(elapsed.as_secs_f64());
    drop(permit);
    // A freed permit, or a freed entity whose next event may now go.
    gateway.wake(index);
}

async fn record<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    row: &Finished<'_>,
) -> Result<bool, idem_sql::Error> {
    let mut tx = gateway.store().begin().await?;
    let written = DB::finish_attempt(&mut tx, row).await?;
    tx.commit().await?;
    Ok(written)
}

fn log_outcome(
    destination: &str,
    delivery: &DueDelivery,
    row: &Finished<'_>,
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
            %status, excerpt = %attempted.excerpt, next_attempt_at = %Timestamp(row.next_attempt_at),
            "attempt failed; will retry"
        ),
        AttemptOutcome::Dead => tracing::error!(
            destination, source = %delivery.source, event_id = %delivery.event_id, attempt = row.attempt,
            %status, excerpt = %attempted.excerpt, "dead letter: every attempt of the schedule failed"
        ),
    }
}
