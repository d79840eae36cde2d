//! How closely a destination's `rate_limit` holds the delivery rate (issue 16, item 3), with
//! the release `idem serve` as a child process on SQLite and a local application answering
//! 200 at once: `cargo bench -p idem-cli --bench rate_limit`. Reported, not gated.
//!
//! The events are posted as fast as 16 connections go (distinct entities, so entity order
//! holds nothing back), faster than the limit: the burst (one second's worth) and the tokens
//! accruing meanwhile are spent while they are posted, and the rest waits. The measured rate is
//! over the deliveries after the last event was posted: how many arrived after it, divided by
//! the time from it to the last arrival.
//! Environment: `IDEM_BENCH_RATE` (attempts per second, default 200), `IDEM_BENCH_RATE_SECS`
//! (seconds of limited deliveries after the burst, default 6).

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::HeaderMap;
use idem_http::verify::stripe;

const SECRET: &str = "whsec_bench";
const APP_SECRET: &str = "whsec_YmVuY2ggYXBwIHNlY3JldA==";
/// Concurrent connections posting the events.
const POSTERS: usize = 16;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let rate = env_u64("IDEM_BENCH_RATE", 200).max(1);
    let secs = env_u64("IDEM_BENCH_RATE_SECS", 6).max(1);
    let burst = rate;
    let events = burst + rate * secs;

    // The application: notes when each delivery arrives.
    let arrived: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let record = Arc::clone(&arrived);
    let app = axum::Router::new().route(
        "/events",
        axum::routing::post(move |_: HeaderMap| {
            let record = Arc::clone(&record);
            async move {
                record.lock().expect("not poisoned").push(Instant::now());
                "ok"
            }
        }),
    );
    let app_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let app_addr = app_listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(app_listener, app).await });

    let dir = tempfile::tempdir().expect("temporary directory");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let config = format!(
        "listen = \"127.0.0.1:{port}\"\ndatabase_url = \"sqlite://{}/idem.db\"\n\
         [[source]]\nname = \"stripe\"\nkind = \"stripe\"\nsecrets_env = [\"BENCH_SECRET\"]\n\
         [[destination]]\nname = \"app\"\nurl = \"http://{app_addr}/events\"\n\
         signing_secret_env = \"APP_SECRET\"\nconcurrency = 64\nrate_limit = \"{rate}/s\"\n\
         [[route]]\nsource = \"stripe\"\ndestination = \"app\"\nordering = \"none\"\n",
        dir.path().display()
    );
    let path = dir.path().join("idem.toml");
    std::fs::write(&path, config).expect("write the configuration");
    let mut child = Command::new(env!("CARGO_BIN_EXE_idem"))
        .args(["--config", path.to_str().expect("UTF-8 path"), "serve"])
        .env("BENCH_SECRET", SECRET)
        .env("APP_SECRET", APP_SECRET)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn idem serve");
    let client = idem_testkit::http_client();
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..600 {
        if client.get(format!("{base}/healthz")).send().await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "idem serve did not start");

    let url = format!("{base}/webhooks/stripe");
    let started = Instant::now();
    let mut posters = tokio::task::JoinSet::new();
    for poster in 0..POSTERS as u64 {
        let (client, url) = (client.clone(), url.clone());
        posters.spawn(async move {
            for n in (poster..events).step_by(POSTERS) {
                let body = format!(
                    r#"{{"id":"evt_rate_{n}","object":"event","type":"customer.updated","created":1,"data":{{"object":{{"id":"cus_rate_{n}","object":"customer"}}}}}}"#
                );
                let signature = stripe::sign(SECRET, unix_now(), body.as_bytes());
                let answer = client
                    .post(&url)
                    .header("stripe-signature", signature)
                    .body(body)
                    .send()
                    .await
                    .expect("idem serve answers");
                assert_eq!(answer.status(), 200);
            }
        });
    }
    posters.join_all().await;
    let posted = Instant::now();
    let limit = Duration::from_secs(secs * 3 + 30);
    let expected = usize::try_from(events).expect("fits");
    while arrived.lock().expect("not poisoned").len() < expected {
        assert!(
            posted.elapsed() < limit,
            "only {} of {events} deliveries arrived",
            arrived.lock().expect("not poisoned").len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();

    let mut times = arrived.lock().expect("not poisoned").clone();
    times.sort();
    // Once every event is posted the backlog holds the rest and the bucket is empty (posting
    // is faster than the limit): from then on each delivery waits for its token.
    let after: Vec<Instant> = times.iter().copied().filter(|t| *t > posted).collect();
    let waiting_at_posted = after.len();
    let last = times[times.len() - 1];
    let window = (last - posted).as_secs_f64();
    let measured = after.len() as f64 / window;
    let ratio = measured / rate as f64;
    println!(
        "rate_limit: limit {rate}/s (burst {burst}), {events} events posted in {:.2} s, \
         {} delivered by then; the other {waiting_at_posted} in {window:.3} s",
        (posted - started).as_secs_f64(),
        times.len() - waiting_at_posted,
    );
    if (waiting_at_posted as u64) < rate {
        println!(
            "rate_limit: posting was too slow to keep a backlog; the figure below is not the limit's"
        );
    }
    println!(
        "rate_limit: limit {rate}/s, measured {measured:.1}/s, ratio {ratio:.3} ({})",
        if (ratio - 1.0).abs() <= 0.05 {
            "within 5 %"
        } else {
            "NOT within 5 %"
        }
    );
}
