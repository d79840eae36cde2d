//! The one supervisor of the server's long-running tasks: each destination's dispatcher, each
//! broker source's reader and each outbox relay. A task that ends before shutdown, or panics,
//! is logged, recorded in the gateway (so `/readyz` fails with [`Error::TaskStopped`](crate::Error::TaskStopped))
//! and stops the server: accepting events that will never be sent, or no longer taking or
//! publishing messages, is worse than stopping.
//!
//! Each task has a stop signal of its own, turned on by the server's stop or by
//! [`Supervisor::stop`], so that a destination's or a source's tasks can be started and stopped
//! while the process runs (the seam a configuration reload uses); a task stopped so is no
//! failure.

use std::future::Future;
use std::sync::{Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::Task;
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// The tasks a server runs, each watched until it ends (see the module docs).
pub(crate) struct Supervisor<DB: GatewayDb> {
    gateway: Gateway<DB>,
    /// The server's stop: every task's own stop follows it.
    stopped: watch::Receiver<bool>,
    /// Turned true when a task stopped while serving: [`Server::run_until`](crate::Server::run_until) stops.
    failed: watch::Sender<bool>,
    running: Mutex<Vec<Running>>,
}

/// One supervised task.
struct Running {
    task: Task,
    /// The task's own stop.
    stop: watch::Sender<bool>,
    /// The watcher, which ends after the task.
    watcher: JoinHandle<()>,
}

/// A task's own stop signal, made before the task when it needs its receiver to be built
/// (a relay connects with it).
pub(crate) fn stop_signal() -> (watch::Sender<bool>, watch::Receiver<bool>) {
    watch::channel(false)
}

impl<DB: GatewayDb> Supervisor<DB> {
    /// A supervisor of `gateway`'s tasks, stopping them when `stopped` turns true and turning
    /// `failed` true when one stops while serving.
    pub(crate) fn new(
        gateway: Gateway<DB>,
        stopped: watch::Receiver<bool>,
        failed: watch::Sender<bool>,
    ) -> Self {
        Self {
            gateway,
            stopped,
            failed,
            running: Mutex::new(Vec::new()),
        }
    }

    /// Spawns `run` as `task`; `run` gets the task's stop signal, on when the server stops or
    /// [`stop`](Self::stop) is called, and returns why it ended early (`Err`), if it did.
    pub(crate) fn start<F>(&self, task: Task, run: impl FnOnce(watch::Receiver<bool>) -> F)
    where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let (stop, stopped) = stop_signal();
        self.start_with(task, stop, run(stopped));
    }

    /// As [`start`](Self::start), for a task made with the receiver of `stop` already (see
    /// [`stop_signal`]).
    pub(crate) fn start_with<F>(&self, task: Task, stop: watch::Sender<bool>, run: F)
    where
        F: Future<Output = Result<(), String>> + Send + 'static,
    {
        let handle = tokio::spawn(run);
        let watcher = tokio::spawn(watch_task(
            self.gateway.clone(),
            task.clone(),
            handle,
            stop.clone(),
            self.stopped.clone(),
            self.failed.clone(),
        ));
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.push(Running {
            task,
            stop,
            watcher,
        });
    }

    /// Stops `task` while the server runs (its destination or source was removed) and waits
    /// until it has finished what it holds; its end is no failure. Does nothing for a task not
    /// running.
    #[allow(dead_code)] // the seam of a configuration reload; the server stops all at once today
    pub(crate) async fn stop(&self, task: &Task) {
        for running in self.take(|t| t == task) {
            let _ = running.stop.send(true);
            let _ = running.watcher.await;
        }
    }

    /// Waits for every task `which` selects to end (after the server's stop), in the order
    /// they were started.
    pub(crate) async fn join(&self, which: impl Fn(&Task) -> bool) {
        for running in self.take(which) {
            let _ = running.watcher.await;
        }
    }

    /// Takes the tasks `which` selects out of the running set.
    fn take(&self, which: impl Fn(&Task) -> bool) -> Vec<Running> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let (taken, kept) = running.drain(..).partition(|r| which(&r.task));
        *running = kept;
        taken
    }
}

/// Waits for `handle` (the task `task`), passing the server's stop on to the task's own
/// `stop`; if it ends before being stopped (with its reason, or none) or panics, logs it,
/// records it in the gateway and turns `failed` true.
async fn watch_task<DB: GatewayDb>(
    gateway: Gateway<DB>,
    task: Task,
    mut handle: JoinHandle<Result<(), String>>,
    stop: watch::Sender<bool>,
    mut server_stopped: watch::Receiver<bool>,
    failed: watch::Sender<bool>,
) {
    let mut passed_on = false;
    let joined = loop {
        tokio::select! {
            joined = &mut handle => break joined,
            Ok(_) = server_stopped.wait_for(|stopped| *stopped), if !passed_on => {
                passed_on = true;
                let _ = stop.send(true);
            }
        }
    };
    let reason = match joined {
        Ok(Ok(())) if *stop.borrow() => return,
        Ok(Ok(())) => "it ended before shutdown".to_owned(),
        Ok(Err(reason)) => reason,
        Err(e) if e.is_panic() => format!("panicked: {}", panic_message(e)),
        Err(e) => e.to_string(),
    };
    tracing::error!(%task, %reason, "task stopped; /readyz fails and the server stops");
    gateway.set_failure(task, reason);
    let _ = failed.send(true);
}

/// Why a task ended with `error`: its panic's text, or the error (a cancelled task).
fn panic_message(error: tokio::task::JoinError) -> String {
    let payload = match error.try_into_panic() {
        Ok(payload) => payload,
        Err(error) => return error.to_string(),
    };
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Config;

    /// A task that runs until its stop turns on.
    async fn until_stopped(mut stopped: watch::Receiver<bool>) -> Result<(), String> {
        let _ = stopped.wait_for(|stopped| *stopped).await;
        Ok(())
    }

    fn reader(source: &str) -> Task {
        Task::Reader {
            source: source.to_owned(),
        }
    }

    #[tokio::test]
    async fn a_task_stopped_while_the_server_runs_is_no_failure() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        let gateway = Gateway::new(Config::defaults(), store);
        let (_stop, stopped) = watch::channel(false);
        let (failed, failure) = watch::channel(false);
        let supervisor = Supervisor::new(gateway.clone(), stopped, failed);
        supervisor.start(reader("a"), until_stopped);
        supervisor.start(reader("b"), until_stopped);
        tokio::time::timeout(Duration::from_secs(5), supervisor.stop(&reader("a")))
            .await
            .expect("the stopped task ends");
        assert!(gateway.failure().is_none());
        assert!(!*failure.borrow());
        // The other one still runs.
        let running = supervisor.take(|_| true);
        assert_eq!(running.len(), 1);
        assert_eq!(running[0].task, reader("b"));
        assert!(!running[0].watcher.is_finished());
    }

    #[tokio::test]
    async fn a_task_that_ends_early_is_recorded_and_stops_the_server() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        let gateway = Gateway::new(Config::defaults(), store);
        let (_stop, stopped) = watch::channel(false);
        let (failed, mut failure) = watch::channel(false);
        let supervisor = Supervisor::new(gateway.clone(), stopped, failed);
        supervisor.start(reader("a"), |_| async {
            Err("the stream was deleted".to_owned())
        });
        tokio::time::timeout(Duration::from_secs(5), failure.wait_for(|f| *f))
            .await
            .expect("the failure is told")
            .expect("the sender is kept");
        assert_eq!(
            gateway.stopped_task(),
            Some((&reader("a"), "the stream was deleted"))
        );
        assert_eq!(
            gateway.failure().map(|e| e.to_string()),
            Some("the reader of source \"a\" stopped (the stream was deleted)".to_owned())
        );
    }

    #[tokio::test]
    async fn the_servers_stop_reaches_every_task_and_a_dispatchers_panic_is_named() {
        let (_dir, store) = idem_testkit::sqlite_store().await;
        let gateway = Gateway::new(Config::defaults(), store);
        let (stop, stopped) = watch::channel(false);
        let (failed, _failure) = watch::channel(false);
        let supervisor = Supervisor::new(gateway.clone(), stopped, failed);
        supervisor.start(reader("a"), until_stopped);
        let _ = stop.send(true);
        tokio::time::timeout(Duration::from_secs(5), supervisor.join(|_| true))
            .await
            .expect("every task ends on the server's stop");
        assert!(gateway.failure().is_none());

        let dispatcher = Task::Dispatcher {
            destination: "app".to_owned(),
        };
        supervisor.start(dispatcher.clone(), |_| async { panic!("boom") });
        supervisor.join(|_| true).await;
        assert_eq!(
            gateway.failure().map(|e| e.to_string()),
            Some(
                "the dispatcher of destination \"app\" stopped (panicked: boom); its events would never be sent"
                    .to_owned()
            )
        );
    }
}
