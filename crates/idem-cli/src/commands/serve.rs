//! `idem serve`: run the gateway until SIGTERM or Ctrl-C, then drain and exit 0; on SIGHUP,
//! read the configuration file again and apply what a reload may change (docs/gateway.md,
//! "Reload").

use std::process::ExitCode;

use anyhow::Context;
use idem_gateway::{Gateway, GatewayDb, ReloadHandle, Server};

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
    // Before the start: from then on a SIGHUP reloads instead of ending the process.
    let hangups = hangups();
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
    let reloads = tokio::spawn(reload_on_hangup(hangups, server.reload_handle()));
    let result = server.run_until(shutdown_signal()).await;
    reloads.abort();
    result?;
    tracing::info!("drained; exiting");
    Ok(ExitCode::SUCCESS)
}

#[cfg(unix)]
type Hangups = Option<tokio::signal::unix::Signal>;
#[cfg(not(unix))]
type Hangups = Option<()>;

/// SIGHUP's stream. Installing the handler is what keeps SIGHUP from ending the process, as it
/// would by default.
fn hangups() -> Hangups {
    #[cfg(unix)]
    {
        let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        if hangups.is_err() {
            tracing::warn!("cannot listen for SIGHUP: reload through POST /admin/reload");
        }
        hangups.ok()
    }
    #[cfg(not(unix))]
    None
}

/// Reloads on every SIGHUP until aborted; the outcome is logged by the reload itself (INFO
/// when applied, ERROR naming the key when refused).
async fn reload_on_hangup(hangups: Hangups, reload: ReloadHandle) {
    #[cfg(unix)]
    if let Some(mut hangups) = hangups {
        while hangups.recv().await.is_some() {
            tracing::info!("SIGHUP: reading the configuration file again");
            let _ = reload.reload().await;
        }
    }
    #[cfg(not(unix))]
    let _ = (hangups, reload);
    std::future::pending::<()>().await;
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
