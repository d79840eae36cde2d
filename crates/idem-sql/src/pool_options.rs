//! How a [`Store`](crate::Store)'s pool opens connections and hands them out.

use std::time::Duration;

/// The default pool size of [`Store::connect`](crate::Store::connect).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// The default [`PoolOptions::acquire_timeout`]: 30 s, sqlx's own.
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// The pool settings of [`Store::connect_with_options`](crate::Store::connect_with_options).
///
/// Whatever the settings, a connection that comes back to the pool still inside a transaction
/// (a `COMMIT` that failed, as on a full disk, leaves sqlx's transaction depth behind) is closed
/// when next taken instead of handed out, so that one failure cannot break every later
/// transaction with "attempted to call begin_with at non-zero transaction depth".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolOptions {
    /// Connections at most ([`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: u32,
    /// How long taking a connection may wait, opening one included: past it the operation fails
    /// with [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable)
    /// ([`DEFAULT_ACQUIRE_TIMEOUT`]). On PostgreSQL and MySQL it also bounds the first connection that
    /// [`Store::connect_with_options`](crate::Store::connect_with_options) opens, so a server
    /// that accepts TCP and never answers is reported after it instead of hanging.
    pub acquire_timeout: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        }
    }
}

impl PoolOptions {
    /// These options with at most `max_connections` connections (at least 1).
    pub fn max_connections(self, max_connections: u32) -> Self {
        Self {
            max_connections: max_connections.max(1),
            ..self
        }
    }

    /// These options with `acquire_timeout` (at least 1 ms).
    pub fn acquire_timeout(self, acquire_timeout: Duration) -> Self {
        Self {
            acquire_timeout: acquire_timeout.max(Duration::from_millis(1)),
            ..self
        }
    }
}
