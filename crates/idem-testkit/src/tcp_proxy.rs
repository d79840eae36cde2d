//! A TCP relay between clients and a server, for the faults of a network between them: its
//! connections dropped ([`TcpProxy::drop_connections`]) or cut for good ([`TcpProxy::cut`]), the
//! server's answers held while the client's bytes go through ([`TcpProxy::hold`]: a server slow
//! to answer one statement, so that a caller's timeout fires while it is in flight), or every
//! byte held both ways ([`TcpProxy::stall`]: a server that stopped answering).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};
use url::Url;

/// What passes through the proxy's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Every byte, both ways.
    Open,
    /// The client's bytes; the server's wait, unread, until released.
    AnswersHeld,
    /// No byte either way until released.
    Stalled,
}

/// Relays every connection it accepts to its upstream. Dropping it closes every connection and
/// stops accepting.
#[derive(Debug)]
pub struct TcpProxy {
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    flow: watch::Sender<Flow>,
    accept: AbortHandle,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl TcpProxy {
    /// Starts relaying to `upstream` (`host:port`) on tasks of the current runtime; a connection
    /// the upstream refuses is closed.
    ///
    /// # Panics
    /// When no local port can be bound.
    pub async fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a local port");
        let addr = listener.local_addr().expect("a local address");
        let (flow, _) = watch::channel(Flow::Open);
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (gate, registry, upstream) =
            (flow.clone(), Arc::clone(&connections), upstream.to_owned());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (upstream, flow) = (upstream.clone(), gate.subscribe());
                let connection = tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream.as_str()).await {
                        relay(client, server, flow).await;
                    }
                });
                registry.lock().unwrap().push(connection);
            }
        });
        Self {
            addr,
            flow,
            accept: accept.abort_handle(),
            connections,
        }
    }

    /// Starts relaying to the server of `url` (`scheme://user@host[:port]/path`; without a port,
    /// PostgreSQL's 5432 or MySQL's 3306 by the scheme) and returns it with `url` through it.
    ///
    /// # Panics
    /// When `url` is not a URL with a host.
    pub async fn in_front_of(url: &str) -> (Self, String) {
        let parsed = Url::parse(url).expect("a URL");
        let host = parsed.host_str().expect("a URL with a host");
        let default = if parsed.scheme().starts_with("postgres") {
            5432
        } else {
            3306
        };
        let upstream = format!("{host}:{}", parsed.port().unwrap_or(default));
        let proxy = Self::start(&upstream).await;
        let through = proxy.url_through(url);
        (proxy, through)
    }

    /// `url` (`scheme://user@host:port/path`) with its host and port replaced by this proxy's.
    ///
    /// # Panics
    /// When `url` is not a URL with a host.
    pub fn url_through(&self, url: &str) -> String {
        let mut through = Url::parse(url).expect("a URL");
        through
            .set_ip_host(self.addr.ip())
            .and_then(|()| through.set_port(Some(self.addr.port())))
            .expect("a URL with a host");
        through.into()
    }

    /// The server's answers from now on wait until [`release`](Self::release); the client's
    /// bytes still reach the server.
    pub fn hold(&self) {
        self.flow.send_replace(Flow::AnswersHeld);
    }

    /// Every byte, both ways, waits until [`release`](Self::release).
    pub fn stall(&self) {
        self.flow.send_replace(Flow::Stalled);
    }

    /// Passes on what was held or stalled, and everything after.
    pub fn release(&self) {
        self.flow.send_replace(Flow::Open);
    }

    /// Closes every connection made so far and goes on accepting new ones: a network drop a
    /// client recovers from by connecting again.
    pub fn drop_connections(&self) {
        for connection in self.connections.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    /// Closes every connection and stops accepting: nothing a client sends from now on reaches
    /// the server.
    pub fn cut(&self) {
        self.accept.abort();
        self.drop_connections();
    }

    /// Waits until every connection made since the last drop was closed by its ends.
    ///
    /// # Panics
    /// When one is still open after 5 s.
    pub async fn all_closed(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self
            .connections
            .lock()
            .unwrap()
            .iter()
            .all(JoinHandle::is_finished)
        {
            assert!(Instant::now() < deadline, "a connection is still open");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.cut();
    }
}

/// Copies both ways until either end closes, each chunk passed on once `flow` lets it.
async fn relay(client: TcpStream, server: TcpStream, flow: watch::Receiver<Flow>) {
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let upward = |f: &Flow| *f != Flow::Stalled;
    let downward = |f: &Flow| *f == Flow::Open;
    tokio::join!(
        pump(client_read, server_write, flow.clone(), upward),
        pump(server_read, client_write, flow, downward),
    );
}

/// Copies `from` to `to` until either ends, each chunk (read before a hold began or after)
/// passed on only while `passes` holds for the flow.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut flow: watch::Receiver<Flow>,
    passes: impl Fn(&Flow) -> bool,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if flow.wait_for(&passes).await.is_err() || to.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn url_through_replaces_host_and_port_only() {
        let proxy = TcpProxy::start("127.0.0.1:9").await;
        let at = proxy.addr;
        assert_eq!(
            proxy.url_through("postgres://postgres@127.0.0.1:5432/idem_test_1"),
            format!("postgres://postgres@{at}/idem_test_1")
        );
        assert_eq!(
            proxy.url_through("mysql://root:pw@localhost/db?ssl-mode=disabled"),
            format!("mysql://root:pw@{at}/db?ssl-mode=disabled")
        );
        assert_eq!(
            proxy.url_through("mysql://127.0.0.1:3306"),
            format!("mysql://{at}")
        );
        assert_eq!(
            proxy.url_through("postgres://u@[::1]:5432/db?application_name=a@b"),
            format!("postgres://u@{at}/db?application_name=a@b")
        );
    }
}
