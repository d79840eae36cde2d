//! A `kind = "nats"` destination under `kill -9` (issue 30, part 2): `idem serve` forwarding
//! Stripe events to a JetStream subject is killed at moments drawn from a fixed seed and
//! started again; every event ends on the stream exactly once, under its delivery's
//! `webhook-id` (a resend of a publish cut by a kill carries the same `Nats-Msg-Id`, and the
//! stream's duplicate window drops it), and a replay of every event publishes nothing new: each
//! resend keeps its id and is acknowledged as a duplicate.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use idem_gateway::dispatch::send::webhook_id;
use idem_gateway::operations::ReplayRequest;
use idem_gateway::{Config, Gateway};
use idem_sql::SqliteStore;
use idem_testkit::nats::{NATS_URL, TestStream};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::faults::{event, send_until_accepted};
use crate::serve_process::{ServeProcess, free_port};
use crate::support::unix_now;

/// Entities, and events of each (300 in all).
const ENTITIES: usize = 10;
const EVENTS_PER_ENTITY: usize = 30;
/// How many times `idem serve` is killed with SIGKILL.
const KILLS: usize = 4;
/// The kill schedule's seed: the same moments on every run.
const SEED: u64 = 0x1de5_0030;

/// Writes `idem.toml` in `dir`: source `stripe`, destination `bus` publishing to `subject`
/// (claims lapse 1 s + 5 s after a kill), a drop-stale route.
fn write_config(dir: &Path, port: u16, subject: &str) -> std::path::PathBuf {
    let path = dir.join("idem.toml");
    let schedule = vec!["\"200ms\""; 30].join(", ");
    let text = format!(
        r#"listen = "127.0.0.1:{port}"
database_url = "sqlite://{}/data/idem.db"
poll_interval = "50ms"

[[source]]
name = "stripe"
kind = "stripe"
secrets_env = ["FAULTS_STRIPE_SECRET"]

[[destination]]
name = "bus"
kind = "nats"
url = "{NATS_URL}"
subject = "{subject}"
timeout = "1s"
retry_schedule = [{schedule}]

[[route]]
source = "stripe"
destination = "bus"
"#,
        dir.display()
    );
    std::fs::write(&path, text).expect("write the configuration");
    path
}

/// The gateway's database, opened beside the running server as an operator command does.
async fn operator(config: &Path) -> Gateway<idem_sql::sqlx::Sqlite> {
    let config = Config::load_for_operations(config).expect("the configuration");
    let store = SqliteStore::connect(&config.database_url)
        .await
        .expect("the gateway's database");
    Gateway::new(config, store)
}

/// Waits (up to `limit`) until no delivery of `bus` is pending or in flight.
async fn settled(gateway: &Gateway<idem_sql::sqlx::Sqlite>, limit: Duration) -> u64 {
    let deadline = Instant::now() + limit;
    loop {
        let stats = gateway.stats().await.expect("stats");
        let bus = stats.destinations.get("bus").copied().unwrap_or_default();
        if bus.pending + bus.in_flight == 0 {
            assert_eq!(bus.dead, 0, "no dead letter");
            return bus.delivered;
        }
        assert!(Instant::now() < deadline, "not settled: {bus:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Attempts of `bus` whose excerpt starts with `prefix`.
async fn attempts_like(gateway: &Gateway<idem_sql::sqlx::Sqlite>, prefix: &str) -> i64 {
    idem_sql::sqlx::query_scalar(
        "SELECT COUNT(*) FROM idem_gateway_attempts WHERE excerpt LIKE ?1 || '%'",
    )
    .bind(prefix)
    .fetch_one(gateway.store().pool())
    .await
    .expect("count attempts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_while_forwarding_to_nats_leaves_every_event_on_the_stream_once() {
    let stream = TestStream::new().await;
    let subject = format!("{}.invoices", stream.subject);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port, &subject);
    let base_url = format!("http://127.0.0.1:{port}");
    let total = ENTITIES * EVENTS_PER_ENTITY;
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut moments: Vec<usize> = (0..KILLS)
        .map(|_| rng.random_range(total / 10..total * 9 / 10))
        .collect();
    moments.sort_unstable();

    let mut serve = ServeProcess::start(&config, port).await;
    let accepted = Arc::new(AtomicUsize::new(0));
    let created_base = unix_now() - 100_000;
    let client = idem_testkit::http_client();
    let mut senders = tokio::task::JoinSet::new();
    for e in 0..ENTITIES {
        let (client, url, accepted) = (client.clone(), base_url.clone(), Arc::clone(&accepted));
        senders.spawn(async move {
            for i in 0..EVENTS_PER_ENTITY {
                let (_, body) = event(e, i, created_base);
                send_until_accepted(&client, &url, &body).await;
                accepted.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    let run = Instant::now();
    for moment in &moments {
        while accepted.load(Ordering::Relaxed) < *moment {
            assert!(run.elapsed() < Duration::from_secs(120), "senders stalled");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        serve.kill9();
        serve = ServeProcess::start(&config, port).await;
    }
    while senders.join_next().await.is_some() {}

    // Every accepted event is delivered (claims cut by a kill lapse 6 s later), each on the
    // stream once under its webhook-id.
    let gateway = operator(&config).await;
    let delivered = settled(&gateway, Duration::from_secs(60)).await;
    assert_eq!(delivered, total as u64);
    let expected: BTreeSet<String> = (0..ENTITIES)
        .flat_map(|e| (0..EVENTS_PER_ENTITY).map(move |i| (e, i)))
        .map(|(e, i)| webhook_id("stripe", &format!("evt_k{e}_{i}"), "bus"))
        .collect();
    let messages = stream.messages(total as u64).await;
    let ids: BTreeSet<String> = messages.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(messages.len(), total, "each event on the stream once");
    assert_eq!(ids, expected, "under its webhook-id");
    let resent = attempts_like(&gateway, "duplicate:").await;

    // A replay of every event resends each with its id: all duplicates, nothing new stored.
    let report = gateway
        .replay(
            &ReplayRequest {
                source: "stripe".into(),
                since: 0,
                until: None,
                event_type: None,
                dry_run: false,
                force: true,
            },
            &|_, _| {},
        )
        .await
        .expect("replay");
    assert_eq!(report.requeued, total as u64);
    settled(&gateway, Duration::from_secs(30)).await;
    assert_eq!(
        attempts_like(&gateway, "duplicate:").await - resent,
        total as i64,
        "every replayed event acknowledged as a duplicate of its first publish"
    );
    let after = stream.messages(total as u64).await;
    assert_eq!(after.len(), total, "the replay stored nothing new");

    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}"
    );
    eprintln!(
        "kill -9 at {moments:?} of {total} events: each on the stream once; {resent} resends after kills were duplicates; {:?} in all",
        run.elapsed()
    );
    stream.delete().await;
}
