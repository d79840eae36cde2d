//! `payments`: idem's reference app. `cargo run -p payments` serves it on 127.0.0.1:3000 with
//! its state in SQLite under ./payments-data; see README.md.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use idem::{PgStore, SqliteStore, Store};
use idem_http::verify::stripe::StripeVerifier;
use idem_idempotency::SqlStore;
use payments::{DEMO_STRIPE_SECRET, PaymentsDb, Tokens};

/// A small payments API behind idem's Idempotency-Key layer, with a Stripe webhook endpoint.
#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(long, default_value = "127.0.0.1:3000")]
    listen: SocketAddr,
    /// `sqlite://path/to.db` or `postgres://user@host/db`; default: SQLite in
    /// ./payments-data/payments.db (the directory is created).
    #[arg(long)]
    database_url: Option<String>,
    /// A user and their bearer token, as USER=TOKEN; repeat for more users. Default:
    /// alice=alice-token and bob=bob-token.
    #[arg(long = "token", value_name = "USER=TOKEN")]
    tokens: Vec<String>,
    /// The Stripe endpoint's webhook signing secret (`whsec_…`); repeat it while rolling the
    /// secret. Default: the demo secret `whsec_payments_demo_secret`, for local tries only.
    #[arg(long = "stripe-webhook-secret", value_name = "WHSEC")]
    stripe_secrets: Vec<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let tokens = if args.tokens.is_empty() {
        Tokens::demo()
    } else {
        Tokens::parse(args.tokens.iter().map(String::as_str))?
    };
    let stripe = if args.stripe_secrets.is_empty() {
        println!(
            "no --stripe-webhook-secret: Stripe deliveries must be signed with the demo secret {DEMO_STRIPE_SECRET}"
        );
        StripeVerifier::new([DEMO_STRIPE_SECRET])?
    } else {
        StripeVerifier::new(&args.stripe_secrets)?
    };
    let url = match args.database_url {
        Some(url) => url,
        None => {
            std::fs::create_dir_all("payments-data").context("create ./payments-data")?;
            "sqlite://payments-data/payments.db".to_owned()
        }
    };
    if url.starts_with("postgres:") || url.starts_with("postgresql:") {
        serve(
            PgStore::connect(&url).await?,
            tokens,
            stripe,
            args.listen,
            &url,
        )
        .await
    } else if url.starts_with("sqlite:") {
        serve(
            SqliteStore::connect(&url).await?,
            tokens,
            stripe,
            args.listen,
            &url,
        )
        .await
    } else {
        anyhow::bail!("--database-url {url:?} is neither sqlite:… nor postgres:…")
    }
}

async fn serve<DB: PaymentsDb>(
    store: Store<DB>,
    tokens: Tokens,
    stripe: StripeVerifier,
    listen: SocketAddr,
    url: &str,
) -> anyhow::Result<()> {
    let router = payments::app(store.clone(), tokens, stripe).await?;
    // Idempotency records older than the retention (72 h) go every ten minutes, in batches.
    let records = SqlStore::new(store);
    tokio::spawn(async move {
        let batch = NonZeroU32::new(500).unwrap_or(NonZeroU32::MIN);
        loop {
            tokio::time::sleep(Duration::from_secs(600)).await;
            if let Err(e) = records.gc(batch).await {
                eprintln!("idempotency gc failed: {e}");
            }
        }
    });
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listen on {listen}"))?;
    println!(
        "payments listening on http://{listen} (database {url}); see examples/payments/README.md"
    );
    axum::serve(listener, router).await?;
    Ok(())
}
