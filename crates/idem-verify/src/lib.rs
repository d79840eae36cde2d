//! # idem-verify: redelivery chaos against any HTTP handler
//!
//! The engine of `idem verify`. It delivers a list of events to a handler the way at-least-once
//! senders do, and checks that the handler's final state does not depend on it:
//!
//! 1. **baseline**: `--reset`, deliver every event once, in order, one at a time, `--state`;
//! 2. each [`Mode`] (`duplicate`, `concurrent`, `shuffle`, `lost-ack`, `crash`,
//!    `replay-later`): reset, deliver with that chaos, snapshot, compare with the baseline. A
//!    non-2xx answer to a duplicate is a finding too (senders retry on 4xx and 5xx). `crash`
//!    runs [`Commands::restart`] (`--restart`) at seeded points, right after a delivery was
//!    handled and before its answer counted, and redelivers that delivery once the target
//!    answers again; without a restart command it is [`Verdict::Skipped`] with a note (not a
//!    pass). [`Options::keep_entity_order`] (`--keep-entity-order`) makes `shuffle` keep each
//!    entity's events in file order. `rebuild` checks a consumer version upgrade: it delivers
//!    the history in order, runs [`Commands::successor`] (`--successor`, which moves the target
//!    to its next consumer version, `billing_v2` succeeding `billing_v1`, keeping its state),
//!    delivers the same history again in order, and compares with the baseline: a projection
//!    rebuilt differently, or an effect run again under a new key, shows in `--state` (print the
//!    effects the target ran, e.g. the idempotency keys its provider received). Without a
//!    successor command it is [`Verdict::Skipped`];
//! 3. on a difference, delta debugging ([`shrink::ddmin`]) over the deliveries finds a minimal
//!    sequence that still diverges from the in-order run of the same events; it is written as a
//!    replayable JSONL file ([`replay`]) with a short explanation.
//!
//! Every copy is signed fresh (a fresh timestamp) with one stable event id per event
//! ([`deliver::Signer`]). Schedules are deterministic from the seed; reordering modes keep the
//! events of one entity that share a version in their relative order (docs/design.md C5). The whole
//! run is bounded by a budget.
//!
//! The four reference handlers the tests and the README run `idem verify` against (one correct,
//! three with a classic bug) are in `examples/verify-handlers`.

mod error;

pub mod deliver;
pub mod events;
pub mod plan;
pub mod run;
pub mod shrink;
pub mod state;

pub use deliver::{Signer, Target};
pub use error::VerifyError;
pub use plan::Mode;
pub use run::{
    MinimalDelivery, MinimalSequence, ModeReport, Non2xx, Options, ReplayReport, Report, Verdict,
    replay, run,
};
pub use state::{Commands, Hooks, Snapshot};
