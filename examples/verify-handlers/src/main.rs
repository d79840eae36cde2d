//! `verify-handlers`: serves the reference handlers of `idem verify` (see
//! the crate's library) until Ctrl-C or SIGTERM.
//!
//! ```text
//! verify-handlers [--listen 127.0.0.1:4000] [--dir DIR] [--secret whsec_…]
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

/// Serves the reference handlers a (correct), b (increments), c (check-then-insert) and
/// d (last write wins) at /a/webhook … /d/webhook, with /X/reset and /X/state; and e (a new
/// consumer version that succeeds the earlier one) and f (effect keys from the versioned name),
/// which also have /X/successor.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:4000")]
    listen: SocketAddr,
    /// Directory of the SQLite databases (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The Stripe signing secret (`whsec_…`); without it deliveries are not checked.
    #[arg(long)]
    secret: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The temporary directory only without --dir; removed on Ctrl-C and on SIGTERM.
    let (dir, temp) = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            (dir.clone(), None)
        }
        None => {
            let temp = tempdir()?;
            (temp.clone(), Some(temp))
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let router = verify_handlers::router(&dir, args.secret.as_deref()).await?;
    println!(
        "reference handlers on http://{} (databases in {}): /a (correct), /b (increments), /c (check-then-insert), /d (last write wins)",
        listener.local_addr()?,
        dir.display()
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown())
        .await?;
    if let Some(temp) = &temp {
        let _ = std::fs::remove_dir_all(temp);
    }
    Ok(())
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
async fn shutdown() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A fresh directory under the system's temporary directory.
fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("idem-verify-handlers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
