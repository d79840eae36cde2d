//! The server's assembly: the listeners and the tasks behind them (group commit, one
//! dispatcher per destination, one reader per broker source, one loop per outbox relay),
//! started together in [`Server::start`]'s steps and drained together.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::config::Destination;
use crate::error::Task;
use crate::gateway::Gateway;
use crate::http::listener::{self, Limits};
use crate::http::{self, metrics::prometheus};
use crate::ingest::unit::Pending;
use crate::reload;
use crate::reload_request::ReloadHandle;
use crate::store::GatewayDb;
use crate::supervise::{self, Supervisor};
use crate::{Error, broker, dispatchers, relays};

/// How many requests may wait for the group-commit task before senders wait too.
const QUEUE_DEPTH: usize = 8192;

/// A running gateway: listening, committing, dispatching.
pub struct Server {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    reload: ReloadHandle,
    /// Turns true when a supervised task stopped while serving.
    failure: watch::Receiver<bool>,
    /// Serves, then drains; ends with the stopped task's error, if one stopped.
    task: JoinHandle<Result<(), Error>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// Locks the gateway's SQLite file for this server (`None` on PostgreSQL): a SQLite database
/// belongs to one gateway process (docs/gateway.md), and a second `idem serve` on it is
/// refused rather than left to race the first. The lock is `flock`'s, which SQLite's own POSIX
/// locks do not see, so operator commands, which take none, still read and write the file; the
/// kernel releases it when the process dies.
///
/// # Errors
/// [`Error::Io`] when another server holds the lock or the file cannot be opened;
/// [`Error::Store`] when the database does not answer.
async fn lock_database_file<DB: GatewayDb>(
    gateway: &Gateway<DB>,
) -> Result<Option<std::fs::File>, Error> {
    let Some(path) = gateway.database_file().await? else {
        return Ok(None);
    };
    let what = || format!("locking the SQLite database {path} for this idem serve");
    let file = std::fs::File::open(&path).map_err(|source| Error::Io {
        what: what(),
        source,
    })?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::Io {
            what: what(),
            source: std::io::Error::other(
                "another idem serve uses it; a SQLite database belongs to one gateway process \
                 (stop the other, or give this one its own database_url; PostgreSQL serves several)",
            ),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(Error::Io {
            what: what(),
            source,
        }),
    }
}

/// The extra listeners `admin_listen` and `metrics_listen` give, bound.
struct OwnListeners {
    admin: Option<TcpListener>,
    metrics: Option<TcpListener>,
}

/// What was connected before anything starts: broker sources (by index) and relays.
struct Connected {
    brokers: Vec<(usize, broker::Connected)>,
    relays: Vec<(String, watch::Sender<bool>, relays::Running)>,
}

impl Server {
    /// Starts serving `gateway` on `listener` (bind `127.0.0.1:0` for a free port), with the
    /// group-commit task, one dispatcher per destination, one reader per broker source
    /// (`kind = "nats"` or `"rabbitmq"`) and one loop per `[[relay]]`. `/admin` and
    /// `/metrics` are served on `listener` too, unless the configuration gives them listen
    /// addresses of their own (`admin_listen`, `metrics_listen`), which are bound here. Run
    /// [`Gateway::migrate`] first.
    ///
    /// # Errors
    /// [`Error::Config`] ([`ConfigError::MissingSecret`](crate::ConfigError::MissingSecret))
    /// when the configuration was read for an operator command
    /// ([`Config::for_operations`](crate::Config::for_operations)) without some secret;
    /// [`Error::Io`] when another server holds the gateway's SQLite database (a SQLite
    /// database belongs to one gateway process), when the listener's address cannot be read, or `admin_listen` or
    /// `metrics_listen` cannot be bound, or an HTTP client cannot be built.
    /// [`Error::Broker`] when a broker source cannot connect or find its stream or queue;
    /// [`Error::Relay`] when a relay cannot open its database or connect to its NATS or RabbitMQ
    /// target (an HTTP target is first reached by the first publish);
    /// [`Error::Destination`] when a broker destination cannot connect or find its stream,
    /// exchange or topic; nothing was started in any of these cases.
    pub async fn start<DB: GatewayDb>(
        gateway: Gateway<DB>,
        listener: TcpListener,
    ) -> Result<Self, Error> {
        // A configuration read for an operator command lacks secrets: it must not serve.
        if let Some(missing) = gateway.config().missing_secret() {
            return Err(missing.into());
        }
        let addr = listener.local_addr().map_err(|source| Error::Io {
            what: "reading the listener's address".into(),
            source,
        })?;
        let database_lock = lock_database_file(&gateway).await?;
        // Before any delivery is stored or sent under a route's new name.
        gateway.apply_route_renames().await?;
        // The registry names every source, destination and Kafka cursor from the first start.
        gateway.register_consumers().await?;
        let own = bind_own_listeners(&gateway).await?;
        let local = |l: &Option<TcpListener>| l.as_ref().and_then(|l| l.local_addr().ok());
        let (admin_addr, metrics_addr) = (local(&own.admin), local(&own.metrics));
        // Installed before the first request, so that no count is lost.
        prometheus();
        let connected = connect_inputs(&gateway).await?;
        let wiring = gateway.wiring();
        let destinations: Vec<&Destination> = wiring.config().destinations.iter().collect();
        let transports = dispatchers::connect(&destinations).await?;
        let (stop, stopped) = watch::channel(false);
        let (failed, failure) = watch::channel(false);
        let supervisor = Arc::new(Supervisor::new(gateway.clone(), stopped.clone(), failed));
        for (lane, transport) in wiring.lanes_arc().zip(transports) {
            dispatchers::start(&supervisor, &gateway, Arc::clone(lane), transport);
        }
        drop(wiring);
        let reload = reload::serve(&gateway, Arc::clone(&supervisor), stopped.clone());
        start_monitor(&supervisor, &gateway)?;
        let (queue, batcher) = start_batcher(&gateway);
        start_inputs(&supervisor, &gateway, queue.as_ref(), connected);
        let servers = serve(&gateway, listener, own, queue, reload.clone(), &stopped);
        let task = tokio::spawn(async move {
            // Held until everything is drained: the next server on the file may start then.
            let _database_lock = database_lock;
            drain(gateway, supervisor, servers, batcher).await
        });
        Ok(Self {
            addr,
            admin_addr,
            metrics_addr,
            stop,
            reload,
            failure,
            task,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address `/admin` is served on when the configuration gives it one (`admin_listen`).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The address `/metrics` is served on when the configuration gives it one
    /// (`metrics_listen`).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// What asks this server to reload its configuration file (named with
    /// [`Gateway::with_config_file`]); `idem serve` calls it on `SIGHUP`, the admin API on
    /// `POST /admin/reload`.
    pub fn reload_handle(&self) -> ReloadHandle {
        self.reload.clone()
    }

    /// Drains and stops: no new connections, requests in progress answered, the commit queue
    /// flushed, attempts in flight finished and recorded.
    ///
    /// # Errors
    /// [`Error::Io`] when serving failed.
    /// [`Error::TaskStopped`] when a dispatcher, a broker reader or a relay stopped while serving.
    pub async fn shutdown(self) -> Result<(), Error> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or(Ok(()))
    }

    /// Serves until `signal` completes (SIGTERM, Ctrl-C) or a supervised task stops (a
    /// dispatcher, a broker reader or a relay panicked or ended), then drains as
    /// [`shutdown`](Self::shutdown).
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown): [`Error::TaskStopped`] when a task stopped.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<(), Error> {
        let mut failure = self.failure.clone();
        tokio::select! {
            () = signal => {}
            // A dropped sender is no failure: only the signal stops.
            Ok(_) = failure.wait_for(|failed| *failed) => {}
        }
        self.shutdown().await
    }
}

/// Binds `admin_listen` and `metrics_listen`, when the configuration gives them.
///
/// # Errors
/// [`Error::Io`] naming the address that cannot be bound.
async fn bind_own_listeners<DB: GatewayDb>(gateway: &Gateway<DB>) -> Result<OwnListeners, Error> {
    let bind = |what: &'static str, at: Option<SocketAddr>| async move {
        match at {
            None => Ok(None),
            Some(at) => TcpListener::bind(at)
                .await
                .map(Some)
                .map_err(|source| Error::Io {
                    what: format!("binding {what} {at}"),
                    source,
                }),
        }
    };
    Ok(OwnListeners {
        admin: bind("admin_listen", gateway.config().admin_listen).await?,
        metrics: bind("metrics_listen", gateway.config().metrics_listen).await?,
    })
}

/// Connects every broker source and every relay before anything starts: a wrong URL, stream,
/// queue or database stops the gateway at once, naming it.
///
/// # Errors
/// [`Error::Broker`] or [`Error::Relay`].
async fn connect_inputs<DB: GatewayDb>(gateway: &Gateway<DB>) -> Result<Connected, Error> {
    let mut brokers = Vec::new();
    let config = gateway.config();
    for (index, source) in config.sources.iter().enumerate() {
        if source.broker().is_some() {
            brokers.push((index, broker::connect(gateway, index).await?));
        }
    }
    let mut ready = Vec::new();
    for relay in &config.relays {
        let (stop, stopped) = supervise::stop_signal();
        let running = relays::connect(relay, stopped).await?;
        ready.push((relay.name.to_string(), stop, running));
    }
    Ok(Connected {
        brokers,
        relays: ready,
    })
}

/// Starts the supervised health monitor (destination health, circuit breakers, alerts), with
/// the HTTP client its notifications go through.
///
/// # Errors
/// [`Error::Io`] when the client cannot be built.
fn start_monitor<DB: GatewayDb>(
    supervisor: &Supervisor<DB>,
    gateway: &Gateway<DB>,
) -> Result<(), Error> {
    let client = crate::tls::default_client_builder()
        .build()
        .map_err(|e| Error::Io {
            what: "building the alerts' HTTP client".into(),
            source: std::io::Error::other(e),
        })?;
    let gateway = gateway.clone();
    supervisor.start(Task::Monitor, move |stopped| async move {
        crate::monitor::run(gateway, client, stopped).await;
        Ok(())
    });
    Ok(())
}

/// Starts the group-commit task when `group_commit` is on: its queue and its handle.
fn start_batcher<DB: GatewayDb>(
    gateway: &Gateway<DB>,
) -> (Option<mpsc::Sender<Pending>>, Option<JoinHandle<()>>) {
    if !gateway.config().group_commit {
        return (None, None);
    }
    let (queue, receiver) = mpsc::channel(QUEUE_DEPTH);
    let batcher = tokio::spawn(crate::ingest::batch::run(gateway.clone(), receiver));
    (Some(queue), Some(batcher))
}

/// Starts one supervised reader per connected broker source, submitting to `queue`, and one
/// supervised loop per relay.
fn start_inputs<DB: GatewayDb>(
    supervisor: &Supervisor<DB>,
    gateway: &Gateway<DB>,
    queue: Option<&mpsc::Sender<Pending>>,
    connected: Connected,
) {
    for (index, connected) in connected.brokers {
        let task = Task::Reader {
            source: gateway.wiring().source(index).name.to_string(),
        };
        let (gateway, queue) = (gateway.clone(), queue.cloned());
        supervisor.start(task, move |stopped| {
            broker::run(gateway, index, queue, connected, stopped)
        });
    }
    for (relay, stop, running) in connected.relays {
        supervisor.start_with(Task::Relay { relay }, stop, async move {
            running.await;
            Ok(())
        });
    }
}

/// Serves the routers on `listener` and on the listeners of their own, until `stopped`.
fn serve<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    listener: TcpListener,
    own: OwnListeners,
    queue: Option<mpsc::Sender<Pending>>,
    reload: ReloadHandle,
    stopped: &watch::Receiver<bool>,
) -> JoinSet<()> {
    let config = gateway.config();
    let limits = Limits {
        header_read_timeout: config.header_read_timeout,
        body_read_timeout: config.body_read_timeout,
        shutdown_grace: config.shutdown_grace,
    };
    let routers = http::routers(
        gateway.clone(),
        queue,
        reload,
        own.admin.is_some(),
        own.metrics.is_some(),
    );
    let mut servers = JoinSet::new();
    servers.spawn(listener::serve(
        listener,
        routers.main,
        limits,
        stopped.clone(),
    ));
    for (own, router) in [(own.admin, routers.admin), (own.metrics, routers.metrics)] {
        if let Some(own) = own {
            servers.spawn(listener::serve(own, router, limits, stopped.clone()));
        }
    }
    servers
}

/// After the stop: waits for the listeners, then the broker readers and relays (they finish
/// the messages they hold and drop their queue senders), then the batcher (the last queue
/// sender is gone: it flushes what is queued), then the dispatchers (attempts in flight
/// finish and are recorded). Ends with the error of the task that stopped, if one did.
async fn drain<DB: GatewayDb>(
    gateway: Gateway<DB>,
    supervisor: Arc<Supervisor<DB>>,
    servers: JoinSet<()>,
    batcher: Option<JoinHandle<()>>,
) -> Result<(), Error> {
    servers.join_all().await;
    supervisor
        .join(|task| !matches!(task, Task::Dispatcher { .. }))
        .await;
    if let Some(batcher) = batcher {
        let _ = batcher.await;
    }
    supervisor.join(|_| true).await;
    match gateway.failure() {
        Some(failure) => Err(failure),
        None => Ok(()),
    }
}
