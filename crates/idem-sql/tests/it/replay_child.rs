//! The replaying process of the replay kill test (`replay_crash.rs`): a child process, this
//! test binary run again ([`idem_testkit::child`]), that replays the application's JSONL log
//! through `billing_v2` succeeding `billing_v1` with [`idem_sql::Replay`], while an effect
//! worker sends the receipts to the recording provider; the test kills it with SIGKILL and
//! starts it again until it prints `done`.
//!
//! ```text
//! replay-child --database-url URL --log FILE --v1 NAME --v2 NAME --effect NAME
//!              --provider URL --clock-offset-ms N
//! ```
//!
//! It prints `event <position> <outcome>` after each event is settled (committed, or found a
//! duplicate), then, after the log, stops the worker (calls in flight finish), drains what is
//! left and prints `done`. `--clock-offset-ms` moves its store's clock ahead of the system's:
//! each restart stands as far after the last as a restarted process does once the leases of
//! the calls its predecessor was making (call timeout + margin) have lapsed, so its worker
//! takes them over at once instead of waiting for them.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use idem_core::{Clock, Name, RetentionPolicy, SystemClock, Timestamp, horizon};
use idem_sql::{
    EffectLedger, Enqueued, HandlerError, JsonlLog, LoggedEvent, MySqlStore, PgStore, Replay,
    Runner, SqliteStore, Store,
};
use idem_testkit::{AppDb, Value};

use crate::provider::http_worker;

/// The name [`crate::replay_crash`] starts this child under.
pub(crate) const NAME: &str = "replay-child";
/// The test that is this child's `main`.
pub(crate) const TEST: &str = "replay_child::replay_child";
/// How long one provider call may take: the lease of a call is this plus 30 s.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(2);

/// The application's projection of both versions.
pub(crate) const PROJECTION: &str = "CREATE TABLE IF NOT EXISTS replayed_payments (\
     consumer VARCHAR(191) NOT NULL, event_id VARCHAR(191) NOT NULL, \
     account VARCHAR(191) NOT NULL, amount BIGINT NOT NULL, PRIMARY KEY (consumer, event_id))";
const INSERT: &str = "INSERT INTO replayed_payments (consumer, event_id, account, amount) \
     VALUES ($1, $2, $3, $4)";

/// Command-line arguments.
#[derive(Debug, Parser)]
struct Args {
    #[arg(long)]
    database_url: String,
    #[arg(long)]
    log: String,
    #[arg(long)]
    v1: String,
    #[arg(long)]
    v2: String,
    #[arg(long)]
    effect: String,
    #[arg(long)]
    provider: String,
    #[arg(long)]
    clock_offset_ms: u64,
}

/// The child's `main`: does nothing unless the kill test started this process; then exits 0
/// after `done`, 1 on an error.
#[test]
#[ignore = "a child process of the replay kill test, which starts it"]
fn replay_child() {
    let Some(args) = idem_testkit::child::args(NAME) else {
        return;
    };
    let args = Args::parse_from(args);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    match runtime.block_on(run(args)) {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("replay-child: {e:#}");
            std::process::exit(1);
        }
    }
}

/// The system clock, `offset` ahead.
#[derive(Debug)]
struct AheadClock(Duration);

impl Clock for AheadClock {
    fn now(&self) -> Timestamp {
        SystemClock.now().saturating_add(self.0)
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let url = args.database_url.clone();
    let clock: Arc<dyn Clock> = Arc::new(AheadClock(Duration::from_millis(args.clock_offset_ms)));
    if url.starts_with("sqlite:") {
        let store = SqliteStore::connect_with(&url, 4)
            .await
            .context("connect")?;
        replay(store.with_clock(clock), &args).await
    } else if url.starts_with("postgres:") {
        let store = PgStore::connect_with(&url, 4).await.context("connect")?;
        replay(store.with_clock(clock), &args).await
    } else if url.starts_with("mysql:") {
        let store = MySqlStore::connect_with(&url, 4).await.context("connect")?;
        replay(store.with_clock(clock), &args).await
    } else {
        bail!("--database-url must start with sqlite:, postgres: or mysql:, got {url}")
    }
}

async fn replay<DB: AppDb>(store: Store<DB>, args: &Args) -> anyhow::Result<()> {
    let (v1, v2) = (
        Name::new("consumer", &args.v1)?,
        Name::new("consumer", &args.v2)?,
    );
    let effect = Name::new("effect", &args.effect)?;
    let worker = http_worker(&store, &effect, &args.provider)
        .call_timeout(CALL_TIMEOUT)
        .poll_interval(Duration::from_millis(20));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn({
        let worker = worker.clone();
        async move {
            worker
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        }
    });

    let runner = Runner::new(store.clone(), &v2).succeeds(&v1);
    let ledger = store.effects();
    let policy = RetentionPolicy::new(Duration::from_secs(30 * 86_400), horizon::STRIPE)?;
    let report = Replay::new(&runner, &policy)
        .run_with_progress(
            &JsonlLog::open(&args.log),
            async |tx: &mut DB::Connection, logged: &LoggedEvent<serde_json::Value>| {
                handle(&runner, &ledger, &effect, tx, logged).await
            },
            |p| idem_testkit::child::report(format_args!("event {} {}", p.position, p.outcome)),
        )
        .await
        .context("replay")?;
    let _ = stop.send(());
    running.await.context("the worker task")?;
    worker.drain().await.context("drain the effects left")?;
    idem_testkit::child::report(format_args!(
        "replayed {} applied {} duplicates {} created {} existing",
        report.applied, report.duplicates, report.effects_created, report.effects_existing
    ));
    idem_testkit::child::report(format_args!("done"));
    Ok(())
}

/// The handler code of both versions: the payment in the projection, its receipt as an effect
/// keyed by the runner (identical request bytes in both).
pub(crate) async fn handle<DB: AppDb>(
    runner: &Runner<DB>,
    ledger: &EffectLedger<DB>,
    effect: &Name,
    tx: &mut DB::Connection,
    logged: &LoggedEvent<serde_json::Value>,
) -> Result<Enqueued, HandlerError> {
    let payload = &logged.payload;
    let (Some(id), Some(account), Some(amount)) = (
        payload["id"].as_str(),
        payload["account"].as_str(),
        payload["amount"].as_i64(),
    ) else {
        return Err(HandlerError::permanent(format!(
            "a payment without id, account or amount: {payload}"
        )));
    };
    DB::execute(
        tx,
        INSERT,
        vec![
            Value::from(runner.consumer().as_str()),
            Value::from(id),
            Value::from(account),
            Value::Int(amount),
        ],
    )
    .await?;
    let request = format!(r#"{{"to":"{account}","amount":{amount}}}"#);
    Ok(runner
        .enqueue_effect(tx, ledger, &logged.event, effect, request.as_bytes())
        .await?)
}
