//! The load generator: signed Stripe events over 1,000 entities, sent closed-loop (64
//! connections, each sending its next request when the last is answered) or open-loop (paced
//! at a fixed rate, whatever the answers take).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idem_http::verify::stripe;

/// The bench's Stripe endpoint secret.
pub(crate) const SECRET: &str = "whsec_bench";
/// Closed-loop connections.
pub(crate) const CONNECTIONS: usize = 64;
/// Entities the events are spread over; each gets its events in version order.
pub(crate) const ENTITIES: u64 = 1_000;

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Event number `n` of run `run`: entity `n % 1000` of the run (each run, and each open-loop
/// step, has entities of its own, or a step's first events would be older than the last
/// step's and dropped as stale), version `n / 1000` (so each entity's events come in version
/// order as `n` grows).
pub(crate) fn event(run: &str, n: u64) -> (String, Vec<u8>) {
    let id = format!("evt_{run}_{n}");
    let body = format!(
        r#"{{"id":"{id}","object":"event","type":"customer.updated","created":{},"data":{{"object":{{"id":"cus_{run}_{}","object":"customer","email":"bench@example.com"}}}}}}"#,
        1_700_000_000 + n / ENTITIES,
        n % ENTITIES
    );
    (id, body.into_bytes())
}

/// What a load run measured.
#[derive(Debug, Default)]
pub(crate) struct Measured {
    /// Answered 2xx per second.
    pub(crate) rate: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    /// Requests not answered 2xx.
    pub(crate) errors: u64,
    /// Requests answered 2xx.
    pub(crate) accepted: u64,
    /// When each event id was answered 2xx (open loop only).
    pub(crate) accepted_at: HashMap<String, Instant>,
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

async fn post(client: &reqwest::Client, url: &str, body: Vec<u8>) -> bool {
    let signature = stripe::sign(SECRET, unix_now(), &body);
    client
        .post(url)
        .header(stripe::SIGNATURE_HEADER, signature)
        .body(body)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

/// Closed loop for `secs`: [`CONNECTIONS`] tasks, task `t` sending events `t`, `t + 64`, … of
/// `run`; with `duplicates` (0 to 1) that share of requests resends an event sent before.
pub(crate) async fn closed_loop(url: &str, run: &str, secs: u64, duplicates: f64) -> Measured {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..CONNECTIONS as u64 {
        let (url, run, errors) = (url.to_owned(), run.to_owned(), Arc::clone(&errors));
        tasks.spawn(async move {
            let client = idem_testkit::http_client();
            let mut latencies = Vec::new();
            let mut next = task;
            let mut sent = 0_u64;
            while Instant::now() < deadline {
                // A fixed pattern, not random: every run sends the same mix.
                let resend = duplicates > 0.0
                    && sent > 0
                    && (sent as f64 * duplicates).floor()
                        < ((sent + 1) as f64 * duplicates).floor();
                let n = if resend {
                    next - CONNECTIONS as u64
                } else {
                    let n = next;
                    next += CONNECTIONS as u64;
                    n
                };
                let (_, body) = event(&run, n);
                let started = Instant::now();
                if !post(&client, &url, body).await {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                latencies.push(started.elapsed());
                sent += 1;
            }
            latencies
        });
    }
    let started = Instant::now();
    let mut latencies: Vec<Duration> = tasks.join_all().await.into_iter().flatten().collect();
    let elapsed = started.elapsed();
    latencies.sort_unstable();
    let errors = errors.load(Ordering::Relaxed);
    Measured {
        rate: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: quantile(&latencies, 0.50),
        p99: quantile(&latencies, 0.99),
        errors,
        accepted: latencies.len() as u64 - errors,
        accepted_at: HashMap::new(),
    }
}

/// Open loop: `rate` requests per second for `secs`, each sent at its time on a connection of a
/// shared pool whatever the earlier ones take (at most 4,096 in flight; more count as errors).
pub(crate) async fn open_loop(url: &str, run: &str, rate: f64, secs: u64) -> Measured {
    let client = idem_testkit::http_client_builder()
        .pool_max_idle_per_host(256)
        .build()
        .expect("client");
    let total = (rate * secs as f64) as u64;
    let accepted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let in_flight = Arc::new(tokio::sync::Semaphore::new(4096));
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..total {
        let at = start + Duration::from_secs_f64(n as f64 / rate);
        tokio::time::sleep_until(at.into()).await;
        let Ok(permit) = Arc::clone(&in_flight).try_acquire_owned() else {
            errors.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let (client, url) = (client.clone(), url.to_owned());
        let (accepted, latencies, errors) = (
            Arc::clone(&accepted),
            Arc::clone(&latencies),
            Arc::clone(&errors),
        );
        let (id, body) = event(run, n);
        tasks.spawn(async move {
            let sent = Instant::now();
            if post(&client, &url, body).await {
                let now = Instant::now();
                accepted.lock().expect("not poisoned").insert(id, now);
                latencies.lock().expect("not poisoned").push(now - sent);
            } else {
                errors.fetch_add(1, Ordering::Relaxed);
            }
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    tasks.join_all().await;
    let elapsed = start.elapsed();
    let mut latencies = std::mem::take(&mut *latencies.lock().expect("not poisoned"));
    latencies.sort_unstable();
    let accepted_at = std::mem::take(&mut *accepted.lock().expect("not poisoned"));
    Measured {
        rate: accepted_at.len() as f64 / elapsed.as_secs_f64(),
        p50: quantile(&latencies, 0.50),
        p99: quantile(&latencies, 0.99),
        errors: errors.load(Ordering::Relaxed),
        accepted: accepted_at.len() as u64,
        accepted_at,
    }
}

/// The p99 of `arrived - accepted` over the events accepted, and how many accepted events had
/// not arrived at all; events in `stale` (older than their entity's newest when they came: the
/// concurrent connections overtake one another) are not sent, by design, and not counted.
pub(crate) fn delivery_delay(
    accepted: &HashMap<String, Instant>,
    arrived: &HashMap<String, Instant>,
    stale: &HashSet<String>,
) -> (Duration, usize) {
    let mut delays = Vec::with_capacity(accepted.len());
    let mut missing = 0;
    for (id, at) in accepted.iter().filter(|(id, _)| !stale.contains(*id)) {
        match arrived.get(id) {
            Some(arrival) => delays.push(arrival.saturating_duration_since(*at)),
            None => missing += 1,
        }
    }
    delays.sort_unstable();
    (quantile(&delays, 0.99), missing)
}
