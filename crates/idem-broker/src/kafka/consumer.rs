//! The Kafka transport: partitions assigned by idem leases (a fair share per live member),
//! renewed while held; one worker per held partition fetching from the stored offset and
//! handing batches to the sink in order.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use std::time::{Duration, Instant};

use idem_core::{Acquire, FencingToken, LeaseKey, Name, Ttl};
use idem_sql::{Backend, ErrorKind, LeaseStore, PartitionClaim, PartitionFence, Store};
use rskafka::client::Client;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::client::{check_topic, partitions_of};
use super::error::KafkaError;
use super::shared::{KafkaConsumerStats, Shared, StartFrom};
use super::sink::PartitionSink;
use super::worker::{Worker, WorkerExit};
use crate::metric_definitions::{
    KAFKA_LEASE_CHANGES_TOTAL, KAFKA_PARTITIONS_HALTED, KAFKA_PARTITIONS_HELD,
};

/// The default partition lease: a member that stops renewing (crashed, paused, cut off from the
/// database) loses its partitions this long after its last renewal.
pub const DEFAULT_KAFKA_LEASE_TTL: Duration = Duration::from_secs(15);
/// The shortest lease [`KafkaConsumer::lease_ttl`] accepts.
pub const MIN_KAFKA_LEASE_TTL: Duration = Duration::from_millis(100);
/// The longest lease [`KafkaConsumer::lease_ttl`] accepts: a crashed member's partitions wait
/// this long for a new holder.
pub const MAX_KAFKA_LEASE_TTL: Duration = Duration::from_secs(600);
/// The default most messages handed to the sink in one batch (one transaction).
pub const DEFAULT_KAFKA_BATCH_SIZE: usize = 100;
/// The default most bytes one fetch asks a partition for (Kafka's
/// `max.partition.fetch.bytes` default). A record batch larger than this is still returned
/// whole, so progress never stalls on a large record.
pub const DEFAULT_FETCH_MAX_BYTES: i32 = 1024 * 1024;
/// The default longest time the broker holds a fetch open waiting for new records (Kafka's
/// `fetch.max.wait.ms` default).
pub const DEFAULT_FETCH_MAX_WAIT: Duration = Duration::from_millis(500);
/// How often the topic's partitions are read again, to notice partitions added to it.
const METADATA_REFRESH: Duration = Duration::from_secs(60);
/// The longest member id [`KafkaConsumer::member_id`] accepts, in bytes.
pub const MAX_MEMBER_ID_BYTES: usize = 36;

/// A Kafka consumer whose partitions are assigned by idem leases and whose offsets are stored
/// by its sink in the same transaction as the output (Kafka's consumer documentation, "Storing
/// Offsets Outside Kafka"). Kafka's consumer groups and committed offsets are not used; rskafka
/// has neither (<https://docs.rs/rskafka>).
///
/// Every process running a consumer of one name on one topic is a **member**: it holds a member
/// lease (renewed every [`renew_interval`](Self::renew_interval)) and takes free partitions up to
/// its fair share of the topic's partitions among the live members (members sorted by id; the
/// first `partitions % members` take one more), giving up partitions above its share after
/// their batch in flight, so the partitions spread evenly within a few renewals of a member
/// joining or leaving. Taking a partition writes the lease's token into the partition's offsets
/// row (see [`idem_sql::KafkaOffsets`]): a member that stops renewing (killed, or paused past
/// its lease) loses its partitions after the lease ttl, and if it comes back it cannot advance
/// their offsets, so its transactions cannot commit.
///
/// Each held partition has a worker that fetches from the stored offset, hands the records to
/// the sink in batches of at most [`batch_size`](Self::batch_size) in offset order (the next
/// batch only after the sink returned for the last), and goes on from the offset the sink
/// stored.
///
/// Consumer names are versioned like every idem consumer (`billing_v2`): two names are two
/// cursors by design; one name has one holder per partition.
pub struct KafkaConsumer<DB: Backend, S: PartitionSink> {
    client: Arc<Client>,
    store: Store<DB>,
    consumer: Name,
    topic: String,
    sink: S,
    partitions: Option<BTreeSet<i32>>,
    member: String,
    lease_ttl: Ttl,
    renew_interval: Duration,
    batch_size: usize,
    fetch_max_bytes: i32,
    fetch_max_wait: Duration,
    start_from: StartFrom,
    stats: KafkaConsumerStats,
}

impl<DB: Backend, S: PartitionSink> fmt::Debug for KafkaConsumer<DB, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KafkaConsumer")
            .field("consumer", &self.consumer)
            .field("topic", &self.topic)
            .field("partitions", &self.partitions)
            .field("member", &self.member)
            .field("lease_ttl", &self.lease_ttl)
            .field("renew_interval", &self.renew_interval)
            .field("batch_size", &self.batch_size)
            .field("start_from", &self.start_from)
            .finish_non_exhaustive()
    }
}

impl<DB: Backend, S: PartitionSink> KafkaConsumer<DB, S> {
    /// A consumer named `consumer` of `topic` through `client` (see
    /// [`connect`](crate::kafka_connect)), keeping its leases and offsets in `store`, handing
    /// batches to `sink` (normally a [`KafkaProcessor`](crate::KafkaProcessor) on the same
    /// store and consumer name). Defaults: every partition of the topic,
    /// [`DEFAULT_KAFKA_LEASE_TTL`] renewed every third of it, [`DEFAULT_KAFKA_BATCH_SIZE`],
    /// [`DEFAULT_FETCH_MAX_BYTES`], [`DEFAULT_FETCH_MAX_WAIT`], [`StartFrom::Earliest`], and a
    /// random member id. Registers `consumer` in `store`'s consumer registry as
    /// [`ConsumerKind::Kafka`](idem_sql::ConsumerKind::Kafka).
    ///
    /// # Errors
    /// [`KafkaError::InvalidConfig`] for a topic name Kafka does not allow or longer than
    /// [`MAX_TOPIC_BYTES`](crate::MAX_TOPIC_BYTES).
    pub fn new(
        client: Arc<Client>,
        store: Store<DB>,
        consumer: &Name,
        topic: &str,
        sink: S,
    ) -> Result<Self, KafkaError> {
        check_topic(topic).map_err(KafkaError::InvalidConfig)?;
        store.register_consumer(consumer, idem_sql::ConsumerKind::Kafka);
        let lease_ttl = Ttl::new(DEFAULT_KAFKA_LEASE_TTL)
            .map_err(|e| KafkaError::InvalidConfig(e.to_string()))?;
        Ok(Self {
            client,
            store,
            consumer: consumer.clone(),
            topic: topic.to_owned(),
            sink,
            partitions: None,
            member: format!("m{:016x}", rand::random::<u64>()),
            lease_ttl,
            renew_interval: DEFAULT_KAFKA_LEASE_TTL / 3,
            batch_size: DEFAULT_KAFKA_BATCH_SIZE,
            fetch_max_bytes: DEFAULT_FETCH_MAX_BYTES,
            fetch_max_wait: DEFAULT_FETCH_MAX_WAIT,
            start_from: StartFrom::default(),
            stats: KafkaConsumerStats::default(),
        })
    }

    /// Consumes only these partitions (checked against the topic when [`run`](Self::run)
    /// starts); the fair share is taken of them. Every member of one consumer name should be
    /// given the same set.
    pub fn partitions(self, partitions: impl IntoIterator<Item = i32>) -> Self {
        Self {
            partitions: Some(partitions.into_iter().collect()),
            ..self
        }
    }

    /// Sets the member id (default: `m` and 16 random hex digits), shown in the offsets rows'
    /// `holder` column and the logs. It must be unique among the members at any time: give each
    /// process its own (a restarted process a new one).
    ///
    /// # Errors
    /// [`KafkaError::InvalidConfig`] unless it is 1 to [`MAX_MEMBER_ID_BYTES`] bytes of
    /// `A–Z a–z 0–9 _ . -`.
    pub fn member_id(self, member: impl Into<String>) -> Result<Self, KafkaError> {
        let member = member.into();
        let valid = !member.is_empty()
            && member.len() <= MAX_MEMBER_ID_BYTES
            && member
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !valid {
            return Err(KafkaError::InvalidConfig(format!(
                "member id {member:?} must be 1 to {MAX_MEMBER_ID_BYTES} bytes of A-Z a-z 0-9 _ . -"
            )));
        }
        Ok(Self { member, ..self })
    }

    /// Sets the lease ttl of the member and partition leases (default [`DEFAULT_KAFKA_LEASE_TTL`])
    /// and renews them every third of it. After a member crashes, its partitions wait up to
    /// this long (plus one renewal interval) for another member.
    ///
    /// # Errors
    /// [`KafkaError::InvalidConfig`] outside [`MIN_KAFKA_LEASE_TTL`]..=[`MAX_KAFKA_LEASE_TTL`].
    pub fn lease_ttl(self, ttl: Duration) -> Result<Self, KafkaError> {
        if !(MIN_KAFKA_LEASE_TTL..=MAX_KAFKA_LEASE_TTL).contains(&ttl) {
            return Err(KafkaError::InvalidConfig(format!(
                "lease ttl {ttl:?} is not between {MIN_KAFKA_LEASE_TTL:?} and {MAX_KAFKA_LEASE_TTL:?}"
            )));
        }
        let lease_ttl = Ttl::new(ttl).map_err(|e| KafkaError::InvalidConfig(e.to_string()))?;
        Ok(Self {
            lease_ttl,
            renew_interval: ttl / 3,
            ..self
        })
    }

    /// Sets how often leases are renewed and the fair share is looked at again (default a third
    /// of the lease ttl; call after [`lease_ttl`](Self::lease_ttl)).
    ///
    /// # Errors
    /// [`KafkaError::InvalidConfig`] when it is zero or not below half the lease ttl (one slow
    /// renewal would lose the leases).
    pub fn renew_interval(self, every: Duration) -> Result<Self, KafkaError> {
        if every.is_zero() || every >= self.lease_ttl.get() / 2 {
            return Err(KafkaError::InvalidConfig(format!(
                "renewal interval {every:?} must be above zero and below half the lease ttl {:?}",
                self.lease_ttl.get()
            )));
        }
        Ok(Self {
            renew_interval: every,
            ..self
        })
    }

    /// Sets the most messages per batch handed to the sink (at least 1).
    pub fn batch_size(self, batch_size: usize) -> Self {
        Self {
            batch_size: batch_size.max(1),
            ..self
        }
    }

    /// Sets the most bytes one fetch asks a partition for, from 1 KiB up (smaller is raised).
    pub fn fetch_max_bytes(self, bytes: i32) -> Self {
        Self {
            fetch_max_bytes: bytes.max(1024),
            ..self
        }
    }

    /// Sets how long the broker holds a fetch open waiting for records (at most 30 s).
    pub fn fetch_max_wait(self, wait: Duration) -> Self {
        Self {
            fetch_max_wait: wait.min(Duration::from_secs(30)),
            ..self
        }
    }

    /// Sets where a partition without a stored offset starts.
    pub fn start_from(self, start_from: StartFrom) -> Self {
        Self { start_from, ..self }
    }

    /// The member id.
    pub fn member(&self) -> &str {
        &self.member
    }

    /// The live partition counters.
    pub fn stats(&self) -> KafkaConsumerStats {
        self.stats.clone()
    }

    /// Consumes until `shutdown` completes. At shutdown it stops fetching, lets every batch in
    /// flight finish, releases its partition leases (other members take them at once) and its
    /// member lease, flushes the consumer registry's pending counts (a failure logged) and
    /// returns `Ok(())`. After each fetch it reports the consumer's lag to the registry: the
    /// high watermark − the next offset, summed over the partitions it holds.
    ///
    /// While it runs, failures of the store or the cluster are logged as warnings and retried
    /// (leases at the next renewal, fetches and batches after a backoff of 100 ms doubling to
    /// 5 s); none needs a restart. A partition whose stored offset the topic no longer has
    /// (records deleted by retention before they were processed, or a topic deleted and
    /// created again) halts with an error log: set it by hand.
    ///
    /// # Errors
    /// Before consuming anything: [`KafkaError::Client`] when the topic's metadata cannot be
    /// read; [`KafkaError::UnknownTopic`]; [`KafkaError::UnknownPartition`] for a configured
    /// partition the topic lacks; [`KafkaError::InvalidConfig`] when the member id is already in
    /// use by a live member or a lease key cannot be built; [`KafkaError::Store`] when the
    /// member lease cannot be taken.
    pub async fn run<F>(self, shutdown: F) -> Result<(), KafkaError>
    where
        F: Future<Output = ()> + Send,
    {
        let all = self.topic_partitions().await?;
        let offsets = self.store.kafka_offsets(&self.consumer);
        let member_key = offsets.member_lease(&self.topic, &self.member)?;
        let leases = self.store.leases();
        let member_token = join(&leases, &member_key, self.lease_ttl).await?;
        let store = self.store.clone();
        let shared = Arc::new(Shared {
            lags: Default::default(),
            store: store.clone(),
            client: self.client,
            offsets,
            topic: self.topic,
            sink: self.sink,
            batch_size: self.batch_size,
            fetch_max_bytes: self.fetch_max_bytes,
            fetch_max_wait: self.fetch_max_wait,
            start_from: self.start_from,
            stats: self.stats,
        });
        let mut group = Group {
            shared,
            leases,
            consumer: self.consumer,
            member: self.member,
            member_key,
            member_token,
            lease_ttl: self.lease_ttl,
            fixed: self.partitions,
            partitions: all,
            metadata_at: Instant::now(),
            held: BTreeMap::new(),
            workers: JoinSet::new(),
            tasks: HashMap::new(),
        };
        tracing::info!(consumer = %group.consumer, topic = %group.shared.topic, member = %group.member, partitions = group.partitions.len(), "Kafka consumer joined");
        let mut tick = tokio::time::interval(self.renew_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                Some(done) = group.workers.join_next_with_id() => group.worker_done(done).await,
                _ = tick.tick() => group.rebalance().await,
            }
        }
        let consumer = group.consumer.clone();
        group.leave().await;
        if let Err(e) = store.flush_consumer_counts().await {
            tracing::warn!(%consumer, error = %e, "flushing the consumer counts at shutdown failed");
        }
        Ok(())
    }

    /// The partitions to consume: the configured ones (checked) or all of the topic's.
    async fn topic_partitions(&self) -> Result<BTreeSet<i32>, KafkaError> {
        let all = partitions_of(&self.client, &self.topic)
            .await?
            .ok_or_else(|| KafkaError::UnknownTopic {
                topic: self.topic.clone(),
            })?;
        match &self.partitions {
            None => Ok(all),
            Some(fixed) => {
                if let Some(&partition) = fixed.iter().find(|p| !all.contains(p)) {
                    return Err(KafkaError::UnknownPartition {
                        topic: self.topic.clone(),
                        partition,
                        count: all.len(),
                    });
                }
                Ok(fixed.clone())
            }
        }
    }
}

/// Takes the member lease.
async fn join<DB: Backend>(
    leases: &LeaseStore<DB>,
    key: &LeaseKey,
    ttl: Ttl,
) -> Result<FencingToken, KafkaError> {
    match leases.acquire(key, ttl).await? {
        Acquire::Acquired { token, .. } => Ok(token),
        _ => Err(KafkaError::InvalidConfig(format!(
            "member lease {key} is held by a live member: give each process its own member id"
        ))),
    }
}

/// One held partition.
struct Held {
    fence: PartitionFence,
    state: State,
    stop: watch::Sender<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// A worker consumes it.
    Running,
    /// Its worker was asked to stop; the lease is released when it has.
    Releasing,
    /// Its renewal was refused; its worker was asked to stop; nothing to release.
    Lost,
    /// Not consumed (poison message under `PoisonPolicy::Halt`, offset out of range); the
    /// lease is kept so that no other member meets the same message.
    Halted,
}

/// What happened to a partition lease, for [`KAFKA_LEASE_CHANGES_TOTAL`].
#[derive(Debug, Clone, Copy)]
enum LeaseChange {
    Acquired,
    Released,
    Lost,
}

/// The running state of one member.
struct Group<DB: Backend, S: PartitionSink> {
    shared: Arc<Shared<DB, S>>,
    leases: LeaseStore<DB>,
    consumer: Name,
    member: String,
    member_key: LeaseKey,
    member_token: FencingToken,
    lease_ttl: Ttl,
    fixed: Option<BTreeSet<i32>>,
    partitions: BTreeSet<i32>,
    metadata_at: Instant,
    held: BTreeMap<i32, Held>,
    workers: JoinSet<(i32, WorkerExit)>,
    tasks: HashMap<tokio::task::Id, i32>,
}

impl<DB: Backend, S: PartitionSink> Group<DB, S> {
    fn lease_change(&self, change: LeaseChange) {
        let (i, label) = match change {
            LeaseChange::Acquired => (2, "acquired"),
            LeaseChange::Released => (3, "released"),
            LeaseChange::Lost => (4, "lost"),
        };
        self.shared.stats.add(i);
        metrics::counter!(KAFKA_LEASE_CHANGES_TOTAL, "consumer" => self.consumer.to_string(), "topic" => self.shared.topic.clone(), "change" => label).increment(1);
    }

    fn publish_counts(&self) {
        let halted = self
            .held
            .values()
            .filter(|h| h.state == State::Halted)
            .count();
        let held = self.held.len();
        self.shared.stats.set_held(held as u64, halted as u64);
        let labels = [
            ("consumer", self.consumer.to_string()),
            ("topic", self.shared.topic.clone()),
        ];
        metrics::gauge!(KAFKA_PARTITIONS_HELD, &labels).set(held as f64);
        metrics::gauge!(KAFKA_PARTITIONS_HALTED, &labels).set(halted as f64);
    }

    /// One renewal round: the member lease, the partition leases, then the fair share.
    async fn rebalance(&mut self) {
        self.renew_member().await;
        self.renew_partitions().await;
        self.refresh_metadata().await;
        let members = match self.shared.offsets.live_members(&self.shared.topic).await {
            Ok(members) => members,
            Err(e) => {
                tracing::warn!(consumer = %self.consumer, error = %e, "cannot count the live members; keeping the current partitions");
                return;
            }
        };
        let share = fair_share(self.partitions.len(), &members, &self.member);
        let active: Vec<i32> = self
            .held
            .iter()
            .filter(|(_, h)| matches!(h.state, State::Running | State::Halted))
            .map(|(p, _)| *p)
            .collect();
        if active.len() > share {
            // Give up the highest-numbered running partitions above the share.
            let extra = active.len() - share;
            let running: Vec<i32> = active
                .iter()
                .rev()
                .filter(|p| self.held.get(p).is_some_and(|h| h.state == State::Running))
                .take(extra)
                .copied()
                .collect();
            for partition in running {
                if let Some(held) = self.held.get_mut(&partition) {
                    tracing::info!(consumer = %self.consumer, partition, share, members = members.len(), "giving up a partition above the fair share");
                    held.state = State::Releasing;
                    held.stop.send_replace(true);
                }
            }
        } else if active.len() < share {
            self.take_free(share - active.len(), &members).await;
        }
        self.publish_counts();
    }

    async fn renew_member(&mut self) {
        match self
            .leases
            .extend(&self.member_key, self.member_token, self.lease_ttl)
            .await
        {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Fenced => {
                // Expired (this process was paused or cut off): join again.
                tracing::warn!(consumer = %self.consumer, member = %self.member, "member lease expired; joining again");
                match self.leases.acquire(&self.member_key, self.lease_ttl).await {
                    Ok(Acquire::Acquired { token, .. }) => self.member_token = token,
                    Ok(_) => {
                        tracing::error!(consumer = %self.consumer, member = %self.member, "member id in use by another live member")
                    }
                    Err(e) => {
                        tracing::warn!(consumer = %self.consumer, error = %e, "cannot take the member lease again")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(consumer = %self.consumer, error = %e, "cannot renew the member lease")
            }
        }
    }

    async fn renew_partitions(&mut self) {
        let mut lost = Vec::new();
        for (partition, held) in &self.held {
            if held.state == State::Lost {
                continue;
            }
            match self.shared.offsets.renew(&held.fence, self.lease_ttl).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Fenced => lost.push(*partition),
                Err(e) => {
                    tracing::warn!(consumer = %self.consumer, partition, error = %e, "cannot renew a partition lease")
                }
            }
        }
        for partition in lost {
            tracing::warn!(consumer = %self.consumer, partition, "partition lease lost (not renewed in time); stopping its worker");
            self.lease_change(LeaseChange::Lost);
            let has_worker = self
                .held
                .get(&partition)
                .is_some_and(|h| h.state != State::Halted);
            if has_worker {
                if let Some(held) = self.held.get_mut(&partition) {
                    held.state = State::Lost;
                    held.stop.send_replace(true);
                }
            } else {
                self.held.remove(&partition);
            }
        }
    }

    /// Reads the topic's partitions again now and then (partitions can be added to a topic).
    async fn refresh_metadata(&mut self) {
        if self.fixed.is_some() || self.metadata_at.elapsed() < METADATA_REFRESH {
            return;
        }
        self.metadata_at = Instant::now();
        match partitions_of(&self.shared.client, &self.shared.topic).await {
            Ok(Some(partitions)) => {
                if partitions != self.partitions {
                    tracing::info!(consumer = %self.consumer, before = self.partitions.len(), now = partitions.len(), "the topic's partitions changed");
                    self.partitions = partitions;
                }
            }
            Ok(None) => {
                tracing::error!(consumer = %self.consumer, topic = %self.shared.topic, "the topic is gone from the cluster's metadata")
            }
            Err(e) => {
                tracing::warn!(consumer = %self.consumer, error = %e, "cannot read the topic's partitions")
            }
        }
    }

    /// Tries to take up to `wanted` partitions no one holds, starting at this member's place
    /// among the members so that members joining together try different partitions first.
    async fn take_free(&mut self, wanted: usize, members: &[String]) {
        let all: Vec<i32> = self.partitions.iter().copied().collect();
        if all.is_empty() {
            return;
        }
        let rank = members
            .iter()
            .position(|m| *m == self.member)
            .unwrap_or(members.len());
        let start = rank * all.len() / members.len().max(1);
        let mut taken = 0;
        for i in 0..all.len() {
            if taken == wanted {
                break;
            }
            let partition = all[(start + i) % all.len()];
            if self.held.contains_key(&partition) {
                continue;
            }
            let claim = self
                .shared
                .offsets
                .acquire(&self.shared.topic, partition, &self.member, self.lease_ttl)
                .await;
            match claim {
                Ok(PartitionClaim::Acquired {
                    fence,
                    next_offset,
                    attempts,
                    takeover,
                    ..
                }) => {
                    tracing::info!(consumer = %self.consumer, partition, token = %fence.token(), ?next_offset, takeover, "partition taken");
                    self.lease_change(LeaseChange::Acquired);
                    self.spawn(fence, next_offset, attempts);
                    taken += 1;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(consumer = %self.consumer, partition, error = %e, "cannot take a partition lease")
                }
            }
        }
    }

    fn spawn(&mut self, fence: PartitionFence, next_offset: Option<i64>, attempts: u32) {
        let (stop, stopped) = watch::channel(false);
        let partition = fence.partition();
        let worker = Worker::new(
            Arc::clone(&self.shared),
            fence.clone(),
            next_offset,
            attempts,
            stopped,
        );
        let handle = self
            .workers
            .spawn(async move { (partition, worker.run().await) });
        self.tasks.insert(handle.id(), partition);
        self.held.insert(
            partition,
            Held {
                fence,
                state: State::Running,
                stop,
            },
        );
    }

    /// A worker ended: release, forget or keep its partition.
    async fn worker_done(
        &mut self,
        done: Result<(tokio::task::Id, (i32, WorkerExit)), tokio::task::JoinError>,
    ) {
        let (partition, exit) = match done {
            Ok((id, (partition, exit))) => {
                self.tasks.remove(&id);
                (partition, exit)
            }
            Err(e) => {
                let Some(partition) = self.tasks.remove(&e.id()) else {
                    return;
                };
                tracing::error!(consumer = %self.consumer, partition, error = %e, "partition worker panicked; releasing the partition");
                (partition, WorkerExit::Stopped)
            }
        };
        let Some(held) = self.held.get_mut(&partition) else {
            return;
        };
        match exit {
            WorkerExit::Halted { reason } if held.state == State::Running => {
                tracing::error!(consumer = %self.consumer, partition, %reason, "partition halted; it stays held and is not consumed until restart");
                held.state = State::Halted;
            }
            WorkerExit::Lost => {
                self.held.remove(&partition);
                self.lease_change(LeaseChange::Lost);
            }
            WorkerExit::Halted { .. } | WorkerExit::Stopped => {
                if let Some(held) = self.held.remove(&partition)
                    && held.state != State::Lost
                {
                    self.release(&held.fence).await;
                }
            }
        }
        self.publish_counts();
    }

    async fn release(&self, fence: &PartitionFence) {
        match self.shared.offsets.release(fence).await {
            Ok(()) => self.lease_change(LeaseChange::Released),
            // Expired meanwhile: nothing to give up.
            Err(e) if e.kind() == ErrorKind::Fenced => {}
            Err(e) => {
                tracing::warn!(consumer = %self.consumer, partition = fence.partition(), error = %e, "cannot release a partition lease; it expires after its ttl")
            }
        }
    }

    /// Shutdown: stop every worker, let its batch in flight finish, give the leases up.
    async fn leave(mut self) {
        for held in self.held.values() {
            held.stop.send_replace(true);
        }
        while let Some(done) = self.workers.join_next_with_id().await {
            if let Ok((id, _)) = &done {
                self.tasks.remove(id);
            }
        }
        let held = std::mem::take(&mut self.held);
        for held in held.into_values() {
            if held.state != State::Lost {
                self.release(&held.fence).await;
            }
        }
        self.publish_counts();
        if let Err(e) = self
            .leases
            .release(&self.member_key, self.member_token)
            .await
        {
            tracing::debug!(consumer = %self.consumer, error = %e, "member lease not released; it expires after its ttl");
        }
        tracing::info!(consumer = %self.consumer, member = %self.member, "Kafka consumer left");
    }
}

/// This member's fair share of `partitions` partitions among the live `members` (sorted ids):
/// `partitions / members`, plus one for the first `partitions % members` members. A member not
/// (or no longer) in the list counts itself as the last.
fn fair_share(partitions: usize, members: &[String], member: &str) -> usize {
    let (count, rank) = match members.iter().position(|m| m == member) {
        Some(rank) => (members.len(), rank),
        None => (members.len() + 1, members.len()),
    };
    partitions / count + usize::from(rank < partitions % count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i}")).collect()
    }

    #[test]
    fn fair_shares_add_up_to_every_partition() {
        for partitions in 0..12 {
            for n in 1..6 {
                let members = ids(n);
                let shares: Vec<usize> = members
                    .iter()
                    .map(|m| fair_share(partitions, &members, m))
                    .collect();
                assert_eq!(
                    shares.iter().sum::<usize>(),
                    partitions,
                    "{partitions} over {n}"
                );
                let (min, max) = (shares.iter().min(), shares.iter().max());
                assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{shares:?}");
            }
        }
    }

    #[test]
    fn a_member_missing_from_the_list_counts_itself_last() {
        // Its member lease lapsed for a moment: it still takes a share, never all.
        assert_eq!(fair_share(4, &ids(1), "zz"), 2);
        assert_eq!(fair_share(4, &[], "zz"), 4);
        assert_eq!(fair_share(3, &ids(2), "zz"), 1);
    }
}
