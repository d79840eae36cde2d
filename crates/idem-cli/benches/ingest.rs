//! Ingest and dispatch speed of `idem serve` (reported, not gated).
//!
//! Runs the real binary as a child process, once per setting, and drives it from this process
//! with 64 concurrent connections, each sending unique, correctly signed Stripe events:
//!
//! - SQLite on a real disk (WAL, `synchronous = FULL`) and PostgreSQL (127.0.0.1:5432), group
//!   commit on and off: requests/s, p50 and p99 latency, and the ratio on/off;
//! - peak RSS of `idem serve` (VmHWM) while ingesting at full rate with
//!   `IDEM_BENCH_PRELOAD` events already stored (default 1,000,000; SQLite, group commit on);
//! - the dispatch rate to a local application that answers 200 at once, on both stores.
//!
//! `cargo bench -p idem-cli --bench ingest`. Environment: `IDEM_BENCH_SECS` (load per
//! setting, default 5), `IDEM_BENCH_PRELOAD`, `IDEM_BENCH_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; set it empty to skip PostgreSQL).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idem_http::verify::stripe;
use idem_sql::sqlx::{self, Connection, PgConnection, SqliteConnection};

const CONNECTIONS: usize = 64;
const SECRET: &str = "whsec_bench";
const APP_SECRET: &str = "whsec_YmVuY2ggYXBwIHNlY3JldA==";
const DISPATCH_EVENTS: u64 = 5_000;

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

async fn run() {
    let secs = env_u64("IDEM_BENCH_SECS", 5);
    let preload = env_u64("IDEM_BENCH_PRELOAD", 1_000_000);
    let dir = tempfile::tempdir_in(".").expect("a directory on the real disk");
    println!("idem gateway ingest bench: {CONNECTIONS} connections, {secs} s per setting\n");
    println!(
        "{:<10} {:<13} {:>10} {:>9} {:>9} {:>9} {:>10}",
        "store", "group commit", "req/s", "p50 ms", "p99 ms", "errors", "peak RSS"
    );

    let mut rates = Vec::new();
    for group_commit in [true, false] {
        let url = format!(
            "sqlite://{}",
            dir.path().join(format!("gc-{group_commit}.db")).display()
        );
        let load = if group_commit { preload } else { 0 };
        if load > 0 {
            preload_sqlite(&url, load).await;
        }
        let result = measure(&url, group_commit, secs).await;
        result.print("sqlite", group_commit, load);
        rates.push(result.rate);
    }
    println!(
        "sqlite: group commit on/off = {:.1}x\n",
        rates[0] / rates[1].max(f64::MIN_POSITIVE)
    );

    let pg_admin = std::env::var("IDEM_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    if !pg_admin.is_empty() {
        let mut pg_rates = Vec::new();
        for group_commit in [true, false] {
            let url = fresh_pg(&pg_admin, group_commit).await;
            let result = measure(&url, group_commit, secs).await;
            drop_pg(&pg_admin, &url).await;
            result.print("postgres", group_commit, 0);
            pg_rates.push(result.rate);
        }
        println!(
            "postgres: group commit on/off = {:.1}x\n",
            pg_rates[0] / pg_rates[1].max(f64::MIN_POSITIVE)
        );
    }

    let url = format!("sqlite://{}", dir.path().join("dispatch.db").display());
    dispatch_rate(&url, "sqlite").await;
    if !pg_admin.is_empty() {
        let url = fresh_pg(&pg_admin, true).await;
        dispatch_rate(&url, "postgres").await;
        drop_pg(&pg_admin, &url).await;
    }
}

struct Measured {
    rate: f64,
    p50: Duration,
    p99: Duration,
    errors: u64,
    peak_rss_kib: u64,
}

impl Measured {
    fn print(&self, store: &str, group_commit: bool, preloaded: u64) {
        println!(
            "{store:<10} {:<13} {:>10.0} {:>9.2} {:>9.2} {:>9} {:>7} MiB{}",
            if group_commit { "on" } else { "off" },
            self.rate,
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3,
            self.errors,
            self.peak_rss_kib / 1024,
            if preloaded > 0 {
                format!("  ({preloaded} events stored before)")
            } else {
                String::new()
            }
        );
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts `idem serve` on `database_url` and waits until it answers.
async fn serve(config: &str, dir: &std::path::Path) -> (Child, String) {
    let port = free_port();
    let path = dir.join(format!("bench-{port}.toml"));
    std::fs::write(&path, format!("listen = \"127.0.0.1:{port}\"\n{config}")).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["--config", path.to_str().expect("utf-8 path"), "serve"])
        .env("BENCH_SECRET", SECRET)
        .env("APP_SECRET", APP_SECRET)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn idem serve");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    for _ in 0..600 {
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            return (child, base);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("idem serve did not start");
}

fn peak_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn stop(mut child: Child) {
    // SIGTERM: the gateway drains and exits 0.
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
}

fn event(task: usize, n: u64, run: &str) -> Vec<u8> {
    format!(
        r#"{{"id":"evt_{run}_{task}_{n}","object":"event","type":"customer.updated","created":{},"data":{{"object":{{"id":"cus_{task}_{}","object":"customer","email":"bench@example.com"}}}}}}"#,
        1_700_000_000 + n,
        n % 97
    )
    .into_bytes()
}

async fn measure(database_url: &str, group_commit: bool, secs: u64) -> Measured {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = format!(
        "database_url = \"{database_url}\"\ngroup_commit = {group_commit}\n\
         [[source]]\nname = \"bench\"\nkind = \"stripe\"\nsecrets_env = [\"BENCH_SECRET\"]\n"
    );
    let (child, base) = serve(&config, dir.path()).await;
    let run = format!(
        "r{}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let deadline = Instant::now() + Duration::from_secs(secs);
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..CONNECTIONS {
        let (base, errors, run) = (base.clone(), Arc::clone(&errors), run.clone());
        tasks.spawn(async move {
            // One client per task: one connection each.
            let client = reqwest::Client::new();
            let mut latencies = Vec::new();
            let mut n = 0;
            while Instant::now() < deadline {
                let body = event(task, n, &run);
                let signature = stripe::sign(SECRET, unix_now(), &body);
                let started = Instant::now();
                let ok = client
                    .post(format!("{base}/webhooks/bench"))
                    .header(stripe::SIGNATURE_HEADER, signature)
                    .body(body)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                latencies.push(started.elapsed());
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                n += 1;
            }
            latencies
        });
    }
    let started = Instant::now();
    let mut latencies: Vec<Duration> = tasks.join_all().await.into_iter().flatten().collect();
    let elapsed = started.elapsed();
    let peak = peak_rss_kib(child.id());
    stop(child);
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    Measured {
        rate: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: at(0.50),
        p99: at(0.99),
        errors: errors.load(Ordering::Relaxed),
        peak_rss_kib: peak,
    }
}

/// Stores `n` events (inbox keys and event rows with a 600-byte body) before the run, the way
/// a long-running gateway would hold them.
async fn preload_sqlite(url: &str, n: u64) {
    let started = Instant::now();
    let store = idem_sql::SqliteStore::connect(url).await.expect("open");
    let gateway = idem_gateway::Gateway::new(idem_gateway::Config::defaults(), store.clone());
    gateway.migrate().await.expect("migrate");
    let mut conn = SqliteConnection::connect(url).await.expect("connect");
    for statement in [
        "INSERT INTO idem_inbox (consumer, dedup_key, processed_at) \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) \
         SELECT 'idem-gateway', 'bench:evt_pre_' || i, 0 FROM n",
        "INSERT INTO idem_gateway_events (source, event_id, event_type, body, headers, received_at) \
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1) \
         SELECT 'bench', 'evt_pre_' || i, 'customer.updated', randomblob(600), '[]', 0 FROM n",
    ] {
        sqlx::query(statement)
            .bind(n as i64)
            .execute(&mut conn)
            .await
            .expect("preload");
    }
    println!(
        "(preloaded {n} events into SQLite in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
}

async fn fresh_pg(admin_url: &str, group_commit: bool) -> String {
    let mut admin = PgConnection::connect(admin_url)
        .await
        .expect("connect to PostgreSQL");
    let name = format!("idem_bench_{}_{group_commit}", std::process::id());
    for statement in [
        format!("DROP DATABASE IF EXISTS \"{name}\""),
        format!("CREATE DATABASE \"{name}\""),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut admin)
            .await
            .expect("create the bench database");
    }
    let base = admin_url.rsplit_once('/').map_or(admin_url, |(b, _)| b);
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

/// Events ingested with a route to a local application that answers 200 at once: the time from
/// the first request until the application has every event.
async fn dispatch_rate(database_url: &str, store: &str) {
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    let app = axum::Router::new().route(
        "/events",
        axum::routing::post(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            async { "ok" }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let app_addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tempfile::tempdir().expect("temp dir");
    let config = format!(
        "database_url = \"{database_url}\"\n\
         [[source]]\nname = \"bench\"\nkind = \"stripe\"\nsecrets_env = [\"BENCH_SECRET\"]\n\
         [[destination]]\nname = \"app\"\nurl = \"http://{app_addr}/events\"\n\
         signing_secret_env = \"APP_SECRET\"\nconcurrency = 32\n\
         [[route]]\nsource = \"bench\"\ndestination = \"app\"\n"
    );
    let (child, base) = serve(&config, dir.path()).await;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..CONNECTIONS {
        let base = base.clone();
        tasks.spawn(async move {
            let client = reqwest::Client::new();
            for n in (task as u64..DISPATCH_EVENTS).step_by(CONNECTIONS) {
                let body = event(task, n, "dispatch");
                let signature = stripe::sign(SECRET, unix_now(), &body);
                let _ = client
                    .post(format!("{base}/webhooks/bench"))
                    .header(stripe::SIGNATURE_HEADER, signature)
                    .body(body)
                    .send()
                    .await;
            }
        });
    }
    tasks.join_all().await;
    let ingested = started.elapsed();
    while received.load(Ordering::Relaxed) < DISPATCH_EVENTS
        && started.elapsed() < Duration::from_secs(120)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let elapsed = started.elapsed();
    stop(child);
    println!(
        "dispatch ({store}, concurrency 32, ordered per entity): {} events ingested in {:.2} s, all delivered after {:.2} s = {:.0} deliveries/s",
        received.load(Ordering::Relaxed),
        ingested.as_secs_f64(),
        elapsed.as_secs_f64(),
        received.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
    );
}
