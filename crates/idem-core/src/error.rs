//! The error type of `idem-core`: input that breaks a rule of the model.

use std::time::Duration;

/// A value that breaks one of idem's rules; each variant names the value and what was expected.
///
/// Returned by the constructors of [`Name`](crate::Name), [`EventId`](crate::EventId),
/// [`Entity`](crate::Entity), [`DedupKey`](crate::DedupKey), [`EffectKey`](crate::EffectKey),
/// [`Ttl`](crate::Ttl) and [`RetentionPolicy`](crate::RetentionPolicy), and by
/// [`decide`](crate::decide).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An id (event id, command id, aggregate id) was empty or only whitespace. Ids are never
    /// defaulted: a delivery without an id cannot be deduplicated and must be refused.
    #[error(
        "{what} is empty or only whitespace; expected non-blank text (ids are never defaulted)"
    )]
    BlankId {
        /// Which id: "event id", "command id" or "aggregate id".
        what: &'static str,
    },
    /// An id was longer than [`MAX_ID_BYTES`](crate::MAX_ID_BYTES).
    #[error("{what} is {len} bytes long; expected at most {max} bytes")]
    IdTooLong {
        /// Which id.
        what: &'static str,
        /// Its length in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// A name (consumer, source, aggregate type) was not 1–64 characters of `A–Z a–z 0–9 _ . -`.
    #[error(
        "{what} {value:?} is not a valid name; expected 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'"
    )]
    InvalidName {
        /// Which name: "consumer", "source" or "aggregate type".
        what: &'static str,
        /// The rejected value.
        value: String,
    },
    /// A lease ttl was zero or too large to be represented in milliseconds.
    #[error("lease ttl {ttl:?} is out of range; expected {min:?} to {max:?}")]
    InvalidTtl {
        /// The rejected ttl.
        ttl: Duration,
        /// The smallest ttl accepted.
        min: Duration,
        /// The largest ttl accepted.
        max: Duration,
    },
    /// A retention period shorter than the sender's redelivery horizon: a redelivered event
    /// would find its key deleted and run a second time (docs/design.md C9).
    #[error(
        "retention of {} is shorter than the redelivery horizon of {}; keep keys at least as long as the sender may redeliver",
        show(*retention), show(*horizon)
    )]
    RetentionTooShort {
        /// The retention that was asked for.
        retention: Duration,
        /// The redelivery horizon it must cover.
        horizon: Duration,
    },
    /// An effect intent key holds a character a provider cannot take in an HTTP header value
    /// (anything outside printable ASCII, `0x20`–`0x7E`), or starts or ends with a space (header
    /// parsers strip it, so the provider would see another key).
    #[error(
        "effect key {value:?} cannot be sent as an idempotency key: {reason}; expected printable ASCII (0x20-0x7E) with no leading or trailing space"
    )]
    InvalidEffectKey {
        /// The rejected key.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// One entity received versions of two kinds (a sequence and a timestamp), which cannot be
    /// compared.
    #[error(
        "entity version kinds differ: stored {stored}, got {got}; one entity must use one kind of version"
    )]
    VersionKindMismatch {
        /// The kind stored for the entity ("sequence" or "timestamp").
        stored: &'static str,
        /// The kind of the new version.
        got: &'static str,
    },
}

/// A duration for a message: whole seconds as `N s`, anything finer as Rust prints it (`1.5s`,
/// `250ms`).
fn show(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{d:?}")
    }
}
