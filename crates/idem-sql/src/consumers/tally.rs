//! The counts of one Store (one process), kept in memory between flushes.
//!
//! Counting takes one mutex lock and allocates nothing for a consumer already known. A flush
//! *takes* what is pending (so two flushes never write the same counts) and, if its
//! transaction does not commit, puts it back (so nothing is lost on a rollback).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::ConsumerKind;
use crate::backend::consumer_ops::{CountRow, RegistryWrite};

/// The length of a count bucket: 5 minutes, in ms.
pub(crate) const BUCKET_MS: i64 = 5 * 60 * 1000;

/// [`Store::counts_flush_interval`](crate::Store::counts_flush_interval)'s default: 5 s.
pub const DEFAULT_COUNTS_FLUSH_INTERVAL: Duration = Duration::from_secs(5);

/// What one event adds to its consumer's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    /// Applied, a tie, or a gap (`gap` true): claimed.
    Claimed { gap: bool },
    /// Answered as a duplicate.
    Duplicate,
    /// Stale: recorded, not applied.
    Stale,
}

/// Counts of one consumer in one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) claimed: i64,
    pub(crate) duplicates: i64,
    pub(crate) stale: i64,
    pub(crate) gaps: i64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.claimed += other.claimed;
        self.duplicates += other.duplicates;
        self.stale += other.stale;
        self.gaps += other.gaps;
    }
}

/// One consumer as this process knows it.
#[derive(Debug, Clone)]
struct Known {
    kind: ConsumerKind,
    first_seen: i64,
    last_seen: i64,
    lag: Option<(i64, i64)>,
    /// Whether its registry row needs writing.
    dirty: bool,
    /// Counts not flushed yet, by bucket start.
    counts: Vec<(i64, Counts)>,
}

/// What one flush writes: registry rows and bucket counts, sorted by consumer so that
/// concurrent flushes lock rows in one order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    pub(crate) registry: Vec<RegistryWrite>,
    pub(crate) counts: Vec<CountRow>,
}

impl Batch {
    pub(crate) fn is_empty(&self) -> bool {
        self.registry.is_empty() && self.counts.is_empty()
    }
}

#[derive(Debug, Default)]
struct Pending {
    known: HashMap<String, Known>,
    /// When the last flush began (ms, the store's clock).
    last_flush: i64,
}

/// The in-memory counts and registrations of a Store, shared by its clones.
#[derive(Debug)]
pub(crate) struct Tally {
    /// This process's id in `idem_consumer_counts.instance`.
    pub(crate) instance: String,
    enabled: AtomicBool,
    interval_ms: AtomicU64,
    pending: Mutex<Pending>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            instance: format!("{:016x}", rand::random::<u64>()),
            enabled: AtomicBool::new(true),
            interval_ms: AtomicU64::new(DEFAULT_COUNTS_FLUSH_INTERVAL.as_millis() as u64),
            pending: Mutex::new(Pending::default()),
        }
    }

    pub(crate) fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn set_interval(&self, interval: Duration) {
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        self.interval_ms.store(ms, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        // A panic while holding the lock leaves plain counters behind: still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `consumer` as `kind` at `now` (a more specific kind replaces `runner`).
    pub(crate) fn register(&self, consumer: &str, kind: ConsumerKind, now: i64) {
        let mut pending = self.lock();
        match pending.known.get_mut(consumer) {
            Some(known) => {
                if kind.overrides(known.kind) {
                    known.kind = kind;
                    known.dirty = true;
                }
            }
            None => {
                pending.known.insert(consumer.to_owned(), fresh(kind, now));
            }
        }
    }

    /// Records `consumer`'s lag at `now`.
    pub(crate) fn report_lag(&self, consumer: &str, lag: i64, now: i64) {
        update(&mut self.lock(), consumer, now, |known| {
            known.lag = Some((lag, now));
            known.last_seen = known.last_seen.max(now);
            known.dirty = true;
        });
    }

    /// Marks `consumer` seen at `now` (a worker's or relay's transaction).
    pub(crate) fn seen(&self, consumer: &str, now: i64) {
        update(&mut self.lock(), consumer, now, |known| {
            known.last_seen = known.last_seen.max(now);
            known.dirty = true;
        });
    }

    /// Adds one event to `consumer`'s bucket of `now`.
    pub(crate) fn count(&self, consumer: &str, counted: Counted, now: i64) {
        if !self.enabled() {
            return;
        }
        let bucket = now - now.rem_euclid(BUCKET_MS);
        update(&mut self.lock(), consumer, now, |known| {
            known.last_seen = known.last_seen.max(now);
            known.dirty = true;
            if !matches!(known.counts.last(), Some((b, _)) if *b == bucket) {
                known.counts.push((bucket, Counts::default()));
            }
            if let Some((_, counts)) = known.counts.last_mut() {
                match counted {
                    Counted::Claimed { gap } => {
                        counts.claimed += 1;
                        counts.gaps += i64::from(gap);
                    }
                    Counted::Duplicate => counts.duplicates += 1,
                    Counted::Stale => counts.stale += 1,
                }
            }
        });
    }

    /// Whether a flush is due at `now`: something pending, and the last flush at least the
    /// flush interval ago.
    pub(crate) fn due(&self, now: i64) -> bool {
        if !self.enabled() {
            return false;
        }
        let interval = i64::try_from(self.interval_ms.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        let pending = self.lock();
        now.saturating_sub(pending.last_flush) >= interval
            && pending.known.values().any(|k| k.dirty)
    }

    /// Takes everything pending into a batch (empty when nothing is), and marks `now` as the
    /// last flush.
    pub(crate) fn take(&self, now: i64) -> Batch {
        let mut pending = self.lock();
        pending.last_flush = now;
        let mut batch = Batch::default();
        for (name, known) in pending.known.iter_mut().filter(|(_, k)| k.dirty) {
            known.dirty = false;
            batch.registry.push(RegistryWrite {
                consumer: name.clone(),
                kind: known.kind.as_str(),
                first_seen: known.first_seen,
                last_seen: known.last_seen,
                lag: known.lag.map(|(lag, _)| lag),
                lag_at: known.lag.map(|(_, at)| at),
            });
            for (bucket, c) in known.counts.drain(..) {
                batch.counts.push(CountRow {
                    consumer: name.clone(),
                    bucket,
                    claimed: c.claimed,
                    duplicates: c.duplicates,
                    stale: c.stale,
                    gaps: c.gaps,
                });
            }
        }
        batch.registry.sort_by(|a, b| a.consumer.cmp(&b.consumer));
        batch
            .counts
            .sort_by(|a, b| (&a.consumer, a.bucket).cmp(&(&b.consumer, b.bucket)));
        batch
    }

    /// Puts back a batch whose transaction did not commit: its counts are added to what was
    /// counted since, its registry rows written again with the next flush.
    pub(crate) fn restore(&self, batch: Batch) {
        let mut pending = self.lock();
        for row in batch.registry {
            update(&mut pending, &row.consumer, row.first_seen, |known| {
                known.dirty = true;
            });
        }
        for row in batch.counts {
            let (bucket, counts) = (
                row.bucket,
                Counts {
                    claimed: row.claimed,
                    duplicates: row.duplicates,
                    stale: row.stale,
                    gaps: row.gaps,
                },
            );
            update(&mut pending, &row.consumer, bucket, |known| {
                known.dirty = true;
                match known.counts.iter_mut().find(|(b, _)| *b == bucket) {
                    Some((_, c)) => c.add(&counts),
                    None => {
                        known.counts.push((bucket, counts));
                        known.counts.sort_by_key(|(b, _)| *b);
                    }
                }
            });
        }
    }
}

/// A consumer not seen before, registered as `kind` at `now`.
fn fresh(kind: ConsumerKind, now: i64) -> Known {
    Known {
        kind,
        first_seen: now,
        last_seen: now,
        lag: None,
        dirty: true,
        counts: Vec::new(),
    }
}

/// Applies `f` to `consumer`'s entry, registering it as a runner at `now` when it was not
/// known (the name is copied only then).
fn update(pending: &mut Pending, consumer: &str, now: i64, f: impl FnOnce(&mut Known)) {
    match pending.known.get_mut(consumer) {
        Some(known) => f(known),
        None => {
            let mut known = fresh(ConsumerKind::Runner, now);
            f(&mut known);
            pending.known.insert(consumer.to_owned(), known);
        }
    }
}
