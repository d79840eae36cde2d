//! One held partition: fetch from the stored offset, hand batches to the sink in order, go on
//! from the offset the sink stored.

use std::sync::Arc;
use std::time::Duration;

use idem_sql::{Backend, ErrorKind, PartitionFence};
use rskafka::client::error::{Error as ClientError, ProtocolError};
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use tokio::sync::watch;

use super::message::KafkaMessage;
use super::shared::{Shared, StartFrom};
use super::sink::{BatchOutcome, PartitionBatch, PartitionSink};
use crate::metric_definitions::{KAFKA_FENCED_TOTAL, KAFKA_LAG};

/// The first wait after a failed fetch, batch or store read; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How much longer than the fetch's own wait a fetch may take before it is abandoned.
const FETCH_GRACE: Duration = Duration::from_secs(30);

/// Why a worker ended.
#[derive(Debug)]
pub(crate) enum WorkerExit {
    /// It was asked to stop (rebalance, lost lease, shutdown) and did, after its batch in flight.
    Stopped,
    /// The partition belongs to another member now (the offsets row holds another fence).
    Lost,
    /// The partition cannot be consumed further by this process.
    Halted { reason: String },
}

/// The state of one partition's worker.
pub(crate) struct Worker<DB: Backend, S: PartitionSink> {
    shared: Arc<Shared<DB, S>>,
    fence: PartitionFence,
    /// The stored next offset (`None` until started).
    stored: Option<i64>,
    /// Failed deliveries of the message at `stored`.
    attempts: u32,
    /// The last high watermark seen.
    high_watermark: i64,
    stop: watch::Receiver<bool>,
    backoff: Duration,
}

/// What to do after a batch.
enum Flow {
    /// On to the next batch of the records fetched.
    Next,
    /// Fetch again from the stored offset.
    Refetch,
    /// End the worker.
    Exit(WorkerExit),
}

impl<DB: Backend, S: PartitionSink> Worker<DB, S> {
    pub(crate) fn new(
        shared: Arc<Shared<DB, S>>,
        fence: PartitionFence,
        stored: Option<i64>,
        attempts: u32,
        stop: watch::Receiver<bool>,
    ) -> Self {
        Self {
            shared,
            fence,
            stored,
            attempts,
            high_watermark: 0,
            stop,
            backoff: MIN_BACKOFF,
        }
    }

    fn consumer(&self) -> String {
        self.shared.offsets.consumer().to_string()
    }

    fn partition(&self) -> i32 {
        self.fence.partition()
    }

    fn stopped(&self) -> bool {
        *self.stop.borrow()
    }

    /// Waits `wait`; `true` when asked to stop meanwhile.
    async fn pause(&mut self, wait: Duration) -> bool {
        if self.stopped() {
            return true;
        }
        tokio::select! {
            // A dropped sender (the consumer is gone) is a stop too.
            _ = self.stop.changed() => true,
            () = tokio::time::sleep(wait) => self.stopped(),
        }
    }

    /// Waits the current backoff and doubles it; `true` when asked to stop meanwhile.
    async fn back_off(&mut self) -> bool {
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        self.pause(wait).await
    }

    pub(crate) async fn run(mut self) -> WorkerExit {
        let Some(client) = self.partition_client().await else {
            return WorkerExit::Stopped;
        };
        let mut next = match self.stored {
            Some(next) => next,
            None => match self.start(&client).await {
                Some(Ok(next)) => next,
                Some(Err(exit)) => return exit,
                None => return WorkerExit::Stopped,
            },
        };
        loop {
            if self.stopped() {
                return WorkerExit::Stopped;
            }
            let messages = match self.fetch(&client, next).await {
                Ok(Some(messages)) => messages,
                Ok(None) => continue,
                Err(exit) => return exit,
            };
            for chunk in messages.chunks(self.shared.batch_size) {
                match self.deliver(chunk).await {
                    Flow::Next => {}
                    Flow::Refetch => break,
                    Flow::Exit(exit) => return exit,
                }
                if self.stopped() {
                    return WorkerExit::Stopped;
                }
            }
            next = match self.stored {
                Some(next) => next,
                None => return WorkerExit::Lost,
            };
        }
    }

    /// The partition's client, retried until it connects; `None` when asked to stop first.
    async fn partition_client(&mut self) -> Option<PartitionClient> {
        let (shared, partition) = (Arc::clone(&self.shared), self.partition());
        loop {
            let made = tokio::select! {
                _ = self.stop.changed() => return None,
                made = shared.client.partition_client(
                    shared.topic.clone(),
                    partition,
                    UnknownTopicHandling::Retry,
                ) => made,
            };
            match made {
                Ok(client) => return Some(client),
                Err(e) => {
                    tracing::warn!(consumer = %self.consumer(), partition = self.partition(), error = %e, "cannot reach the partition's leader; retrying");
                    if self.back_off().await {
                        return None;
                    }
                }
            }
        }
    }

    /// Chooses and stores the first offset of a partition that has none; `None` when asked to
    /// stop first.
    async fn start(&mut self, client: &PartitionClient) -> Option<Result<i64, WorkerExit>> {
        let at = match self.shared.start_from {
            StartFrom::Earliest => OffsetAt::Earliest,
            StartFrom::Latest => OffsetAt::Latest,
        };
        loop {
            let offset = match client.get_offset(at).await {
                Ok(offset) => offset,
                Err(e) => {
                    tracing::warn!(consumer = %self.consumer(), partition = self.partition(), error = %e, "cannot read the partition's start offset; retrying");
                    if self.back_off().await {
                        return None;
                    }
                    continue;
                }
            };
            match self.shared.offsets.start_at(&self.fence, offset).await {
                Ok(stored) => {
                    tracing::info!(consumer = %self.consumer(), partition = self.partition(), offset = stored, start_from = ?self.shared.start_from, "partition started");
                    self.stored = Some(stored);
                    return Some(Ok(stored));
                }
                Err(e) if e.kind() == ErrorKind::Fenced => return Some(Err(self.lost())),
                Err(e) => {
                    tracing::warn!(consumer = %self.consumer(), partition = self.partition(), error = %e, "cannot store the partition's start offset; retrying");
                    if self.back_off().await {
                        return None;
                    }
                }
            }
        }
    }

    /// One fetch from `next`: the records at or after it (`Ok(None)` for none or a failed
    /// fetch after its backoff), or the end of the worker.
    async fn fetch(
        &mut self,
        client: &PartitionClient,
        next: i64,
    ) -> Result<Option<Vec<KafkaMessage>>, WorkerExit> {
        let wait = self.shared.fetch_max_wait;
        let max_wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        let bytes = 1..self.shared.fetch_max_bytes.saturating_add(1);
        let fetched = tokio::select! {
            _ = self.stop.changed() => return Err(WorkerExit::Stopped),
            fetched = tokio::time::timeout(wait + FETCH_GRACE, client.fetch_records(next, bytes, max_wait_ms)) => fetched,
        };
        let (records, high_watermark) = match fetched {
            Ok(Ok(fetched)) => fetched,
            Ok(Err(ClientError::ServerError {
                protocol_error: ProtocolError::OffsetOutOfRange,
                ..
            })) => {
                let reason = format!(
                    "stored offset {next} is outside the partition's records (deleted by retention before they were processed, or the topic was created again); set the offset in idem_kafka_offsets by hand"
                );
                tracing::error!(consumer = %self.consumer(), partition = self.partition(), %reason, "partition halted");
                return Err(WorkerExit::Halted { reason });
            }
            Ok(Err(e)) => {
                tracing::warn!(consumer = %self.consumer(), partition = self.partition(), offset = next, error = %e, "fetch failed; retrying");
                return if self.back_off().await {
                    Err(WorkerExit::Stopped)
                } else {
                    Ok(None)
                };
            }
            Err(_) => {
                tracing::warn!(consumer = %self.consumer(), partition = self.partition(), offset = next, "fetch timed out; retrying");
                return Ok(None);
            }
        };
        self.backoff = MIN_BACKOFF;
        self.high_watermark = high_watermark;
        self.report_lag(next);
        let messages: Vec<KafkaMessage> = records
            .into_iter()
            .filter(|r| r.offset >= next)
            .map(|r| KafkaMessage::from_record(&self.shared.topic, self.partition(), r))
            .collect();
        Ok(Some(messages).filter(|m| !m.is_empty()))
    }

    fn report_lag(&self, next: i64) {
        let lag = self.high_watermark.saturating_sub(next).max(0);
        self.shared.report_lag(self.partition(), lag);
        metrics::gauge!(KAFKA_LAG, "consumer" => self.consumer(), "topic" => self.shared.topic.clone(), "partition" => self.partition().to_string())
            .set(lag as f64);
    }

    /// Hands `chunk` (records at or after the stored offset) to the sink, once.
    async fn deliver(&mut self, chunk: &[KafkaMessage]) -> Flow {
        let Some(from) = self.stored else {
            return Flow::Exit(WorkerExit::Lost);
        };
        let mut messages: Vec<KafkaMessage> =
            chunk.iter().filter(|m| m.offset >= from).cloned().collect();
        if messages.is_empty() {
            return Flow::Next;
        }
        if let Some(first) = messages.first_mut()
            && first.offset == from
        {
            first.delivered = self.attempts.saturating_add(1);
        }
        let batch = PartitionBatch {
            fence: self.fence.clone(),
            from,
            attempts: self.attempts,
            messages,
            high_watermark: self.high_watermark,
        };
        let end = batch.end();
        match self.shared.sink.apply(&batch).await {
            Ok(BatchOutcome::Settled) => {
                self.stored = Some(end);
                self.attempts = 0;
                self.backoff = MIN_BACKOFF;
                self.report_lag(end);
                Flow::Next
            }
            Ok(BatchOutcome::Retry {
                next_offset,
                attempts,
                after,
            }) if (from..end).contains(&next_offset) => {
                self.stored = Some(next_offset);
                self.attempts = attempts;
                self.report_lag(next_offset);
                if self.pause(after).await {
                    Flow::Exit(WorkerExit::Stopped)
                } else {
                    Flow::Refetch
                }
            }
            Ok(BatchOutcome::Halt {
                next_offset,
                reason,
            }) if (from..=end).contains(&next_offset) => {
                self.stored = Some(next_offset);
                self.report_lag(next_offset);
                Flow::Exit(WorkerExit::Halted { reason })
            }
            Ok(outcome) => {
                tracing::error!(consumer = %self.consumer(), partition = self.partition(), from, end, ?outcome, "the sink named an offset outside its batch; reading the stored offset");
                self.resync().await
            }
            Err(e) if e.kind() == ErrorKind::Fenced => self.resync().await,
            Err(e) => {
                tracing::warn!(consumer = %self.consumer(), partition = self.partition(), from, error = %e, "batch failed; retrying from the stored offset");
                if self.back_off().await {
                    return Flow::Exit(WorkerExit::Stopped);
                }
                self.resync().await
            }
        }
    }

    /// Reads the stored offset again (after a refused advance or a failed batch whose commit may
    /// have happened): go on from it if the partition is still this member's.
    async fn resync(&mut self) -> Flow {
        loop {
            match self.shared.offsets.load(&self.fence).await {
                Ok(row) => {
                    if row.next_offset != self.stored {
                        tracing::info!(consumer = %self.consumer(), partition = self.partition(), was = ?self.stored, stored = ?row.next_offset, "stored offset moved; going on from it");
                    }
                    self.stored = row.next_offset;
                    self.attempts = row.attempts;
                    return match row.next_offset {
                        Some(_) => Flow::Refetch,
                        None => Flow::Exit(self.lost()),
                    };
                }
                Err(e) if e.kind() == ErrorKind::Fenced => return Flow::Exit(self.lost()),
                Err(e) => {
                    tracing::warn!(consumer = %self.consumer(), partition = self.partition(), error = %e, "cannot read the stored offset; retrying");
                    if self.back_off().await {
                        return Flow::Exit(WorkerExit::Stopped);
                    }
                }
            }
        }
    }

    /// The partition was taken over: this member's writes are fenced.
    fn lost(&self) -> WorkerExit {
        tracing::warn!(consumer = %self.consumer(), partition = self.partition(), token = %self.fence.token(), "partition taken over by another member; this member's writes are fenced");
        self.shared.stats.add_fenced();
        metrics::counter!(KAFKA_FENCED_TOTAL, "consumer" => self.consumer(), "topic" => self.shared.topic.clone())
            .increment(1);
        WorkerExit::Lost
    }
}
