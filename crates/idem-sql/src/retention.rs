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
    /// (`idem_dead_letters`: they wait for an operator, docs/design.md C9).
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
        Ok(GcReport {
            inbox: self
                .gc_table(Table::Core(GcTable::Inbox), cutoff, batch_size)
                .await?,
            leases: self
                .gc_table(Table::Core(GcTable::Leases), cutoff, batch_size)
                .await?,
            parked: self
                .gc_table(Table::Core(GcTable::Parked), cutoff, batch_size)
                .await?,
            // Published outbox rows only (C9): pending rows are undelivered, parked ones wait
            // for an operator.
            outbox: self.gc_table(Table::Outbox, cutoff, batch_size).await?,
            // Finished effects only (C9): the others are still to run or wait for an operator.
            effects: self.gc_table(Table::Effects, cutoff, batch_size).await?,
        })
    }

    /// Deletes `table`'s rows older than `cutoff` in batches until a batch comes back short;
    /// returns how many.
    async fn gc_table(
        &self,
        table: Table,
        cutoff: i64,
        batch_size: NonZeroU32,
    ) -> Result<u64, Error> {
        let limit = i64::from(batch_size.get());
        let mut total = 0;
        loop {
            let mut conn = self.pool().acquire().await?;
            let deleted = match table {
                Table::Core(table) => DB::gc_batch(&mut conn, table, cutoff, limit).await?,
                Table::Outbox => DB::outbox_gc(&mut conn, cutoff, limit).await?,
                Table::Effects => DB::effects_gc(&mut conn, cutoff, limit).await?,
            };
            total += deleted;
            metrics::counter!(GC_DELETED_TOTAL, "table" => table.name()).increment(deleted);
            if deleted < u64::from(batch_size.get()) {
                return Ok(total);
            }
        }
    }
}

/// The tables retention deletes from.
#[derive(Debug, Clone, Copy)]
enum Table {
    Core(GcTable),
    Outbox,
    Effects,
}

impl Table {
    /// The `table` label of [`GC_DELETED_TOTAL`].
    fn name(self) -> &'static str {
        match self {
            Self::Core(GcTable::Inbox) => "idem_inbox",
            Self::Core(GcTable::Leases) => "idem_leases",
            Self::Core(GcTable::Parked) => "idem_parked",
            Self::Outbox => "idem_outbox",
            Self::Effects => "idem_effects",
        }
    }
}
