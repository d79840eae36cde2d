//! The figures a listing reads beside the registry rows, grouped by consumer: counts per
//! window, dead letters, effects and outbox rows by status, leases, Kafka offsets, successors.

use std::collections::{BTreeMap, HashMap};

use crate::Error;
use crate::backend::Backend;
use crate::backend::consumer_ops::Grouped;

/// The windows a report counts over, in seconds: 1 hour, 24 hours, 30 days.
pub(crate) const WINDOWS_SECS: [u64; 3] = [3600, 24 * 3600, 30 * 24 * 3600];

/// Counts of one consumer over one window: claimed, duplicates, stale, gaps.
pub(crate) type Summed = [i64; 4];

/// Everything read beside the registry rows, by consumer name.
#[derive(Debug, Default)]
pub(crate) struct Figures {
    /// Per window of [`WINDOWS_SECS`].
    pub(crate) counts: [HashMap<String, Summed>; 3],
    /// Dead letters per window of [`WINDOWS_SECS`].
    pub(crate) dead_letters: [HashMap<String, i64>; 3],
    pub(crate) effects: HashMap<String, BTreeMap<String, u64>>,
    pub(crate) outbox: HashMap<String, BTreeMap<String, u64>>,
    /// Running leases by scope.
    pub(crate) leases: HashMap<String, i64>,
    pub(crate) kafka_offsets: HashMap<String, i64>,
    /// The successor of each predecessor (the latest declared) and when it was declared.
    pub(crate) successors: HashMap<String, (String, i64)>,
}

impl Figures {
    /// Reads every figure with windows ending at `now` (ms).
    ///
    /// # Errors
    /// [`Error::Database`] when a query fails.
    pub(crate) async fn read<DB: Backend>(
        conn: &mut DB::Connection,
        now: i64,
    ) -> Result<Self, Error> {
        let mut figures = Self::default();
        for (i, secs) in WINDOWS_SECS.into_iter().enumerate() {
            let from = now.saturating_sub(i64::try_from(secs).unwrap_or(i64::MAX) * 1000);
            for (name, c, d, s, g) in DB::consumers_window(conn, from, now).await? {
                figures.counts[i].insert(name, [c, d, s, g]);
            }
            let dead = Grouped::DeadLetters { from, to: now };
            for (name, _, n) in DB::consumers_grouped(conn, dead).await? {
                figures.dead_letters[i].insert(name, n);
            }
        }
        figures.effects = by_status(DB::consumers_grouped(conn, Grouped::EffectsByStatus).await?);
        figures.outbox = by_status(DB::consumers_grouped(conn, Grouped::OutboxByStatus).await?);
        figures.leases = counted(DB::consumers_grouped(conn, Grouped::Leases { now }).await?);
        figures.kafka_offsets = counted(DB::consumers_grouped(conn, Grouped::KafkaOffsets).await?);
        // Ordered by declaration: a later successor replaces an earlier one.
        for (predecessor, successor, at) in DB::consumers_grouped(conn, Grouped::Successors).await?
        {
            figures.successors.insert(predecessor, (successor, at));
        }
        Ok(figures)
    }
}

/// (consumer, status, count) rows as a map of maps.
fn by_status(rows: Vec<(String, String, i64)>) -> HashMap<String, BTreeMap<String, u64>> {
    let mut out: HashMap<String, BTreeMap<String, u64>> = HashMap::new();
    for (name, status, n) in rows {
        out.entry(name)
            .or_default()
            .insert(status, u64::try_from(n).unwrap_or(0));
    }
    out
}

/// (name, _, count) rows as a map.
fn counted(rows: Vec<(String, String, i64)>) -> HashMap<String, i64> {
    rows.into_iter().map(|(name, _, n)| (name, n)).collect()
}
