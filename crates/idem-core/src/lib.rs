//! The rules of idem, with no I/O: dedup keys built only from the event, entity versions and the
//! stale/tie/gap decision, fencing tokens and lease ttls, retention against redelivery horizons,
//! and an injectable clock.
//!
//! Storage lives in `idem-sql`; most users depend on the `idem` facade crate, which re-exports
//! this one.
//!
//! ```
//! use idem_core::{decide, Advance, DedupKey, EventId, Name, Version};
//!
//! let stripe = Name::new("source", "stripe")?;
//! let key = DedupKey::from_event(&stripe, &EventId::new("evt_1")?);
//! assert_eq!(key.as_str(), "stripe:evt_1");
//!
//! // `customer.subscription.updated` (created 1623979266) was applied first;
//! // `customer.subscription.created` (created 1623979265) arrives late: stale.
//! let applied = Version::timestamp(1_623_979_266);
//! let late = Version::timestamp(1_623_979_265);
//! assert_eq!(decide(Some(&applied), &late)?, Advance::Stale { current: applied });
//! # Ok::<(), idem_core::Error>(())
//! ```

mod backoff;
mod clock;
mod dedup_key;
mod effect_key;
mod entity;
mod error;
mod id;
mod lease;
mod name;
mod retention;
#[cfg(feature = "tls")]
pub mod tls;
mod version;

pub use backoff::Backoff;
pub use clock::{Clock, ManualClock, Rfc3339, SystemClock, Timestamp};
pub use dedup_key::DedupKey;
pub use effect_key::{EffectKey, MAX_EFFECT_KEY_BYTES};
pub use entity::Entity;
pub use error::Error;
pub use id::{EventId, MAX_ID_BYTES};
pub use lease::{Acquire, FencingToken, LeaseKey, Ttl};
pub use name::{MAX_NAME_LEN, Name};
pub use retention::{RetentionPolicy, horizon};
pub use version::{Advance, GapPolicy, Version, VersionValue, decide};
