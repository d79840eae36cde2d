//! Receive-and-forward speed of `idem serve` against its baselines, all measured in one run on
//! this machine (reported, not gated): `cargo bench -p idem-cli --bench ingest`.
//!
//! - **ceiling**: a bare axum handler that verifies the Stripe signature and reads the event id;
//! - **naive recipe**: the same plus one transaction per webhook (SQLite WAL `synchronous =
//!   FULL` on one connection; PostgreSQL with 32 connections);
//! - **ingest-only**: `idem serve` without a route, 64 closed-loop connections, unique events
//!   over 1,000 entities in version order, then 30 % duplicates;
//! - **forwarding**: the same load with one route to a local application answering 200 at
//!   once (`concurrency = 64`): ingest rate and p99 with forwarding on;
//! - **sustainable end-to-end rate**: open loop, the offered rate stepped up as a share of the
//!   ingest-only rate; the highest step at which every event arrives and the p99 from its 200
//!   to its arrival is at most 1 s;
//! - **forwarding rate**: deliveries per second over the closed-loop forwarding run, from its
//!   start until its last accepted event arrived (the backlog drained);
//! - peak RSS of `idem serve` over the closed-loop forwarding run and the open-loop steps it
//!   held (each step's peak is its own; one not held queues requests without bound).
//!
//! Every setting runs the release binary as a child process, the load from this process and
//! the baselines and the application each on a runtime of their own. Durability as shipped:
//! SQLite `synchronous = FULL` in WAL, PostgreSQL `fsync` and `synchronous_commit` on.
//! Environment: `IDEM_BENCH_SECS` (closed-loop load per setting, default 8), `IDEM_BENCH_STEP_SECS`
//! (each open-loop step, default 30), `IDEM_BENCH_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; empty skips PostgreSQL), `IDEM_BENCH_SQLITE=0`
//! skips the SQLite gateway runs (to study PostgreSQL alone), `IDEM_BENCH_IDEM` (the `idem` binary to
//! run instead of the one built with the bench: a base build's, to compare two builds back to back).

mod baselines;
mod cpu;
mod gateway;
mod load;
mod own_runtime;

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idem_sql::sqlx::{self, Connection, PgConnection, SqliteConnection};

use baselines::Recipe;
use gateway::{App, Serve};
use load::Measured;

/// Shares of the ingest-only rate offered in the open-loop steps, in order.
const STEPS: [f64; 6] = [0.25, 0.4, 0.5, 0.6, 0.75, 0.9];
/// The delivery deadline of the sustainable rate: p99 from 200 to arrival.
const DELIVERY_P99: Duration = Duration::from_secs(1);
/// The longest wait for a forwarding run's backlog to drain.
const DRAIN_LIMIT: Duration = Duration::from_secs(180);

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_id(tag: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{tag}{nanos}")
}

fn row(name: &str, m: &Measured) {
    println!(
        "{name:<44} {:>9.0} {:>9.2} {:>9.2} {:>7}",
        m.rate,
        m.p50.as_secs_f64() * 1e3,
        m.p99.as_secs_f64() * 1e3,
        m.errors
    );
}

/// What one store's gateway runs measured.
struct StoreFigures {
    ingest: Measured,
    forwarding: Measured,
    /// Deliveries per second of the closed-loop forwarding run, backlog drained.
    forwarded: f64,
    sustainable: f64,
    peak_rss_kib: u64,
}

async fn run() {
    let secs = env_u64("IDEM_BENCH_SECS", 8);
    let step_secs = env_u64("IDEM_BENCH_STEP_SECS", 30);
    let pg_admin = std::env::var("IDEM_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let dir = tempfile::tempdir_in(".").expect("a directory on the real disk");
    println!(
        "idem receive-and-forward bench: {} closed-loop connections, {secs} s per setting, {step_secs} s per open-loop step\n",
        load::CONNECTIONS
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9} {:>7}",
        "setting", "req/s", "p50 ms", "p99 ms", "errors"
    );

    let ceiling = {
        let server = baselines::start(Recipe::None);
        load::closed_loop(&server.url, &run_id("c"), secs, 0.0).await
    };
    row("ceiling (verify + parse, no store)", &ceiling);
    let naive_sqlite = {
        let url = format!("sqlite://{}", dir.path().join("naive.db").display());
        let server = baselines::start(Recipe::Sqlite(url));
        load::closed_loop(&server.url, &run_id("n"), secs, 0.0).await
    };
    row("naive recipe, SQLite (1 connection)", &naive_sqlite);
    let naive_pg = if pg_admin.is_empty() {
        None
    } else {
        let url = fresh_pg(&pg_admin, "naive").await;
        let measured = {
            let server = baselines::start(Recipe::Postgres(url.clone()));
            load::closed_loop(&server.url, &run_id("n"), secs, 0.0).await
        };
        drop_pg(&pg_admin, &url).await;
        row("naive recipe, PostgreSQL (32 connections)", &measured);
        Some(measured)
    };

    let sqlite = if std::env::var("IDEM_BENCH_SQLITE").is_ok_and(|v| v == "0") {
        None
    } else {
        let url = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
        let urls = [url("ingest.db"), url("forward.db"), url("open.db")];
        Some(gateway_runs("SQLite", &urls, secs, step_secs, dir.path()).await)
    };
    let postgres = if pg_admin.is_empty() {
        None
    } else {
        let urls = [
            fresh_pg(&pg_admin, "ingest").await,
            fresh_pg(&pg_admin, "forward").await,
            fresh_pg(&pg_admin, "open").await,
        ];
        let figures = gateway_runs("PostgreSQL", &urls, secs, step_secs, dir.path()).await;
        for url in &urls {
            drop_pg(&pg_admin, url).await;
        }
        Some(figures)
    };

    println!("\nratios (target in brackets):");
    let ratio = |a: f64, b: f64| a / b.max(f64::MIN_POSITIVE);
    if let Some(sqlite) = &sqlite {
        println!(
            "  SQLite ingest-only / ceiling            {:>6.2}x  [>= 0.4]",
            ratio(sqlite.ingest.rate, ceiling.rate)
        );
        println!(
            "  SQLite ingest-only / naive SQLite       {:>6.2}x  [>= 10]",
            ratio(sqlite.ingest.rate, naive_sqlite.rate)
        );
    }
    if let (Some(pg), Some(naive)) = (&postgres, &naive_pg) {
        println!(
            "  PostgreSQL ingest-only / naive PG       {:>6.2}x  [>= 1.5]",
            ratio(pg.ingest.rate, naive.rate)
        );
    }
    for (store, figures) in [
        ("SQLite", sqlite.as_ref()),
        ("PostgreSQL", postgres.as_ref()),
    ] {
        let Some(f) = figures else { continue };
        println!(
            "  {store:<10} forwarding rate / ingest-only {:>5.2}x  ({:.0} deliveries/s)",
            ratio(f.forwarded, f.ingest.rate),
            f.forwarded
        );
        println!(
            "  {store:<10} sustainable / ingest-only   {:>6.2}x  [>= 0.5]  ({:.0} of {:.0} events/s)",
            ratio(f.sustainable, f.ingest.rate),
            f.sustainable,
            f.ingest.rate
        );
        println!(
            "  {store:<10} p99 forwarding / ingest-only {:>5.2}x  [<= 2]",
            ratio(f.forwarding.p99.as_secs_f64(), f.ingest.p99.as_secs_f64())
        );
        println!(
            "  {store:<10} peak RSS, forwarding held  {:>6} MiB  [<= 64]",
            f.peak_rss_kib / 1024
        );
    }
}

/// The gateway's runs on one store: ingest-only (unique, then 30 % duplicates) on
/// `urls[0]`, forwarding closed-loop on `urls[1]`, the open-loop steps on `urls[2]`.
async fn gateway_runs(
    store: &str,
    urls: &[String; 3],
    secs: u64,
    step_secs: u64,
    dir: &std::path::Path,
) -> StoreFigures {
    let ingest = {
        let serve = Serve::start(&urls[0], None, dir).await;
        let cpu = cpu::Snapshot::take(serve.pid(), serve.database());
        let unique = load::closed_loop(&serve.url, &run_id("i"), secs, 0.0).await;
        row(&format!("idem serve, {store}, ingest-only"), &unique);
        println!(
            "  {}",
            cpu.per_event(
                &cpu::Snapshot::take(serve.pid(), serve.database()),
                unique.accepted
            )
        );
        let dup = load::closed_loop(&serve.url, &run_id("d"), secs, 0.3).await;
        row(&format!("idem serve, {store}, ingest-only, 30 % dup"), &dup);
        unique
    };
    forwarding_runs(store, &urls[1], &urls[2], ingest, secs, step_secs, dir).await
}

async fn forwarding_runs(
    store: &str,
    forward_url: &str,
    open_url: &str,
    ingest: Measured,
    secs: u64,
    step_secs: u64,
    dir: &std::path::Path,
) -> StoreFigures {
    let app = App::start();
    let (forwarding, forwarded, mut peak) = {
        let serve = Serve::start(forward_url, Some(&app), dir).await;
        let cpu = cpu::Snapshot::take(serve.pid(), serve.database());
        let started = Instant::now();
        let measured = load::closed_loop(&serve.url, &run_id("f"), secs, 0.0).await;
        row(
            &format!("idem serve, {store}, forwarding (ingest)"),
            &measured,
        );
        let stale = stale_events(forward_url).await.len() as u64;
        let forwarded = drain_rate(&app, measured.accepted - stale, started).await;
        println!(
            "{:<44} {forwarded:>9.0}",
            format!("  forwarded, deliveries/s")
        );
        println!(
            "  {}",
            cpu.per_event(
                &cpu::Snapshot::take(serve.pid(), serve.database()),
                measured.accepted
            )
        );
        println!("  {}", serve.dispatch_summary().await);
        (measured, forwarded, serve.peak_rss_kib())
    };
    let serve = Serve::start(open_url, Some(&app), dir).await;
    let mut sustainable = 0.0;
    for share in STEPS {
        let rate = (ingest.rate * share).max(1.0);
        serve.reset_peak_rss();
        let cpu = cpu::Snapshot::take(serve.pid(), serve.database());
        let measured = load::open_loop(&serve.url, &run_id("o"), rate, step_secs).await;
        // The last events get their 1 s too.
        tokio::time::sleep(DELIVERY_P99 + Duration::from_secs(1)).await;
        let stale = stale_events(open_url).await;
        let (p99, missing) = load::delivery_delay(&measured.accepted_at, &app.arrived(), &stale);
        let step_peak = serve.peak_rss_kib();
        let held = p99 <= DELIVERY_P99 && missing == 0 && measured.errors == 0;
        if held {
            peak = peak.max(step_peak);
        }
        println!("    {}", serve.dispatch_summary().await);
        println!(
            "    {}",
            cpu.per_event(
                &cpu::Snapshot::take(serve.pid(), serve.database()),
                measured.accepted
            )
        );
        println!(
            "  open loop {store} at {rate:>6.0}/s ({:.0} % of ingest-only): accepted {:>6}, stale {:>4}, delivery p99 {:>8.1} ms, not delivered {missing}, errors {}, peak RSS {} MiB -> {}",
            share * 100.0,
            measured.accepted_at.len(),
            stale.len(),
            p99.as_secs_f64() * 1e3,
            measured.errors,
            step_peak / 1024,
            if held { "held" } else { "not held" }
        );
        if !held {
            break;
        }
        sustainable = rate;
    }
    StoreFigures {
        ingest,
        forwarding,
        forwarded,
        sustainable,
        peak_rss_kib: peak,
    }
}

/// The ids of the events the gateway at `database_url` recorded as stale (not sent): read from
/// its tables, as `idem events` would show them.
async fn stale_events(database_url: &str) -> HashSet<String> {
    const STALE: &str = "SELECT e.event_id FROM idem_gateway_deliveries d \
         JOIN idem_gateway_events e ON e.id = d.event WHERE d.state = 'stale'";
    let ids: Vec<String> = if database_url.starts_with("sqlite:") {
        let mut conn = SqliteConnection::connect(database_url)
            .await
            .expect("open the gateway's SQLite database");
        sqlx::query_scalar(STALE).fetch_all(&mut conn).await
    } else {
        let mut conn = PgConnection::connect(database_url)
            .await
            .expect("connect to the gateway's database");
        sqlx::query_scalar(STALE).fetch_all(&mut conn).await
    }
    .expect("read the stale deliveries");
    ids.into_iter().collect()
}

/// Deliveries per second from `started` until `accepted` events have arrived at `app` (the
/// app starts empty), waiting at most [`DRAIN_LIMIT`]; counts what arrived by then if not all.
async fn drain_rate(app: &App, accepted: u64, started: Instant) -> f64 {
    let limit = started + DRAIN_LIMIT;
    loop {
        let arrived = app.arrived();
        let count = arrived.len() as u64;
        if count >= accepted || Instant::now() >= limit {
            let last = arrived.values().max().copied().unwrap_or(started);
            return count as f64
                / last
                    .saturating_duration_since(started)
                    .as_secs_f64()
                    .max(1e-3);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fresh database `idem_bench_{pid}_{tag}` on the server of `admin_url`; its URL.
async fn fresh_pg(admin_url: &str, tag: &str) -> String {
    let base = admin_url.rsplit_once('/').map_or(admin_url, |(b, _)| b);
    let name = format!("idem_bench_{}_{tag}", std::process::id());
    let mut admin = PgConnection::connect(admin_url)
        .await
        .expect("connect to PostgreSQL");
    for statement in [
        format!("DROP DATABASE IF EXISTS \"{name}\""),
        format!("CREATE DATABASE \"{name}\""),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut admin)
            .await
            .expect("create the bench database");
    }
    format!("{base}/{name}")
}

/// Drops the bench database at `url`.
async fn drop_pg(admin_url: &str, url: &str) {
    let name = url.rsplit_once('/').map_or(url, |(_, n)| n);
    if let Ok(mut admin) = PgConnection::connect(admin_url).await {
        let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
        let _ = sqlx::query(sqlx::AssertSqlSafe(drop))
            .execute(&mut admin)
            .await;
    }
}
