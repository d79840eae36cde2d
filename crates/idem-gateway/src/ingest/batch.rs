//! Group commit: many requests, one transaction, one fsync. Each request's dedup key is claimed
//! in idem's inbox, fresh events are stored with their deliveries, and every request is answered
//! only after the commit (docs/design.md C2). A request is a [`Unit`]: one webhook or broker
//! message, or one Kafka partition batch whose offset advance and dead letters commit with its
//! events, so that the stored offset never runs ahead of, or behind, what was stored.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use idem_core::{Advance, Backoff, DedupKey, Name};
use idem_sql::{Claim, DeadLetterRecord, ErrorKind, PartitionFence, Proposed};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::answer::Answer;
use crate::config::Ordering;
use crate::gateway::Gateway;
use crate::lanes::handoff::{Claimer, Handed, Reserved};
use crate::metric_definitions::{DISPATCH_TOTAL, INGEST_BATCH_SIZE};
use crate::model::fields::Extracted;
use crate::model::guard_note;
use crate::store::{DeliveryState, DueDelivery, GatewayDb, NewDelivery, NewEvent};
use crate::traces::{self, TraceHeaders};
use crate::wiring::Wiring;

/// The most requests one transaction commits. A Kafka unit counts as one: there is at most one
/// in the queue per held partition (the next batch of a partition comes after this one's
/// answer), each of at most the consumer's batch size.
const MAX_BATCH: usize = 1024;
/// The fewest requests a batch needs to commit while another batch is still committing.
const SHARED_BATCH: usize = 16;
/// How many times a batch that failed with a retryable error (conflict, busy, lost connection)
/// is tried in all.
const BATCH_ATTEMPTS: u32 = 4;
/// The pause after failed try number n of a batch: 10 ms, doubled each time.
const RETRY_BACKOFF: Backoff =
    Backoff::exponential(Duration::from_millis(10), Duration::from_millis(80));

/// A verified delivery with its event read, waiting to be committed.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub source: usize,
    pub key: DedupKey,
    pub event: Extracted,
    pub body: Bytes,
    pub received_at: i64,
    /// The trace context stored with the event (`crate::traces`).
    pub trace: Option<TraceHeaders>,
    /// The request's `ingest` span, linked to the span of the commit it is in (disabled for
    /// broker messages and with traces off).
    pub span: tracing::Span,
}

/// A Kafka partition's stored offset moved from `from` to `to` (compare-and-set, fenced by the
/// partition lease) in the commit of the events read from the records in between.
#[derive(Debug, Clone)]
pub(crate) struct OffsetAdvance {
    /// The consumer name the offsets are stored under.
    pub consumer: Name,
    pub fence: PartitionFence,
    pub from: i64,
    pub to: i64,
}

/// What commits together or not at all.
#[derive(Debug)]
pub(crate) struct Unit {
    /// The events, in arrival (offset) order.
    pub events: Vec<Incoming>,
    /// Messages that can never be events, recorded in idem's dead-letter table.
    pub letters: Vec<DeadLetterRecord>,
    /// A Kafka partition's offset moved over `events` and `letters`.
    pub advance: Option<OffsetAdvance>,
}

impl Unit {
    /// A unit of one event: a webhook, a NATS or RabbitMQ message.
    pub(crate) fn one(incoming: Incoming) -> Self {
        Self {
            events: vec![incoming],
            letters: Vec::new(),
            advance: None,
        }
    }
}

/// A request waiting in the batcher's queue.
pub(crate) struct Pending {
    pub unit: Unit,
    /// One answer per event of the unit, in order.
    pub reply: oneshot::Sender<Result<Vec<Answer>, Unavailable>>,
    /// When the request's `database_timeout` runs out: a request still queued then is answered
    /// 503 and left out of the batch, and the batch's commit must end before its earliest
    /// request's deadline, so that no request answered 503 is committed after all.
    pub deadline: Instant,
}

/// The batch holding a request could not be committed (the error was logged once for the
/// batch): the request is answered 503 and nothing of it was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unavailable;

/// The group-commit task: takes whatever requests are queued (at most [`MAX_BATCH`]), commits
/// them in one transaction, answers each, and repeats until every sender is gone (shutdown:
/// the queue is flushed first). Up to `DB::CONCURRENT_COMMITS` batches commit at once; while
/// all are in flight the queue fills, so the next batch is larger.
pub(crate) async fn run<DB: GatewayDb>(gateway: Gateway<DB>, mut queue: mpsc::Receiver<Pending>) {
    let slots = Arc::new(Semaphore::new(DB::CONCURRENT_COMMITS.max(1)));
    let mut commits = JoinSet::new();
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break;
        };
        let mut batch = Vec::with_capacity(MAX_BATCH);
        if queue.recv_many(&mut batch, MAX_BATCH).await == 0 {
            break;
        }
        while commits.try_join_next().is_some() {}
        // A commit beside those in flight only for a batch worth its statements (about ten,
        // whatever its size): a small one waits for more requests or for a commit to end.
        // Under light load every commit was a request or two, each costing PostgreSQL the
        // statements of a batch.
        while !commits.is_empty() && batch.len() < SHARED_BATCH {
            let room = MAX_BATCH - batch.len();
            tokio::select! {
                received = queue.recv_many(&mut batch, room) => {
                    if received == 0 {
                        break;
                    }
                }
                _ = commits.join_next() => {}
            }
        }
        // Webhooks in key order, as before units; the inbox sorts the keys it claims itself, so
        // concurrent batches cannot deadlock on its unique index whatever the order here.
        batch.sort_by(|a, b| first_key(&a.unit).cmp(first_key(&b.unit)));
        let gateway = gateway.clone();
        commits.spawn(async move {
            commit_and_answer(&gateway, batch).await;
            drop(slot);
        });
    }
    while commits.join_next().await.is_some() {}
}

/// The first dedup key of `unit` ('' for none), to order a batch by.
fn first_key(unit: &Unit) -> &str {
    unit.events.first().map_or("", |i| i.key.as_str())
}

/// Commits one batch under `database_timeout` and answers each of its requests.
async fn commit_and_answer<DB: GatewayDb>(gateway: &Gateway<DB>, batch: Vec<Pending>) {
    let now = Instant::now();
    let (live, late): (Vec<Pending>, Vec<Pending>) = batch
        .into_iter()
        .partition(|p| p.deadline > now && !p.reply.is_closed());
    for pending in late {
        // Its sender was (or is about to be) told 503: nothing of it may be kept.
        let _ = pending.reply.send(Err(Unavailable));
    }
    let Some(earliest) = live.iter().map(|p| p.deadline).min() else {
        return;
    };
    let deadline = gateway.config().database_timeout;
    let (incoming, replies): (Vec<_>, Vec<_>) = live.into_iter().map(|p| (p.unit, p.reply)).unzip();
    let span = traces::batch_span(incoming.iter().map(|u| u.events.len()).sum());
    traces::link_to_batch(
        &span,
        incoming.iter().flat_map(|u| &u.events).map(|i| &i.span),
    );
    let health = gateway.health();
    // Bounded: a database that stops answering costs each batch `database_timeout`, and
    // the requests were answered 503 by then (their own deadline is the same).
    let answers = match tokio::time::timeout_at(earliest, commit(gateway, &incoming)).await {
        Ok(Ok(answers)) => {
            health.recovered();
            answers.into_iter().map(Ok).collect()
        }
        // Not the database being away but one request it refuses: commit each request
        // alone, so that only the one at fault is answered 503.
        Ok(Err(e)) if incoming.len() > 1 && !e.is_retryable() => {
            let one_by_one = async {
                let mut answers = Vec::with_capacity(incoming.len());
                for one in &incoming {
                    let answer = commit(gateway, std::slice::from_ref(one)).await;
                    match &answer {
                        Ok(_) => health.recovered(),
                        Err(e) => health.failed(&e.to_string()),
                    }
                    answers.push(answer.map(|mut a| a.remove(0)).map_err(|_| Unavailable));
                }
                answers
            };
            tokio::time::timeout_at(earliest, one_by_one)
                .await
                .unwrap_or_else(|_| vec![Err(Unavailable); incoming.len()])
        }
        Ok(Err(e)) => {
            health.failed(&e.to_string());
            vec![Err(Unavailable); incoming.len()]
        }
        Err(_) => {
            let reason = format!("the database did not answer within {deadline:?}");
            tracing::error!(
                size = incoming.len(),
                "batch not committed: {reason}; its requests get 503"
            );
            health.failed(&reason);
            vec![Err(Unavailable); incoming.len()]
        }
    };
    if answers.iter().any(Result::is_err) {
        traces::batch_failed(&span);
    }
    // The spans end (the requests' `ingest` spans held here too) before the answers go, so
    // that a request's span has ended by the time its sender has the answer.
    drop(incoming);
    drop(span);
    for (reply, answer) in replies.into_iter().zip(answers) {
        // A closed reply means the client left; the commit stands either way.
        let _ = reply.send(answer);
    }
}

/// Commits `batch` in one transaction, trying again on a retryable error. Returns the answers of
/// each unit's events, in order.
///
/// # Errors
/// The last error when every try failed or the error is not retryable; nothing was committed.
pub(crate) async fn commit<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    batch: &[Unit],
) -> Result<Vec<Vec<Answer>>, idem_sql::Error> {
    let events: usize = batch.iter().map(|u| u.events.len()).sum();
    metrics::histogram!(INGEST_BATCH_SIZE).record(events as f64);
    let mut tries = 1;
    loop {
        match commit_once(gateway, batch).await {
            Ok(answers) => return Ok(answers),
            Err(e) if e.is_retryable() && tries < BATCH_ATTEMPTS => {
                tracing::debug!(error = %e, tries, size = batch.len(), "batch failed, trying again");
                tokio::time::sleep(RETRY_BACKOFF.delay(tries)).await;
                tries += 1;
            }
            Err(e) => {
                // The sources say whose senders were told to retry (503, NAK or requeue).
                let mut sources: Vec<&str> = batch
                    .iter()
                    .flat_map(|u| &u.events)
                    .map(|i| gateway.source(i.source).name.as_str())
                    .collect();
                sources.sort_unstable();
                sources.dedup();
                let sources = sources.join(",");
                tracing::error!(error = %e, tries, size = batch.len(), %sources, "batch not committed; its requests get 503");
                return Err(e);
            }
        }
    }
}

/// A delivery row to write, decided per (route, event).
struct Decision {
    route: usize,
    event: usize,
    state: DeliveryState,
    tie: bool,
    /// Whether the delivery records its entity and version (drop-stale routes), for ordering
    /// and for replays.
    ordered: bool,
    note: Option<String>,
    /// A dense version sequence skipped numbers (counted, applied).
    gap: bool,
    /// The entity (`type:id`) and versions the delivery records when `ordered`.
    entity: Option<String>,
    version: Option<i64>,
    version_secondary: Option<i64>,
    /// Claimed as it is stored and handed to the dispatcher after the commit, under this permit.
    permit: Option<Reserved>,
    /// Stored pending behind an earlier delivery of its entity (in the batch, or pending or in
    /// flight): the end of that one's attempt brings it, no backlog to wait for.
    behind: bool,
}

/// One try at committing `units`, in the steps docs/design.md C2 describes: claim the dedup
/// keys, store the fresh events, decide each route's delivery (version guard, hand-off),
/// store the deliveries, add the counts, the dead letters and the Kafka offsets, commit; then
/// hand the claimed deliveries over and wake the dispatchers. Returns each unit's answers.
async fn commit_once<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    units: &[Unit],
) -> Result<Vec<Vec<Answer>>, idem_sql::Error> {
    let batch: Vec<&Incoming> = units.iter().flat_map(|u| &u.events).collect();
    let _turn = gateway.writer().ingest().await;
    let now = gateway.now().as_millis();
    // Read once per batch: a reload swaps it between batches, never within one.
    let wiring = gateway.wiring();
    let mut tx = gateway.store().begin().await?;
    let mut answers = claim(gateway, &mut tx, &batch).await?;
    let stored = store_events(gateway, &mut tx, &batch, &mut answers).await?;
    let decisions = decide(gateway, &wiring, &mut tx, &batch, &answers).await?;
    let ids = store_deliveries(gateway, &wiring, &mut tx, &decisions, &stored.rows, now).await?;
    note_waits(gateway, &wiring, &decisions);
    let counts = super::count::of_ingest(
        gateway,
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
    tx.commit().await.map_err(idem_sql::Error::from)?;
    hand_over(gateway, &wiring, &batch, &stored, decisions, ids, now);
    let mut answers = answers.into_iter();
    Ok(units
        .iter()
        .map(|u| answers.by_ref().take(u.events.len()).collect())
        .collect())
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
struct StoredEvents {
    /// The indices (in the batch) of the accepted events.
    accepted: Vec<usize>,
    /// Their forwarded headers as JSON, in the order of `accepted`.
    headers: Vec<String>,
    /// Per event of the batch, its row id (0 for one not stored).
    rows: Vec<i64>,
}

/// Stores the accepted events of `batch`; one whose row was kept from before (a dead letter
/// waiting for redrive) is turned into a duplicate in `answers`.
async fn store_events<DB: GatewayDb>(
    gateway: &Gateway<DB>,
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
    let new_events: Vec<NewEvent<'_>> = accepted
        .iter()
        .zip(&headers)
        .map(|(i, headers)| new_event(gateway, batch[*i], headers))
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

/// The event row of `incoming`, with its forwarded `headers` as JSON.
fn new_event<'a, DB: GatewayDb>(
    gateway: &'a Gateway<DB>,
    incoming: &'a Incoming,
    headers: &'a str,
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
        source: gateway.source(incoming.source).name.as_str(),
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
    }
}

/// One decision per (matching route, accepted event), in (route, entity, arrival) order: the
/// version guard of each drop-stale route, then which deliveries are handed off.
async fn decide<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    batch: &[&Incoming],
    answers: &[Answer],
) -> Result<Vec<Decision>, idem_sql::Error> {
    // Each route's events in (entity, arrival) order: the version guard decides a route's
    // events in one batch, in arrival order per entity.
    let mut work = Vec::new();
    for (i, incoming) in batch.iter().enumerate() {
        if answers[i] != Answer::Accepted {
            continue;
        }
        for (r, route) in wiring.routes_of(gateway.config(), incoming.source) {
            if route.matches(incoming.event.event_type.as_deref()) {
                let entity = incoming.event.entity.as_ref().map(|(e, _)| e.to_string());
                work.push((r, entity, i));
            }
        }
    }
    work.sort();
    let mut decisions: Vec<Decision> = work
        .into_iter()
        .map(|(route, _, event)| Decision {
            route,
            event,
            state: DeliveryState::Pending,
            tie: false,
            ordered: false,
            gap: false,
            note: None,
            entity: None,
            version: None,
            version_secondary: None,
            permit: None,
            behind: false,
        })
        .collect();
    let mut start = 0;
    while start < decisions.len() {
        let r = decisions[start].route;
        let end = start
            + decisions[start..]
                .iter()
                .take_while(|d| d.route == r)
                .count();
        let route = &gateway.config().routes[r];
        if route.ordering == Ordering::DropStale {
            guard_route(gateway, tx, batch, &mut decisions[start..end]).await?;
        }
        start = end;
    }
    hand_off_candidates::<DB>(gateway, wiring, tx, &mut decisions).await?;
    Ok(decisions)
}

/// Stores one delivery per decision (a handed-off one claimed until its lane's claim end);
/// returns their ids, in order.
async fn store_deliveries<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    decisions: &[Decision],
    rows: &[i64],
    now: i64,
) -> Result<Vec<i64>, idem_sql::Error> {
    let deliveries: Vec<NewDelivery<'_>> = decisions
        .iter()
        .map(|decision| {
            let route = &gateway.config().routes[decision.route];
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
fn note_waits<DB: GatewayDb>(gateway: &Gateway<DB>, wiring: &Wiring, decisions: &[Decision]) {
    for decision in decisions
        .iter()
        .filter(|d| d.state == DeliveryState::Pending && d.permit.is_none())
    {
        if let Some(entity) = &decision.entity {
            let route = &gateway.config().routes[decision.route];
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
fn hand_over<DB: GatewayDb>(
    gateway: &Gateway<DB>,
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
    let mut stored_pending: Vec<Option<bool>> = vec![None; gateway.config().destinations.len()];
    for (decision, id) in decisions.into_iter().zip(ids) {
        let route = &gateway.config().routes[decision.route];
        let d = route.destination_index;
        let incoming = batch[decision.event];
        log_unordered_and_stale(gateway, route, incoming, &decision);
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
            route: route.name.to_string(),
            entity: decision.entity,
            source: gateway.source(incoming.source).name.to_string(),
            event_id: event.event_id.to_string(),
            dedup_key: incoming.key.as_str().to_owned(),
            event_type: event.event_type.clone(),
            body: Some(incoming.body.to_vec()),
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
fn log_unordered_and_stale<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    route: &crate::config::Route,
    incoming: &Incoming,
    decision: &Decision,
) {
    if let (Ordering::DropStale, Some(missing)) = (route.ordering, &incoming.event.unordered) {
        tracing::warn!(
            route = %route.name,
            source = %gateway.source(incoming.source).name,
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

/// The version guard of one drop-stale route over its `decisions` (in entity, arrival order),
/// in one batch: sets each decision's state, tie, note and the entity and versions it records.
async fn guard_route<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    tx: &mut sqlx::Transaction<'static, DB>,
    batch: &[&Incoming],
    decisions: &mut [Decision],
) -> Result<(), idem_sql::Error> {
    let Some(first) = decisions.first() else {
        return Ok(());
    };
    let route = &gateway.config().routes[first.route];
    let ordered: Vec<(usize, Proposed<'_>)> = decisions
        .iter()
        .enumerate()
        .filter_map(|(k, decision)| {
            let incoming = batch[decision.event];
            let (entity, version) = incoming.event.entity.as_ref()?;
            Some((
                k,
                Proposed {
                    entity,
                    version,
                    key: &incoming.key,
                },
            ))
        })
        .collect();
    let proposed: Vec<Proposed<'_>> = ordered.iter().map(|(_, p)| *p).collect();
    let guard = gateway.store().version_guard(&route.name);
    let results = guard.advance_many(tx, &proposed).await?;
    for ((k, proposed), result) in ordered.into_iter().zip(results) {
        let decision = &mut decisions[k];
        match result {
            Ok(Advance::Stale { current }) => {
                decision.state = DeliveryState::Stale;
                decision.ordered = true;
                decision.note = Some(guard_note::stale(
                    proposed.entity,
                    current,
                    proposed.version,
                ));
            }
            Ok(Advance::Tie { .. }) => {
                decision.tie = true;
                decision.ordered = true;
            }
            Ok(Advance::Gap { expected, got }) => {
                decision.gap = true;
                decision.ordered = true;
                decision.note = Some(guard_note::gap(expected, got));
            }
            Ok(Advance::Applied { previous: None }) => {
                decision.ordered = true;
                decision.note = Some(guard_note::FIRST.to_owned());
            }
            Ok(_) => decision.ordered = true,
            // The entity's stored version is of the other kind (the source's version type was
            // changed): the event cannot be compared, so it is sent unordered, like one
            // without an entity.
            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                tracing::warn!(route = %route.name, entity = %proposed.entity, error = %e, "version not comparable; sent without ordering");
                decision.note = Some(guard_note::not_comparable(&e.to_string()));
            }
            Err(e) => return Err(e),
        }
        if decision.ordered {
            decision.entity = Some(proposed.entity.to_string());
            decision.version = Some(proposed.version.primary.get());
            decision.version_secondary = proposed.version.secondary;
        }
    }
    Ok(())
}

/// Gives a permit to each pending delivery that may be claimed as it is stored and handed to
/// its dispatcher after the commit (see `dispatch::handoff`): while permits last, the first of
/// each (route, entity) in the batch, unless a delivery of its entity is already pending or in
/// flight. Runs after the version guard, whose row locks make a concurrent batch of the same
/// entity commit first, so that its deliveries are seen here.
async fn hand_off_candidates<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    wiring: &Wiring,
    tx: &mut sqlx::Transaction<'static, DB>,
    decisions: &mut [Decision],
) -> Result<(), idem_sql::Error> {
    let mut first_of_entity = HashSet::new();
    for decision in decisions.iter_mut() {
        if decision.state != DeliveryState::Pending {
            continue;
        }
        if let Some(entity) = &decision.entity
            && !first_of_entity.insert((decision.route, entity.clone()))
        {
            decision.behind = true;
            continue;
        }
        let d = gateway.config().routes[decision.route].destination_index;
        decision.permit = wiring.lane(d).handoff().reserve(gateway.now());
    }
    let routes = &gateway.config().routes;
    let keys: Vec<(&str, &str, &str)> = decisions
        .iter()
        .filter(|decision| decision.permit.is_some())
        .filter_map(|decision| {
            let route = &routes[decision.route];
            let entity = decision.entity.as_deref()?;
            Some((route.destination.as_str(), route.name.as_str(), entity))
        })
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let open: HashSet<(String, String, String)> =
        DB::open_entities(tx, &keys).await?.into_iter().collect();
    if open.is_empty() {
        return Ok(());
    }
    for decision in decisions.iter_mut() {
        let route = &routes[decision.route];
        if let Some(entity) = &decision.entity {
            let key = (
                route.destination.to_string(),
                route.name.to_string(),
                entity.clone(),
            );
            if decision.permit.is_some() && open.contains(&key) {
                // Its entity's earlier delivery goes first: stored pending, the permit freed.
                decision.permit = None;
                decision.behind = true;
            }
        }
    }
    Ok(())
}
