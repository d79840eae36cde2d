//! `idem verify` refuses a run that would prove nothing: a baseline the target mostly rejects
//! (a wrong `--sign` secret), a `--state` that prints nothing or changes between two reads,
//! and a zero budget.

use std::path::Path;
use std::time::Duration;

use idem_verify::{Commands, Mode, Options, Signer, Target, VerifyError, events};
use verify_handlers as handlers;

const SECRET: &str = "whsec_verify_test_secret";

async fn options(dir: &Path, sign: &str, state: Option<&str>) -> Options {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = handlers::spawn(dir, Some(SECRET), listener).await.unwrap();
    let events_file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/stripe-events/events.jsonl");
    Options {
        events: events::load(&events_file).unwrap(),
        target: Target::new(
            &format!("http://{addr}/a/webhook"),
            sign.parse::<Signer>().unwrap(),
        )
        .unwrap(),
        commands: Commands {
            reset: format!("curl -sf -X POST http://{addr}/a/reset"),
            state: state.map_or_else(|| format!("curl -sf http://{addr}/a/state"), str::to_owned),
            ignore: Vec::new(),
            restart: None,
            successor: None,
        },
        modes: vec![Mode::Duplicate],
        seed: 42,
        budget: Duration::from_secs(60),
        out_dir: None,
        keep_entity_order: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_secret_is_an_error_not_a_pass() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path(), "stripe:whsec_wrong", None).await;
    let error = idem_verify::run(&options, &|_| {}).await.unwrap_err();
    assert!(
        matches!(
            error,
            VerifyError::BaselineRejected {
                rejected: 159,
                total: 159,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("the baseline: 159 of 159 deliveries were rejected (")
            && message.ends_with("): check --sign and --target"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_state_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path(), &format!("stripe:{SECRET}"), Some("true")).await;
    let error = idem_verify::run(&options, &|_| {}).await.unwrap_err();
    assert!(matches!(error, VerifyError::EmptyState { .. }), "{error:?}");
    assert!(error.to_string().starts_with("--state printed nothing"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unstable_state_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path(), &format!("stripe:{SECRET}"), Some("date +%s%N")).await;
    let error = idem_verify::run(&options, &|_| {}).await.unwrap_err();
    assert!(
        matches!(error, VerifyError::UnstableState { .. }),
        "{error:?}"
    );
    assert!(error.to_string().starts_with(
        "--state output differs between two reads with no deliveries in between; make it deterministic or use --ignore"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_budget_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path(), &format!("stripe:{SECRET}"), None).await;
    options.budget = Duration::ZERO;
    let error = idem_verify::run(&options, &|_| {}).await.unwrap_err();
    assert!(matches!(error, VerifyError::ZeroBudget), "{error:?}");
    assert_eq!(error.to_string(), "--budget must be greater than 0");
}
