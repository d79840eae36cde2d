//! Writing a batch of counts and registry rows in a transaction: the flush that rides in a
//! consumer's own commit (never a background task's: on SQLite a writer holds the database's
//! only write lock, and a frozen process must never hold it for a count).

use sqlx::Transaction;

use super::tally::{Batch, Tally};
use crate::Error;
use crate::backend::Backend;

/// Adds `batch` to the transaction: one multi-row upsert of the counts (rows of `instance`) and
/// one of the registry rows.
///
/// # Errors
/// [`Error::Database`] when a statement fails (the transaction is then not to be committed).
pub(crate) async fn write<DB: Backend>(
    tx: &mut Transaction<'static, DB>,
    instance: &str,
    batch: &Batch,
) -> Result<(), Error> {
    let _ = (tx, instance, batch);
    unimplemented!("flush")
}

/// The batch to add to a commit at `now`, when a flush is due; `None` otherwise.
pub(crate) fn due(tally: &Tally, now: i64) -> Option<Batch> {
    tally
        .due(now)
        .then(|| tally.take(now))
        .filter(|b| !b.is_empty())
}
