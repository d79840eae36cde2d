//! One try at a group commit, in the steps docs/design.md C2 describes: claim the dedup keys,
//! store the fresh events, decide each route's delivery ([`decide`](super::decide)), store
//! the deliveries, add the counts, dead letters and Kafka offsets, commit, then hand the claimed
//! deliveries over to their lanes and wake the dispatchers.

use idem_core::{DedupKey, Name};
use idem_sql::Claim;

use super::answer::Answer;
use super::decide::{Decision, decide};
use super::unit::{Incoming, OffsetAdvance, Unit};
use crate::config::Ordering;
use crate::gateway::Gateway;
use crate::lanes::handoff::{Claimer, Handed};
use crate::metric_definitions::{DISPATCH_TOTAL, INGEST_UNROUTED_TOTAL, ROUTE_FILTERED_TOTAL};
use crate::store::{DeliveryState, DueDelivery, GatewayDb, NewDelivery, NewEvent, SharedBody};
use crate::wiring::Wiring;

/// One try at committing `units`, in the steps docs/design.md C2 describes: claim the dedup
/// keys, store the fresh events, decide each route's delivery (version guard, hand-off),
/// store the deliveries, add the counts, the dead letters and the Kafka offsets, commit; then
/// hand the claimed deliveries over and wake the dispatchers. Returns each unit's answers.
pub(super) async fn commit_once<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    units: &[Unit],
) -> Result<Vec<Vec<Answer>>, idem_sql::Error> {
    let batch: Vec<&Incoming> = units.iter().flat_map(|u| &u.events).collect();
    let _turn = gateway.writer().ingest().await;
    let now = gateway.now().as_millis();
    let mut tx = gateway.store().begin().await?;
    let mut answers = claim(gateway, &mut tx, &batch).await?;
    let stored = store_events(wiring, &mut tx, &batch, &mut answers).await?;
    let decisions = decide(gateway, wiring, &mut tx, &batch, &answers).await?;
    let ids = store_deliveries::<DB>(wiring, &mut tx, &decisions, &stored.rows, now).await?;
    note_waits(wiring, &decisions);
    let counts = super::count::of_ingest(
        wiring,
        now,
        batch.iter().map(|i| i.source).zip(answers.iter().copied()),
        decisions.iter().map(|d| super::count::Judged {
            route: d.route,
            stale: d.state == DeliveryState::Stale,
            tie: d.tie,
            gap: d.gap,
        }),
    );
    DB::add_counts(&mut tx, &counts).await?;
    letters_and_offsets(gateway, &mut tx, units).await?;
    let mut routed = vec![false; batch.len()];
    decisions.iter().for_each(|d| routed[d.event] = true);
    tx.commit().await.map_err(idem_sql::Error::from)?;
    count_filtered_and_unrouted(wiring, &batch, &answers, &routed);
    hand_over(wiring, &batch, &stored, decisions, ids, now);
    let mut answers = answers.into_iter();
    Ok(units
        .iter()
        .map(|u| answers.by_ref().take(u.events.len()).collect())
        .collect())
}

/// Counts, once committed, each route that filtered an event stored by this commit, and each
/// such event no route took (`routed[i]`: event `i` got a delivery). A duplicate decided
/// nothing.
fn count_filtered_and_unrouted(
    wiring: &Wiring,
    batch: &[&Incoming],
    answers: &[Answer],
    routed: &[bool],
) {
    for ((incoming, answer), routed) in batch.iter().zip(answers).zip(routed) {
        if *answer != Answer::Accepted {
            continue;
        }
        for route in &incoming.filtered {
            metrics::counter!(ROUTE_FILTERED_TOTAL, "route" => route.to_string()).increment(1);
        }
        if !routed {
            let source = wiring.source(incoming.source).name.to_string();
            metrics::counter!(INGEST_UNROUTED_TOTAL, "source" => source).increment(1);
        }
    }
}

/// Claims every event's dedup key in idem's inbox: `Accepted` for a fresh one.
async fn claim<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    tx: &mut sqlx::Transaction<'static, DB>,
    batch: &[&Incoming],
) -> Result<Vec<Answer>, idem_sql::Error> {
    let keys: Vec<DedupKey> = batch.iter().map(|i| i.key.clone()).collect();
    let claims = gateway.inbox().claim_many(tx, &keys).await?;
    Ok(claims
        .iter()
        .map(|c| match c {
            Claim::Fresh => Answer::Accepted,
            Claim::Duplicate => Answer::Duplicate,
        })
        .collect())
}

/// The events stored by one batch.
pub(super) struct StoredEvents {
    /// The indices (in the batch) of the accepted events.
    pub(super) accepted: Vec<usize>,
    /// Their forwarded headers as JSON, in the order of `accepted`.
    pub(super) headers: Vec<String>,
    /// Per event of the batch, its row id (0 for one not stored).
    pub(super) rows: Vec<i64>,
}

/// Stores the accepted events of `batch`; one whose row was kept from before (a dead letter
/// waiting for redrive) is turned into a duplicate in `answers`.
async fn store_events<DB: GatewayDb>(
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    batch: &[&Incoming],
    answers: &mut [Answer],
) -> Result<StoredEvents, idem_sql::Error> {
    let accepted: Vec<usize> = (0..batch.len())
        .filter(|i| answers[*i] == Answer::Accepted)
        .collect();
    let headers: Vec<String> = accepted
        .iter()
        .map(|i| batch[*i].event.headers.to_json())
        .collect();
    let filtered: Vec<Option<String>> = accepted
        .iter()
        .map(|i| filtered_routes(batch[*i]))
        .collect();
    let new_events: Vec<NewEvent<'_>> = accepted
        .iter()
        .zip(headers.iter().zip(&filtered))
        .map(|(i, (headers, filtered))| new_event(wiring, batch[*i], headers, filtered.as_deref()))
        .collect();
    let mut rows = vec![0_i64; batch.len()];
    for (i, row) in accepted
        .iter()
        .zip(DB::insert_events(tx, &new_events).await?)
    {
        match row {
            Some(row) => rows[*i] = row,
            // Its inbox key was collected but the event row is kept (a dead letter waiting for
            // redrive): still the same event, so still a duplicate.
            None => answers[*i] = Answer::Duplicate,
        }
    }
    drop(new_events);
    Ok(StoredEvents {
        accepted,
        headers,
        rows,
    })
}

/// The routes whose filter did not take `incoming`, as the JSON list its row keeps; `None`
/// when there are none.
fn filtered_routes(incoming: &Incoming) -> Option<String> {
    (!incoming.filtered.is_empty()).then(|| {
        let names: Vec<&str> = incoming.filtered.iter().map(Name::as_str).collect();
        serde_json::Value::from(names).to_string()
    })
}

/// The event row of `incoming`, with its forwarded `headers` and the routes that `filtered`
/// it as JSON.
fn new_event<'a>(
    wiring: &'a Wiring,
    incoming: &'a Incoming,
    headers: &'a str,
    filtered: Option<&'a str>,
) -> NewEvent<'a> {
    let event = &incoming.event;
    let (aggregate_type, aggregate_id, version) = match &event.entity {
        Some((entity, version)) => (
            Some(entity.aggregate_type().as_str()),
            Some(entity.aggregate_id()),
            Some(version.primary.get()),
        ),
        None => (None, None, None),
    };
    NewEvent {
        source: wiring.source(incoming.source).name.as_str(),
        event_id: event.event_id.as_str(),
        dedup_key: incoming.key.as_str(),
        event_type: event.event_type.as_deref(),
        aggregate_type,
        aggregate_id,
        version,
        version_secondary: event.entity.as_ref().and_then(|(_, v)| v.secondary),
        body: &incoming.body,
        headers,
        received_at: incoming.received_at,
        traceparent: incoming.trace.as_ref().map(|t| t.traceparent.as_str()),
        tracestate: incoming
            .trace
            .as_ref()
            .and_then(|t| t.tracestate.as_deref()),
        filtered_routes: filtered,
    }
}

/// Stores one delivery per decision (a handed-off one claimed until its lane's claim end);
/// returns their ids, in order.
pub(super) async fn store_deliveries<DB: GatewayDb>(
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    decisions: &[Decision],
    rows: &[i64],
    now: i64,
) -> Result<Vec<i64>, idem_sql::Error> {
    let deliveries: Vec<NewDelivery<'_>> = decisions
        .iter()
        .map(|decision| {
            let route = &wiring.config().routes[decision.route];
            let lane = wiring.lane(route.destination_index);
            NewDelivery {
                event: rows[decision.event],
                route: route.name.as_str(),
                destination: route.destination.as_str(),
                state: decision.state,
                entity: decision.entity.as_deref(),
                version: decision.version,
                version_secondary: decision.version_secondary,
                tie: decision.tie,
                note: decision.note.as_deref(),
                now,
                claimed_until: decision.permit.as_ref().map(|_| lane.claim_end(now)),
            }
        })
        .collect();
    Ok(DB::insert_deliveries(tx, &deliveries).await?)
}

/// Notes each delivery stored pending behind its entity. Done before the commit, so that no
/// due query can claim one of them before it is counted.
pub(super) fn note_waits(wiring: &Wiring, decisions: &[Decision]) {
    for decision in decisions
        .iter()
        .filter(|d| d.state == DeliveryState::Pending && d.permit.is_none())
    {
        if let Some(entity) = &decision.entity {
            let route = &wiring.config().routes[decision.route];
            wiring
                .lane(route.destination_index)
                .handoff()
                .wait_for(route.name.as_str(), entity);
        }
    }
}

/// Records the units' dead letters and advances their Kafka offsets, in the same transaction.
async fn letters_and_offsets<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    tx: &mut sqlx::Transaction<'static, DB>,
    units: &[Unit],
) -> Result<(), idem_sql::Error> {
    for letter in units.iter().flat_map(|u| &u.letters) {
        gateway.store().dead_letters().record_in(tx, letter).await?;
    }
    // In one order, so that two batches (a zombie's and its successor's) cannot deadlock.
    let mut advances: Vec<&OffsetAdvance> =
        units.iter().filter_map(|u| u.advance.as_ref()).collect();
    advances.sort_by_key(|a| (a.consumer.as_str(), a.fence.topic(), a.fence.partition()));
    for advance in advances {
        gateway
            .store()
            .kafka_offsets(&advance.consumer)
            .advance_in(tx, &advance.fence, advance.from, advance.to)
            .await?;
    }
    Ok(())
}

/// After the commit: hands each claimed delivery to its dispatcher, logs the stale and the
/// unordered ones, and wakes each destination that had deliveries stored pending.
pub(super) fn hand_over(
    wiring: &Wiring,
    batch: &[&Incoming],
    stored: &StoredEvents,
    decisions: Vec<Decision>,
    ids: Vec<i64>,
    now: i64,
) {
    // Where each accepted event's forwarded headers are in `headers`.
    let mut headers_at = vec![0; batch.len()];
    for (at, i) in stored.accepted.iter().enumerate() {
        headers_at[*i] = at;
    }
    // Per destination: `Some(backlog)` when a delivery was stored pending, `backlog` when one
    // of them waits for a due query rather than for its entity.
    let mut stored_pending: Vec<Option<bool>> = vec![None; wiring.config().destinations.len()];
    for (decision, id) in decisions.into_iter().zip(ids) {
        let route = &wiring.config().routes[decision.route];
        let d = route.destination_index;
        let incoming = batch[decision.event];
        log_unordered_and_stale(wiring, route, incoming, &decision);
        if decision.state == DeliveryState::Stale {
            continue;
        }
        let Some(permit) = decision.permit else {
            let backlog = !decision.behind;
            stored_pending[d] = Some(stored_pending[d].unwrap_or(false) || backlog);
            continue;
        };
        let event = &incoming.event;
        let delivery = DueDelivery {
            id,
            failures: 0,
            tie: decision.tie,
            // Live traffic, never a rebuild's.
            rebuild: false,
            route: route.name.to_string(),
            entity: decision.entity,
            source: wiring.source(incoming.source).name.to_string(),
            event_id: event.event_id.to_string(),
            dedup_key: incoming.key.as_str().to_owned(),
            event_type: event.event_type.clone(),
            body: SharedBody(Some(incoming.body.clone())),
            headers: stored.headers[headers_at[decision.event]].clone(),
            traceparent: incoming.trace.as_ref().map(|t| t.traceparent.clone()),
            tracestate: incoming.trace.as_ref().and_then(|t| t.tracestate.clone()),
        };
        let lane = wiring.lane(d);
        lane.handoff().hand(Handed {
            delivery,
            attempt: 1,
            until: lane.claim_end(now),
            permit,
            path: Claimer::Ingest,
        });
    }
    // A delivery behind its entity's may be free already (that attempt ended before its
    // wait was noted): the due query the wake makes claims it then.
    for (d, stored) in stored_pending.into_iter().enumerate() {
        if let Some(backlog) = stored {
            if backlog {
                wiring.lane(d).handoff().stored_pending();
            }
            wiring.lane(d).wake();
        }
    }
}

/// Logs a drop-stale route's event that lacks what orders it, and a stale delivery (counted
/// as a `stale` dispatch).
fn log_unordered_and_stale(
    wiring: &Wiring,
    route: &crate::config::Route,
    incoming: &Incoming,
    decision: &Decision,
) {
    if let (Ordering::DropStale, Some(missing)) = (route.ordering, &incoming.event.unordered) {
        tracing::warn!(
            route = %route.name,
            source = %wiring.source(incoming.source).name,
            event_id = %incoming.event.event_id,
            %missing,
            "event accepted but not ordered: it lacks {missing}, which its source reads the entity and version from, so it is sent whatever its entity's newest version"
        );
    }
    if decision.state == DeliveryState::Stale {
        metrics::counter!(DISPATCH_TOTAL, "destination" => route.destination.to_string(), "outcome" => "stale")
            .increment(1);
        // idem's version guard already logs it at INFO with both versions: once is enough.
        tracing::debug!(
            route = %route.name,
            key = %incoming.key,
            versions = decision.note.as_deref().unwrap_or_default(),
            "stale event acknowledged, not forwarded"
        );
    }
}
