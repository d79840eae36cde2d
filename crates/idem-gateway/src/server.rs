//! The HTTP server: ingest, health, metrics; and the tasks behind it (group commit, one
//! dispatcher per destination, one reader per broker source, one loop per outbox relay), started
//! together and drained together.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::OnceLock;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};

use crate::gateway::Gateway;
use crate::ingest::{self, IngestState};
use crate::listener::{self, Limits};
use crate::metric_definitions::{
    self, BACKLOG, DEAD_LETTERS, DISPATCH_DURATION_SECONDS, INGEST_DURATION_SECONDS,
    LATENCY_BUCKETS, OLDEST_UNDELIVERED_AGE_SECONDS,
};
use crate::problem::Problem;
use crate::store::GatewayDb;
use crate::{Error, broker, dispatch, relays};

/// How many requests may wait for the group-commit task before senders wait too.
const QUEUE_DEPTH: usize = 8192;

/// The process-wide Prometheus recorder, installed on first use. `None` when another recorder
/// was installed first (an application embedding the gateway); `/metrics` then answers 503.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full(INGEST_DURATION_SECONDS.into()),
                    LATENCY_BUCKETS,
                )
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(DISPATCH_DURATION_SECONDS.into()),
                        LATENCY_BUCKETS,
                    )
                })
                .ok()?;
            let handle = builder.install_recorder().ok()?;
            metric_definitions::describe();
            Some(handle)
        })
        .as_ref()
}

/// A running gateway: listening, committing, dispatching.
pub struct Server {
    addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    /// Turns true when a dispatcher stopped while serving.
    failure: watch::Receiver<bool>,
    task: JoinHandle<Result<(), Error>>,
    /// The dispatcher failure recorded in the gateway, as an error.
    gateway_failure: Box<dyn Fn() -> Option<Error> + Send + Sync>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
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
    /// [`Error::Io`] when the listener's address cannot be read, or `admin_listen` or
    /// `metrics_listen` cannot be bound.
    /// [`Error::Broker`] when a broker source cannot connect or find its stream or queue;
    /// [`Error::Relay`] when a relay cannot open its database or connect to its NATS or RabbitMQ
    /// target (an HTTP target is first reached by the first publish); nothing was started in
    /// either case.
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
        let admin_listener = bind("admin_listen", gateway.config().admin_listen).await?;
        let metrics_listener = bind("metrics_listen", gateway.config().metrics_listen).await?;
        let local = |l: &Option<TcpListener>| l.as_ref().and_then(|l| l.local_addr().ok());
        let (admin_addr, metrics_addr) = (local(&admin_listener), local(&metrics_listener));
        // Installed before the first request, so that no count is lost.
        prometheus();
        // Every broker source is connected before anything starts: a wrong URL, stream or
        // queue stops the gateway at once, naming it.
        let mut connected = Vec::new();
        for (index, source) in gateway.config().sources.iter().enumerate() {
            if source.broker().is_some() {
                connected.push((index, broker::connect(&gateway, index).await?));
            }
        }
        let (stop, stopped) = watch::channel(false);
        let mut ready_relays = Vec::new();
        for relay in &gateway.config().relays {
            let running = relays::connect(relay, stopped.clone()).await?;
            ready_relays.push((relay.name.to_string(), running));
        }
        let build = |what: String, builder: reqwest::ClientBuilder| {
            builder.build().map_err(|e| Error::Io {
                what,
                source: std::io::Error::other(e),
            })
        };
        // One client (one connection pool) for the destinations without TLS settings; one of
        // its own for each destination with them.
        let shared = build(
            "building the HTTP client".into(),
            crate::tls::default_client_builder(),
        )?;
        let mut clients = Vec::new();
        for destination in &gateway.config().destinations {
            clients.push(match &destination.tls {
                None => shared.clone(),
                Some(tls) => build(
                    format!(
                        "building the HTTP client of destination {:?}",
                        destination.name.as_str()
                    ),
                    tls.client_builder(),
                )?,
            });
        }
        let (failed, failure) = watch::channel(false);
        let mut dispatchers = Vec::new();
        for (index, client) in clients.into_iter().enumerate() {
            let dispatcher = tokio::spawn(dispatch::run(
                gateway.clone(),
                index,
                client,
                stopped.clone(),
            ));
            dispatchers.push(tokio::spawn(supervise(
                gateway.clone(),
                index,
                dispatcher,
                stopped.clone(),
                failed.clone(),
            )));
        }
        let (queue, batcher) = if gateway.config().group_commit {
            let (queue, receiver) = mpsc::channel(QUEUE_DEPTH);
            (
                Some(queue),
                Some(tokio::spawn(ingest::batch::run(gateway.clone(), receiver))),
            )
        } else {
            (None, None)
        };
        let mut readers = Vec::new();
        for (index, connected) in connected {
            let reader = tokio::spawn(broker::run(
                gateway.clone(),
                index,
                queue.clone(),
                connected,
                stopped.clone(),
            ));
            let task = format!(
                "the reader of source {:?}",
                gateway.source(index).name.as_str()
            );
            readers.push(tokio::spawn(supervise_task(
                gateway.clone(),
                task,
                reader,
                stopped.clone(),
                failed.clone(),
            )));
        }
        for (name, running) in ready_relays {
            readers.push(tokio::spawn(supervise_task(
                gateway.clone(),
                format!("relay {name:?}"),
                tokio::spawn(async move {
                    running.await;
                    Ok(())
                }),
                stopped.clone(),
                failed.clone(),
            )));
        }
        let failure_gateway = gateway.clone();
        let config = gateway.config();
        let limits = Limits {
            header_read_timeout: config.header_read_timeout,
            body_read_timeout: config.body_read_timeout,
            shutdown_grace: config.shutdown_grace,
        };
        let routers = routers(
            gateway.clone(),
            queue,
            admin_listener.is_some(),
            metrics_listener.is_some(),
        );
        let mut servers = JoinSet::new();
        servers.spawn(listener::serve(
            listener,
            routers.main,
            limits,
            stopped.clone(),
        ));
        for (own, router) in [
            (admin_listener, routers.admin),
            (metrics_listener, routers.metrics),
        ] {
            if let Some(own) = own {
                servers.spawn(listener::serve(own, router, limits, stopped.clone()));
            }
        }
        let task = tokio::spawn(async move {
            servers.join_all().await;
            // Broker readers finish the messages they hold (stored and acked, or handed back)
            // and drop their queue senders; relays finish their cycle.
            for reader in readers {
                let _ = reader.await;
            }
            // The router, and with it the last queue sender, is gone: the batcher flushes what
            // is queued and ends.
            if let Some(batcher) = batcher {
                let _ = batcher.await;
            }
            for dispatcher in dispatchers {
                let _ = dispatcher.await;
            }
            Ok(())
        });
        Ok(Self {
            addr,
            admin_addr,
            metrics_addr,
            stop,
            failure,
            task,
            gateway_failure: Box::new(move || gateway_failure(&failure_gateway)),
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

    /// Drains and stops: no new connections, requests in progress answered, the commit queue
    /// flushed, attempts in flight finished and recorded.
    ///
    /// # Errors
    /// [`Error::Io`] when serving failed.
    /// [`Error::Dispatcher`] when a destination's dispatcher stopped while serving.
    pub async fn shutdown(self) -> Result<(), Error> {
        let _ = self.stop.send(true);
        let served = self.task.await.unwrap_or(Ok(()));
        match (self.gateway_failure)() {
            Some(failure) => Err(failure),
            None => served,
        }
    }

    /// Serves until `signal` completes (SIGTERM, Ctrl-C) or a destination's dispatcher stops
    /// (it panicked or ended: its events would never be sent), then drains as
    /// [`shutdown`](Self::shutdown).
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown): [`Error::Dispatcher`] when a dispatcher stopped.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<(), Error> {
        let mut failure = self.failure.clone();
        tokio::select! {
            () = signal => {}
            // A dropped sender (no destinations) is no failure: only the signal stops.
            Ok(_) = failure.wait_for(|failed| *failed) => {}
        }
        self.shutdown().await
    }
}

fn gateway_failure<DB: GatewayDb>(gateway: &Gateway<DB>) -> Option<Error> {
    match gateway.dispatch_failure() {
        Some(Error::Dispatcher {
            destination,
            reason,
        }) => Some(Error::Dispatcher {
            destination: destination.clone(),
            reason: reason.clone(),
        }),
        Some(Error::TaskStopped { task, reason }) => Some(Error::TaskStopped {
            task: task.clone(),
            reason: reason.clone(),
        }),
        _ => None,
    }
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

/// Waits for `handle` (a broker reader or a relay, named `task`); if it ends before shutdown
/// (with its reason, or none) or panics, logs it, records it in the gateway (so `/readyz`
/// fails) and tells [`Server::run_until`] to stop, as [`supervise`] does for dispatchers.
async fn supervise_task<DB: GatewayDb>(
    gateway: Gateway<DB>,
    task: String,
    handle: JoinHandle<Result<(), String>>,
    stopped: watch::Receiver<bool>,
    failed: watch::Sender<bool>,
) {
    let reason = match handle.await {
        Ok(Ok(())) if *stopped.borrow() => return,
        Ok(Ok(())) => "it ended before shutdown".to_owned(),
        Ok(Err(reason)) => reason,
        Err(e) if e.is_panic() => format!("panicked: {}", panic_message(e)),
        Err(e) => e.to_string(),
    };
    tracing::error!(%task, %reason, "task stopped; /readyz fails and the server stops");
    gateway.set_failure(Error::TaskStopped { task, reason });
    let _ = failed.send(true);
}

/// Waits for destination `index`'s dispatcher; if it ends before shutdown or panics, logs it,
/// records it in the gateway (so `/readyz` fails) and tells [`Server::run_until`] to stop:
/// accepting events that will never be sent is worse than stopping.
async fn supervise<DB: GatewayDb>(
    gateway: Gateway<DB>,
    index: usize,
    dispatcher: JoinHandle<()>,
    stopped: watch::Receiver<bool>,
    failed: watch::Sender<bool>,
) {
    let outcome = dispatcher.await;
    let reason = match outcome {
        Ok(()) if *stopped.borrow() => return,
        Ok(()) => "it ended before shutdown".to_owned(),
        Err(e) if e.is_panic() => format!("panicked: {}", panic_message(e)),
        Err(e) => e.to_string(),
    };
    let destination = gateway.destination(index).name.to_string();
    tracing::error!(
        destination = %destination, %reason,
        "dispatcher stopped: its events would never be sent; /readyz fails and the server stops"
    );
    gateway.set_dispatch_failure(&destination, reason);
    let _ = failed.send(true);
}

/// The routers of the listeners: the main one (webhooks, health, and `/admin` and `/metrics`
/// unless they have listeners of their own), the admin one and the metrics one.
struct Routers {
    main: Router,
    admin: Router,
    metrics: Router,
}

fn routers<DB: GatewayDb>(
    gateway: Gateway<DB>,
    queue: Option<mpsc::Sender<ingest::batch::Pending>>,
    own_admin: bool,
    own_metrics: bool,
) -> Routers {
    let limit = gateway.config().max_body_bytes;
    let ingest_state = IngestState {
        gateway: gateway.clone(),
        queue,
    };
    let health = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz::<DB>))
        .with_state(gateway.clone());
    let metrics = Router::new()
        .route("/metrics", get(render_metrics::<DB>))
        .with_state(gateway.clone());
    // The console is served where the admin API is.
    let admin =
        crate::admin::router(gateway.clone()).merge(crate::console::router(gateway.clone()));
    let webhooks = Router::new()
        .route("/webhooks/{source}", post(ingest::handle::<DB>))
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            limit,
            ingest::declared_length,
        ))
        .with_state(ingest_state);
    let mut main = health.clone().merge(webhooks);
    if !own_admin {
        main = main.merge(admin.clone());
    }
    if !own_metrics {
        main = main.merge(metrics.clone());
    }
    let finish = |router: Router| {
        router
            .fallback(not_found)
            .method_not_allowed_fallback(method_not_allowed)
    };
    Routers {
        main: finish(main),
        admin: finish(health.clone().merge(admin)),
        metrics: finish(health.merge(metrics)),
    }
}

/// An unknown path: 404 problem+json naming it, like every other error.
async fn not_found(uri: axum::http::Uri) -> Response {
    Problem::new(
        StatusCode::NOT_FOUND,
        "not-found",
        "Not found",
        format!(
            "nothing is served at {}: webhooks are POSTed to /webhooks/{{source}}; /healthz, /readyz, /metrics and /admin/… are the others",
            uri.path()
        ),
    )
    .into_response()
}

/// A known path with another method: 405 problem+json (axum keeps the `Allow` header).
async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "Method not allowed",
        format!(
            "{method} is not served at {}; the `Allow` header lists what is",
            uri.path()
        ),
    )
    .into_response()
}

/// Ready when every task runs and the store takes work, answered within `readyz_timeout`: while
/// ingest works, a connection and `SELECT 1`; once a commit failed (a full disk, a database
/// away), a probe write, so that readiness comes back only when ingest does.
async fn readyz<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    if let Some(failure) = gateway.dispatch_failure() {
        let (code, title) = match failure {
            Error::Dispatcher { .. } => ("dispatcher-stopped", "Dispatcher stopped"),
            _ => ("task-stopped", "Task stopped"),
        };
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            code,
            title,
            failure.to_string(),
        )
        .into_response();
    }
    let deadline = gateway.config().readyz_timeout;
    let unavailable = |detail: String| {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store-unavailable",
            "Store unavailable",
            detail,
        )
        .into_response()
    };
    match tokio::time::timeout(deadline, probe(&gateway)).await {
        Ok(Ok(())) => "ready".into_response(),
        Ok(Err(detail)) => unavailable(detail),
        Err(_) => unavailable(format!("the database did not answer within {deadline:?}")),
    }
}

/// `/readyz`'s probe of the store; the reason it is not usable.
async fn probe<DB: GatewayDb>(gateway: &Gateway<DB>) -> Result<(), String> {
    let health = gateway.health();
    let Some(failing) = health.failing() else {
        let mut conn = gateway
            .store()
            .pool()
            .acquire()
            .await
            .map_err(|e| e.to_string())?;
        return DB::probe_read(&mut conn).await.map_err(|e| e.to_string());
    };
    let write = async {
        let mut tx = gateway.store().begin().await?;
        DB::probe_write(&mut tx, gateway.now().as_millis()).await?;
        tx.commit().await?;
        Ok::<_, idem_sql::Error>(())
    };
    match write.await {
        Ok(()) => {
            health.recovered();
            Ok(())
        }
        Err(e) => Err(format!("{e} (ingest is failing: {failing})")),
    }
}

/// Refreshes the gauges from the tables, then renders every metric.
async fn render_metrics<DB: GatewayDb>(State(gateway): State<Gateway<DB>>) -> Response {
    let Some(handle) = prometheus() else {
        return Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "metrics-unavailable",
            "Metrics unavailable",
            "another metrics recorder was installed in this process",
        )
        .into_response();
    };
    match gateway.open_stats().await {
        Ok(stats) => {
            for (destination, counts) in &stats.destinations {
                let backlog = counts.pending + counts.in_flight;
                metrics::gauge!(BACKLOG, "destination" => destination.clone()).set(backlog as f64);
                metrics::gauge!(DEAD_LETTERS, "destination" => destination.clone())
                    .set(counts.dead as f64);
            }
            let age = stats.oldest_undelivered.map_or(0.0, |t| {
                (gateway.now().as_millis() - t.as_millis()).max(0) as f64 / 1000.0
            });
            metrics::gauge!(OLDEST_UNDELIVERED_AGE_SECONDS).set(age);
        }
        Err(e) => tracing::warn!(error = %e, "gauges not refreshed"),
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        handle.render(),
    )
        .into_response()
}
