//! The gateway under faults, each made for real: a full disk (a size-capped tmpfs), a database
//! that accepts TCP and never answers, a PostgreSQL server stopped and started again, slow
//! clients that send a byte every 200 ms. No accepted event is lost; every webhook is answered
//! within its deadline; nothing needs a restart to recover.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use idem_sql::{PoolOptions, SqliteStore};

use crate::support::{Downstream, Running, config_text, env, stripe_event, system_clock, unix_now};

/// A tmpfs of `mib` MiB mounted on a fresh directory, unmounted on drop: a disk that really
/// fills up. Needs root (as CI and this project's machines run tests); refuses loudly otherwise.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(mib: u32) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "cannot mount a {mib} MiB tmpfs at {} (the full-disk test needs root)",
            dir.path().display()
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a filler file until the disk is full; returns its path.
    fn fill(&self) -> PathBuf {
        use std::io::Write as _;
        let path = self.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            match file.write_all(&chunk) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        let _ = file.sync_all();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazily: a pool connection still open in the dying runtime must not keep it mounted.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

async fn readyz(running: &Running<idem_sql::sqlx::Sqlite>) -> u16 {
    running
        .client
        .get(format!("{}/readyz", running.url))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// A full disk: webhooks get 503 (nothing kept, send again) and `/readyz` says not ready;
/// once space is free again, ingest, dispatch and `/readyz` recover without a restart, and every
/// event answered 200 is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_recovers_without_a_restart() {
    let disk = SmallDisk::mount(30);
    let url = format!("sqlite://{}", disk.path().join("idem.db").display());
    let store = SqliteStore::connect_with_options(&url, PoolOptions::default())
        .await
        .unwrap()
        .with_clock(system_clock());
    let app = Downstream::ok().await;
    let config =
        idem_gateway::Config::from_toml(&config_text(app.addr, "[\"10ms\"]"), &env).unwrap();
    let running = Running::start(config, store).await;
    let now = unix_now();
    let mut accepted = Vec::new();
    for n in 0..20 {
        let id = format!("evt_before_{n}");
        let answer = running
            .post_stripe(&stripe_event(
                &id,
                "invoice.paid",
                "invoice",
                &format!("in_{n}"),
                now,
            ))
            .await;
        assert_eq!(answer.status, 200, "{:?}", answer.json);
        accepted.push(id);
    }
    assert_eq!(readyz(&running).await, 200);

    let filler = disk.fill();
    // Large bodies, so that pages must be allocated on a full disk.
    let big = "x".repeat(200_000);
    let mut refused = 0;
    for n in 0..10 {
        let id = format!("evt_full_{n}");
        let body = format!(
            r#"{{"id":"{id}","object":"event","type":"invoice.paid","created":{now},"data":{{"object":{{"id":"in_full_{n}","object":"invoice","pad":"{big}"}}}}}}"#
        );
        let answer = running.post_stripe(body.as_bytes()).await;
        match answer.status {
            200 => accepted.push(id),
            503 => refused += 1,
            other => panic!("answer {other} on a full disk: {:?}", answer.json),
        }
    }
    assert!(
        refused > 0,
        "the disk was full, yet every webhook was stored"
    );
    assert_eq!(readyz(&running).await, 503, "a full disk is not ready");

    std::fs::remove_file(filler).unwrap();
    // Recovered without a restart: the next webhooks are stored and /readyz is ready again.
    for n in 0..20 {
        let id = format!("evt_after_{n}");
        let answer = running
            .post_stripe(&stripe_event(
                &id,
                "invoice.paid",
                "invoice",
                &format!("in_a{n}"),
                now,
            ))
            .await;
        assert_eq!(
            answer.status, 200,
            "after freeing the disk: {:?}",
            answer.json
        );
        accepted.push(id);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while readyz(&running).await != 200 {
        assert!(
            Instant::now() < deadline,
            "/readyz stayed 503 after the disk was freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    running.settle().await;
    let received = app.received();
    for id in &accepted {
        let copies = received
            .iter()
            .filter(|r| r.header("idem-event-id") == Some(id.as_str()))
            .count();
        assert_eq!(copies, 1, "{id} answered 200 and delivered once");
    }
    running.server.shutdown().await.unwrap();
}
