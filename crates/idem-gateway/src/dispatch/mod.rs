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

mod attempt;
mod attempted;
mod claim;
mod kafka;
mod message;
mod nats;
mod outcomes;
mod rabbitmq;
pub(crate) mod schedule;
pub mod send;
mod transport;

pub use crate::lanes::{LEASE_MARGIN, throttle};

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::Destination;
use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::lanes::probe::ProbeResult;
use crate::metric_definitions::{DESTINATION_PAUSED, DISPATCH_CLAIMS_TOTAL};
use crate::store::GatewayDb;
use attempt::{Bounds, Claimed, start};
use claim::{start_due, start_probe};
use outcomes::Outcomes;
pub(crate) use transport::Transport;

/// The pause before claiming again after a claim failed or timed out.
const ERROR_PAUSE: Duration = Duration::from_millis(250);

/// Runs the dispatcher of `lane`'s destination (with the settings the lane carries) over
/// `transport` (see [`Transport::connect`]) until `shutdown` turns true, then waits for the
/// attempts in flight to finish and be recorded, and closes the transport's connection.
pub(crate) async fn run<DB: GatewayDb>(
    gateway: Gateway<DB>,
    lane: Arc<Lane>,
    transport: Transport,
    shutdown: watch::Receiver<bool>,
) {
    dispatch(gateway, lane, &transport, shutdown).await;
    transport.close().await;
}

async fn dispatch<DB: GatewayDb>(
    gateway: Gateway<DB>,
    lane: Arc<Lane>,
    transport: &Transport,
    mut shutdown: watch::Receiver<bool>,
) {
    let destination = lane.destination().clone();
    let bounds = Bounds::new(destination.concurrency);
    let handoff = lane.handoff();
    // At least 1, at most `concurrency`: an idle destination always claims.
    let low_water = destination.concurrency.div_ceil(2);
    let mut handed = handoff.open(Arc::clone(&bounds.slots), low_water);
    // Keys a reload never changes (it refuses them): read once.
    let config = gateway.config();
    let poll = config.poll_interval;
    // A claim lasts LEASE_MARGIN past the attempt's timeout: the time an outcome may wait.
    let claim_ttl = match lane.claim_ttl() {
        Ok(ttl) => ttl,
        Err(e) => {
            tracing::error!(destination = %destination.name, error = %e, "destination timeout too long for a claim; nothing is sent");
            return;
        }
    };
    let (outcomes, writer) =
        Outcomes::start(gateway.clone(), Arc::clone(&lane), LEASE_MARGIN, claim_ttl);
    let mut tasks = JoinSet::new();
    let throttle = handoff.throttle();
    // Read before the first claim, so that a paused destination sends nothing after a restart;
    // then at least every second, for a pause or resume made through another process.
    let refresh_every = poll.min(throttle::PAUSE_REFRESH);
    refresh_pause(&gateway, &lane).await;
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
            // the next refresh. Only the circuit breaker's probe, when this process holds it,
            // sends one delivery.
            if lane.probe().take_request() {
                let probed = start_probe(&gateway, transport, &outcomes, &bounds, &mut tasks);
                if let Err(e) = probed.await {
                    tracing::warn!(destination = %destination.name, error = %e, "cannot claim the circuit breaker's probe; trying at the next one");
                    lane.probe().report(ProbeResult::NothingDue);
                }
            }
        } else if bounds.slots.available_permits() < low_water {
            handoff.owe_claim();
        } else {
            let deadline = config.database_timeout;
            let started = start_due(&gateway, transport, &outcomes, &bounds, &mut tasks);
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
                    let claimed = Claimed { delivery: next.delivery, attempt: next.attempt, until: next.until, slot: next.permit.start(), probe: false };
                    start(&gateway, transport, &outcomes, &bounds, claimed, &mut tasks);
                    continue;
                }
                () = tokio::time::sleep_until(next_refresh) => {
                    next_refresh = tokio::time::Instant::now() + refresh_every;
                    // Only a resume calls for a claim: a refresh must not stand in for the
                    // wake-ups the claims rely on.
                    if !refresh_pause(&gateway, &lane).await {
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
            probe: false,
        };
        start(&gateway, transport, &outcomes, &bounds, claimed, &mut tasks);
    }
    finish_in_flight(&mut tasks, &destination, config.shutdown_grace).await;
    drop(outcomes);
    let _ = writer.await;
}

/// Waits up to `grace` (`shutdown_grace`) for the attempts in flight to end and be recorded,
/// then cuts the rest: a destination's `timeout` may be an hour, and a stop must not wait for
/// it. A cut attempt's claim lapses as a dead process's would, and the delivery is sent again
/// after the next start with the same `Idempotency-Key`.
async fn finish_in_flight(tasks: &mut JoinSet<()>, destination: &Destination, grace: Duration) {
    let all_ended = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all_ended).await.is_ok() {
        return;
    }
    tracing::warn!(
        destination = %destination.name,
        in_flight = tasks.len(),
        "attempts still in flight after shutdown_grace are cut; their deliveries are sent again after the next start"
    );
    tasks.shutdown().await;
}

/// Reads the pause of `lane`'s destination from the database into its throttle (kept as it was when
/// the database does not answer within `database_timeout`); returns whether it was just
/// resumed.
async fn refresh_pause<DB: GatewayDb>(gateway: &Gateway<DB>, lane: &Lane) -> bool {
    let name = lane.destination().name.as_str();
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
