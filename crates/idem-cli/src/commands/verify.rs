//! `idem verify`: redelivery chaos against a handler (the engine is `idem-verify`).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use indicatif::ProgressBar;

use crate::cli::VerifyArgs;

/// The exit code of `idem verify` when the run could not be done (see `idem verify --help`).
pub(super) const VERIFY_ERROR_EXIT: u8 = 3;

pub(super) async fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
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
        successor: args.successor,
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
            .filter(|&m| m != Mode::Rebuild || commands.successor.is_some())
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
