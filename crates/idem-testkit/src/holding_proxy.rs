//! A TCP relay between clients and a server that can hold the server's answers: a database that
//! is slow to answer one statement, so that a caller's timeout fires while the statement is in
//! flight (sent, executed, its answer not yet read).

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use url::Url;

/// Relays every connection to its upstream; [`hold`](Self::hold) stops passing the server's
/// bytes on (they wait, unread, until [`release`](Self::release)); the client's bytes always go
/// through.
#[derive(Debug)]
pub struct HoldingProxy {
    /// Where it listens (127.0.0.1, a free port).
    pub addr: SocketAddr,
    held: watch::Sender<bool>,
}

impl HoldingProxy {
    /// Starts relaying to `upstream` on a task of the current runtime.
    ///
    /// # Panics
    /// When no local port can be bound.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a local port");
        let addr = listener.local_addr().expect("a local address");
        let (held, _) = watch::channel(false);
        let gate = held.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, gate.subscribe()));
            }
        });
        Self { addr, held }
    }

    /// Starts relaying to the server of `url` (`scheme://user@host[:port]/path`; without a port,
    /// PostgreSQL's 5432 or MySQL's 3306 by the scheme) and returns it with `url` through it.
    ///
    /// # Panics
    /// When `url` is not a URL with a host, or its host does not resolve.
    pub async fn in_front_of(url: &str) -> (Self, String) {
        let parsed = Url::parse(url).expect("a URL");
        let host = parsed.host_str().expect("a URL with a host");
        let default = if parsed.scheme().starts_with("postgres") {
            5432
        } else {
            3306
        };
        let port = parsed.port().unwrap_or(default);
        let upstream = tokio::net::lookup_host((host.trim_matches(['[', ']']), port))
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .unwrap_or_else(|| panic!("{host} does not resolve"));
        let proxy = Self::start(upstream).await;
        let through = proxy.url_through(url);
        (proxy, through)
    }

    /// The server's answers from now on wait until [`release`](Self::release).
    pub fn hold(&self) {
        self.held.send_replace(true);
    }

    /// Passes on what was held, and everything after.
    pub fn release(&self) {
        self.held.send_replace(false);
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
}

/// Copies client to server freely, and server to client while not held.
async fn relay(client: TcpStream, server: TcpStream, mut held: watch::Receiver<bool>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    });
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match server_read.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        // Read before a hold began or after: either way passed on only once released.
        if held.wait_for(|held| !*held).await.is_err()
            || client_write.write_all(&buf[..n]).await.is_err()
        {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn url_through_replaces_host_and_port_only() {
        let proxy = HoldingProxy::start("127.0.0.1:9".parse().unwrap()).await;
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
