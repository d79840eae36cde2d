//! The version guard: per (consumer, entity) the highest applied version (C5).

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
    /// On PostgreSQL the entity's row is locked (`SELECT … FOR UPDATE`) until the transaction
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
