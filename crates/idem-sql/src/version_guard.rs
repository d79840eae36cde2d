//! The version guard: per (consumer, entity) the highest applied version (C5).

use std::collections::{BTreeMap, HashSet};

use idem_core::{Advance, DedupKey, Entity, Name, Version, VersionValue, decide};
use sqlx::Transaction;

use crate::backend::Backend;
use crate::backend::ops::{VersionRow, VersionWrite};
use crate::metric_definitions::{GAP_SIZE, GAPS_TOTAL, STALE_TOTAL, TIES_TOTAL};
use crate::{Error, Store};

/// The version guard of one consumer. Made by [`Store::version_guard`].
#[derive(Debug)]
pub struct VersionGuard<DB: Backend> {
    store: Store<DB>,
    consumer: Name,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for VersionGuard<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            consumer: self.consumer.clone(),
        }
    }
}

impl<DB: Backend> VersionGuard<DB> {
    pub(crate) fn new(store: Store<DB>, consumer: Name) -> Self {
        Self { store, consumer }
    }

    /// Compares `version` with the entity's stored version by the rule of
    /// [`decide`](idem_core::decide) and, unless the event is stale, stores it as the entity's
    /// version, all inside the caller's transaction (so a rollback undoes it).
    ///
    /// Returns [`Advance::Applied`], [`Advance::Tie`] and [`Advance::Gap`] after storing `version`
    /// (and `key` as the event that set it); [`Advance::Stale`] without writing, also when `key`
    /// is the very event that set the stored version (a replay after retention deleted its inbox
    /// key is never applied twice). A tie without a secondary value keeps the stored one. A gap is stored
    /// like any applied version; to refuse or hold gaps, roll back (the [`Runner`](crate::Runner)
    /// does this for [`GapPolicy::Reject`](idem_core::GapPolicy) and `Park`).
    ///
    /// On PostgreSQL and MySQL the entity's row is locked (`SELECT … FOR UPDATE`) until the transaction
    /// ends, so two events of one entity are compared one after the other. Counts
    /// `idem_stale_events_total`, `idem_version_ties_total`, `idem_gaps_total` and
    /// `idem_gap_size`, and logs stale events with both versions.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the entity has a version of the other kind (sequence vs timestamp);
    /// [`Error::CorruptRow`] when the stored kind is unknown; [`Error::Database`] as for any
    /// statement.
    pub async fn advance(
        &self,
        tx: &mut Transaction<'_, DB>,
        entity: &Entity,
        version: &Version,
        key: &DedupKey,
    ) -> Result<Advance, Error> {
        let consumer = self.consumer.as_str();
        let (aggregate_type, aggregate_id) =
            (entity.aggregate_type().as_str(), entity.aggregate_id());
        let mut write = VersionWrite {
            consumer,
            aggregate_type,
            aggregate_id,
            kind: version.primary.kind(),
            version: version.primary.get(),
            secondary: version.secondary,
            dedup_key: key.as_str(),
            now: self.store.now().as_millis(),
        };
        // Insert-if-absent, else lock and compare: a concurrent first event of the same entity
        // makes the insert find a row, and the loop then reads (and locks) that row.
        let advance = loop {
            match DB::load_version(tx, consumer, aggregate_type, aggregate_id).await? {
                Some(row) => {
                    let same_event = row.dedup_key == key.as_str();
                    let current = stored_version(row)?;
                    // The event that set the stored version, again (a replay after its inbox
                    // key was deleted by retention): already applied, so never applied twice.
                    let advance = if same_event {
                        Advance::Stale { current }
                    } else {
                        decide(Some(&current), version)?
                    };
                    if let Advance::Tie { current } = advance {
                        // A tie without a secondary value keeps the stored one, so that a later
                        // event with a lower secondary value is still stale.
                        write.secondary = write.secondary.or(current.secondary);
                    }
                    if advance.is_applied() {
                        DB::update_version(tx, &write).await?;
                    }
                    break advance;
                }
                None => {
                    if DB::insert_version(tx, &write).await? {
                        break Advance::Applied { previous: None };
                    }
                }
            }
        };
        self.report(entity, version, &advance);
        Ok(advance)
    }

    /// [`advance`](Self::advance) for each of `events`, in their order, with a handful of
    /// statements instead of two per event: the entities that have no row get one (their first
    /// event's version), the others' rows are read (and locked on PostgreSQL and MySQL) in key order, every
    /// event is decided in memory by the rule of [`decide`](idem_core::decide), and the rows that
    /// moved are written in one statement. Events of one entity are decided one after the other,
    /// as if each came in its own call; the metrics and logs are those of `advance`.
    ///
    /// Two batches that share entities lock their rows in one order (inserts before reads, each
    /// in key order), so they wait for each other instead of deadlocking.
    ///
    /// Returns one result per event, in order: what `advance` would have returned, with
    /// [`Error::Invalid`] for an event whose version is of the other kind than its entity's and
    /// [`Error::CorruptRow`] for an entity whose stored kind is unknown (those events change
    /// nothing).
    ///
    /// # Errors
    /// [`Error::Database`] as for any statement: then nothing of the batch may be committed.
    pub async fn advance_many<'a>(
        &'a self,
        tx: &mut Transaction<'_, DB>,
        events: &[Proposed<'a>],
    ) -> Result<Vec<Result<Advance, Error>>, Error> {
        let consumer = self.consumer.as_str();
        let now = self.store.now().as_millis();
        let write_of = |event: &Proposed<'a>, secondary: Option<i64>| VersionWrite {
            consumer,
            aggregate_type: event.entity.aggregate_type().as_str(),
            aggregate_id: event.entity.aggregate_id(),
            kind: event.version.primary.kind(),
            version: event.version.primary.get(),
            secondary,
            dedup_key: event.key.as_str(),
            now,
        };
        // Each entity's first event, in key order.
        let mut first: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (index, event) in events.iter().enumerate() {
            first
                .entry((
                    event.entity.aggregate_type().as_str(),
                    event.entity.aggregate_id(),
                ))
                .or_insert(index);
        }
        let mut current: BTreeMap<(&str, &str), Stored> = BTreeMap::new();
        let mut inserted_first: HashSet<usize> = HashSet::new();
        // An entity's row may be neither inserted nor read only if it was deleted in between;
        // the next round inserts it again.
        let mut missing: Vec<(&str, &str)> = first.keys().copied().collect();
        while !missing.is_empty() {
            let rows: Vec<VersionWrite<'_>> = missing
                .iter()
                .map(|key| write_of(&events[first[key]], events[first[key]].version.secondary))
                .collect();
            let inserted: HashSet<(String, String)> =
                DB::insert_versions(tx, &rows).await?.into_iter().collect();
            let mut existing = Vec::with_capacity(missing.len());
            for key in missing.drain(..) {
                if inserted.contains(&(key.0.to_owned(), key.1.to_owned())) {
                    let index = first[&key];
                    inserted_first.insert(index);
                    current.insert(key, Stored::from_event(&events[index]));
                } else {
                    existing.push(key);
                }
            }
            let mut read: BTreeMap<(String, String), VersionRow> =
                DB::load_versions(tx, consumer, &existing)
                    .await?
                    .into_iter()
                    .map(|(aggregate_type, aggregate_id, row)| {
                        ((aggregate_type, aggregate_id), row)
                    })
                    .collect();
            for key in existing {
                match read.remove(&(key.0.to_owned(), key.1.to_owned())) {
                    Some(row) => {
                        current.insert(key, Stored::from_row(row));
                    }
                    None => missing.push(key),
                }
            }
        }

        let mut results = Vec::with_capacity(events.len());
        let mut moved: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (index, event) in events.iter().enumerate() {
            let key = (
                event.entity.aggregate_type().as_str(),
                event.entity.aggregate_id(),
            );
            if inserted_first.contains(&index) {
                let advance = Advance::Applied { previous: None };
                self.report(event.entity, event.version, &advance);
                results.push(Ok(advance));
                continue;
            }
            let stored = current
                .get_mut(&key)
                .expect("every entity was inserted or read");
            let decided = match &stored.version {
                Err(corrupt) => Err(Error::CorruptRow {
                    table: "idem_versions",
                    detail: corrupt.clone(),
                }),
                // The event that set the stored version, again: never applied twice.
                Ok(current) if stored.dedup_key == event.key.as_str() => {
                    Ok(Advance::Stale { current: *current })
                }
                Ok(current) => decide(Some(current), event.version).map_err(Error::from),
            };
            if let Ok(advance) = &decided {
                if advance.is_applied() {
                    let mut version = *event.version;
                    if let Advance::Tie { current } = advance {
                        // As in `advance`: a tie without a secondary value keeps the stored one.
                        version.secondary = version.secondary.or(current.secondary);
                    }
                    stored.version = Ok(version);
                    stored.dedup_key = event.key.as_str().to_owned();
                    moved.insert(key, index);
                }
                self.report(event.entity, event.version, advance);
            }
            results.push(decided);
        }
        let updates: Vec<VersionWrite<'_>> = moved
            .iter()
            .map(|(key, index)| {
                let secondary = current[key].version.as_ref().ok().and_then(|v| v.secondary);
                write_of(&events[*index], secondary)
            })
            .collect();
        DB::update_versions(tx, &updates).await?;
        Ok(results)
    }

    /// The consumer this guard belongs to.
    pub fn consumer(&self) -> &Name {
        &self.consumer
    }

    fn report(&self, entity: &Entity, got: &Version, advance: &Advance) {
        let consumer = self.consumer.to_string();
        match *advance {
            Advance::Applied { .. } => {}
            Advance::Stale { current } => {
                metrics::counter!(STALE_TOTAL, "consumer" => consumer.clone()).increment(1);
                tracing::info!(%consumer, %entity, %current, %got, "stale event recorded, not applied");
            }
            Advance::Tie { current } => {
                metrics::counter!(TIES_TOTAL, "consumer" => consumer.clone()).increment(1);
                tracing::info!(%consumer, %entity, %current, %got, "version tie applied");
            }
            Advance::Gap { expected, got } => {
                metrics::counter!(GAPS_TOTAL, "consumer" => consumer.clone()).increment(1);
                metrics::histogram!(GAP_SIZE, "consumer" => consumer.clone())
                    .record(got.abs_diff(expected) as f64);
                tracing::info!(%consumer, %entity, expected, got, "sequence gap");
            }
        }
    }
}

/// One event for [`VersionGuard::advance_many`]: its entity, its version and its dedup key.
#[derive(Debug, Clone, Copy)]
pub struct Proposed<'a> {
    /// The entity the event is about.
    pub entity: &'a Entity,
    /// The event's version of it.
    pub version: &'a Version,
    /// The event's dedup key (kept as the event that set the entity's version).
    pub key: &'a DedupKey,
}

/// An entity's version as [`VersionGuard::advance_many`] tracks it through a batch: the stored
/// row's (or the row's detail when its kind is unknown) and the event that set it.
struct Stored {
    version: Result<Version, String>,
    dedup_key: String,
}

impl Stored {
    fn from_event(event: &Proposed<'_>) -> Self {
        Self {
            version: Ok(*event.version),
            dedup_key: event.key.as_str().to_owned(),
        }
    }

    fn from_row(row: VersionRow) -> Self {
        let dedup_key = row.dedup_key.clone();
        let version = stored_version(row).map_err(|e| match e {
            Error::CorruptRow { detail, .. } => detail,
            other => other.to_string(),
        });
        Self { version, dedup_key }
    }
}

fn stored_version(row: VersionRow) -> Result<Version, Error> {
    let primary = match row.kind.as_str() {
        "sequence" => VersionValue::Sequence(row.version),
        "timestamp" => VersionValue::Timestamp(row.version),
        other => {
            return Err(Error::CorruptRow {
                table: "idem_versions",
                detail: format!("version_kind {other:?}"),
            });
        }
    };
    Ok(Version {
        primary,
        secondary: row.secondary,
    })
}

impl<DB: Backend> Store<DB> {
    /// The version guard of `consumer`.
    pub fn version_guard(&self, consumer: &Name) -> VersionGuard<DB> {
        VersionGuard::new(self.clone(), consumer.clone())
    }
}
