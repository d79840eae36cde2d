//! Writing a batch of counts and registry rows in a transaction: the flush that rides in a
//! consumer's own commit (never a background task's: on SQLite a writer holds the database's
//! only write lock, and a frozen process must never hold it for a count).

use sqlx::Transaction;

use super::tally::{Batch, Tally};
use crate::backend::Backend;
use crate::{Error, Store};

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
    DB::consumers_flush(tx, instance, &batch.counts, &batch.registry).await?;
    Ok(())
}

/// The batch to add to a commit at `now`, when a flush is due; `None` otherwise.
fn due(tally: &Tally, now: i64) -> Option<Batch> {
    tally
        .due(now)
        .then(|| tally.take(now))
        .filter(|b| !b.is_empty())
}

/// Commits `tx`, carrying the pending counts and registry rows when a flush is due (at most
/// every flush interval): they are cleared when the commit succeeds and kept for the next
/// flush when it does not, so they are never counted twice nor lost on a rollback.
///
/// # Errors
/// [`Error::Database`] when the flush's statements or the commit fail; nothing was committed.
pub(crate) async fn commit<DB: Backend>(
    store: &Store<DB>,
    mut tx: Transaction<'static, DB>,
) -> Result<(), Error> {
    let tally = store.tally();
    let Some(batch) = due(tally, store.now().as_millis()) else {
        return Ok(tx.commit().await?);
    };
    let result = match write::<DB>(&mut tx, &tally.instance, &batch).await {
        Ok(()) => tx.commit().await.map_err(Error::from),
        Err(e) => Err(e),
    };
    if result.is_err() {
        tally.restore(batch);
    }
    result
}

/// After a step that wrote nothing (a duplicate), flushes in its own transaction when a flush
/// is due: the consumer's own step, never a background task's. A failure keeps the counts for
/// the next flush and is logged, not returned: the duplicate's answer does not depend on it.
pub(crate) async fn flush_if_due<DB: Backend>(store: &Store<DB>) {
    if !store.tally().due(store.now().as_millis()) {
        return;
    }
    if let Err(e) = store.flush_consumer_counts().await {
        tracing::warn!(error = %e, "flushing consumer counts failed; they are kept for the next flush");
    }
}
