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

/// The reason (`bad_signature`, `too_large` or `malformed`: the console's and the alerts'
/// words) a refusal of problem type `code` (`bad-signature`, …) is counted under, or
/// `None` for a refusal that says nothing of the sender (a timeout, the store unavailable).
pub(crate) fn rejection_reason(code: &str) -> Option<&'static str> {
    match code {
        "bad-signature" => Some("bad_signature"),
        "body-too-large" => Some("too_large"),
        "malformed-json" | "no-event-id" | "bad-event-field" | "unreadable-body" => {
            Some("malformed")
        }
        _ => None,
    }
}

/// Refused requests counted in this process since the monitor last added them to the
/// database (`idem_gateway_rejections`): one write per source, reason and interval, however
/// many forged requests arrive.
#[derive(Debug, Default)]
pub(crate) struct Rejections {
    counts: Mutex<std::collections::BTreeMap<(String, &'static str), i64>>,
}

impl Rejections {
    /// Counts one refusal of `source` for `reason`.
    pub(crate) fn add(&self, source: &str, reason: &'static str) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry((source.to_owned(), reason)).or_default() += 1;
        }
    }

    /// Takes the counts so far, leaving none.
    pub(crate) fn take(&self) -> Vec<(String, &'static str, i64)> {
        self.counts.lock().map_or_else(
            |_| Vec::new(),
            |mut counts| {
                std::mem::take(&mut *counts)
                    .into_iter()
                    .map(|((source, reason), n)| (source, reason, n))
                    .collect()
            },
        )
    }

    /// Puts back counts that could not be written.
    pub(crate) fn restore(&self, rows: Vec<(String, &'static str, i64)>) {
        if let Ok(mut counts) = self.counts.lock() {
            for (source, reason, n) in rows {
                *counts.entry((source, reason)).or_default() += n;
            }
        }
    }
}
