//! The gateway's fault suite, on the real binary: `kill -9` at moments drawn from a fixed seed
//! under a sender that retries until 2xx, SIGTERM with stalled clients, a database that accepts
//! TCP and never answers. The promise checked each time: no event answered 200 is lost, entity
//! order is kept, every resend carries the same `Idempotency-Key`, every deadline holds.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use idem_http::verify::stripe;
use idem_testkit::downstream::Received;
use idem_testkit::silent_server::SilentServer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;

use crate::serve_process::{STRIPE_SECRET, ServeProcess, free_port, write_config};
use crate::support::{Downstream, IDEM, unix_now};

/// Entities of the kill run, and events of each (5,000 in all).
const ENTITIES: usize = 50;
const EVENTS_PER_ENTITY: usize = 100;
/// How many times `idem serve` is killed with SIGKILL during the run.
const KILLS: usize = 10;
/// The kill schedule's seed: the same moments on every run.
const SEED: u64 = 0x1de5_0013;

/// Event `i` of entity `e`: its id, and a `created` that grows with `i` (the entity's version).
pub(crate) fn event(e: usize, i: usize, base: i64) -> (String, Vec<u8>) {
    let id = format!("evt_k{e}_{i}");
    let body = format!(
        r#"{{"id":"{id}","object":"event","type":"invoice.updated","created":{},"data":{{"object":{{"id":"in_{e}","object":"invoice"}}}}}}"#,
        base + i as i64
    );
    (id, body.into_bytes())
}

/// POSTs a signed Stripe event, as a sender with a 10 s timeout: the status, 0 when no answer.
async fn send(client: &reqwest::Client, base: &str, body: &[u8]) -> u16 {
    client
        .post(format!("{base}/webhooks/stripe"))
        .header(
            "stripe-signature",
            stripe::sign(STRIPE_SECRET, unix_now(), body),
        )
        .timeout(Duration::from_secs(10))
        .body(body.to_vec())
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// Sends until 2xx, as Stripe does (a refused connection or a 503 is tried again).
pub(crate) async fn send_until_accepted(
    client: &reqwest::Client,
    base: &str,
    body: &[u8],
) -> usize {
    let mut tries = 0;
    loop {
        tries += 1;
        if (200..300).contains(&send(client, base, body).await) {
            return tries;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `(entity, index)` of a request the downstream received, from its `Idem-Event-Id`.
fn parse(received: &Received) -> (usize, usize) {
    let id = received.header("idem-event-id").expect("Idem-Event-Id");
    let (e, i) = id
        .strip_prefix("evt_k")
        .and_then(|rest| rest.split_once('_'))
        .unwrap_or_else(|| panic!("unexpected event id {id}"));
    (e.parse().unwrap(), i.parse().unwrap())
}

/// 5,000 events of 50 entities (each entity's sent one after the other, as a sender's queue
/// does), `kill -9` of `idem serve` at 10 moments drawn from a fixed seed and a restart after
/// each: every event is answered 2xx in the end and delivered, each entity's events arrive in
/// version order (a resend of the event in flight at a kill may come again right after itself,
/// never after a newer one), and every copy of an event carries the same `Idempotency-Key`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_at_ten_moments_loses_no_accepted_event_and_keeps_order() {
    let app = Downstream::ok().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port, app.addr, "poll_interval = \"50ms\"");
    let base_url = format!("http://127.0.0.1:{port}");
    let total = ENTITIES * EVENTS_PER_ENTITY;
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut moments: Vec<usize> = (0..KILLS)
        .map(|_| rng.random_range(total / 20..total * 19 / 20))
        .collect();
    moments.sort_unstable();

    let mut serve = ServeProcess::start(&config, port).await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let resent = Arc::new(AtomicUsize::new(0));
    let created_base = unix_now() - 100_000;
    let client = idem_testkit::http_client();
    let mut senders = tokio::task::JoinSet::new();
    for e in 0..ENTITIES {
        let (client, url) = (client.clone(), base_url.clone());
        let (accepted, resent) = (Arc::clone(&accepted), Arc::clone(&resent));
        senders.spawn(async move {
            for i in 0..EVENTS_PER_ENTITY {
                let (_, body) = event(e, i, created_base);
                let tries = send_until_accepted(&client, &url, &body).await;
                resent.fetch_add(tries - 1, Ordering::Relaxed);
                accepted.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let run = Instant::now();
    for moment in &moments {
        while accepted.load(Ordering::Relaxed) < *moment {
            assert!(
                run.elapsed() < Duration::from_secs(240),
                "only {} of {total} accepted after 240 s",
                accepted.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        serve.kill9();
        serve = ServeProcess::start(&config, port).await;
    }
    while senders.join_next().await.is_some() {}
    assert_eq!(accepted.load(Ordering::Relaxed), total);

    // Every event answered 2xx is delivered.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let delivered: HashSet<(usize, usize)> = app.received().iter().map(parse).collect();
        if delivered.len() == total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {total} accepted events delivered 120 s after the last one",
            delivered.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}"
    );

    let received = app.received();
    let mut per_entity: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut keys: BTreeMap<(usize, usize), HashSet<String>> = BTreeMap::new();
    for request in &received {
        let (e, i) = parse(request);
        per_entity.entry(e).or_default().push(i);
        keys.entry((e, i))
            .or_default()
            .insert(request.header("idempotency-key").unwrap_or("").to_owned());
    }
    for (e, sequence) in &per_entity {
        let mut collapsed = sequence.clone();
        collapsed.dedup();
        assert_eq!(
            collapsed,
            (0..EVENTS_PER_ENTITY).collect::<Vec<_>>(),
            "entity {e}: deliveries out of version order"
        );
    }
    for ((e, i), set) in &keys {
        let expected = HashSet::from([format!("\"stripe:evt_k{e}_{i}\"")]);
        assert_eq!(set, &expected, "every copy of evt_k{e}_{i} has its one key");
    }
    let copies = received.len() - total;
    eprintln!(
        "kill -9 at {moments:?} of {total} events: 0 lost, {} sender resends, {copies} repeated deliveries, {:?} in all",
        resent.load(Ordering::Relaxed),
        run.elapsed()
    );
}

/// SIGTERM mid-burst with 10 clients stalled in their headers (a byte every 200 ms, far from
/// the 60 s `header_read_timeout`): the process exits within `shutdown_grace` (1 s) plus 50 %,
/// with status 0; the 20 events answered 200 before, which the application refused until then,
/// are delivered after the next start, each under its one key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_cuts_stalled_clients_at_the_grace_and_loses_nothing() {
    let accepting = Arc::new(AtomicBool::new(false));
    let answered_ok: Arc<std::sync::Mutex<HashSet<String>>> = Arc::default();
    let (open, ok) = (Arc::clone(&accepting), Arc::clone(&answered_ok));
    let app = Downstream::start(Arc::new(move |request| {
        if !open.load(Ordering::SeqCst) {
            return StatusCode::SERVICE_UNAVAILABLE;
        }
        let key = request.header("idempotency-key").unwrap_or("").to_owned();
        ok.lock().unwrap().insert(key);
        StatusCode::OK
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(
        dir.path(),
        port,
        app.addr,
        "shutdown_grace = \"1s\"\nheader_read_timeout = \"60s\"",
    );
    let serve = ServeProcess::start(&config, port).await;
    let client = idem_testkit::http_client();
    let base = unix_now() - 1000;
    for n in 0..20 {
        let (_, body) = event(n, 0, base);
        assert_eq!(send(&client, &serve.base, &body).await, 200);
    }
    let stop_stalling = Arc::new(AtomicBool::new(false));
    let mut stalled = Vec::new();
    for _ in 0..10 {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let stop = Arc::clone(&stop_stalling);
        stalled.push(tokio::spawn(async move {
            for byte in b"POST /webhooks/stripe HTTP/1.1\r\nX-Slow: ".iter().cycle() {
                if stop.load(Ordering::SeqCst) || stream.write_all(&[*byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    let grace = Duration::from_secs(1);
    let signalled = Instant::now();
    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(30)).await;
    let took = signalled.elapsed();
    stop_stalling.store(true, Ordering::SeqCst);
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}"
    );
    assert!(
        took <= grace + grace / 2,
        "exited {took:?} after SIGTERM with stalled clients (shutdown_grace 1 s)"
    );

    accepting.store(true, Ordering::SeqCst);
    let serve = ServeProcess::start(&config, port).await;
    let expected: HashSet<String> = (0..20).map(|n| format!("\"stripe:evt_k{n}_0\"")).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while *answered_ok.lock().unwrap() != expected {
        assert!(
            Instant::now() < deadline,
            "delivered after the restart: {:?} of 20",
            answered_ok.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for request in app.received() {
        let (n, _) = parse(&request);
        let key = format!("\"stripe:evt_k{n}_0\"");
        assert_eq!(request.header("idempotency-key"), Some(key.as_str()));
    }
    drop(serve);
    for task in stalled {
        let _ = task.await;
    }
}

/// A database that accepts TCP and never answers: `idem serve` reports it within
/// `database_timeout` (1 s here) plus 50 % instead of hanging, and an operator command within
/// its 10 s plus 50 %; both exit non-zero naming the database, without its password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_never_answers_is_reported_within_the_deadline() {
    let silent = SilentServer::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("postgres://idem:hunter2@{}/idem", silent.addr);
    let config = write_config(
        dir.path(),
        free_port(),
        "127.0.0.1:1".parse().unwrap(),
        &format!("database_url = \"{url}\"\ndatabase_timeout = \"1s\""),
    );
    for (args, bound) in [
        (vec!["serve"], Duration::from_millis(1500)),
        (vec!["events", "list"], Duration::from_secs(15)),
    ] {
        let start = Instant::now();
        let output = tokio::task::spawn_blocking({
            let config = config.clone();
            let args = args.clone();
            move || {
                Command::new(IDEM)
                    .arg("--config")
                    .arg(&config)
                    .args(&args)
                    .env("FAULTS_STRIPE_SECRET", STRIPE_SECRET)
                    .env("FAULTS_APP_SECRET", "whsec_aGVsbG8=")
                    .output()
                    .unwrap()
            }
        })
        .await
        .unwrap();
        let took = start.elapsed();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "idem {args:?}: {stderr}");
        assert!(
            took <= bound,
            "idem {args:?} took {took:?}, bound {bound:?}: {stderr}"
        );
        assert!(
            stderr.contains(&silent.addr.to_string()),
            "idem {args:?}: {stderr}"
        );
        assert!(!stderr.contains("hunter2"), "idem {args:?}: {stderr}");
    }
    assert!(
        silent.connections() >= 2,
        "both commands reached the server"
    );
}
