//! Group commit: many requests, one transaction, one fsync. Each request's dedup key is claimed
//! in idem's inbox, fresh events are stored with their deliveries, and every request is answered
//! only after the commit (docs/design.md C2). A request is a [`Unit`]: one webhook or broker
//! message, or one Kafka partition batch whose offset advance and dead letters commit with its
//! events, so that the stored offset never runs ahead of, or behind, what was stored.

use std::sync::Arc;
use std::time::Duration;

use idem_core::Backoff;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::answer::Answer;
use super::commit::commit_once;
use super::unit::{Pending, Unavailable, Unit};
use crate::gateway::Gateway;
use crate::metric_definitions::INGEST_BATCH_SIZE;
use crate::store::GatewayDb;
use crate::traces;
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
    // One configuration for the whole batch: a reload swaps it between batches, never within
    // one, and a unit filtered under the one before is filtered again.
    let wiring = gateway.wiring();
    let deadline = wiring.config().database_timeout;
    let (mut incoming, replies): (Vec<_>, Vec<_>) =
        live.into_iter().map(|p| (p.unit, p.reply)).unzip();
    for unit in &mut incoming {
        super::filter::apply(gateway, &wiring, unit);
    }
    let span = traces::batch_span(incoming.iter().map(|u| u.events.len()).sum());
    traces::link_to_batch(
        &span,
        incoming.iter().flat_map(|u| &u.events).map(|i| &i.span),
    );
    let health = gateway.health();
    // Bounded: a database that stops answering costs each batch `database_timeout`, and
    // the requests were answered 503 by then (their own deadline is the same).
    let answers = match tokio::time::timeout_at(earliest, commit(gateway, &wiring, &incoming)).await
    {
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
                    let answer = commit(gateway, &wiring, std::slice::from_ref(one)).await;
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
    wiring: &Wiring,
    batch: &[Unit],
) -> Result<Vec<Vec<Answer>>, idem_sql::Error> {
    let events: usize = batch.iter().map(|u| u.events.len()).sum();
    metrics::histogram!(INGEST_BATCH_SIZE).record(events as f64);
    let mut tries = 1;
    loop {
        match commit_once(gateway, wiring, batch).await {
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
                    .map(|i| wiring.source(i.source).name.as_str())
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
