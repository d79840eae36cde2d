//! A pooled connection for an operation that may begin a transaction of its own (MySQL's
//! outbox claims and failures, lease acquires and effect claims lock rows in one): closed, not
//! handed back to the pool, when the operation is given up part way (a timeout, a dropped
//! future). sqlx counts a PostgreSQL or MySQL transaction only once `BEGIN`'s answer is read, so
//! an operation given up while its `BEGIN` was in flight would hand the pool a connection inside
//! a transaction nobody ends (see [`Store::begin`](crate::Store::begin)).

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool};

/// A [`PoolConnection`] that is closed on drop unless [`finished`](Self::finished) was called.
pub(crate) struct ClosedIfCutShort<DB: Database> {
    conn: PoolConnection<DB>,
    finished: bool,
}

impl<DB: Database> ClosedIfCutShort<DB> {
    /// Takes a connection from `pool` (safe to give up: nothing was sent yet).
    ///
    /// # Errors
    /// sqlx's, when no connection could be had within the pool's acquire timeout.
    pub(crate) async fn acquire(pool: &Pool<DB>) -> Result<Self, sqlx::Error> {
        Ok(Self {
            conn: pool.acquire().await?,
            finished: false,
        })
    }

    /// The operation ended (with its answer or its error): the connection's state is known to
    /// sqlx, and it goes back to the pool.
    pub(crate) fn finished(mut self) {
        self.finished = true;
    }
}

impl<DB: Database> Deref for ClosedIfCutShort<DB> {
    type Target = PoolConnection<DB>;
    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl<DB: Database> DerefMut for ClosedIfCutShort<DB> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn
    }
}

impl<DB: Database> Drop for ClosedIfCutShort<DB> {
    fn drop(&mut self) {
        if !self.finished {
            self.conn.close_on_drop();
        }
    }
}
