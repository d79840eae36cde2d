//! `idem serve` with `database_url = "mysql://…"` (MariaDB here), as an operator runs it: events
//! accepted across a `kill -9` and a restart are each delivered, in entity order; a dead letter
//! is listed and redriven, and a destination paused, by the operator commands on the same
//! database.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use crate::faults::{event, send_until_accepted};
use crate::serve_process::{ServeProcess, free_port, write_config};
use crate::support::{Downstream, IDEM, unix_now};

/// Entities, and events of each, half sent before the kill and half after.
const ENTITIES: usize = 5;
const EVENTS_PER_ENTITY: usize = 10;
/// The entity whose every event the application refuses with 400 (a dead letter at once).
const REFUSED: usize = 99;

/// Runs `idem -c CONFIG ARGS`: (exit code, stdout, stderr).
fn idem(config: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(IDEM)
        .arg("-c")
        .arg(config)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idem_serve_on_mariadb_survives_kill_9_and_the_operator_commands_use_it() {
    let url = idem_testkit::mysql_database().await;
    let refusing = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let refuse = Arc::clone(&refusing);
    let app = Downstream::start(Arc::new(move |request| {
        let refused = request
            .header("idem-event-id")
            .is_some_and(|id| id.starts_with(&format!("evt_k{REFUSED}_")));
        if refused && refuse.load(std::sync::atomic::Ordering::SeqCst) {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        }
    }))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let top = format!("database_url = \"{url}\"\npoll_interval = \"50ms\"");
    let config = write_config(dir.path(), port, app.addr, &top);
    let base = format!("http://127.0.0.1:{port}");
    let client = idem_testkit::http_client();
    let created = unix_now() - 100_000;

    let serve = ServeProcess::start(&config, port).await;
    let (_, refused) = event(REFUSED, 0, created);
    send_until_accepted(&client, &base, &refused).await;
    for i in 0..EVENTS_PER_ENTITY / 2 {
        for e in 0..ENTITIES {
            send_until_accepted(&client, &base, &event(e, i, created).1).await;
        }
    }
    serve.kill9();
    let serve = ServeProcess::start(&config, port).await;
    for i in EVENTS_PER_ENTITY / 2..EVENTS_PER_ENTITY {
        for e in 0..ENTITIES {
            send_until_accepted(&client, &base, &event(e, i, created).1).await;
        }
    }
    let total = ENTITIES * EVENTS_PER_ENTITY;
    let deadline = Instant::now() + Duration::from_secs(60);
    let delivered = || -> BTreeMap<usize, Vec<usize>> {
        let mut per_entity: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for request in app.received() {
            let id = request.header("idem-event-id").unwrap_or("").to_owned();
            let (e, i) = id
                .strip_prefix("evt_k")
                .and_then(|rest| rest.split_once('_'))
                .unwrap();
            let (e, i): (usize, usize) = (e.parse().unwrap(), i.parse().unwrap());
            if e != REFUSED {
                per_entity.entry(e).or_default().push(i);
            }
        }
        per_entity
    };
    loop {
        let distinct: HashSet<(usize, usize)> = delivered()
            .iter()
            .flat_map(|(e, is)| is.iter().map(move |i| (*e, *i)))
            .collect();
        if distinct.len() == total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {total} delivered",
            distinct.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (e, sequence) in delivered() {
        let mut collapsed = sequence.clone();
        collapsed.dedup();
        assert_eq!(
            collapsed,
            (0..EVENTS_PER_ENTITY).collect::<Vec<_>>(),
            "entity {e}: in version order"
        );
    }

    // The operator commands, on the database `idem serve` is using.
    let (code, stdout, stderr) = idem(&config, &["events", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let listed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(listed.as_array().is_some_and(|l| !l.is_empty()), "{stdout}");
    let (code, stdout, stderr) = idem(&config, &["dlq", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let dead: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let dead = dead.as_array().unwrap();
    assert_eq!(dead.len(), 1, "{stdout}");
    assert_eq!(dead[0]["event_id"], format!("evt_k{REFUSED}_0"));
    refusing.store(false, std::sync::atomic::Ordering::SeqCst);
    let id = dead[0]["id"].to_string();
    let (code, stdout, stderr) = idem(&config, &["dlq", "redrive", "--id", &id]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let key = format!("stripe:evt_k{REFUSED}_0");
    let deadline = Instant::now() + Duration::from_secs(20);
    while app.with_key(&key).len() < 2 {
        assert!(Instant::now() < deadline, "the redriven event was not sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, stdout, stderr) = idem(&config, &["destination", "pause", "app"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.starts_with("destination app paused"), "{stdout}");
    let (code, stdout, _) = idem(&config, &["destination", "pause", "app"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.starts_with("destination app was already paused (since 20"),
        "{stdout}"
    );
    let (code, stdout, stderr) = idem(&config, &["destination", "list", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let destinations: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(destinations[0]["name"], "app", "{stdout}");
    assert_eq!(destinations[0]["paused"], true, "{stdout}");

    serve.sigterm();
    let status = serve.wait_exit(Duration::from_secs(20)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}
