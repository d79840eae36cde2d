//! What each command does, over the library.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use idem_gateway::{Config, DatabaseKind, Gateway, GatewayDb, Server};
use idem_sql::Store;
use idem_sql::redact_url;
use idem_sql::sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use idem_sql::sqlx::{Postgres, Sqlite};
use std::str::FromStr;

use std::io::IsTerminal;

use idem_gateway::operations::ReplayRequest;
use idem_gateway::time::{format_time, parse_time};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::{Cli, Command, DlqCommand, EventsCommand, ReplayArgs, VerifyArgs};
use crate::ledgers;

/// Runs one command; the exit code says whether it succeeded.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // idem's own tables, usually in the application's database: with --database the
    // configuration is not read at all (its secrets need not be set).
    let ledger_url = |database: Option<String>| match database {
        Some(url) => Ok(url),
        None => match &cli.config {
            Some(path) => Config::load(path).map(|c| c.database_url),
            None => Ok(Config::defaults().database_url),
        },
    };
    let cli = match cli.command {
        Command::Effects(args) => {
            return ledgers::effects(&ledger_url(args.database)?, args.command).await;
        }
        Command::Outbox(args) => {
            return ledgers::outbox(&ledger_url(args.database)?, args.command).await;
        }
        Command::DeadLetters(args) => {
            return ledgers::dead_letters(&ledger_url(args.database)?, args.command).await;
        }
        command => Cli {
            config: cli.config,
            command,
        },
    };
    if let Command::Demo = cli.command {
        if let Some(path) = &cli.config {
            bail!(
                "idem demo takes no --config (given {}): it runs its own gateway, sources and \
                 application on SQLite in a temporary directory; use `idem serve --config` for yours",
                path.display()
            );
        }
        return demo().await;
    }
    if let Command::Verify(args) = cli.command {
        let result = match &cli.config {
            Some(path) => Err(anyhow::anyhow!(
                "idem verify takes no --config (given {}): it talks to the handler under test only",
                path.display()
            )),
            None => verify(*args).await,
        };
        // 1 is a finding (a mode did not match); an operational error exits 3.
        return Ok(result.unwrap_or_else(|e| {
            if crate::is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {}", crate::chain(&e));
            ExitCode::from(VERIFY_ERROR_EXIT)
        }));
    }
    let config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::defaults(),
    };
    // check-config checks the file alone: it opens no database and creates no file.
    if let Command::CheckConfig = cli.command {
        return check_config(&config);
    }
    let serve = matches!(cli.command, Command::Serve);
    let url = config.database_url.clone();
    match DatabaseKind::of(&url) {
        Some(DatabaseKind::Sqlite) if serve => {
            create_sqlite_dir(&url)?;
            let store = Store::<Sqlite>::connect(&url).await?;
            with_store(cli.command, config, store).await
        }
        Some(DatabaseKind::Sqlite) => {
            // Admin commands read what `idem serve` made: they never create a database.
            let options = SqliteConnectOptions::from_str(&url)
                .with_context(|| {
                    format!("database_url {:?} is not a SQLite URL", redact_url(&url))
                })?
                .create_if_missing(false);
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await
                .map_err(|e| no_tables(&url, e))?;
            let store = Store::<Sqlite>::from_pool(pool);
            idem_sql::sqlx::query("SELECT 1 FROM idem_gateway_events LIMIT 1")
                .fetch_optional(store.pool())
                .await
                .map_err(|e| no_tables(&url, e))?;
            with_store(cli.command, config, store).await
        }
        Some(DatabaseKind::Postgres) => {
            let store = Store::<Postgres>::connect(&url).await?;
            if !serve {
                idem_sql::sqlx::query("SELECT 1 FROM idem_gateway_events LIMIT 1")
                    .fetch_optional(store.pool())
                    .await
                    .map_err(|e| no_tables(&url, e))?;
            }
            with_store(cli.command, config, store).await
        }
        _ => bail!(
            "database_url {:?} is neither sqlite:// nor postgres://",
            redact_url(&config.database_url)
        ),
    }
}

/// A missing table (or, for SQLite, a missing file) says the database was never served: name
/// it and what to check, instead of the driver's "no such table". Other errors pass through.
fn no_tables(url: &str, error: idem_sql::sqlx::Error) -> anyhow::Error {
    let url = redact_url(url);
    if crate::ledgers::is_missing_table(&error) {
        anyhow::anyhow!(
            "no idem gateway tables at {url}: check database_url or --config (idem serve creates them)"
        )
    } else {
        anyhow::Error::new(error).context(format!("cannot open the database at {url}"))
    }
}

async fn with_store<DB: GatewayDb>(
    command: Command,
    config: Config,
    store: Store<DB>,
) -> anyhow::Result<ExitCode> {
    let gateway = Gateway::new(config, store);
    match command {
        Command::Serve => serve(gateway).await,
        Command::CheckConfig => check_config(gateway.config()),
        Command::Demo => demo().await,
        Command::Verify(args) => verify(*args).await,
        Command::Effects(args) => {
            let url = args
                .database
                .unwrap_or(gateway.config().database_url.clone());
            ledgers::effects(&url, args.command).await
        }
        Command::Outbox(args) => {
            let url = args
                .database
                .unwrap_or(gateway.config().database_url.clone());
            ledgers::outbox(&url, args.command).await
        }
        Command::DeadLetters(args) => {
            let url = args
                .database
                .unwrap_or(gateway.config().database_url.clone());
            ledgers::dead_letters(&url, args.command).await
        }
        Command::Events(EventsCommand::List { source, limit }) => {
            let events = gateway.list_events(source.as_deref(), limit).await?;
            outln!(
                "{:<24} {:<10} {:<32} {:<36} entity",
                "received",
                "source",
                "event id",
                "type"
            )?;
            for e in events {
                outln!(
                    "{:<24} {:<10} {:<32} {:<36} {}",
                    format_time(e.received_at),
                    e.source,
                    e.event_id,
                    e.event_type.unwrap_or_default(),
                    e.entity.unwrap_or_default()
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Events(EventsCommand::Show { source, event_id }) => {
            let Some(detail) = gateway.show_event(&source, &event_id).await? else {
                bail!("no event {event_id:?} of source {source:?} is stored");
            };
            outln!("{}", serde_json::to_string_pretty(&detail)?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Dlq(DlqCommand::List { destination, limit }) => {
            let dead = gateway.dead_letters(destination.as_deref(), limit).await?;
            outln!(
                "{:>6} {:<12} {:<10} {:<32} {:>8}  since",
                "id",
                "destination",
                "source",
                "event id",
                "attempts"
            )?;
            for d in dead {
                outln!(
                    "{:>6} {:<12} {:<10} {:<32} {:>8}  {}",
                    d.id,
                    d.destination,
                    d.source,
                    d.event_id,
                    d.attempts,
                    format_time(d.updated_at)
                )?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Dlq(DlqCommand::Redrive { destination, id }) => {
            // An unknown destination is refused, naming the configured ones.
            let n = gateway.redrive(destination.as_deref(), id).await?;
            outln!("{n} dead letters redriven; a running `idem serve` sends them now")?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Replay(args) => replay(&gateway, args).await,
        Command::Gc => {
            let report = gateway.gc().await?;
            outln!(
                "deleted {} inbox keys and {} finished events; dropped {} raw bodies",
                report.inbox_keys,
                report.events,
                report.bodies
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn replay<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    args: ReplayArgs,
) -> anyhow::Result<ExitCode> {
    // An unknown source is refused by `Gateway::replay`, naming the configured ones; the range
    // is checked here too, to name the options as typed.
    let now = gateway.now().as_millis();
    let since = parse_time("--since", &args.since, now)?;
    let until = args
        .until
        .as_deref()
        .map(|t| parse_time("--until", t, now))
        .transpose()?;
    if since >= until.unwrap_or(now + 1) {
        bail!(
            "--since {} ({}) is not before --until {} ({}): the range is empty",
            args.since,
            format_time(since),
            args.until.as_deref().unwrap_or("(now)"),
            format_time(until.unwrap_or(now))
        );
    }
    let request = ReplayRequest {
        source: args.source,
        since,
        until,
        dry_run: args.dry_run,
        force: args.force,
    };
    // A bar only on a terminal: logs and pipes get the summary line alone.
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} deliveries")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report = gateway.replay(&request, &progress).await?;
    bar.finish_and_clear();
    outln!(
        "{} deliveries matched: {} {}, {} still in progress, {} older than their entity's newest{}, {} without a stored body",
        report.matched,
        report.requeued,
        if request.dry_run {
            "would be sent again"
        } else {
            "sent again"
        },
        report.in_progress,
        report.older,
        if request.force {
            ""
        } else {
            " (use --force to send them)"
        },
        report.no_body
    )?;
    Ok(ExitCode::SUCCESS)
}

async fn serve<DB: GatewayDb>(gateway: Gateway<DB>) -> anyhow::Result<ExitCode> {
    gateway.migrate().await?;
    let listen = gateway.config().listen;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let server = Server::start(gateway.clone(), listener).await?;
    let config = gateway.config();
    tracing::info!(
        listen = %server.local_addr(),
        sources = config.sources.len(),
        destinations = config.destinations.len(),
        routes = config.routes.len(),
        "idem gateway serving"
    );
    server.run_until(shutdown_signal()).await?;
    tracing::info!("drained; exiting");
    Ok(ExitCode::SUCCESS)
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

fn check_config(config: &Config) -> anyhow::Result<ExitCode> {
    outln!("configuration is valid")?;
    outln!("  listen        {}", config.listen)?;
    outln!("  database      {}", redact_url(&config.database_url))?;
    outln!(
        "  retention     {}",
        humantime::format_duration(config.retention)
    )?;
    for source in &config.sources {
        match source.broker() {
            // Checked here as written; `idem serve` connects and finds the stream or queue.
            Some(broker) => outln!(
                "  source        {} ({}, {} at {})",
                source.name,
                source.kind,
                broker.describe(),
                broker.display_url()
            )?,
            None => outln!(
                "  source        {} ({}, redelivery horizon {})",
                source.name,
                source.kind,
                humantime::format_duration(source.kind.redelivery_horizon())
            )?,
        }
    }
    for destination in &config.destinations {
        outln!(
            "  destination   {} -> {}",
            destination.name,
            destination.url
        )?;
    }
    for route in &config.routes {
        outln!(
            "  route         {}: {} -> {} (ordering {})",
            route.name,
            route.source,
            route.destination,
            route.ordering.as_str()
        )?;
    }
    for relay in &config.relays {
        // Checked here as written; `idem serve` opens the database and reaches the target.
        outln!(
            "  relay         {}: idem_outbox of {} -> {} at {} (batch {}, poll {})",
            relay.name,
            relay.display_database_url(),
            relay.target.kind(),
            relay.target.display_url(),
            relay.batch_size,
            humantime::format_duration(relay.poll_interval)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn demo() -> anyhow::Result<ExitCode> {
    outln!("idem demo: a gateway on SQLite in a temporary directory, an application behind it,")?;
    outln!("and the payloads of testdata/ sent 3x each (two copies at once), one Stripe object")?;
    outln!("out of order, one bad signature; the application fails the first attempt of some.\n")?;
    let report = idem_gateway::demo::run().await?;
    out!("{}", report.table())?;
    outln!(
        "\n{} unique events in {:.1} s",
        report.unique_events,
        report.elapsed.as_secs_f64()
    )?;
    if report.passed() {
        outln!("PASS: every unique non-stale event was delivered exactly once, in entity order")?;
        Ok(ExitCode::SUCCESS)
    } else {
        outln!("FAIL:")?;
        for problem in &report.problems {
            outln!("  - {problem}")?;
        }
        Ok(ExitCode::FAILURE)
    }
}

/// Creates the directory of a `sqlite://path` database, as a first run needs.
fn create_sqlite_dir(url: &str) -> anyhow::Result<()> {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" {
        return Ok(());
    }
    if let Some(dir) = Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok(())
}

/// The exit code of `idem verify` when the run could not be done (see `idem verify --help`).
const VERIFY_ERROR_EXIT: u8 = 3;

async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    use idem_verify::{Commands, Mode, Options, Signer, Target, Verdict};

    let budget = humantime::parse_duration(&args.budget).with_context(|| {
        format!(
            "--budget {:?} is not a duration such as 90s or 2m",
            args.budget
        )
    })?;
    if budget.is_zero() {
        bail!("--budget must be greater than 0");
    }
    let signer: Signer = args.sign.parse()?;
    let target = Target::new(&args.target, signer)?;
    let commands = Commands {
        reset: args.reset,
        state: args.state,
        ignore: args.ignore,
        restart: args.restart,
    };
    if let Some(file) = &args.replay {
        let lines = idem_verify::events::load(file)?;
        let report = idem_verify::replay(&lines, &target, &commands, budget).await?;
        outln!(
            "replayed {} deliveries of {} events from {} against the in-order run of the same events",
            report.deliveries,
            report.events,
            file.display()
        )?;
        for line in &report.state_diff {
            outln!("  {line}")?;
        }
        for n in &report.duplicate_non_2xx {
            outln!(
                "  duplicate {} at step {} answered {}",
                n.event_id,
                n.step,
                n.status
            )?;
        }
        if let Some(path) = &args.json {
            write_json(path, &report)?;
        }
        return Ok(if report.diverged {
            outln!("DIVERGED: the sequence reproduces")?;
            ExitCode::FAILURE
        } else {
            outln!("MATCHED: the sequence does not diverge")?;
            ExitCode::SUCCESS
        });
    }
    let Some(events_path) = &args.events else {
        bail!("give --events FILE (or --replay FILE)");
    };
    let events = idem_verify::events::load(events_path)?;
    let modes = match &args.modes {
        Some(list) => Mode::parse_list(list)?,
        None => Mode::ALL
            .into_iter()
            .filter(|&m| m != Mode::Crash || commands.restart.is_some())
            .collect(),
    };
    if modes.is_empty() {
        bail!("--modes {:?} names no mode", args.modes.unwrap_or_default());
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating --out {}", args.out.display()))?;
    outln!(
        "idem verify: {} events from {} -> {} (seed {}, budget {})",
        events.len(),
        events_path.display(),
        args.target,
        args.seed,
        humantime::format_duration(budget)
    )?;
    let options = Options {
        events,
        target,
        commands,
        modes,
        seed: args.seed,
        budget,
        out_dir: Some(args.out.clone()),
        keep_entity_order: args.keep_entity_order,
    };
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::hidden()
    };
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let report = idem_verify::run(&options, &|message: &str| {
        bar.set_message(message.to_owned())
    })
    .await?;
    bar.finish_and_clear();
    outln!(
        "{:<13} {:<14} {:>10} {:>11} {:>9} {:>8}",
        "mode",
        "verdict",
        "deliveries",
        "state diffs",
        "dup non-2xx",
        "seconds"
    )?;
    for m in &report.modes {
        let verdict = match m.verdict {
            Verdict::Matched => "matched",
            Verdict::Diverged => "DIVERGED",
            Verdict::OutOfBudget => "out of budget",
            Verdict::Skipped => "SKIPPED",
            _ => "unknown",
        };
        outln!(
            "{:<13} {:<14} {:>10} {:>11} {:>9} {:>8.1}",
            m.mode.name(),
            verdict,
            m.deliveries,
            m.state_diff.len(),
            m.duplicate_non_2xx.len(),
            m.seconds
        )?;
    }
    for m in &report.modes {
        if let Some(note) = &m.note {
            outln!("note: {}: {note}", m.mode.name())?;
        }
    }
    if !report.baseline_non_2xx.is_empty() {
        let mut statuses: Vec<u16> = report.baseline_non_2xx.iter().map(|n| n.status).collect();
        statuses.sort_unstable();
        statuses.dedup();
        let statuses: Vec<String> = statuses.iter().map(u16::to_string).collect();
        let first: Vec<&str> = report
            .baseline_non_2xx
            .iter()
            .take(3)
            .map(|n| n.event_id.as_str())
            .collect();
        outln!(
            "note: the baseline got non-2xx ({}) for {} of {} events, e.g. {}{} (their duplicates are not findings)",
            statuses.join(", "),
            report.baseline_non_2xx.len(),
            report.events,
            first.join(", "),
            if report.baseline_non_2xx.len() > first.len() {
                ", …"
            } else {
                ""
            }
        )?;
    }
    for m in &report.modes {
        if let Some(minimal) = &m.minimal {
            outln!()?;
            out!("{}", minimal.explanation)?;
        }
    }
    if let Some(path) = &args.json {
        write_json(path, &report)?;
    }
    let diverged = report
        .modes
        .iter()
        .filter(|m| m.verdict != Verdict::Matched)
        .count();
    outln!()?;
    if report.passed {
        outln!(
            "PASS: every mode matched the baseline ({:.1} s)",
            report.seconds
        )?;
        Ok(ExitCode::SUCCESS)
    } else {
        outln!(
            "FAIL: {diverged} of {} modes did not match ({:.1} s)",
            report.modes.len(),
            report.seconds
        )?;
        Ok(ExitCode::FAILURE)
    }
}

fn write_json(path: &Path, value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
