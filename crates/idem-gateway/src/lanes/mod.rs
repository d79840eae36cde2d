//! Lanes: one per destination, what ingest's hand-off and the destination's dispatcher share in
//! memory. A [`Lane`] holds the dispatcher's wake, the hand-off of fresh deliveries, the pause
//! and rate limit (the throttle with its token bucket), whether its claims and outcome writes
//! work now, how long a claim of its deliveries lasts, and the circuit breaker's probe. Ingest and dispatch both reach a
//! destination's state through its `&Lane`, so neither imports the other.

mod bucket;
pub(crate) mod handoff;
pub(crate) mod health;
pub(crate) mod probe;
pub mod throttle;

use std::time::Duration;

use idem_core::Timestamp;
use idem_core::Ttl;
use tokio::sync::Notify;

use crate::config::Destination;
use handoff::Handoff;
use health::DispatchHealth;
use probe::Probe;
use throttle::Throttle;

/// Added to a destination's timeout to make how long a claim holds its delivery: the claim must
/// outlive the attempt, or another process could take the delivery over while it is still
/// being sent (their clocks must agree to well within it).
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// One destination's shared runtime state (see the module docs).
pub(crate) struct Lane {
    /// The destination's settings this lane was made with: its dispatcher sends with them
    /// until a reload that changes them replaces the lane (and the dispatcher).
    destination: Destination,
    /// Rung when the destination may have new due work.
    wake: Notify,
    /// Fresh deliveries ingest hands to the dispatcher, and the throttle they pass.
    handoff: Handoff,
    /// Whether the dispatcher's claims and outcome writes work now.
    health: DispatchHealth,
    /// How long a claim of one of its deliveries lasts: the timeout plus [`LEASE_MARGIN`].
    claim: Duration,
    /// The circuit breaker's probe while it is paused.
    probe: Probe,
}

impl Lane {
    /// The lane of `destination` at `now`: its throttle starts with a full bucket.
    pub(crate) fn new(destination: &Destination, now: Timestamp) -> Self {
        Self {
            destination: destination.clone(),
            wake: Notify::new(),
            handoff: Handoff::new(Throttle::new(destination.rate_limit, now)),
            health: DispatchHealth::default(),
            claim: destination.timeout + LEASE_MARGIN,
            probe: Probe::default(),
        }
    }

    /// The destination's settings (see the field).
    pub(crate) fn destination(&self) -> &Destination {
        &self.destination
    }

    /// Tells the dispatcher that it may have due work.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// What the dispatcher waits on between claims.
    pub(crate) fn waker(&self) -> &Notify {
        &self.wake
    }

    /// The hand-off from ingest, and its permits and throttle.
    pub(crate) fn handoff(&self) -> &Handoff {
        &self.handoff
    }

    /// Whether the dispatcher's claims and outcome writes work now.
    pub(crate) fn health(&self) -> &DispatchHealth {
        &self.health
    }

    /// The circuit breaker's probe.
    pub(crate) fn probe(&self) -> &Probe {
        &self.probe
    }

    /// How long a claim holds a delivery: the attempt's timeout plus [`LEASE_MARGIN`], so that
    /// it outlives the attempt.
    ///
    /// # Errors
    /// idem-core's, when the destination's timeout is too long for a lease.
    pub(crate) fn claim_ttl(&self) -> Result<Ttl, idem_core::Error> {
        Ttl::new(self.claim)
    }

    /// When a claim made at `now` (ms) ends, as [`claim_ttl`](Self::claim_ttl) says.
    pub(crate) fn claim_end(&self, now: i64) -> i64 {
        now.saturating_add(i64::try_from(self.claim.as_millis()).unwrap_or(i64::MAX))
    }
}
