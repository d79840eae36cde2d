//! `idem verify --modes rebuild` against the two handlers of a consumer that ships a new
//! version: (e) succeeds its earlier version and matches; (f) derives its receipts' keys from
//! its versioned name, so the rebuild sends every receipt again under a new key: flagged, shrunk
//! to one event delivered before and after the move to the successor, and the minimal sequence
//! replays to the same divergence (and needs `--successor` to replay at all).

use std::path::Path;
use std::time::Duration;

use idem_verify::{Commands, Mode, Options, Signer, Target, Verdict, VerifyError, events};
use verify_handlers as handlers;

/// The first events of testdata/stripe-events: enough payments with an amount (each sends a
/// receipt) to make a rebuild meaningful, few enough for shrinking to be quick.
const EVENTS: usize = 40;

async fn options(flavor: &str, out: &Path, dir: &Path) -> Options {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = handlers::spawn(dir, None, listener).await.unwrap();
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/stripe-events/events.jsonl");
    let mut events = events::load(&file).unwrap();
    events.truncate(EVENTS);
    Options {
        events,
        target: Target::new(
            &format!("http://{addr}/{flavor}/webhook"),
            "none".parse::<Signer>().unwrap(),
        )
        .unwrap(),
        commands: Commands {
            reset: format!("curl -sf -X POST http://{addr}/{flavor}/reset"),
            state: format!("curl -sf http://{addr}/{flavor}/state"),
            ignore: Vec::new(),
            restart: None,
            successor: Some(format!("curl -sf -X POST http://{addr}/{flavor}/successor")),
        },
        modes: vec![Mode::Rebuild],
        seed: 42,
        budget: Duration::from_secs(60),
        out_dir: Some(out.to_owned()),
        keep_entity_order: false,
    }
}

/// Receipts the baseline sent: one per event of the first `EVENTS` with an amount.
fn receipts(options: &Options) -> usize {
    options
        .events
        .iter()
        .filter(|e| {
            serde_json::from_slice::<serde_json::Value>(&e.body)
                .ok()
                .and_then(|v| v.pointer("/data/object/amount").cloned())
                .is_some_and(|a| a.is_i64())
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_in_the_lineage_rebuilds_without_sending_a_receipt_again() {
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = options("e", out.path(), dir.path()).await;
    assert!(receipts(&options) > 0, "the events hold payments");
    let report = idem_verify::run(&options, &|_| {}).await.unwrap();
    let mode = &report.modes[0];
    assert_eq!(mode.verdict, Verdict::Matched, "{report:#?}");
    // The history, then the same history again to the successor.
    assert_eq!(mode.deliveries, 2 * EVENTS);
    assert!(mode.duplicate_non_2xx.is_empty());
    assert!(report.passed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_from_the_version_name_are_flagged_with_a_minimal_sequence() {
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = options("f", out.path(), dir.path()).await;
    let sent = receipts(&options);
    let report = idem_verify::run(&options, &|_| {}).await.unwrap();
    let mode = &report.modes[0];
    assert_eq!(mode.verdict, Verdict::Diverged, "{report:#?}");
    assert!(!report.passed);
    // Every receipt went out again under a payments_v2 key: the provider's key list doubled.
    let added = mode
        .state_diff
        .iter()
        .filter(|d| d.starts_with("provider_keys[") && d.contains("(absent) → "))
        .count();
    assert_eq!(added, sent, "{:#?}", mode.state_diff);

    let minimal = mode.minimal.as_ref().expect("a diverging mode is shrunk");
    assert!(minimal.one_minimal, "{}", minimal.explanation);
    let shape: Vec<(usize, bool)> = minimal
        .deliveries
        .iter()
        .map(|d| (d.step, d.successor))
        .collect();
    assert_eq!(shape, [(0, false), (1, true)], "{}", minimal.explanation);
    assert_eq!(
        minimal.deliveries[0].event_id,
        minimal.deliveries[1].event_id
    );
    assert_eq!(
        minimal.state_diff.len(),
        1,
        "one receipt sent again: {:#?}",
        minimal.state_diff
    );
    assert!(
        minimal.state_diff[0].starts_with("provider_keys[1]: (absent) → \"payments_v2/"),
        "{:?}",
        minimal.state_diff
    );
    assert!(
        minimal.explanation.contains("successor"),
        "{}",
        minimal.explanation
    );

    // The file replays to the same divergence; without --successor it cannot be replayed.
    let file = minimal.file.as_ref().unwrap();
    assert_eq!(file, &out.path().join("idem-verify-rebuild.jsonl"));
    let lines = events::load(file).unwrap();
    let replayed = idem_verify::replay(
        &lines,
        &options.target,
        &options.commands,
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(replayed.diverged);
    assert_eq!(replayed.state_diff, minimal.state_diff);
    let without = Commands {
        successor: None,
        ..options.commands.clone()
    };
    let refused = idem_verify::replay(&lines, &options.target, &without, Duration::from_secs(30))
        .await
        .unwrap_err();
    assert!(matches!(refused, VerifyError::NoSuccessor), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_without_a_successor_command_is_skipped() {
    let (dir, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut options = options("e", out.path(), dir.path()).await;
    options.commands.successor = None;
    let report = idem_verify::run(&options, &|_| {}).await.unwrap();
    assert_eq!(report.modes[0].verdict, Verdict::Skipped);
    assert!(
        report.modes[0]
            .note
            .as_deref()
            .unwrap()
            .contains("--successor"),
        "{report:#?}"
    );
    assert!(!report.passed);
}
