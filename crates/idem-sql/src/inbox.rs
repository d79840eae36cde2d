//! The inbox: processed dedup keys per consumer. A claim is the INSERT of a key (C1).

use std::collections::HashSet;

use idem_core::{DedupKey, Name};

use crate::backend::Backend;
use crate::error::in_transaction;
use crate::metric_definitions::CLAIMS_TOTAL;
use crate::{Error, Store};

/// The result of claiming a dedup key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Claim {
    /// The key was not in the inbox: this transaction now holds it. Do the work and commit; a
    /// rollback (or a crash) frees the key for the next delivery.
    Fresh,
    /// The key was processed by a committed transaction: acknowledge the delivery as success
    /// (C3) and do nothing else.
    Duplicate,
}

/// The inbox of one consumer. Made by [`Store::inbox`].
#[derive(Debug)]
pub struct Inbox<DB: Backend> {
    store: Store<DB>,
    consumer: Name,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for Inbox<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            consumer: self.consumer.clone(),
        }
    }
}

impl<DB: Backend> Inbox<DB> {
    pub(crate) fn new(store: Store<DB>, consumer: Name) -> Self {
        Self { store, consumer }
    }

    /// Claims `key` inside the caller's open transaction with `INSERT … ON CONFLICT DO
    /// NOTHING`; there is no read before the write (docs/design.md C1). `tx` is the
    /// transaction's connection, `&mut *tx`, as for sqlx.
    ///
    /// On MySQL and MariaDB the claim is a plain `INSERT`, and its duplicate-key error (1062) is
    /// [`Claim::Duplicate`] (InnoDB rolls back the statement only; the transaction goes on).
    ///
    /// Two transactions claiming one key at once: on PostgreSQL and MySQL the second waits until the first
    /// ends, then returns [`Claim::Duplicate`] if the first committed or [`Claim::Fresh`] if it
    /// rolled back; on SQLite, `BEGIN IMMEDIATE` already ordered them. Increments
    /// `idem_claims_total{consumer, outcome}`.
    ///
    /// # Errors
    /// [`Error::Database`], of kind [`Conflict`](crate::ErrorKind::Conflict) on a serialization
    /// failure, deadlock or SQLITE_BUSY (roll back and run again; never a duplicate).
    /// [`Error::NoTransaction`] when `tx` has no transaction open: a claim must commit with the
    /// work it guards.
    pub async fn claim(&self, tx: &mut DB::Connection, key: &DedupKey) -> Result<Claim, Error> {
        in_transaction(tx, "Inbox::claim")?;
        let fresh = DB::claim(tx, self.consumer.as_str(), key.as_str(), self.now()).await?;
        let claim = if fresh {
            Claim::Fresh
        } else {
            Claim::Duplicate
        };
        self.count(claim, 1);
        Ok(claim)
    }

    /// Claims many keys in one statement (a few on SQLite, 1,000 keys each) inside the caller's
    /// transaction: the batched path for high throughput.
    ///
    /// Returns one [`Claim`] per input key, in input order. A key listed twice is
    /// [`Claim::Fresh`] at most once (its first place). Keys are sorted before the INSERT so that
    /// two concurrent batches lock shared keys in one order and cannot deadlock.
    ///
    /// # Errors
    /// As [`claim`](Self::claim).
    pub async fn claim_many(
        &self,
        tx: &mut DB::Connection,
        keys: &[DedupKey],
    ) -> Result<Vec<Claim>, Error> {
        in_transaction(tx, "Inbox::claim_many")?;
        let mut sorted: Vec<&str> = keys.iter().map(DedupKey::as_str).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let fresh = DB::claim_many(tx, self.consumer.as_str(), &sorted, self.now()).await?;
        let mut fresh: HashSet<String> = fresh.into_iter().collect();
        let claims: Vec<Claim> = keys
            .iter()
            .map(|key| {
                if fresh.remove(key.as_str()) {
                    Claim::Fresh
                } else {
                    Claim::Duplicate
                }
            })
            .collect();
        let n_fresh = claims.iter().filter(|c| **c == Claim::Fresh).count();
        self.count(Claim::Fresh, n_fresh);
        self.count(Claim::Duplicate, claims.len() - n_fresh);
        Ok(claims)
    }

    /// Whether `key` was committed to this inbox, read outside any transaction (one SELECT).
    ///
    /// Only a committed key is seen, so `true` is final (until retention deletes the key); `false`
    /// decides nothing: claim to find out. Counts `true` as a duplicate in `idem_claims_total`.
    ///
    /// # Errors
    /// [`Error::Database`].
    pub async fn is_claimed(&self, key: &DedupKey) -> Result<bool, Error> {
        let mut conn = self.store.pool().acquire().await?;
        let claimed = DB::is_claimed(&mut conn, self.consumer.as_str(), key.as_str()).await?;
        if claimed {
            self.count(Claim::Duplicate, 1);
        }
        Ok(claimed)
    }

    /// The consumer this inbox belongs to.
    pub fn consumer(&self) -> &Name {
        &self.consumer
    }

    fn now(&self) -> i64 {
        self.store.now().as_millis()
    }

    fn count(&self, claim: Claim, n: usize) {
        if n == 0 {
            return;
        }
        let outcome = match claim {
            Claim::Fresh => "fresh",
            Claim::Duplicate => "duplicate",
        };
        metrics::counter!(CLAIMS_TOTAL, "consumer" => self.consumer.to_string(), "outcome" => outcome)
            .increment(n as u64);
    }
}

impl<DB: Backend> Store<DB> {
    /// The inbox of `consumer`.
    pub fn inbox(&self, consumer: &Name) -> Inbox<DB> {
        Inbox::new(self.clone(), consumer.clone())
    }
}
