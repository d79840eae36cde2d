//! One writer at a time on a database that has only one (SQLite), taken in this process instead
//! of in SQLite's busy handler: a writer that finds the database locked there sleeps 1 ms, then
//! 2, 5, 10 … up to 100 ms between tries, which put tens of milliseconds on webhooks whenever
//! dispatch held the lock. Here the next writer starts the moment the last one commits, and
//! ingest goes first: dispatch waits while a group commit is waiting. On PostgreSQL, where
//! writers run side by side, the gate is open.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Mutex, MutexGuard, Notify};

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct WriterGate {
    /// `None`: writers need no gate.
    lock: Option<Mutex<()>>,
    ingest_waiting: AtomicUsize,
    ingest_passed: Notify,
}

/// Held while a write transaction runs; dropping it lets the next writer in.
pub(crate) type Turn<'a> = Option<MutexGuard<'a, ()>>;

impl WriterGate {
    /// A gate that lets one writer in at a time when `single_writer`, or an open one.
    pub(crate) fn new(single_writer: bool) -> Self {
        Self {
            lock: single_writer.then(|| Mutex::new(())),
            ..Self::default()
        }
    }

    /// Ingest's turn: first in line.
    pub(crate) async fn ingest(&self) -> Turn<'_> {
        let lock = self.lock.as_ref()?;
        self.ingest_waiting.fetch_add(1, Ordering::SeqCst);
        let turn = lock.lock().await;
        self.ingest_waiting.fetch_sub(1, Ordering::SeqCst);
        self.ingest_passed.notify_waiters();
        Some(turn)
    }

    /// Dispatch's turn: after every group commit waiting now.
    pub(crate) async fn dispatch(&self) -> Turn<'_> {
        let lock = self.lock.as_ref()?;
        loop {
            let passed = self.ingest_passed.notified();
            if self.ingest_waiting.load(Ordering::SeqCst) == 0 {
                break;
            }
            passed.await;
        }
        Some(lock.lock().await)
    }
}
