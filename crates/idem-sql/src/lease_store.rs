//! Fenced leases, for work that cannot live inside one transaction (C8's lease part).

use idem_core::{Acquire, FencingToken, LeaseKey, Timestamp, Ttl};
use sqlx::Transaction;

use crate::backend::Backend;
use crate::cut_short::ClosedIfCutShort;
use crate::metric_definitions::LEASE_TAKEOVERS_TOTAL;
use crate::{Error, Store};

/// How often `acquire` re-reads a lease that changed between its two statements before giving up
/// with a conflict. Each round needs another holder to release in between, so this is rarely
/// more than one.
const ACQUIRE_ROUNDS: usize = 8;

/// Leases with fencing tokens. Made by [`Store::leases`].
///
/// A lease is `(scope, key)` → token, state (running, completed, released) and expiry. Every
/// time it is acquired anew (first time, after a release, or by taking over an expired one) the
/// token grows by one, and `complete`, `release` and `extend` succeed only with the current
/// token: a holder that stalled past its expiry cannot overwrite its successor. Each call is one
/// autocommitted statement (two when `acquire` finds the lease taken), outside any transaction
/// of the caller's, with the time from the store's clock.
///
/// Retention ([`Store::gc`]) deletes leases completed, released or expired before its cutoff;
/// the next `acquire` of such a key starts again at token 1. A holder stalled for longer than
/// the retention period (which is at least the sender's redelivery horizon, days) could then
/// match a new token: the fence holds for stalls shorter than the retention.
#[derive(Debug)]
pub struct LeaseStore<DB: Backend> {
    store: Store<DB>,
}

// Written out: a derive would require `DB: Clone`, which sqlx's database types are not.
impl<DB: Backend> Clone for LeaseStore<DB> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<DB: Backend> LeaseStore<DB> {
    pub(crate) fn new(store: Store<DB>) -> Self {
        Self { store }
    }

    /// Tries to take the lease on `key` for `ttl`, for work without a request fingerprint (the
    /// same as [`acquire_with_fingerprint`](Self::acquire_with_fingerprint) with an empty one).
    ///
    /// # Errors
    /// As [`acquire_with_fingerprint`](Self::acquire_with_fingerprint).
    pub async fn acquire(&self, key: &LeaseKey, ttl: Ttl) -> Result<Acquire, Error> {
        self.acquire_with_fingerprint(key, &[], ttl).await
    }

    /// Tries to take the lease on `key` for `ttl`, for the request identified by `fingerprint`
    /// (any bytes, such as a SHA-256 of the request; compared exactly).
    ///
    /// Returns [`Acquire::Acquired`] with a new token when the lease is free (absent, released,
    /// or expired: `takeover` then says an expired holder was displaced, counted in
    /// `idem_lease_takeovers_total`); the new holder's fingerprint replaces the old one. While the
    /// lease is live or completed, nothing is changed and the answer is
    /// [`Acquire::FingerprintMismatch`] if it was taken for another fingerprint, else
    /// [`Acquire::InProgress`] with its expiry, or [`Acquire::Completed`] with the stored record.
    ///
    /// # Errors
    /// [`Error::LeaseContended`] when the lease changed hands on every one of a few reads;
    /// [`Error::Database`].
    pub async fn acquire_with_fingerprint(
        &self,
        key: &LeaseKey,
        fingerprint: &[u8],
        ttl: Ttl,
    ) -> Result<Acquire, Error> {
        let mut conn = ClosedIfCutShort::acquire(self.store.pool()).await?;
        let acquired = self.acquire_on(&mut conn, key, fingerprint, ttl).await;
        conn.finished();
        acquired
    }

    /// As [`acquire_with_fingerprint`](Self::acquire_with_fingerprint), inside the caller's
    /// transaction: the lease row is written by the transaction, so the caller's writes, the
    /// lease and (with [`complete_in`](Self::complete_in)) its record commit together, in one
    /// commit, or not at all. Until that transaction ends, another acquire of the same key waits
    /// for it (PostgreSQL's and MySQL's row lock; SQLite's single writer) and then sees its
    /// outcome.
    ///
    /// # Errors
    /// As [`acquire_with_fingerprint`](Self::acquire_with_fingerprint).
    pub async fn acquire_in(
        &self,
        tx: &mut Transaction<'_, DB>,
        key: &LeaseKey,
        fingerprint: &[u8],
        ttl: Ttl,
    ) -> Result<Acquire, Error> {
        self.acquire_on(tx, key, fingerprint, ttl).await
    }

    async fn acquire_on(
        &self,
        conn: &mut DB::Connection,
        key: &LeaseKey,
        fingerprint: &[u8],
        ttl: Ttl,
    ) -> Result<Acquire, Error> {
        let (scope, k) = (key.scope(), key.key());
        for _ in 0..ACQUIRE_ROUNDS {
            let now = self.now();
            let taken = DB::acquire_lease(conn, scope, k, fingerprint, now, ttl.as_millis());
            if let Some(taken) = taken.await? {
                if taken.takeover {
                    metrics::counter!(LEASE_TAKEOVERS_TOTAL).increment(1);
                    tracing::info!(lease = %key, token = taken.token, "expired lease taken over");
                }
                return Ok(Acquire::Acquired {
                    token: FencingToken(taken.token),
                    expires_at: Timestamp(taken.expires_at),
                    takeover: taken.takeover,
                });
            }
            // Live or completed; a release or expiry in between sends us round again.
            let Some(row) = DB::load_lease(conn, scope, k).await? else {
                continue;
            };
            let live = row.state == "running" && row.expires_at > now;
            if (live || row.state == "completed") && row.fingerprint != fingerprint {
                return Ok(Acquire::FingerprintMismatch);
            }
            if row.state == "completed" {
                return Ok(Acquire::Completed {
                    record: row.record.unwrap_or_default(),
                });
            }
            if live {
                return Ok(Acquire::InProgress {
                    until: Timestamp(row.expires_at),
                });
            }
        }
        Err(Error::LeaseContended { key: key.clone() })
    }

    /// Stores `record` (for example a serialised response) and marks the lease completed, if
    /// `token` is still the current token of a running lease. Later `acquire` calls return the
    /// record.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the token is not current or the lease is not running (nothing is
    /// written); [`Error::Database`].
    pub async fn complete(
        &self,
        key: &LeaseKey,
        token: FencingToken,
        record: &[u8],
    ) -> Result<(), Error> {
        let mut conn = self.store.pool().acquire().await?;
        let done = DB::complete_lease(
            &mut conn,
            key.scope(),
            key.key(),
            token.0,
            record,
            self.now(),
        )
        .await?;
        fenced(done, key, token)
    }

    /// As [`complete`](Self::complete), inside the caller's transaction: the record commits with
    /// the caller's own writes, or neither does.
    ///
    /// # Errors
    /// As [`complete`](Self::complete).
    pub async fn complete_in(
        &self,
        tx: &mut Transaction<'_, DB>,
        key: &LeaseKey,
        token: FencingToken,
        record: &[u8],
    ) -> Result<(), Error> {
        let done =
            DB::complete_lease(tx, key.scope(), key.key(), token.0, record, self.now()).await?;
        fenced(done, key, token)
    }

    /// Gives the lease up without a record, if `token` is current (for example after a failed
    /// attempt): the next `acquire` takes it at once, with the next token.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the token is not current or the lease is not running;
    /// [`Error::Database`].
    pub async fn release(&self, key: &LeaseKey, token: FencingToken) -> Result<(), Error> {
        let mut conn = self.store.pool().acquire().await?;
        let done =
            DB::release_lease(&mut conn, key.scope(), key.key(), token.0, self.now()).await?;
        fenced(done, key, token)
    }

    /// Renews a live lease held with `token`: it now expires `ttl` from now. Returns the new
    /// expiry.
    ///
    /// # Errors
    /// [`Error::Fenced`] when the token is not current, the lease is not running, or it has
    /// already expired (another holder may be taking it over); [`Error::Database`].
    pub async fn extend(
        &self,
        key: &LeaseKey,
        token: FencingToken,
        ttl: Ttl,
    ) -> Result<Timestamp, Error> {
        let mut conn = self.store.pool().acquire().await?;
        let now = self.now();
        match DB::extend_lease(
            &mut conn,
            key.scope(),
            key.key(),
            token.0,
            now,
            ttl.as_millis(),
        )
        .await?
        {
            Some(expires_at) => Ok(Timestamp(expires_at)),
            None => Err(Error::Fenced {
                key: key.clone(),
                token,
            }),
        }
    }

    fn now(&self) -> i64 {
        self.store.now().as_millis()
    }
}

fn fenced(done: bool, key: &LeaseKey, token: FencingToken) -> Result<(), Error> {
    if done {
        Ok(())
    } else {
        Err(Error::Fenced {
            key: key.clone(),
            token,
        })
    }
}

impl<DB: Backend> Store<DB> {
    /// The lease store.
    pub fn leases(&self) -> LeaseStore<DB> {
        LeaseStore::new(self.clone())
    }
}
