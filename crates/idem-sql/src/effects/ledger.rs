//! The effect ledger: intents written in the handler's transaction, read and resolved by
//! operators.

use idem_core::{EffectKey, Name};

use super::{EffectRecord, EffectStatus, Enqueued, Resolution};
use crate::backend::Backend;
use crate::backend::effect_ops::Resolve;
use crate::error::in_transaction;
use crate::metric_definitions::EFFECTS_ENQUEUED_TOTAL;
use crate::{Error, Store};

/// The effect ledger (table `idem_effects`). Made by [`Store::effects`].
///
/// Record an effect with [`enqueue`](Self::enqueue) inside the transaction that claims the
/// event (C2): the intent commits with the handler's writes or not at all, before any call is
/// made. An [`EffectWorker`](crate::EffectWorker) then runs it. Operators use
/// [`get`](Self::get), [`list`](Self::list) and [`resolve`](Self::resolve).
///
/// Retention ([`Store::gc`]) deletes only finished effects (succeeded, failed) last changed
/// before its cutoff; a key enqueued again after that is a new effect. Keys derived from a dedup
/// key are protected by the inbox for as long as the key is kept; business intent keys
/// (`charge:order:50266`) only for as long as their row is kept.
#[derive(Debug)]
pub struct EffectLedger<DB: Backend> {
    store: Store<DB>,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for EffectLedger<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<DB: Backend> EffectLedger<DB> {
    pub(crate) fn new(store: Store<DB>) -> Self {
        Self { store }
    }

    /// Records the intent to run `effect` with `request` (any bytes, passed to the provider as
    /// is) under `key`, inside the caller's open transaction, with `INSERT … ON CONFLICT DO
    /// NOTHING` (no read before the write, C1). `tx` is that transaction's connection: `&mut *tx`,
    /// as for sqlx (inside [`Runner::run`](crate::Runner::run)'s handler, and on a transaction
    /// from [`Store::begin`] alike).
    ///
    /// Returns [`Enqueued::Created`] for a new key. For a key already in the ledger (committed,
    /// or committed by a concurrent transaction this one waited for on PostgreSQL or MySQL) with the same
    /// effect name and the same request bytes, nothing is written and the answer is what is
    /// stored: [`Enqueued::Completed`] with the outcome, [`Enqueued::Failed`], or
    /// [`Enqueued::Pending`] with the status. [`Enqueued`] says what each means for the handler. Counts `idem_effects_enqueued_total{effect,
    /// outcome}` with outcome `created`, `existing` or `conflict` (counted when called, whether or
    /// not the transaction later commits).
    ///
    /// # Errors
    /// [`Error::EffectConflict`] (kind [`InvalidInput`](crate::ErrorKind::InvalidInput)) when the
    /// key was enqueued with another effect name or other request bytes: one key names one
    /// request. Nothing is written; the transaction stays usable. [`Error::NoTransaction`] when
    /// `tx` has no transaction open (a pooled connection): the intent would commit on its own. [`Error::Database`], of kind
    /// [`Conflict`](crate::ErrorKind::Conflict) on a serialization failure, deadlock or
    /// SQLITE_BUSY; [`Error::CorruptRow`] when the stored row holds a value idem never writes.
    pub async fn enqueue(
        &self,
        tx: &mut DB::Connection,
        effect: &Name,
        key: &EffectKey,
        request: &[u8],
    ) -> Result<Enqueued, Error> {
        self.enqueue_as(tx, None, effect, key, request, false).await
    }

    /// As [`enqueue`](Self::enqueue), recording `consumer` as the row's writer (its `consumer`
    /// column, counted per consumer by [`Store::consumers`](crate::Store::consumers)).
    /// `enqueue` leaves it NULL; [`Runner::enqueue_effect`](crate::Runner::enqueue_effect)
    /// records the runner's consumer. A row that exists already keeps its writer.
    ///
    /// # Errors
    /// As [`enqueue`](Self::enqueue).
    pub async fn enqueue_for(
        &self,
        tx: &mut DB::Connection,
        consumer: &Name,
        effect: &Name,
        key: &EffectKey,
        request: &[u8],
    ) -> Result<Enqueued, Error> {
        self.enqueue_as(tx, Some(consumer), effect, key, request, false)
            .await
    }

    /// [`enqueue`](Self::enqueue), recording `consumer` as the writer when given; with `successor` (a consumer with a declared lineage, through
    /// [`Runner::enqueue_effect`](crate::Runner::enqueue_effect)) a stored row whose request
    /// bytes differ is answered with its state, the difference counted and logged, instead of
    /// [`Error::EffectConflict`].
    pub(crate) async fn enqueue_as(
        &self,
        tx: &mut DB::Connection,
        consumer: Option<&Name>,
        effect: &Name,
        key: &EffectKey,
        request: &[u8],
        successor: bool,
    ) -> Result<Enqueued, Error> {
        in_transaction(tx, "EffectLedger::enqueue")?;
        let now = self.store.now().as_millis();
        let count = |outcome: &'static str| {
            metrics::counter!(EFFECTS_ENQUEUED_TOTAL, "effect" => effect.to_string(), "outcome" => outcome)
                .increment(1);
        };
        if DB::effects_insert(
            tx,
            key.as_str(),
            effect.as_str(),
            request,
            now,
            consumer.map(Name::as_str),
        )
        .await?
        {
            count("created");
            return Ok(Enqueued::Created);
        }
        let Some(row) = DB::effects_load(tx, key.as_str()).await? else {
            // Only retention deletes rows, and only finished ones long past: the row that made the
            // INSERT conflict was deleted between the two statements.
            return Err(Error::CorruptRow {
                table: "idem_effects",
                detail: format!("effect {key} conflicted on insert but cannot be read"),
            });
        };
        let stored = EffectRecord::from_row(row)?;
        let differs = if stored.effect != *effect {
            Some("effect name")
        } else if stored.request != request {
            Some("request")
        } else {
            None
        };
        match differs {
            Some("request") if successor => {
                count("request_differs");
                tracing::warn!(
                    effect = %effect,
                    key = %key,
                    "a later consumer version enqueued this effect with other request bytes than its lineage recorded; nothing runs again (the stored state is answered)"
                );
            }
            Some(what) => {
                count("conflict");
                return Err(Error::EffectConflict {
                    key: key.clone(),
                    what,
                });
            }
            None => count("existing"),
        }
        Ok(match stored.status {
            EffectStatus::Succeeded => Enqueued::Completed {
                outcome: stored.outcome.unwrap_or_default(),
            },
            EffectStatus::Failed => Enqueued::Failed {
                reason: stored.last_error.unwrap_or_default(),
            },
            status => Enqueued::Pending { status },
        })
    }

    /// The effect stored under `key`, if any (one autocommitted read).
    ///
    /// # Errors
    /// [`Error::Database`]; [`Error::CorruptRow`] for a row idem did not write.
    pub async fn get(&self, key: &EffectKey) -> Result<Option<EffectRecord>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::effects_load(&mut conn, key.as_str())
            .await?
            .map(EffectRecord::from_row)
            .transpose()
    }

    /// How many effects are stored under keys derived in `scope` (`{scope}/{effect}/{dedup
    /// key}`, [`EffectKey::derive`] with `scope` as its consumer): for a consumer with a declared
    /// lineage, pass its effects scope ([`Runner::effects_scope_name`](crate::Runner::effects_scope_name))
    /// to count what its lineage recorded. Intent keys ([`EffectKey::intent`]) belong to no
    /// scope and are not counted, nor are rows [`Store::gc`] deleted. One autocommitted read of
    /// the whole ledger (it compares each key's prefix): meant for reports, not for a hot path.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn count_scope(&self, scope: &Name) -> Result<u64, Error> {
        let mut conn = self.store.pool().acquire().await?;
        let prefix = format!("{scope}/");
        let n = DB::effects_count_prefix(&mut conn, &prefix).await?;
        Ok(u64::try_from(n).unwrap_or_default())
    }

    /// Up to `limit` effects in `status`, least recently changed first (then by key): for example
    /// the parked and dead effects an operator must resolve.
    ///
    /// # Errors
    /// [`Error::Database`]; [`Error::CorruptRow`] for a row idem did not write.
    pub async fn list(&self, status: EffectStatus, limit: u32) -> Result<Vec<EffectRecord>, Error> {
        let mut conn = self.store.pool().acquire().await?;
        DB::effects_list(&mut conn, status.as_str(), i64::from(limit))
            .await?
            .into_iter()
            .map(EffectRecord::from_row)
            .collect()
    }

    /// Resolves a parked or dead effect as an operator decided after reconciling with the
    /// provider (see [`Resolution`]); returns the effect as now stored. One autocommitted
    /// statement; workers never hold parked or dead effects, so no lease is involved. The
    /// worker's apply hook does not run: apply a [`Resolution::Succeeded`] outcome locally
    /// yourself if it needs a local write.
    ///
    /// # Errors
    /// [`Error::EffectNotFound`] when no effect has this key; [`Error::EffectNotResolvable`]
    /// (kind [`InvalidInput`](crate::ErrorKind::InvalidInput)) when it is neither parked nor dead
    /// (nothing is changed); [`Error::Database`].
    pub async fn resolve(
        &self,
        key: &EffectKey,
        resolution: Resolution,
    ) -> Result<EffectRecord, Error> {
        let resolve = match &resolution {
            Resolution::Succeeded(outcome) => Resolve::Succeeded(outcome),
            Resolution::Failed(reason) => Resolve::Failed(reason),
            Resolution::Retry => Resolve::Retry,
        };
        let mut conn = self.store.pool().acquire().await?;
        let now = self.store.now().as_millis();
        let resolved = DB::effects_resolve(&mut conn, key.as_str(), &resolve, now).await?;
        let stored = DB::effects_load(&mut conn, key.as_str())
            .await?
            .map(EffectRecord::from_row)
            .transpose()?;
        match stored {
            None => Err(Error::EffectNotFound { key: key.clone() }),
            Some(record) if resolved => {
                tracing::info!(effect_key = %key, effect = %record.effect, status = %record.status, "effect resolved by an operator");
                Ok(record)
            }
            Some(record) => Err(Error::EffectNotResolvable {
                key: key.clone(),
                status: record.status,
            }),
        }
    }
}

impl<DB: Backend> Store<DB> {
    /// The effect ledger: record effect intents in the handler's transaction, read and resolve
    /// them (run them with an [`EffectWorker`](crate::EffectWorker)).
    pub fn effects(&self) -> EffectLedger<DB> {
        EffectLedger::new(self.clone())
    }
}
