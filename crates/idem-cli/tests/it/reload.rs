//! `SIGHUP` to `idem serve` under load (issue 32, item 3): a valid file is applied live — a new
//! destination and route, a changed destination whose dispatcher is restarted — and an invalid
//! one is refused and logged, while 1,000 events go through: each is delivered to the first
//! application exactly once, and each accepted after the reload to the new one exactly once.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::faults::{event, send_until_accepted};
use crate::serve_process::{ServeProcess, free_port, write_config};
use crate::support::{Downstream, unix_now};

const ENTITIES: usize = 20;
const EVENTS_PER_ENTITY: usize = 50;

fn hangup(serve: &ServeProcess) {
    let sent = Command::new("kill")
        .args(["-HUP", &serve.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "SIGHUP not sent");
}

/// Waits until the log holds `needle` (at most 30 s).
async fn logged(log: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains(needle)) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the log:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_until(accepted: &AtomicUsize, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while accepted.load(Ordering::Relaxed) < count {
        assert!(Instant::now() < deadline, "only {accepted:?} accepted");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// How many times each event id arrived at `downstream`.
fn copies(downstream: &Downstream) -> BTreeMap<String, usize> {
    let mut copies = BTreeMap::new();
    for request in downstream.received() {
        let id = request.header("idem-event-id").expect("Idem-Event-Id");
        *copies.entry(id.to_owned()).or_default() += 1;
    }
    copies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sighup_applies_a_valid_file_and_refuses_an_invalid_one_under_load() {
    let (app, app2) = (Downstream::ok().await, Downstream::ok().await);
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = write_config(dir.path(), port, app.addr, "poll_interval = \"50ms\"");
    // A short timeout: a delivery claimed by the dispatcher the reload stops is sent again
    // once its claim lapses, the timeout plus 5 s.
    let v1 = std::fs::read_to_string(&config).unwrap().replacen(
        "signing_secret_env = \"FAULTS_APP_SECRET\"\n",
        "signing_secret_env = \"FAULTS_APP_SECRET\"\ntimeout = \"1s\"\n",
        1,
    );
    std::fs::write(&config, &v1).unwrap();
    let log = dir.path().join("serve.log");
    let filter = "warn,idem_gateway::reload=info,idem_cli=info";
    let serve = ServeProcess::start_logged(&config, port, filter, &log).await;

    let total = ENTITIES * EVENTS_PER_ENTITY;
    let accepted = Arc::new(AtomicUsize::new(0));
    let reloaded = Arc::new(AtomicBool::new(false));
    let after_reload = Arc::new(Mutex::new(HashSet::new()));
    let created = unix_now() - 100_000;
    let client = idem_testkit::http_client();
    let mut senders = tokio::task::JoinSet::new();
    for e in 0..ENTITIES {
        let (client, url) = (client.clone(), serve.base.clone());
        let (accepted, reloaded) = (Arc::clone(&accepted), Arc::clone(&reloaded));
        let after_reload = Arc::clone(&after_reload);
        senders.spawn(async move {
            for i in 0..EVENTS_PER_ENTITY {
                let (id, body) = event(e, i, created);
                // The last two fifths wait for the reload: a fast machine would otherwise send
                // everything in the time the reload takes, and nothing would test the swap.
                while i >= EVENTS_PER_ENTITY * 3 / 5 && !reloaded.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                // Sent once the reload was logged, so received after the swap.
                let after = reloaded.load(Ordering::SeqCst);
                send_until_accepted(&client, &url, &body).await;
                if after {
                    after_reload.lock().unwrap().insert(id);
                }
                accepted.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    // A valid file: destination app2 with a route, and app's concurrency changed.
    wait_until(&accepted, total / 4).await;
    let v2 = v1.replacen(
        "signing_secret_env = \"FAULTS_APP_SECRET\"\n",
        "signing_secret_env = \"FAULTS_APP_SECRET\"\nconcurrency = 4\n",
        1,
    ) + &format!(
        r#"
[[destination]]
name = "app2"
url = "http://{}/events"
signing_secret_env = "FAULTS_APP_SECRET"

[[route]]
source = "stripe"
destination = "app2"
"#,
        app2.addr
    );
    std::fs::write(&config, &v2).unwrap();
    hangup(&serve);
    let applied = logged(&log, "configuration reloaded").await;
    reloaded.store(true, Ordering::SeqCst);
    assert!(
        applied.contains("app2") && applied.contains("changed=[\"app\"]"),
        "{applied}"
    );

    // An invalid file: refused, logged, the running configuration kept.
    wait_until(&accepted, total * 3 / 5).await;
    std::fs::write(&config, v2.replace("[[route]]", "[[route]")).unwrap();
    hangup(&serve);
    let refused = logged(&log, "configuration reload refused").await;
    assert!(refused.contains("invalid-config"), "{refused}");

    while senders.join_next().await.is_some() {}
    assert_eq!(accepted.load(Ordering::Relaxed), total);
    let after_reload = after_reload.lock().unwrap().clone();
    assert!(
        after_reload.len() >= total / 3,
        "{} sent after the reload",
        after_reload.len()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (first, second) = (copies(&app), copies(&app2));
        let second_done = after_reload.iter().all(|id| second.contains_key(id));
        if first.len() == total && second_done {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {total} at app, {} of {} at app2 after 60 s",
            first.len(),
            after_reload
                .iter()
                .filter(|id| second.contains_key(*id))
                .count(),
            after_reload.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}"
    );
    let (first, second) = (copies(&app), copies(&app2));
    let twice: Vec<_> = first.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent twice to app: {twice:?}");
    let twice: Vec<_> = second.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "sent twice to app2: {twice:?}");
    assert!(second.len() <= total);
}
