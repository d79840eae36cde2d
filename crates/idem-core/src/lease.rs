//! Leases with fencing tokens, for work that cannot live inside one database transaction.

use std::fmt;
use std::time::Duration;

use crate::id::check_id;
use crate::{Error, Timestamp};

/// What a lease is held on: a scope (the principal of an HTTP request, an effect worker's name,
/// a destination) and a key within it. They are kept as two separate values, so two scopes never
/// share a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    scope: String,
    key: String,
}

impl LeaseKey {
    /// Builds a lease key; both parts are non-blank text of at most
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES).
    ///
    /// # Errors
    /// [`Error::BlankId`] or [`Error::IdTooLong`] naming "lease scope" or "lease key".
    pub fn new(scope: impl Into<String>, key: impl Into<String>) -> Result<Self, Error> {
        Ok(Self {
            scope: check_id("lease scope", scope.into())?,
            key: check_id("lease key", key.into())?,
        })
    }

    /// The scope.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The key within the scope.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for LeaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.scope, self.key)
    }
}

/// A fencing token: increases by one each time a lease changes hands. Every write by the holder
/// is checked against it, so a holder whose lease expired cannot overwrite its successor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken(pub i64);

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A lease duration, checked: at least [`Ttl::MIN`], at most [`Ttl::MAX`]. A zero ttl is refused
/// (it would make every lease expired at once) and so is an unbounded one (a crashed holder would
/// block the key for ever).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ttl(Duration);

impl Ttl {
    /// The shortest ttl: 1 ms.
    pub const MIN: Duration = Duration::from_millis(1);
    /// The longest ttl: 7 days.
    pub const MAX: Duration = Duration::from_secs(7 * 24 * 3600);

    /// Checks a ttl.
    ///
    /// # Errors
    /// [`Error::InvalidTtl`] below [`Ttl::MIN`] (including zero) or above [`Ttl::MAX`].
    pub fn new(ttl: Duration) -> Result<Self, Error> {
        if (Self::MIN..=Self::MAX).contains(&ttl) {
            Ok(Self(ttl))
        } else {
            Err(Error::InvalidTtl {
                ttl,
                min: Self::MIN,
                max: Self::MAX,
            })
        }
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }

    /// The duration in whole milliseconds (at least 1).
    pub fn as_millis(self) -> i64 {
        // In range by construction: at most 7 days of milliseconds.
        i64::try_from(self.0.as_millis()).unwrap_or(i64::MAX)
    }
}

/// The answer to acquiring a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquire {
    /// The caller now holds the lease, with this token, until `expires_at`.
    Acquired {
        /// The token to present to `complete`, `release` and `extend`.
        token: FencingToken,
        /// When the lease lapses unless extended.
        expires_at: Timestamp,
        /// Whether an expired lease of another holder was taken over.
        takeover: bool,
    },
    /// Another holder has a live lease: do not run the work.
    InProgress {
        /// When that lease lapses (a `Retry-After` can be computed from it).
        until: Timestamp,
    },
    /// The work was completed: here is the record its holder stored.
    Completed {
        /// The record, as bytes (for example a serialised HTTP response).
        record: Vec<u8>,
    },
    /// The lease is live or completed for another request: its fingerprint differs from the
    /// one given. Nothing was changed; the key is being reused for different work (for an HTTP
    /// Idempotency-Key, a 422).
    FingerprintMismatch,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_bounds() {
        assert!(matches!(
            Ttl::new(Duration::ZERO),
            Err(Error::InvalidTtl { .. })
        ));
        assert!(matches!(
            Ttl::new(Duration::MAX),
            Err(Error::InvalidTtl { .. })
        ));
        assert_eq!(
            Ttl::new(Duration::from_secs(30)).unwrap().as_millis(),
            30_000
        );
    }
}
