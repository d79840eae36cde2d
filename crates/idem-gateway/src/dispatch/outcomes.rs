//! Attempt outcomes written in group commits: the attempts that finish while one transaction
//! commits are written together in the next, so forwarding costs one sync per batch of
//! outcomes instead of one per delivery, and leaves the database's writer to ingest for longer.
//! Each attempt waits for its outcome's commit before it frees its permit and its entity.

use std::time::{Duration, Instant};

use idem_core::Backoff;

use tokio::sync::{mpsc, oneshot};

use crate::gateway::Gateway;
use crate::store::{Finished, GatewayDb};

/// The most outcomes one transaction writes.
const MAX_OUTCOMES: usize = 256;
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
}

impl Outcomes {
    /// Starts the writer on `gateway`'s database; a batch that fails is tried again for at
    /// most `retry_for` (the time left of the claims). It ends once every `Outcomes` is dropped
    /// and the queue is written.
    pub(crate) fn start<DB: GatewayDb>(
        gateway: Gateway<DB>,
        queue_len: usize,
        retry_for: Duration,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (queue, receiver) = mpsc::channel(queue_len.max(1));
        let task = tokio::spawn(write(gateway, receiver, retry_for));
        (Self { queue }, task)
    }

    /// Queues `row` and waits for its commit.
    pub(crate) async fn record(&self, row: Finished) -> Recorded {
        let (reply, answer) = oneshot::channel();
        if self.queue.send((row, reply)).await.is_err() {
            return Err("the outcome writer has stopped".to_owned());
        }
        answer
            .await
            .unwrap_or_else(|_| Err("the outcome writer has stopped".to_owned()))
    }
}

async fn write<DB: GatewayDb>(
    gateway: Gateway<DB>,
    mut queue: mpsc::Receiver<Queued>,
    retry_for: Duration,
) {
    let mut batch = Vec::with_capacity(MAX_OUTCOMES);
    let deadline = gateway.config().database_timeout;
    while queue.recv_many(&mut batch, MAX_OUTCOMES).await > 0 {
        // Rows locked in one order by every writer, so concurrent batches of several gateway
        // processes cannot deadlock.
        batch.sort_by_key(|(row, _): &Queued| row.delivery);
        let rows: Vec<&Finished> = batch.iter().map(|(row, _)| row).collect();
        let first_try = Instant::now();
        let mut tries = 1;
        let written = loop {
            let failure = match tokio::time::timeout(deadline, commit(&gateway, &rows)).await {
                Ok(Ok(written)) => break written.into_iter().map(Ok).collect(),
                Ok(Err(e)) => e.to_string(),
                Err(_) => timed_out(deadline),
            };
            // The attempts were made: writing their outcomes once the database is back (within
            // the claims) spares sending them again. Past that, another holder may take them:
            // sent again, same key.
            let pause = RETRY_BACKOFF.delay(tries);
            if first_try.elapsed() + pause >= retry_for {
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

async fn commit<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    rows: &[&Finished],
) -> Result<Vec<bool>, idem_sql::Error> {
    let _turn = gateway.writer().dispatch().await;
    let mut tx = gateway.store().begin().await?;
    let written = DB::finish_attempts(&mut tx, rows).await?;
    tx.commit().await?;
    Ok(rows
        .iter()
        .map(|row| written.binary_search(&row.delivery).is_ok())
        .collect())
}
