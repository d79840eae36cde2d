//! The commands, one file each; this module reads the configuration and opens the database
//! for the commands that need them.

mod check_config;
mod consumer_inventory;
mod consumers;
mod dead_letters;
mod demo;
mod destination;
mod dlq;
mod effects;
mod events;
mod gc;
mod idem_tables;
mod json_out;
mod lint;
mod lint_registry;
mod outbox;
mod replay;
mod serve;
mod verify;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use idem_gateway::traces::Traces;
use idem_gateway::{Config, DatabaseKind, Gateway, GatewayDb};
use std::time::Duration;

use idem_sql::redact_url;
use idem_sql::sqlx::{MySql, Postgres, Sqlite};
use idem_sql::{AnyStore, PoolOptions, Store};

use crate::cli::{Cli, Command, DestinationCommand, DlqCommand, EventsCommand, ReplayArgs};

/// The commands that work on the gateway's own database.
enum OnGateway {
    Serve {
        strict: bool,
        /// The file `SIGHUP` and `POST /admin/reload` read again.
        config_file: Option<std::path::PathBuf>,
    },
    Events(EventsCommand),
    Dlq(DlqCommand),
    Destination(DestinationCommand),
    Replay(ReplayArgs),
    Gc,
}

/// Runs one command; the exit code says whether it succeeded.
pub(crate) async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let log_filter = cli.log_filter();
    // `idem serve` installs its subscriber once its configuration says whether traces are on.
    if !matches!(cli.command, Command::Serve { .. }) {
        crate::logging::init(log_filter, None);
    }
    // idem's own tables, usually in the application's database: with --database the
    // configuration is not read at all; without, only its database_url is needed (its secrets
    // need not be set).
    let ledger_url = |database: Option<String>| match database {
        Some(url) => Ok(url),
        None => match &cli.config {
            Some(path) => Config::load_for_operations(path).map(|c| c.database_url),
            None => Ok(Config::defaults().database_url),
        },
    };
    let on_gateway = match cli.command {
        Command::Effects(args) => {
            return effects::effects(&ledger_url(args.database)?, args.command).await;
        }
        Command::Outbox(args) => {
            return outbox::outbox(&ledger_url(args.database)?, args.command).await;
        }
        Command::DeadLetters(args) => {
            return dead_letters::dead_letters(&ledger_url(args.database)?, args.command).await;
        }
        Command::Consumers(args) => {
            let url = ledger_url(args.database)?;
            return consumers::consumers(&url, cli.config.as_deref(), args.command).await;
        }
        Command::Lint { args } => return lint::lint(args).await,
        Command::Demo { console } => {
            if let Some(path) = &cli.config {
                bail!(
                    "idem demo takes no --config (given {}): it runs its own gateway, sources and \
                     application on SQLite in a temporary directory; use `idem serve --config` for yours",
                    path.display()
                );
            }
            return demo::demo(console).await;
        }
        Command::Verify(args) => {
            let result = match &cli.config {
                Some(path) => Err(anyhow::anyhow!(
                    "idem verify takes no --config (given {}): it talks to the handler under test only",
                    path.display()
                )),
                None => verify::verify(*args).await,
            };
            // 1 is a finding (a mode did not match); an operational error exits 3.
            return Ok(result.unwrap_or_else(|e| {
                if crate::is_broken_pipe(&e) {
                    return ExitCode::SUCCESS;
                }
                eprintln!("error: {}", crate::chain(&e));
                ExitCode::from(verify::VERIFY_ERROR_EXIT)
            }));
        }
        // check-config checks the file alone, secrets included: it opens no database (unless
        // --database, then never creating it) and creates no file.
        Command::CheckConfig { strict, database } => {
            let config = load(&cli.config, true)?;
            let code = check_config::check_config(&config, strict)?;
            if !database || code != ExitCode::SUCCESS {
                return Ok(code);
            }
            return check_database(config).await;
        }
        Command::Serve { strict } => OnGateway::Serve {
            strict,
            config_file: cli.config.clone(),
        },
        Command::Events(command) => OnGateway::Events(command),
        Command::Dlq(command) => OnGateway::Dlq(command),
        Command::Destination(command) => OnGateway::Destination(command),
        Command::Replay(args) => OnGateway::Replay(args),
        Command::Gc => OnGateway::Gc,
    };
    let serve = matches!(on_gateway, OnGateway::Serve { .. });
    // Only `idem serve` verifies, signs and authenticates: the operator commands run without
    // the secrets in their environment.
    let config = load(&cli.config, serve)?;
    let traces = match &config.telemetry {
        Some(settings) if serve => Some(Traces::start(settings)?),
        _ => None,
    };
    if serve {
        crate::logging::init(log_filter, traces.as_ref());
    }
    if let (Some(settings), Some(_)) = (&config.telemetry, &traces) {
        tracing::info!(
            url = %settings.traces_url,
            service = %settings.service_name,
            sample_ratio = settings.sample_ratio,
            "exporting traces (OTLP over HTTP)"
        );
    }
    let result = on_database(on_gateway, config, serve).await;
    if let Some(traces) = traces {
        // Blocks until the collector answered: off the runtime's threads.
        match tokio::task::spawn_blocking(move || traces.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the last spans were not exported"),
            Err(e) => tracing::warn!(error = %e, "the last spans were not exported"),
        }
    }
    result
}

/// Opens the gateway's database of `config` and runs `on_gateway` on it (`serve`: as `idem
/// serve`, creating a missing SQLite file).
async fn on_database(
    on_gateway: OnGateway,
    config: Config,
    serve: bool,
) -> anyhow::Result<ExitCode> {
    let url = config.database_url.clone();
    match DatabaseKind::of(&url) {
        Some(DatabaseKind::Sqlite) if serve => {
            create_sqlite_dir(&url)?;
            let store = Store::<Sqlite>::connect_with_options(&url, pool(&config, serve)).await?;
            on_store(on_gateway, config, store).await
        }
        Some(DatabaseKind::Postgres) if serve => {
            let store = Store::<Postgres>::connect_with_options(&url, pool(&config, serve)).await?;
            on_store(on_gateway, config, store).await
        }
        Some(DatabaseKind::MySql) if serve => {
            let store = Store::<MySql>::connect_with_options(&url, pool(&config, serve)).await?;
            on_store(on_gateway, config, store).await
        }
        // Admin commands read what `idem serve` made: they never create a database.
        Some(_) => {
            match AnyStore::open_existing(&url, "idem_gateway_events", pool(&config, serve))
                .await
                .map_err(no_tables)?
            {
                AnyStore::Sqlite(store) => on_store(on_gateway, config, store).await,
                AnyStore::Postgres(store) => on_store(on_gateway, config, store).await,
                AnyStore::MySql(store) => on_store(on_gateway, config, store).await,
                _ => bail!(
                    "database_url {:?} is not sqlite://, postgres:// or mysql://",
                    redact_url(&config.database_url)
                ),
            }
        }
        None => bail!(
            "database_url {:?} is not sqlite://, postgres:// or mysql://",
            redact_url(&config.database_url)
        ),
    }
}

/// `idem check-config --database`: what `idem serve` refuses at start in the database of
/// `config` (opened as the operator commands open it, never created).
async fn check_database(config: Config) -> anyhow::Result<ExitCode> {
    let url = config.database_url.clone();
    let shown = redact_url(&url);
    let stray = match AnyStore::open_existing(&url, "idem_gateway_events", pool(&config, false))
        .await
        .map_err(no_tables)?
    {
        AnyStore::Sqlite(store) => Gateway::new(config, store).unconfigured_routes().await?,
        AnyStore::Postgres(store) => Gateway::new(config, store).unconfigured_routes().await?,
        AnyStore::MySql(store) => Gateway::new(config, store).unconfigured_routes().await?,
        _ => bail!("database_url {shown:?} is not sqlite://, postgres:// or mysql://"),
    };
    if stray.is_empty() {
        outln!("database {shown}: every stored route name is configured, renamed or retired")?;
        return Ok(ExitCode::SUCCESS);
    }
    for route in &stray {
        outln!("error: {route}")?;
    }
    Ok(ExitCode::FAILURE)
}

/// How long an operator command waits for the database before it reports it (a PostgreSQL
/// server that accepts the connection and never answers, for one).
const OPERATOR_DATABASE_TIMEOUT: Duration = Duration::from_secs(10);

/// The pool of the gateway's database: `idem serve` waits for a connection at most
/// `database_timeout` (then a webhook gets 503); an operator command at most 10 s.
fn pool(config: &Config, serve: bool) -> PoolOptions {
    PoolOptions::default().acquire_timeout(if serve {
        config.database_timeout
    } else {
        OPERATOR_DATABASE_TIMEOUT
    })
}

/// The configuration in `path`, or the built-in defaults without one; with `secrets`, every
/// secret must be set, as `idem serve` and `idem check-config` need.
fn load(path: &Option<std::path::PathBuf>, secrets: bool) -> anyhow::Result<Config> {
    Ok(match path {
        Some(path) if secrets => Config::load(path)?,
        Some(path) => Config::load_for_operations(path)?,
        // The defaults, with the OpenTelemetry variables that may turn traces on.
        None if secrets => Config::from_toml("", &|var| std::env::var(var).ok())?,
        None => Config::defaults(),
    })
}

async fn on_store<DB: GatewayDb>(
    command: OnGateway,
    config: Config,
    store: Store<DB>,
) -> anyhow::Result<ExitCode> {
    let gateway = Gateway::new(config, store);
    match command {
        OnGateway::Serve {
            strict,
            config_file,
        } => {
            let gateway = match config_file {
                Some(path) => gateway.with_config_file(path),
                None => gateway,
            }
            .with_strict_reload(strict);
            serve::serve(gateway, strict).await
        }
        OnGateway::Events(command) => events::events(&gateway, command).await,
        OnGateway::Dlq(command) => dlq::dlq(&gateway, command).await,
        OnGateway::Destination(command) => destination::destination(&gateway, command).await,
        OnGateway::Replay(args) => replay::replay(&gateway, args).await,
        OnGateway::Gc => gc::gc(&gateway).await,
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

/// A missing table (or, for SQLite, a missing file) says the database was never served: name
/// it and what to check, instead of the driver's "no such table". Other errors pass through,
/// naming the database without its password.
fn no_tables(error: idem_sql::Error) -> anyhow::Error {
    match error {
        idem_sql::Error::MissingTable { url, .. } => anyhow::anyhow!(
            "no idem gateway tables at {url}: check database_url or --config (idem serve creates them)"
        ),
        other => anyhow::Error::new(other),
    }
}
