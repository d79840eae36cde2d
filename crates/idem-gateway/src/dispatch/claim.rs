//! A due query: claim every due delivery that a free slot and a token of the rate limit allow,
//! in one transaction, and start their attempts.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;

use super::attempt::{Bounds, Claimed, start};
use super::outcomes::Outcomes;
use super::transport::Transport;
use crate::gateway::Gateway;
use crate::lanes::probe::ProbeResult;
use crate::metric_definitions::{DISPATCH_CLAIMS_TOTAL, DISPATCH_RATE_LIMITED_TOTAL};
use crate::store::GatewayDb;

/// Claims every due delivery a free slot and a token of the rate limit allow, in one
/// transaction, and starts their attempts. Returns how long until the next delivery falls due
/// (the poll interval when one is due but held back), or until the next token when tokens
/// ran short.
pub(super) async fn start_due<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    transport: &Transport,
    outcomes: &Outcomes,
    bounds: &Bounds,
    tasks: &mut JoinSet<()>,
) -> Result<Duration, idem_sql::Error> {
    let destination = outcomes.lane().destination();
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
                probe: false,
            };
            start(gateway, transport, outcomes, bounds, claimed, tasks);
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

/// Claims the destination's next due delivery as the circuit breaker's probe, while it is
/// paused, and starts its attempt; reports [`ProbeResult::NothingDue`] when none is due.
pub(super) async fn start_probe<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    transport: &Transport,
    outcomes: &Outcomes,
    bounds: &Bounds,
    tasks: &mut JoinSet<()>,
) -> Result<(), idem_sql::Error> {
    let lane = outcomes.lane();
    let name = lane.destination().name.as_str();
    let ttl = lane.claim_ttl()?;
    let Ok(slot) = Arc::clone(&bounds.slots).try_acquire_owned() else {
        lane.probe().report(ProbeResult::NothingDue);
        return Ok(());
    };
    let now = gateway.now();
    let due = {
        let _turn = gateway.dispatch_connection().await;
        let mut conn = gateway.store().pool().acquire().await?;
        DB::due(&mut conn, name, now.as_millis(), 1).await?
    };
    let Some(delivery) = due.into_iter().next() else {
        lane.probe().report(ProbeResult::NothingDue);
        return Ok(());
    };
    let (claimed, until) = {
        let _connection = gateway.dispatch_connection().await;
        let _turn = gateway.writer().dispatch().await;
        let mut tx = gateway.begin_dispatch().await?;
        let until = now.saturating_add(ttl.get()).as_millis();
        let claimed = DB::start_attempts(&mut tx, &[delivery.id], until, now.as_millis()).await?;
        tx.commit().await?;
        (claimed, until)
    };
    let Some((_, attempt)) = claimed.into_iter().next() else {
        lane.probe().report(ProbeResult::NothingDue);
        return Ok(());
    };
    if let (Some(entity), 1) = (&delivery.entity, attempt) {
        lane.handoff().claimed(&delivery.route, entity);
    }
    metrics::counter!(DISPATCH_CLAIMS_TOTAL, "destination" => name.to_owned(), "path" => "due")
        .increment(1);
    tracing::info!(destination = name, source = %delivery.source, event_id = %delivery.event_id, "circuit breaker: probing the paused destination with one delivery");
    let claimed = Claimed {
        delivery,
        attempt,
        until,
        slot,
        probe: true,
    };
    start(gateway, transport, outcomes, bounds, claimed, tasks);
    Ok(())
}
