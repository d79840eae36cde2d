//! Reading the registry: the reports of `idem consumers list|show`.

use std::collections::HashMap;
use std::str::FromStr;

use idem_core::Timestamp;

use super::figures::{Figures, WINDOWS_SECS};
use super::judge;
use crate::backend::Backend;
use crate::backend::consumer_ops::RegistryRead;
use crate::{ConsumerKind, ConsumerReport, Error, Holds, Lag, ListOptions, Store, WindowCounts};

/// The consumer registry of a store, read: [`Store::consumers`].
#[derive(Debug)]
pub struct Consumers<DB: Backend> {
    store: Store<DB>,
}

impl<DB: Backend> Store<DB> {
    /// The consumer registry, for reading reports ([`Consumers::list`], [`Consumers::show`]).
    /// Reads what was flushed: call [`flush_consumer_counts`](Self::flush_consumer_counts) first
    /// for this process's latest counts.
    pub fn consumers(&self) -> Consumers<DB> {
        Consumers {
            store: self.clone(),
        }
    }
}

impl<DB: Backend> Consumers<DB> {
    /// Every consumer in the registry (first seen at or after `options.since`, when given),
    /// sorted by name, each with its windows ending at `options.now`, its effects and outbox rows
    /// by status, what it holds, its lag, its successor and its flags. Effects and outbox rows
    /// with no recorded writer (written before the registry, or by a direct `enqueue`) are in
    /// no consumer's figures.
    ///
    /// # Errors
    /// [`Error::Database`] when a query fails; [`Error::CorruptRow`] for a stored kind this
    /// idem does not know.
    pub async fn list(&self, options: &ListOptions) -> Result<Vec<ConsumerReport>, Error> {
        let mut reports = self.reports(options).await?;
        if let Some(since) = options.since {
            reports.retain(|r| r.first_seen >= since);
        }
        Ok(reports)
    }

    /// The report of the consumer called `name` (`options.since` does not apply).
    ///
    /// # Errors
    /// [`Error::UnknownConsumer`] when the registry has no such consumer (it lists the known
    /// names); as [`list`](Self::list).
    pub async fn show(&self, name: &str, options: &ListOptions) -> Result<ConsumerReport, Error> {
        let reports = self.reports(options).await?;
        let known: Vec<String> = reports.iter().map(|r| r.name.clone()).collect();
        reports
            .into_iter()
            .find(|r| r.name == name)
            .ok_or_else(|| Error::UnknownConsumer {
                consumer: name.to_owned(),
                known,
            })
    }

    /// Every consumer's report, by name.
    async fn reports(&self, options: &ListOptions) -> Result<Vec<ConsumerReport>, Error> {
        let now = options.now.as_millis();
        let mut conn = self.store.pool().acquire().await?;
        let rows = DB::consumers_registry(&mut conn).await?;
        let figures = Figures::read::<DB>(&mut conn, now).await?;
        drop(conn);
        let last_seen: HashMap<&str, i64> = rows.iter().map(|r| (r.0.as_str(), r.4)).collect();
        let mut reports = Vec::with_capacity(rows.len());
        for row in &rows {
            let mut report = report(row, &figures)?;
            let successor_seen = figures
                .successors
                .get(&report.name)
                .map(|(s, declared)| last_seen.get(s.as_str()).copied().unwrap_or(*declared));
            report.flags = judge::flags(&report, successor_seen, &options.thresholds, now);
            reports.push(report);
        }
        Ok(reports)
    }
}

/// One registry row's report, without flags.
fn report(row: &RegistryRead, figures: &Figures) -> Result<ConsumerReport, Error> {
    let (name, kind, first_seen, exact, last_seen, lag, lag_at) = row;
    let kind = ConsumerKind::from_str(kind).map_err(|e| Error::CorruptRow {
        table: "idem_consumers",
        detail: format!("consumer {name}: {e}"),
    })?;
    let effects = figures.effects.get(name).cloned().unwrap_or_default();
    let outbox = figures.outbox.get(name).cloned().unwrap_or_default();
    let sum = |map: &std::collections::BTreeMap<String, u64>, statuses: &[&str]| -> u64 {
        statuses.iter().filter_map(|s| map.get(*s)).sum()
    };
    let get = |map: &HashMap<String, i64>, key: &str| count(map.get(key).copied().unwrap_or(0));
    let holds = Holds {
        leases: get(&figures.leases, name) + get(&figures.leases, &format!("kafka/{name}")),
        kafka_offsets: get(&figures.kafka_offsets, name),
        pending_effects: sum(&effects, &["pending", "running", "unknown"]),
        open_outbox: sum(&outbox, &["pending", "parked"]),
    };
    Ok(ConsumerReport {
        name: name.clone(),
        kind,
        first_seen: Timestamp(*first_seen),
        first_seen_exact: *exact,
        last_seen: Timestamp(*last_seen),
        windows: windows(name, figures),
        effects_by_status: effects,
        outbox_by_status: outbox,
        holds,
        lag: lag.zip(*lag_at).map(|(value, at)| Lag {
            value: count(value),
            at: Timestamp(at),
        }),
        successor: figures.successors.get(name).map(|(s, _)| s.clone()),
        flags: Vec::new(),
    })
}

/// `name`'s counts over each window.
fn windows(name: &str, figures: &Figures) -> Vec<WindowCounts> {
    WINDOWS_SECS
        .iter()
        .enumerate()
        .map(|(i, secs)| {
            let [claimed, duplicates, stale, gaps] = figures.counts[i]
                .get(name)
                .copied()
                .unwrap_or_default()
                .map(count);
            let deliveries = claimed + duplicates + stale;
            WindowCounts {
                window_secs: *secs,
                claimed,
                duplicates,
                repeat_rate: if deliveries == 0 {
                    0.0
                } else {
                    duplicates as f64 / deliveries as f64
                },
                stale,
                gaps,
                dead_letters: count(figures.dead_letters[i].get(name).copied().unwrap_or(0)),
            }
        })
        .collect()
}

/// A stored count as u64 (never negative; 0 if it were).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}
