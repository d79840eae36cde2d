//! Whether the store takes writes, as the last ingest commit found it: what `/readyz` reports
//! besides its own probe. A failed commit marks the store failing (with the reason); a commit,
//! or a probe write of `/readyz`, that succeeds marks it working again.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The ingest's view of the store.
#[derive(Debug, Default)]
pub(crate) struct StoreHealth {
    failing: AtomicBool,
    reason: Mutex<Option<String>>,
}

impl StoreHealth {
    /// A commit (or probe) failed with `reason`.
    pub(crate) fn failed(&self, reason: &str) {
        if let Ok(mut last) = self.reason.lock() {
            *last = Some(reason.to_owned());
        }
        self.failing.store(true, Ordering::Release);
    }

    /// A commit (or probe) succeeded.
    pub(crate) fn recovered(&self) {
        self.failing.store(false, Ordering::Release);
    }

    /// Why the store is failing; `None` while it takes writes.
    pub(crate) fn failing(&self) -> Option<String> {
        if !self.failing.load(Ordering::Acquire) {
            return None;
        }
        Some(
            self.reason
                .lock()
                .ok()
                .and_then(|r| r.clone())
                .unwrap_or_else(|| "the last commit failed".to_owned()),
        )
    }
}
