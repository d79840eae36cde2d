//! A server that accepts TCP connections and never answers: a database or broker hung behind a
//! working network (a stopped VM, a full listen queue on a proxy), which no connection refusal
//! reveals.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// Accepts on a free 127.0.0.1 port and keeps every connection open, unread, until dropped.
#[derive(Debug)]
pub struct SilentServer {
    /// Where it listens.
    pub addr: SocketAddr,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl SilentServer {
    /// Starts one on a thread of its own.
    ///
    /// # Panics
    /// When no local port can be bound.
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a local port");
        let addr = listener.local_addr().expect("a local address");
        let held = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&held);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                keep.lock().expect("not poisoned").push(stream);
            }
        });
        Self { addr, held }
    }

    /// How many connections it has accepted.
    pub fn connections(&self) -> usize {
        self.held.lock().expect("not poisoned").len()
    }
}
