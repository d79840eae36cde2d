//! The `idem lint` command. `idem lint ARGS…` runs this binary with the same arguments.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use idem_lint::{ChangedLines, Confidence, Config, Linter, RegistryRow, RuleId};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
    Sarif,
    /// A Markdown table (with --inventory), for a pull-request comment.
    Markdown,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Level {
    High,
    Medium,
}

/// Finds handler code that is wrong under redelivery (at-least-once webhooks and brokers):
/// volatile dedup keys, check-then-act, markers outside the effect's transaction,
/// unconditional inserts, relative updates, dual writes, duplicates answered with errors,
/// signatures over parsed bodies, last-write-wins. TypeScript/TSX, JavaScript, Python, Go, Java,
/// Kotlin, Ruby and Rust.
///
/// Exit codes: 0 nothing at or above --fail-on, 1 findings, 2 could not run.
#[derive(Debug, Parser)]
#[command(name = "idem lint", version, bin_name = "idem lint")]
struct Args {
    /// Files and folders to scan (folders respect .gitignore). Default: the current folder.
    paths: Vec<PathBuf>,
    /// Report only findings on lines a pull request against BASE changes: since the merge base
    /// of BASE and HEAD (three dots), with uncommitted and untracked changes.
    #[arg(long, value_name = "BASE")]
    diff: Option<String>,
    /// Output format: text, json or sarif (SARIF 2.1.0, for GitHub code scanning); with
    /// --inventory: text, json or markdown.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// List every handler found (webhook routes, broker consumers, jobs) with its consumer
    /// name, marker kind and whether the marker commits with the side effect, instead of
    /// findings. Exits 0 unless the input is bad.
    #[arg(long)]
    inventory: bool,
    /// With --inventory: join with the consumer registry's rows, a JSON array read from FILE
    /// (`-`: standard input). `idem lint --inventory --database URL` reads them from idem's
    /// tables and passes them here.
    #[arg(long, value_name = "FILE", requires = "inventory")]
    registry: Option<PathBuf>,
    /// With --inventory: join with the consumer registry of the idem database at URL. Read by
    /// the `idem` command (`idem lint --inventory --database URL`), which passes the rows to
    /// this program as --registry.
    #[arg(long, value_name = "URL", requires = "inventory")]
    database: Option<String>,
    /// Only these rules (comma-separated ids, e.g. REL_KEY_VOLATILE,ARC_DUAL_WRITE).
    #[arg(long, value_delimiter = ',', value_name = "RULE_ID,…")]
    rules: Vec<String>,
    /// Skip paths matching these globs (comma-separated or repeated), e.g. 'vendor/**'.
    #[arg(long, value_delimiter = ',', value_name = "GLOB")]
    exclude: Vec<String>,
    /// Exit 1 only for findings at or above this confidence [default: medium, or the
    /// config's fail_on].
    #[arg(long, value_enum)]
    fail_on: Option<Level>,
    /// Config file [default: ./idem-lint.toml when it exists].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// `--inventory`: the handlers of `paths`, joined with the registry when one is given.
fn inventory(args: &Args, linter: &Linter, paths: &[PathBuf]) -> anyhow::Result<()> {
    let rows = match &args.registry {
        Some(file) if file.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read the registry from standard input")?;
            Some(RegistryRow::parse_all(&text, "standard input")?)
        }
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the registry {}", file.display()))?;
            Some(RegistryRow::parse_all(&text, &file.display().to_string())?)
        }
        None => None,
    };
    let inventory = linter.inventory(paths)?;
    let join = rows.map(|rows| inventory.join(&rows));
    let out = match args.format {
        Format::Text => idem_lint::inventory_to_text(&inventory, join.as_ref()),
        Format::Markdown => idem_lint::inventory_to_markdown(&inventory, join.as_ref()),
        Format::Json => {
            serde_json::to_string_pretty(&idem_lint::inventory_to_json(&inventory, join.as_ref()))
                .context("cannot render the JSON inventory")?
                + "\n"
        }
        Format::Sarif => anyhow::bail!(
            "--format sarif lists findings, not an inventory: with --inventory use text, json or markdown"
        ),
    };
    print!("{out}");
    if !matches!(args.format, Format::Text) {
        for s in &inventory.skipped {
            eprintln!("warning: skipped {}: {}", s.path.display(), s.reason);
        }
    }
    Ok(())
}

fn run(args: Args) -> anyhow::Result<bool> {
    if args.database.is_some() {
        anyhow::bail!(
            "--database is read by the idem command: run `idem lint --inventory --database URL` \
             (it reads idem_consumers and passes the rows here as --registry -), or give the rows \
             with --registry FILE"
        );
    }
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => {
            let default = PathBuf::from("idem-lint.toml");
            if default.is_file() {
                Config::load(&default)?
            } else {
                Config::default()
            }
        }
    };
    config.add_excludes(&args.exclude)?;
    let fail_on = match args.fail_on {
        Some(Level::High) => Confidence::High,
        Some(Level::Medium) => Confidence::Medium,
        None => config.fail_on().unwrap_or(Confidence::Medium),
    };
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut linter = Linter::new().config(config);
    if !args.rules.is_empty() {
        let rules = args
            .rules
            .iter()
            .map(|r| r.parse::<RuleId>())
            .collect::<Result<Vec<_>, _>>()?;
        linter = linter.rules(&rules);
    }
    if let Some(base) = &args.diff {
        let first = &paths[0];
        let dir = if first.is_dir() {
            first.clone()
        } else {
            first
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), PathBuf::from)
        };
        linter = linter.changed_lines(ChangedLines::since(&dir, base)?);
    }
    if args.inventory {
        inventory(&args, &linter, &paths)?;
        return Ok(false);
    }
    let report = linter.scan(&paths)?;
    let out = match args.format {
        Format::Text => idem_lint::to_text(&report),
        Format::Json => serde_json::to_string_pretty(&idem_lint::to_json(&report))
            .context("cannot render the JSON report")?,
        Format::Sarif => serde_json::to_string_pretty(&idem_lint::to_sarif(&report))
            .context("cannot render the SARIF report")?,
        Format::Markdown => anyhow::bail!(
            "--format markdown is the inventory's table: add --inventory, or use text, json or sarif"
        ),
    };
    print!("{out}");
    if !matches!(args.format, Format::Text) {
        println!();
        for s in &report.skipped {
            eprintln!("warning: skipped {}: {}", s.path.display(), s.reason);
        }
    }
    Ok(report.fails(fail_on))
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match run(args) {
        Ok(false) => ExitCode::SUCCESS,
        Ok(true) => ExitCode::from(1),
        Err(e) => {
            // Causes the message already quotes are not repeated.
            let mut msg = e.to_string();
            for cause in e.chain().skip(1) {
                let c = cause.to_string();
                if !msg.contains(&c) {
                    msg.push_str(": ");
                    msg.push_str(&c);
                }
            }
            eprintln!("idem lint: {msg}");
            ExitCode::from(2)
        }
    }
}
