//! Retention: deleting old rows in small batches (C9).

use std::num::NonZeroU32;

use idem_core::RetentionPolicy;

use crate::backend::Backend;
use crate::backend::ops::GcTable;
use crate::metric_definitions::GC_DELETED_TOTAL;
use crate::{Error, Store};

/// What one [`Store::gc`] run deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Inbox keys processed before the cutoff.
    pub inbox: u64,
    /// Leases completed or released before the cutoff, or expired before it. Live leases are
    /// never deleted.
    pub leases: u64,
    /// Parked-gap markers first seen before the cutoff.
    pub parked: u64,
    /// Outbox rows published before the cutoff. Pending and parked rows are never deleted.
    pub outbox: u64,
    /// Effects finished (succeeded, or resolved as failed) and last changed before the cutoff.
    /// Pending, running, unknown, parked and dead effects are never deleted.
    pub effects: u64,
}

impl<DB: Backend> Store<DB> {
    /// Deletes rows older than the policy's retention (cutoff = now − `policy.keep()`), in
    /// batches of `batch_size` rows, each batch its own short transaction so that claims are
    /// never blocked for long. Never deletes version guard rows, live leases or dead letters
    /// (`idem_dead_letters`: they wait for an operator, DESIGN.md C9).
    ///
    /// The policy was checked against the sender's redelivery horizon when it was made
    /// ([`RetentionPolicy::new`]), so a key is never deleted while its event may still be
    /// redelivered.
    ///
    /// # Errors
    /// [`Error::Database`] for a failed batch (the batches before it stay deleted).
    pub async fn gc(
        &self,
        policy: &RetentionPolicy,
        batch_size: NonZeroU32,
    ) -> Result<GcReport, Error> {
        let cutoff = self.now().saturating_sub(policy.keep()).as_millis();
        let mut report = GcReport::default();
        for (table, total, label) in [
            (GcTable::Inbox, &mut report.inbox, "idem_inbox"),
            (GcTable::Leases, &mut report.leases, "idem_leases"),
            (GcTable::Parked, &mut report.parked, "idem_parked"),
        ] {
            loop {
                let mut conn = self.pool().acquire().await?;
                let deleted =
                    DB::gc_batch(&mut conn, table, cutoff, i64::from(batch_size.get())).await?;
                *total += deleted;
                metrics::counter!(GC_DELETED_TOTAL, "table" => label).increment(deleted);
                if deleted < u64::from(batch_size.get()) {
                    break;
                }
            }
        }
        // Published outbox rows only (C9): pending rows are undelivered, parked ones wait for
        // an operator.
        loop {
            let mut conn = self.pool().acquire().await?;
            let deleted = DB::outbox_gc(&mut conn, cutoff, i64::from(batch_size.get())).await?;
            report.outbox += deleted;
            metrics::counter!(GC_DELETED_TOTAL, "table" => "idem_outbox").increment(deleted);
            if deleted < u64::from(batch_size.get()) {
                break;
            }
        }
        // Finished effects only (C9): the others are still to run or wait for an operator.
        loop {
            let mut conn = self.pool().acquire().await?;
            let deleted = DB::effects_gc(&mut conn, cutoff, i64::from(batch_size.get())).await?;
            report.effects += deleted;
            metrics::counter!(GC_DELETED_TOTAL, "table" => "idem_effects").increment(deleted);
            if deleted < u64::from(batch_size.get()) {
                break;
            }
        }
        Ok(report)
    }
}
