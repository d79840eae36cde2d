//! Serving HTTP connections on one listener with limits a gateway on the internet needs: a
//! client must send its headers within `header_read_timeout` (hyper closes the connection
//! otherwise) and its body within `body_read_timeout` (the request is answered 408 and the
//! connection closed); shutdown stops accepting, lets requests in progress finish for at most
//! `shutdown_grace`, then cuts what is still open. Every request answered 200 before was
//! committed first, so cutting a connection loses nothing accepted.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

use crate::http::body_deadline::DeadlineBody;

/// The deadlines of one listener.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) body_read_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
}

/// The pause after a failed `accept` (too many open files, for one) before the next.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Serves `router` on `listener` until `stop` turns true, then shuts down as the module says.
/// Each request carries its peer's address as [`ConnectInfo`].
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let body_read_timeout = limits.body_read_timeout;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let service = router
                        .clone()
                        .map_request(move |request: Request<hyper::body::Incoming>| {
                            let mut request = request.map(|body| {
                                Body::new(DeadlineBody::new(Body::new(body), body_read_timeout))
                            });
                            request.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                            request
                        })
                        .map_err(|never: Infallible| match never {});
                    let service = TowerToHyperService::new(service);
                    let (builder, watcher) = (builder.clone(), graceful.watcher());
                    let mut stopped = stop.clone();
                    connections.spawn(async move {
                        // hyper's header timer starts at the first byte: a connection that
                        // sends none is closed after the same deadline here, or at shutdown
                        // (HTTP clients open spare connections that may never carry a request:
                        // one must not hold the shutdown for the whole grace).
                        let mut first = [0u8; 1];
                        let opened =
                            tokio::time::timeout(limits.header_read_timeout, stream.peek(&mut first));
                        tokio::select! {
                            // Bytes already sent at shutdown are a request: served (graceful).
                            biased;
                            opened = opened => if !matches!(opened, Ok(Ok(n)) if n > 0) {
                                return;
                            },
                            () = until_stopped(&mut stopped) => return,
                        }
                        let connection = builder
                            .serve_connection_with_upgrades(TokioIo::new(stream), service)
                            .into_owned();
                        // A client that went away or broke the protocol: nothing to report.
                        let _ = watcher.watch(connection).await;
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot accept a connection; trying again");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = until_stopped(&mut stop) => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!(
                open = connections.len(),
                grace = ?limits.shutdown_grace,
                "connections still open after the shutdown grace; cutting them"
            );
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Returns once `stop` turns true (or its sender is gone), holding no borrow of it.
async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await.map(|_| ());
}
