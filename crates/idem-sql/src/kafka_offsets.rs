//! Kafka consumer offsets kept in idem's store: one row per (consumer, topic, partition) holding
//! the next offset to process, advanced by compare-and-set in the same transaction as the output
//! of the messages before it, and the partition leases that give each partition one holder at a
//! time.
//!
//! This is the recipe of Kafka's consumer documentation for exactly-once output without Kafka
//! transactions (section "Storing Offsets Outside Kafka" of the `KafkaConsumer` javadoc,
//! <https://kafka.apache.org/36/javadoc/org/apache/kafka/clients/consumer/KafkaConsumer.html>):
//! store the position with the output, atomically, and on assignment resume from the stored
//! position. Kafka's own committed offsets and consumer groups are not used.
//!
//! # Fencing
//!
//! A partition is held through an idem lease ([`LeaseStore`](crate::LeaseStore)) on
//! [`KafkaOffsets::partition_lease`]. Taking the lease and writing its token and the holder's
//! member id into the offsets row happen in one transaction ([`KafkaOffsets::acquire`]); every
//! advance ([`KafkaOffsets::advance_in`]) matches that token, that member id and the expected
//! offset. So once a new holder took a partition, the old one (a process paused past its lease,
//! a "zombie") can neither move the offset nor commit the transaction that carries its output:
//! its advance matches no row and the caller rolls back. On PostgreSQL and MySQL the two cannot interleave
//! (the advance and the fence write the same row, so one waits for the other's commit); on SQLite
//! write transactions run one at a time.
//!
//! The fence does not depend on the lease row surviving: retention may delete a lease that
//! expired long ago and the next holder then starts again at token 1, but it also writes its own
//! member id, which no earlier holder has.

use idem_core::{Acquire, FencingToken, LeaseKey, Name, Timestamp, Ttl};
use sqlx::Transaction;

use crate::backend::Backend;
use crate::backend::kafka_offset_ops::{FenceKey, OffsetRow};
use crate::{Error, LeaseStore, Store};

const TABLE: &str = "idem_kafka_offsets";

/// What the lease scope of a Kafka consumer's leases starts with: `kafka/{consumer}`.
pub(crate) const LEASE_SCOPE_PREFIX: &str = "kafka/";

/// What a holder of a partition presents with every write to its offsets row: the partition, the
/// token of its lease and its member id. Made by [`KafkaOffsets::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionFence {
    topic: String,
    partition: i32,
    token: FencingToken,
    holder: String,
}

impl PartitionFence {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The partition number.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The token of the holder's partition lease.
    pub fn token(&self) -> FencingToken {
        self.token
    }

    /// The holder's member id.
    pub fn holder(&self) -> &str {
        &self.holder
    }
}

/// The answer to [`KafkaOffsets::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartitionClaim {
    /// The caller now holds the partition until `expires_at` (renew with
    /// [`KafkaOffsets::renew`]); the fence is written.
    Acquired {
        /// What the caller presents with every write.
        fence: PartitionFence,
        /// The stored next offset; `None` when no holder has started the partition yet (choose a
        /// start and store it with [`KafkaOffsets::start_at`]).
        next_offset: Option<i64>,
        /// Failed deliveries so far of the message at `next_offset`.
        attempts: u32,
        /// When the lease lapses unless renewed (ms since the epoch, store clock).
        expires_at: Timestamp,
        /// Whether an expired lease of another holder was taken over.
        takeover: bool,
    },
    /// Another holder has a live lease on the partition until `until`.
    Held {
        /// When that lease lapses unless renewed.
        until: Timestamp,
    },
}

/// A partition's stored position, as read by [`KafkaOffsets::get`], [`KafkaOffsets::list`] and
/// [`KafkaOffsets::load`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KafkaOffset {
    /// The partition number.
    pub partition: i32,
    /// The offset of the next message to process: every message before it is applied (its
    /// output committed), dead-lettered or skipped. `None` before the first holder started.
    pub next_offset: Option<i64>,
    /// The lease token of the holder that last took the partition.
    pub token: FencingToken,
    /// That holder's member id.
    pub holder: String,
    /// Failed deliveries of the message at `next_offset` (0 after every advance).
    pub attempts: u32,
    /// The last of those failures, as text.
    pub last_error: Option<String>,
    /// When the row last changed (ms since the epoch, store clock).
    pub updated_at: Timestamp,
}

/// The Kafka offsets and partition leases of one consumer. Made by [`Store::kafka_offsets`];
/// cheap to clone.
///
/// The consumer name is versioned like every idem consumer (`billing_v2`): two names are two
/// cursors on the same topic, each with its own offsets, inbox and leases.
#[derive(Debug)]
pub struct KafkaOffsets<DB: Backend> {
    store: Store<DB>,
    consumer: Name,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for KafkaOffsets<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            consumer: self.consumer.clone(),
        }
    }
}

impl<DB: Backend> Store<DB> {
    /// The Kafka offsets and partition leases of `consumer` (`idem_kafka_offsets`, leases in
    /// `idem_leases`).
    pub fn kafka_offsets(&self, consumer: &Name) -> KafkaOffsets<DB> {
        KafkaOffsets {
            store: self.clone(),
            consumer: consumer.clone(),
        }
    }
}

impl<DB: Backend> KafkaOffsets<DB> {
    /// The consumer.
    pub fn consumer(&self) -> &Name {
        &self.consumer
    }

    /// The lease scope of this consumer's partition and member leases: `kafka/{consumer}`
    /// (also read by a reset's liveness check).
    pub(crate) fn scope(&self) -> String {
        format!("{LEASE_SCOPE_PREFIX}{}", self.consumer)
    }

    /// The lease on one partition: scope `kafka/{consumer}`, key `{topic}/{partition}`.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the key would pass the 255 bytes of a lease key (a topic longer
    /// than about 240 bytes) or the topic is blank.
    pub fn partition_lease(&self, topic: &str, partition: i32) -> Result<LeaseKey, Error> {
        Ok(LeaseKey::new(self.scope(), format!("{topic}/{partition}"))?)
    }

    /// The lease that says a member is alive: scope `kafka/{consumer}`, key
    /// `{topic}/members/{member}` (a partition number is never `members`, so the two kinds of key
    /// never meet). Acquire and renew it with [`Store::leases`]; [`live_members`](Self::live_members)
    /// counts the live ones.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the key would pass 255 bytes or a part is blank.
    pub fn member_lease(&self, topic: &str, member: &str) -> Result<LeaseKey, Error> {
        Ok(LeaseKey::new(
            self.scope(),
            format!("{topic}/members/{member}"),
        )?)
    }

    /// The member ids whose member lease on `topic` is live now, sorted.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn live_members(&self, topic: &str) -> Result<Vec<String>, Error> {
        let prefix = format!("{topic}/members/");
        let mut conn = self.store.pool().acquire().await?;
        let keys = DB::kafka_live_members(&mut conn, &self.scope(), &prefix, self.now()).await?;
        Ok(keys
            .into_iter()
            .filter_map(|key| key.strip_prefix(&prefix).map(str::to_owned))
            .collect())
    }

    /// Tries to take `partition` of `topic` for member `holder` for `ttl`: in one transaction,
    /// acquires the partition lease and, when it was free (absent, released or expired), writes
    /// the new token and `holder` into the partition's offsets row (creating it, not started,
    /// the first time). From the commit on, only writes presenting the returned fence match the
    /// row.
    ///
    /// Returns [`PartitionClaim::Acquired`] with the stored position, or
    /// [`PartitionClaim::Held`] while another holder's lease is live.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a lease key that cannot be built (see
    /// [`partition_lease`](Self::partition_lease)); [`Error::LeaseContended`];
    /// [`Error::Database`] (a conflict on SQLite's busy database is of kind
    /// [`Conflict`](crate::ErrorKind::Conflict): try again).
    pub async fn acquire(
        &self,
        topic: &str,
        partition: i32,
        holder: &str,
        ttl: Ttl,
    ) -> Result<PartitionClaim, Error> {
        let key = self.partition_lease(topic, partition)?;
        let leases = LeaseStore::new(self.store.clone());
        let mut tx = self.store.begin().await?;
        let (token, expires_at, takeover) = match leases.acquire_in(&mut tx, &key, &[], ttl).await?
        {
            Acquire::Acquired {
                token,
                expires_at,
                takeover,
            } => (token, expires_at, takeover),
            Acquire::InProgress { until } => return Ok(PartitionClaim::Held { until }),
            // Partition leases are never completed and carry no fingerprint: a row in either
            // state was written by something else and is not touched.
            Acquire::Completed { .. } | Acquire::FingerprintMismatch => {
                return Err(Error::CorruptRow {
                    table: "idem_leases",
                    detail: format!("partition lease {key} is completed or has a fingerprint"),
                });
            }
        };
        let fence = PartitionFence {
            topic: topic.to_owned(),
            partition,
            token,
            holder: holder.to_owned(),
        };
        let (next_offset, attempts) =
            DB::kafka_fence(&mut tx, &self.fence_key(&fence), self.now()).await?;
        tx.commit().await?;
        Ok(PartitionClaim::Acquired {
            fence,
            next_offset,
            attempts: attempts_of(attempts)?,
            expires_at,
            takeover,
        })
    }

    /// Renews the partition lease of `fence` for `ttl` from now; returns the new expiry.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the lease is no longer held with the fence's token or has already
    /// expired (another member may be taking it over: stop working on the partition);
    /// [`Error::Invalid`]; [`Error::Database`].
    pub async fn renew(&self, fence: &PartitionFence, ttl: Ttl) -> Result<Timestamp, Error> {
        let key = self.partition_lease(&fence.topic, fence.partition)?;
        LeaseStore::new(self.store.clone())
            .extend(&key, fence.token, ttl)
            .await
    }

    /// Gives the partition up (after its last batch committed): another member can take it at
    /// once, with the next token.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the lease is no longer held with the fence's token;
    /// [`Error::Invalid`]; [`Error::Database`].
    pub async fn release(&self, fence: &PartitionFence) -> Result<(), Error> {
        let key = self.partition_lease(&fence.topic, fence.partition)?;
        LeaseStore::new(self.store.clone())
            .release(&key, fence.token)
            .await
    }

    /// Stores the first position of a partition that has none (`next_offset` was `None` in the
    /// claim): the offset the holder chose to start from (the earliest or the latest offset
    /// Kafka reports). Returns the stored position: `offset`, or the one already stored.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the fence no longer matches the row; [`Error::Database`].
    pub async fn start_at(&self, fence: &PartitionFence, offset: i64) -> Result<i64, Error> {
        let mut conn = self.store.pool().acquire().await?;
        if DB::kafka_start(&mut conn, &self.fence_key(fence), offset, self.now()).await? {
            return Ok(offset);
        }
        drop(conn);
        match self.load(fence).await?.next_offset {
            Some(stored) => Ok(stored),
            None => Err(self.fenced(fence)),
        }
    }

    /// Advances the partition's stored offset from `from` to `to` inside the caller's
    /// transaction (compare-and-set), clearing its failure count when it moves (`to == from`
    /// only checks the fence and the offset): the messages in `from..to` are
    /// settled by what the transaction wrote. Call it in the transaction that carries their
    /// output, then commit.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the row does not hold this fence (another holder took the
    /// partition), its offset is not `from` (the caller's view is out of date, for example
    /// after a commit whose answer was lost: [`load`](Self::load) tells the two apart) or `to`
    /// is before `from` (an offset never moves back); roll back, nothing of the transaction may
    /// commit. [`Error::Database`].
    pub async fn advance_in(
        &self,
        tx: &mut Transaction<'_, DB>,
        fence: &PartitionFence,
        from: i64,
        to: i64,
    ) -> Result<(), Error> {
        let moved = DB::kafka_advance(tx, &self.fence_key(fence), from, to, self.now()).await?;
        if moved {
            Ok(())
        } else {
            Err(self.fenced(fence))
        }
    }

    /// Counts a failed delivery of the message at offset `at` (the stored next offset) inside the
    /// caller's transaction, with `error` as its last error; returns how many deliveries of it
    /// failed so far. The count survives restarts and changes of holder, so a retry limit holds
    /// across them.
    ///
    /// # Errors
    /// [`Error::Fenced`] as for [`advance_in`](Self::advance_in); [`Error::CorruptRow`] for a
    /// negative count; [`Error::Database`].
    pub async fn record_failure_in(
        &self,
        tx: &mut Transaction<'_, DB>,
        fence: &PartitionFence,
        at: i64,
        error: &str,
    ) -> Result<u32, Error> {
        match DB::kafka_fail(tx, &self.fence_key(fence), at, error, self.now()).await? {
            Some(attempts) => attempts_of(attempts),
            None => Err(self.fenced(fence)),
        }
    }

    /// The stored position of the fence's partition, if the fence still holds it.
    ///
    /// # Errors
    /// [`Error::Fenced`] when another holder took the partition (or the row is gone);
    /// [`Error::CorruptRow`]; [`Error::Database`].
    pub async fn load(&self, fence: &PartitionFence) -> Result<KafkaOffset, Error> {
        match self.get(&fence.topic, fence.partition).await? {
            Some(row) if row.token == fence.token && row.holder == fence.holder => Ok(row),
            _ => Err(self.fenced(fence)),
        }
    }

    /// The stored position of `partition` of `topic`, whoever holds it.
    ///
    /// # Errors
    /// [`Error::CorruptRow`] for a negative attempt count; [`Error::Database`].
    pub async fn get(&self, topic: &str, partition: i32) -> Result<Option<KafkaOffset>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::kafka_get(&mut conn, self.consumer.as_str(), topic, partition)
            .await?
            .map(offset_of)
            .transpose()
    }

    /// The stored positions of every partition of `topic` this consumer has taken, by partition.
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub async fn list(&self, topic: &str) -> Result<Vec<KafkaOffset>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::kafka_list(&mut conn, self.consumer.as_str(), topic)
            .await?
            .into_iter()
            .map(offset_of)
            .collect()
    }

    fn fence_key<'a>(&'a self, fence: &'a PartitionFence) -> FenceKey<'a> {
        FenceKey {
            consumer: self.consumer.as_str(),
            topic: &fence.topic,
            partition: fence.partition,
            token: fence.token.0,
            holder: &fence.holder,
        }
    }

    fn fenced(&self, fence: &PartitionFence) -> Error {
        match self.partition_lease(&fence.topic, fence.partition) {
            Ok(key) => Error::Fenced {
                key,
                token: fence.token,
            },
            Err(e) => e,
        }
    }

    fn now(&self) -> i64 {
        self.store.now().as_millis()
    }
}

fn attempts_of(attempts: i32) -> Result<u32, Error> {
    u32::try_from(attempts).map_err(|_| Error::CorruptRow {
        table: TABLE,
        detail: format!("attempts {attempts}"),
    })
}

fn offset_of(row: OffsetRow) -> Result<KafkaOffset, Error> {
    let (partition, next_offset, token, holder, attempts, last_error, updated_at) = row;
    Ok(KafkaOffset {
        partition,
        next_offset,
        token: FencingToken(token),
        holder,
        attempts: attempts_of(attempts)?,
        last_error,
        updated_at: Timestamp(updated_at),
    })
}
