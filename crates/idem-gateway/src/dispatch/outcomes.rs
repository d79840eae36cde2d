//! Attempt outcomes written in group commits: the attempts that finish while one transaction
//! commits, or within a few milliseconds of the first, are written together in the next, so
//! forwarding costs one commit per batch of outcomes instead of one per delivery, and leaves the
//! database's writer to ingest for longer. On PostgreSQL that commit does not wait for the WAL
//! flush (see `GatewayDb::relax_commit`: a lost outcome means a delivery sent again, never two
//! holders at once); on SQLite it runs on the connection that never waits for the disk
//! (`store::relaxed`).
//! An attempt frees its permit once its outcome is queued (the queue is bounded, so a writer
//! that falls behind holds the next attempts back); its delivery stays in flight in its row,
//! holding its entity, until the outcome commits.

use std::sync::Arc;
use std::time::{Duration, Instant};

use idem_core::{Backoff, Ttl};

use tokio::sync::{mpsc, oneshot};

use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::lanes::handoff::{Claimer, Handed, Reserved};
use crate::model::counts::{Counts, Metric, Scope};
use crate::store::{AttemptOutcome, DeliveryState, DueDelivery, Finished, GatewayDb};

/// The most outcomes one transaction writes.
const MAX_OUTCOMES: usize = 256;
/// How long the writer gathers outcomes after the first of a batch arrives.
const GATHER: Duration = Duration::from_millis(5);
/// The pause after failed try number n of a batch of outcomes: 50 ms, doubled up to 1 s.
const RETRY_BACKOFF: Backoff =
    Backoff::exponential(Duration::from_millis(50), Duration::from_secs(1));

/// Whether an outcome was written: `Ok(false)` when the delivery's claim had lapsed and another
/// holder took it (nothing written), `Err` with the reason when the batch was not committed.
pub(crate) type Recorded = Result<bool, String>;

type Queued = (Finished, oneshot::Sender<Recorded>);

/// The sending side of a destination's outcome writer; cheap to clone.
#[derive(Clone)]
pub(crate) struct Outcomes {
    queue: mpsc::Sender<Queued>,
    /// The destination's lane, taken once when the dispatcher started.
    lane: Arc<Lane>,
}

impl Outcomes {
    /// Starts the writer of the destination of `lane` on `gateway`'s database; a batch that fails is
    /// tried again for at most `retry_for` (the time left of the claims), and the next
    /// deliveries it claims are held for `claim_ttl` (as a due query's claims). It ends once
    /// every `Outcomes` is dropped and the queue is written.
    pub(crate) fn start<DB: GatewayDb>(
        gateway: Gateway<DB>,
        lane: Arc<Lane>,
        retry_for: Duration,
        claim_ttl: Ttl,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        // Room for the batch being gathered while the last one commits.
        let (queue, receiver) = mpsc::channel(MAX_OUTCOMES);
        let limits = Limits {
            retry_for,
            claim_ttl,
        };
        let task = tokio::spawn(write(gateway, Arc::clone(&lane), receiver, limits));
        (Self { queue, lane }, task)
    }

    /// The destination's lane.
    pub(crate) fn lane(&self) -> &Lane {
        &self.lane
    }

    /// Queues `row` (waiting while the queue is full: the writer is behind) and returns what
    /// waits for its commit.
    pub(crate) async fn queue(&self, row: Finished) -> InQueue {
        let (reply, answer) = oneshot::channel();
        let sent = self.queue.send((row, reply)).await.is_ok();
        InQueue { answer, sent }
    }
}

/// An outcome in the writer's queue; await [`InQueue::committed`] for its commit.
pub(crate) struct InQueue {
    answer: oneshot::Receiver<Recorded>,
    sent: bool,
}

impl InQueue {
    /// Whether the outcome was written (see [`Recorded`]), once its batch committed or failed.
    pub(crate) async fn committed(self) -> Recorded {
        let stopped = || Err("the outcome writer has stopped".to_owned());
        if !self.sent {
            return stopped();
        }
        self.answer.await.unwrap_or_else(|_| stopped())
    }
}

/// How long a failed batch is tried again, and how long the claims a batch makes last.
#[derive(Debug, Clone, Copy)]
struct Limits {
    retry_for: Duration,
    claim_ttl: Ttl,
}

async fn write<DB: GatewayDb>(
    gateway: Gateway<DB>,
    lane: Arc<Lane>,
    mut queue: mpsc::Receiver<Queued>,
    limits: Limits,
) {
    let mut batch = Vec::with_capacity(MAX_OUTCOMES);
    let deadline = gateway.config().database_timeout;
    while queue.recv_many(&mut batch, MAX_OUTCOMES).await > 0 {
        // Gathered a little longer than what is queued: under load a commit then writes many
        // outcomes (a handful of statements and a sync for all) instead of one or two. Only the
        // next delivery of the same entity waits for it; the attempt's permit is free already.
        let gathered = tokio::time::sleep(GATHER);
        tokio::pin!(gathered);
        while batch.len() < MAX_OUTCOMES {
            let room = MAX_OUTCOMES - batch.len();
            tokio::select! {
                received = queue.recv_many(&mut batch, room) => {
                    if received == 0 {
                        break;
                    }
                }
                () = &mut gathered => break,
            }
        }
        // Rows locked in one order by every writer, so concurrent batches of several gateway
        // processes cannot deadlock.
        batch.sort_by_key(|(row, _): &Queued| row.delivery);
        let rows: Vec<&Finished> = batch.iter().map(|(row, _)| row).collect();
        let mut next = Successors::of(&gateway, &lane, &rows);
        let first_try = Instant::now();
        let mut tries = 1;
        let health = lane.health();
        let written = loop {
            let committed = commit(&gateway, &lane, &rows, &next.keys, limits.claim_ttl);
            let failure = match tokio::time::timeout(deadline, committed).await {
                Ok(Ok((written, claimed))) => {
                    next.hand(&lane, claimed);
                    health.outcomes_written();
                    break written.into_iter().map(Ok).collect();
                }
                Ok(Err(e)) => e.to_string(),
                Err(_) => timed_out(deadline),
            };
            health.outcomes_failed(failure.clone(), gateway.now().as_millis());
            // The attempts were made: writing their outcomes once the database is back (within
            // the claims) spares sending them again. Past that, another holder may take them:
            // sent again, same key.
            let pause = RETRY_BACKOFF.delay(tries);
            if first_try.elapsed() + pause >= limits.retry_for {
                break vec![Err(failure); rows.len()];
            }
            tracing::debug!(error = %failure, tries, size = rows.len(), "outcomes not written; trying again");
            tokio::time::sleep(pause).await;
            tries += 1;
        };
        for ((_, reply), recorded) in batch.drain(..).zip(written) {
            let _ = reply.send(recorded);
        }
    }
}

fn timed_out(deadline: Duration) -> String {
    format!("the database did not answer within {deadline:?}")
}

/// The next deliveries a batch of outcomes may claim: one per (route, entity) whose delivery
/// ended (delivered or dead; one to retry still holds its entity), for as many as slots and
/// tokens allow, reserved before the commit.
struct Successors {
    keys: Vec<(String, String)>,
    reserved: Vec<Reserved>,
}

/// Deliveries claimed in a batch's commit, with the end of their claim (ms).
type Claimed = (Vec<(DueDelivery, i64)>, i64);

impl Successors {
    fn of<DB: GatewayDb>(gateway: &Gateway<DB>, lane: &Lane, rows: &[&Finished]) -> Self {
        let mut keys: Vec<(String, String)> = rows
            .iter()
            .filter(|row| row.state != DeliveryState::Pending)
            .filter_map(|row| Some((row.route.clone(), row.entity.clone()?)))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let handoff = lane.handoff();
        let now = gateway.now();
        let reserved: Vec<Reserved> = keys
            .iter()
            .map_while(|_| handoff.reserve_successor(now))
            .collect();
        keys.truncate(reserved.len());
        Self { keys, reserved }
    }

    /// Hands what the commit claimed to the dispatcher, each under one of the reservations
    /// (the others go back).
    fn hand(&mut self, lane: &Lane, claimed: Claimed) {
        let handoff = lane.handoff();
        let (deliveries, until) = claimed;
        for (delivery, attempt) in deliveries {
            let Some(permit) = self.reserved.pop() else {
                break;
            };
            if let (Some(entity), 1) = (&delivery.entity, attempt) {
                handoff.claimed(&delivery.route, entity);
            }
            handoff.hand(Handed {
                delivery,
                attempt,
                until,
                permit,
                path: Claimer::Successor,
            });
        }
        self.reserved.clear();
    }
}

/// Writes `rows` and claims the next delivery of each of `keys` whose row was written, in one
/// transaction. Returns whether each row was written, and what was claimed.
async fn commit<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    lane: &Lane,
    rows: &[&Finished],
    keys: &[(String, String)],
    ttl: Ttl,
) -> Result<(Vec<bool>, Claimed), idem_sql::Error> {
    let destination = lane.destination();
    let _connection = gateway.dispatch_connection().await;
    let _turn = gateway.writer().dispatch().await;
    let mut tx = gateway.begin_dispatch().await?;
    let written = DB::finish_attempts(&mut tx, rows).await?;
    let is_written = |id: i64| written.binary_search(&id).is_ok();
    // Only the entities whose delivery this batch ended: a fenced-off outcome ended nothing.
    let ended: Vec<(&str, &str)> = keys
        .iter()
        .filter(|(route, entity)| {
            rows.iter().any(|row| {
                is_written(row.delivery)
                    && row.route == *route
                    && row.entity.as_deref() == Some(entity.as_str())
            })
        })
        .map(|(route, entity)| (route.as_str(), entity.as_str()))
        .collect();
    let now = gateway.now();
    let until = now.saturating_add(ttl.get()).as_millis();
    let mut claimed = Vec::new();
    if !ended.is_empty() {
        let next = DB::due_successors(&mut tx, &ended, now.as_millis()).await?;
        let ids: Vec<i64> = next.iter().map(|delivery| delivery.id).collect();
        let attempts = DB::start_attempts(&mut tx, &ids, until, now.as_millis()).await?;
        let mut attempts = attempts.into_iter().peekable();
        for delivery in next {
            if let Some((_, attempt)) = attempts.next_if(|(id, _)| *id == delivery.id) {
                claimed.push((delivery, attempt));
            }
        }
    }
    if !written.is_empty() {
        let counts = of_outcomes(destination.name.as_str(), rows, &written);
        DB::add_counts(&mut tx, &counts).await?;
    }
    // On PostgreSQL a claim fences holders on other machines, so a commit that claims waits for
    // the disk. (SQLite's dispatch transactions never wait: `store::relaxed`.)
    if claimed.is_empty() {
        DB::relax_commit(&mut tx).await?;
    }
    tx.commit().await?;
    let written = rows.iter().map(|row| is_written(row.delivery)).collect();
    Ok((written, (claimed, until)))
}

/// The counts of one outcome commit of `destination`: each row of `rows` that was `written`
/// (delivery ids, ascending), by its outcome, at its time, for the destination and its event's
/// source.
fn of_outcomes(destination: &str, rows: &[&Finished], written: &[i64]) -> Counts {
    let mut counts = Counts::new();
    for row in rows {
        if written.binary_search(&row.delivery).is_err() {
            continue;
        }
        let metric = match row.outcome {
            AttemptOutcome::Delivered => Metric::Delivered,
            AttemptOutcome::Retry => Metric::Retried,
            AttemptOutcome::Dead => Metric::Dead,
        };
        counts.add(row.now, Scope::Destination, destination, metric);
        counts.add(row.now, Scope::Source, &row.source, metric);
    }
    counts
}
