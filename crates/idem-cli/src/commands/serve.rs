//! `idem serve`: run the gateway until SIGTERM or Ctrl-C, then drain and exit 0.

use std::process::ExitCode;

use anyhow::Context;
use idem_gateway::{Gateway, GatewayDb, Server};

pub(super) async fn serve<DB: GatewayDb>(
    gateway: Gateway<DB>,
    strict: bool,
) -> anyhow::Result<ExitCode> {
    let warnings = gateway.config().warnings();
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    if strict && !warnings.is_empty() {
        anyhow::bail!(
            "refused (--strict): the configuration has {} warning(s), logged above",
            warnings.len()
        );
    }
    gateway.migrate().await?;
    let listen = gateway.config().listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let server = Server::start(gateway.clone(), listener).await?;
    let config = gateway.config();
    // The bound addresses, not the configured ones: a configured port 0 is chosen at bind.
    let bound =
        |addr: Option<std::net::SocketAddr>| addr.map_or_else(|| "-".to_owned(), |a| a.to_string());
    tracing::info!(
        listen = %server.local_addr(),
        admin = %bound(server.admin_addr()),
        metrics = %bound(server.metrics_addr()),
        sources = config.sources.len(),
        destinations = config.destinations.len(),
        routes = config.routes.len(),
        "idem gateway serving"
    );
    if config.admin_token.is_some() && config.console.enabled {
        let at = server.admin_addr().unwrap_or(server.local_addr());
        let url = config
            .console
            .url
            .as_ref()
            .map_or_else(|| format!("http://{at}/console"), ToString::to_string);
        tracing::info!(%url, "web console serving (sign in with the admin token)");
    }
    server.run_until(shutdown_signal()).await?;
    tracing::info!("drained; exiting");
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}
