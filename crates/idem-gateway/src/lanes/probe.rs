//! The circuit breaker's probe on a paused destination: the monitor asks for one (after it
//! claimed the probe in the database, so one process of the database sends it), the dispatcher
//! sends the destination's next due delivery despite the pause, and reports how it ended.

use std::sync::{Mutex, PoisonError};

/// How a probe ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    /// The delivery was delivered: the destination answers again.
    Delivered,
    /// The attempt failed: its status (if any) and the start of the answer or the error.
    Failed(Option<i64>, String),
    /// No delivery was due: nothing was sent.
    NothingDue,
}

/// One destination's probe in this process: asked for, then its result.
#[derive(Debug, Default)]
pub(crate) struct Probe {
    state: Mutex<(bool, Option<ProbeResult>)>,
}

impl Probe {
    /// Asks the dispatcher for one probe (after the monitor claimed it in the database).
    pub(crate) fn request(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *state = (true, None);
    }

    /// Whether a probe was asked for; the dispatcher takes the request.
    pub(crate) fn take_request(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut state.0, false)
    }

    /// How the probe ended.
    pub(crate) fn report(&self, result: ProbeResult) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = Some(result);
    }

    /// The probe's result, once; `None` while it runs (or none was asked for).
    pub(crate) fn take_result(&self) -> Option<ProbeResult> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .take()
    }
}
