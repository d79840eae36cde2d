//! An HTTP server on a runtime of its own (two threads), as a separate process would be, so
//! that the load generator's runtime does not also run the server under test.

use std::future::Future;

use tokio::sync::oneshot;

/// A running server; stopped (and its thread joined) on drop.
pub(crate) struct OwnRuntime {
    /// `http://127.0.0.1:{port}{path}`.
    pub(crate) url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OwnRuntime {
    /// Builds the router with `make` on the new runtime (it may open databases first) and
    /// serves it on a free 127.0.0.1 port; `url` ends with `path`. Its threads are named `name`
    /// (at most 15 bytes, Linux's limit), so that their CPU time can be told from the rest of
    /// the bench's ([`crate::cpu::own_threads`]).
    pub(crate) fn serve<F, Fut>(name: &'static str, path: &str, make: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = axum::Router>,
    {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name(name)
                    .enable_all()
                    .build()
                    .expect("a server runtime");
                runtime.block_on(async move {
                    let router = make().await;
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("bind");
                    let addr = listener.local_addr().expect("address");
                    ready_tx.send(addr).expect("report the address");
                    let _ = axum::serve(listener, router)
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })
            .expect("spawn a server thread");
        let addr = ready_rx.recv().expect("server started");
        Self {
            url: format!("http://{addr}{path}"),
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
