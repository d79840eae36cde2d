//! Crash mode against a restartable `verify-handlers` process, and `--keep-entity-order`:
//! (a) matches in crash mode; (b) diverges (a delivery handled just before the crash is not
//! acknowledged, so it is redelivered and added twice); (c) matches (its bug needs concurrent
//! copies, and a redelivery after a restart is sequential); without `--restart`, crash mode is
//! skipped with a note and the run does not pass; (d) passes shuffle when each entity's events
//! keep their order.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use idem_verify::{Commands, Mode, Options, Report, Signer, Target, Verdict, events};
use verify_handlers as handlers;

const SECRET: &str = "whsec_verify_test_secret";

fn load_events() -> Vec<events::EventRecord> {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/stripe-events/events.jsonl");
    events::load(&file).unwrap()
}

fn options(addr: &str, flavor: &str, modes: &[Mode], restart: Option<String>) -> Options {
    Options {
        events: load_events(),
        target: Target::new(
            &format!("http://{addr}/{flavor}/webhook"),
            format!("stripe:{SECRET}").parse::<Signer>().unwrap(),
        )
        .unwrap(),
        commands: Commands {
            reset: format!("curl -sf -X POST http://{addr}/{flavor}/reset"),
            state: format!("curl -sf http://{addr}/{flavor}/state"),
            ignore: Vec::new(),
            restart,
            successor: None,
        },
        modes: modes.to_vec(),
        seed: 42,
        budget: Duration::from_secs(60),
        out_dir: None,
        keep_entity_order: false,
    }
}

fn verdicts(report: &Report) -> Vec<(Mode, Verdict)> {
    report.modes.iter().map(|m| (m.mode, m.verdict)).collect()
}

/// A `verify-handlers` process on a fixed port with its databases in a temporary directory,
/// started (and restarted) by a script that kills the one in the pid file first.
struct Server {
    dir: tempfile::TempDir,
    addr: String,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let pid = dir.path().join("pid");
        let script = format!(
            "#!/bin/sh\n\
             # Kills the handlers in the pid file (if any), waits until the port is closed (the\n\
             # killed process may stay a zombie), starts new ones.\n\
             if [ -f '{pid}' ]; then\n\
               kill -9 \"$(cat '{pid}')\" 2>/dev/null\n\
               n=0; while curl -s -o /dev/null http://{addr}/ && [ $n -lt 250 ]; do sleep 0.02; n=$((n+1)); done\n\
             fi\n\
             '{bin}' --listen {addr} --dir '{db}' --secret {SECRET} </dev/null >/dev/null 2>&1 &\n\
             echo $! > '{pid}'\n",
            pid = pid.display(),
            bin = env!("CARGO_BIN_EXE_verify-handlers"),
            db = dir.path().join("db").display(),
        );
        std::fs::write(dir.path().join("restart.sh"), script).unwrap();
        let server = Server { dir, addr };
        let status = Command::new("sh").arg(server.script()).status().unwrap();
        assert!(status.success());
        server
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("restart.sh")
    }

    fn restart_command(&self) -> String {
        format!("sh '{}'", self.script().display())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.dir.path().join("pid");
        if let Ok(pid) = std::fs::read_to_string(pid) {
            let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mode_restarts_and_redelivers() {
    let server = Server::start();
    let a = options(
        &server.addr,
        "a",
        &[Mode::Crash],
        Some(server.restart_command()),
    );
    a.target
        .wait_answering(Duration::from_secs(30))
        .await
        .unwrap();
    let points = idem_verify::plan::schedule(Mode::Crash, &a.events, a.seed)
        .iter()
        .filter(|d| d.crash)
        .count();
    assert!(points >= 1);

    let report = idem_verify::run(&a, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [(Mode::Crash, Verdict::Matched)],
        "{report:#?}"
    );
    assert!(report.passed);
    assert_eq!(report.modes[0].deliveries, 159 + points);

    // (b): the delivery handled before the crash is redelivered and added twice.
    let b = options(
        &server.addr,
        "b",
        &[Mode::Crash],
        Some(server.restart_command()),
    );
    let report = idem_verify::run(&b, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [(Mode::Crash, Verdict::Diverged)],
        "{report:#?}"
    );
    let minimal = report.modes[0].minimal.as_ref().unwrap();
    assert!(minimal.one_minimal, "{}", minimal.explanation);
    let d = &minimal.deliveries;
    assert_eq!(d.len(), 2, "{}", minimal.explanation);
    assert_eq!(d[0].event_id, d[1].event_id);
    assert!(d[0].crash && !d[1].crash, "{}", minimal.explanation);
    assert_eq!(minimal.state_diff.len(), 1, "{:?}", minimal.state_diff);
    let (path, change) = minimal.state_diff[0].split_once(": ").unwrap();
    assert!(path.starts_with("balances."), "{path}");
    let (before, after) = change.split_once(" → ").unwrap();
    assert_eq!(
        after.parse::<i64>().unwrap(),
        2 * before.parse::<i64>().unwrap()
    );

    // (c): sequential redelivery after a restart sees its "seen" row.
    let c = options(
        &server.addr,
        "c",
        &[Mode::Crash],
        Some(server.restart_command()),
    );
    let report = idem_verify::run(&c, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [(Mode::Crash, Verdict::Matched)],
        "{report:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_entity_order_lets_last_write_wins_pass_shuffle_and_crash_needs_restart() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = handlers::spawn(dir.path(), Some(SECRET), listener)
        .await
        .unwrap()
        .to_string();
    let mut d = options(&addr, "d", &[Mode::Shuffle, Mode::Crash], None);
    d.keep_entity_order = true;
    let report = idem_verify::run(&d, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [
            (Mode::Shuffle, Verdict::Matched),
            (Mode::Crash, Verdict::Skipped)
        ],
        "{report:#?}"
    );
    assert!(
        report.modes[1]
            .note
            .as_deref()
            .unwrap()
            .contains("--restart")
    );
    assert_eq!(report.modes[1].deliveries, 0);
    assert!(!report.passed, "a skipped mode is not a pass");
    // The same shuffle without the option reorders within an entity, and (d) diverges.
    d.keep_entity_order = false;
    d.modes = vec![Mode::Shuffle];
    let report = idem_verify::run(&d, &|_| {}).await.unwrap();
    assert_eq!(verdicts(&report), [(Mode::Shuffle, Verdict::Diverged)]);
}
