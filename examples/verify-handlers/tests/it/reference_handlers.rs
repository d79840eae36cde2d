//! `idem verify` against the four reference handlers, on the 159 Stripe events of testdata/:
//! (a) passes every mode; (b) is flagged by duplicate, (c) by concurrent, (d) by shuffle and
//! replay-later, each shrunk to at most 3 deliveries within a 60 s budget, and each minimal
//! sequence replays to the same divergence.

use std::path::Path;
use std::time::Duration;

use idem_verify::{Commands, Mode, Options, Report, Signer, Target, Verdict, events};
use verify_handlers as handlers;

const SECRET: &str = "whsec_verify_test_secret";

struct Setup {
    _dir: tempfile::TempDir,
    out: tempfile::TempDir,
    options: Options,
}

async fn setup(flavor: &str, modes: &[Mode]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = handlers::spawn(dir.path(), Some(SECRET), listener)
        .await
        .unwrap();
    let events_file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/stripe-events/events.jsonl");
    let events = events::load(&events_file).unwrap();
    assert_eq!(events.len(), 159);
    let out = tempfile::tempdir().unwrap();
    let options = Options {
        events,
        target: Target::new(
            &format!("http://{addr}/{flavor}/webhook"),
            format!("stripe:{SECRET}").parse::<Signer>().unwrap(),
        )
        .unwrap(),
        commands: Commands {
            reset: format!("curl -sf -X POST http://{addr}/{flavor}/reset"),
            state: format!("curl -sf http://{addr}/{flavor}/state"),
            ignore: Vec::new(),
            restart: None,
            successor: None,
        },
        modes: modes.to_vec(),
        seed: 42,
        budget: Duration::from_secs(60),
        out_dir: Some(out.path().to_owned()),
        keep_entity_order: false,
    };
    Setup {
        _dir: dir,
        out,
        options,
    }
}

fn verdicts(report: &Report) -> Vec<(Mode, Verdict)> {
    report.modes.iter().map(|m| (m.mode, m.verdict)).collect()
}

/// The mode's minimal sequence: at most 3 deliveries, and its file replays to the same
/// divergence. Returns its (step, event id) pairs and its state diff.
async fn minimal_replays(
    setup: &Setup,
    report: &Report,
    mode: Mode,
) -> (Vec<(usize, String)>, Vec<String>) {
    let m = report.modes.iter().find(|m| m.mode == mode).unwrap();
    let minimal = m.minimal.as_ref().expect("a diverging mode is shrunk");
    assert!(
        minimal.one_minimal,
        "{mode}: shrinking finished within the budget"
    );
    assert!(
        minimal.deliveries.len() <= 3,
        "{mode}: {} deliveries: {}",
        minimal.deliveries.len(),
        minimal.explanation
    );
    let file = minimal.file.as_ref().unwrap();
    assert_eq!(
        file,
        &setup.out.path().join(format!("idem-verify-{mode}.jsonl"))
    );
    let lines = events::load(file).unwrap();
    assert_eq!(lines.len(), minimal.deliveries.len());
    let replayed = idem_verify::replay(
        &lines,
        &setup.options.target,
        &setup.options.commands,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(
        replayed.diverged,
        "{mode}: the minimal sequence replays to a divergence"
    );
    assert_eq!(
        replayed.state_diff, minimal.state_diff,
        "{mode}: the same divergence"
    );
    assert_eq!(replayed.duplicate_non_2xx, minimal.duplicate_non_2xx);
    (
        minimal
            .deliveries
            .iter()
            .map(|d| (d.step, d.event_id.clone()))
            .collect(),
        minimal.state_diff.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correct_handler_passes_every_mode() {
    // Crash mode needs a restartable target (tests/crash_and_entity_order.rs), rebuild one with
    // a successor version (tests/rebuild.rs).
    let modes: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|&m| m != Mode::Crash && m != Mode::Rebuild)
        .collect();
    let setup = setup("a", &modes).await;
    let report = idem_verify::run(&setup.options, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        modes
            .iter()
            .map(|&m| (m, Verdict::Matched))
            .collect::<Vec<_>>(),
        "{report:#?}"
    );
    assert!(report.passed);
    assert!(report.baseline_non_2xx.is_empty());
    assert!(report.seconds < 60.0);
    let deliveries: Vec<usize> = report.modes.iter().map(|m| m.deliveries).collect();
    assert!(deliveries.iter().all(|&n| n >= 159), "{deliveries:?}");
    // The duplicate modes really sent copies.
    assert!(
        deliveries[0] >= 2 * 159 && deliveries[1] >= 2 * 159,
        "{deliveries:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incrementing_handler_is_flagged_by_duplicate() {
    let setup = setup("b", &[Mode::Duplicate, Mode::Shuffle]).await;
    let report = idem_verify::run(&setup.options, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [
            (Mode::Duplicate, Verdict::Diverged),
            (Mode::Shuffle, Verdict::Matched)
        ]
    );
    assert!(!report.passed);
    let (deliveries, diff) = minimal_replays(&setup, &report, Mode::Duplicate).await;
    // One event twice, one after the other: its object's balance is doubled.
    assert_eq!(deliveries.len(), 2, "{deliveries:?}");
    assert_eq!(deliveries[0].1, deliveries[1].1);
    assert_eq!((deliveries[0].0, deliveries[1].0), (0, 1));
    assert_eq!(diff.len(), 1, "{diff:?}");
    let (path, change) = diff[0].split_once(": ").unwrap();
    assert!(path.starts_with("balances."), "{diff:?}");
    let (before, after) = change.split_once(" → ").unwrap();
    let before: i64 = before.parse().unwrap();
    assert_eq!(after.parse::<i64>().unwrap(), 2 * before, "{diff:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_then_insert_handler_is_flagged_by_concurrent() {
    let setup = setup("c", &[Mode::Duplicate, Mode::Concurrent]).await;
    let report = idem_verify::run(&setup.options, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [
            (Mode::Duplicate, Verdict::Matched),
            (Mode::Concurrent, Verdict::Diverged)
        ]
    );
    let (deliveries, diff) = minimal_replays(&setup, &report, Mode::Concurrent).await;
    // Two copies of one event at the same moment: two ledger rows.
    assert_eq!(deliveries.len(), 2, "{deliveries:?}");
    assert_eq!(deliveries[0], deliveries[1], "same event, same step");
    assert_eq!(diff, [format!("ledger_rows.{}: 1 → 2", deliveries[0].1)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_write_wins_handler_is_flagged_by_reordering() {
    let setup = setup(
        "d",
        &[
            Mode::Duplicate,
            Mode::Concurrent,
            Mode::Shuffle,
            Mode::ReplayLater,
        ],
    )
    .await;
    let report = idem_verify::run(&setup.options, &|_| {}).await.unwrap();
    assert_eq!(
        verdicts(&report),
        [
            (Mode::Duplicate, Verdict::Matched),
            (Mode::Concurrent, Verdict::Matched),
            (Mode::Shuffle, Verdict::Diverged),
            (Mode::ReplayLater, Verdict::Diverged),
        ]
    );
    let events = &setup.options.events;
    for mode in [Mode::Shuffle, Mode::ReplayLater] {
        let (deliveries, diff) = minimal_replays(&setup, &report, mode).await;
        // A newer event of an object, then an older one: the older status is kept.
        assert!(
            (2..=3).contains(&deliveries.len()),
            "{mode}: {deliveries:?}"
        );
        let first = events.iter().find(|e| e.id == deliveries[0].1).unwrap();
        let last = events
            .iter()
            .find(|e| e.id == deliveries[deliveries.len() - 1].1)
            .unwrap();
        assert_eq!(first.entity, last.entity, "{mode}: one object");
        assert!(last.version < first.version, "{mode}: older after newer");
        let entity = first.entity.clone().unwrap();
        assert!(
            diff.iter().any(|d| d.starts_with(&format!(
                "objects.{entity}.event: \"{}\" → \"{}\"",
                first.id, last.id
            ))),
            "{mode}: {diff:?}"
        );
    }
}
