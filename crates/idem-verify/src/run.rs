//! The engine: baseline, modes, comparison, shrinking, and the report.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::VerifyError;
use crate::deliver::{Answer, Target};
use crate::events::EventRecord;
use crate::plan::{self, Delivery, Mode};
use crate::shrink::ddmin;
use crate::state::{Commands, Snapshot};

/// What to verify.
#[derive(Debug, Clone)]
pub struct Options {
    /// The events, in the sender's order (see [`events::load`](crate::events::load)).
    pub events: Vec<EventRecord>,
    /// The endpoint and how copies are signed.
    pub target: Target,
    /// `--reset`, `--state` and `--ignore`.
    pub commands: Commands,
    /// The modes to run, in order.
    pub modes: Vec<Mode>,
    /// The seed of every schedule.
    pub seed: u64,
    /// The whole run's time limit (baseline, modes and shrinking).
    pub budget: Duration,
    /// Where each diverging mode's minimal sequence is written as `idem-verify-MODE.jsonl`;
    /// `None` writes none.
    pub out_dir: Option<PathBuf>,
    /// `--keep-entity-order`: `shuffle` keeps each entity's events in file order.
    pub keep_entity_order: bool,
}

/// A mode's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Verdict {
    /// Same final state as the baseline, and every duplicate answered 2xx.
    Matched,
    /// Another final state, or a non-2xx answer to a duplicate.
    Diverged,
    /// The budget ran out before the mode finished (or started).
    OutOfBudget,
    /// Not run: `crash` without `--restart` (see [`ModeReport::note`]). Not a pass.
    Skipped,
}

/// A non-2xx answer to a duplicate of an event the in-order run accepted (senders retry on
/// 4xx and 5xx: docs/design.md C3 asks for 200).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Non2xx {
    /// The event id.
    pub event_id: String,
    /// The step of the delivery.
    pub step: usize,
    /// The HTTP status.
    pub status: u16,
}

/// One delivery of a minimal sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MinimalDelivery {
    /// The step (equal steps were sent at the same moment).
    pub step: usize,
    /// The event id.
    pub event_id: String,
    /// The event's entity, if known.
    pub entity: Option<String>,
    /// The event's version, if known.
    pub version: Option<i64>,
    /// Crash mode: the target was restarted right after it, before its answer counted.
    pub crash: bool,
    /// Rebuild mode: the target was moved to its successor consumer version before it.
    pub successor: bool,
}

/// The shrunk reproduction of a divergence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MinimalSequence {
    /// The deliveries, by step.
    pub deliveries: Vec<MinimalDelivery>,
    /// Whether removing any one delivery makes it pass (false when the budget cut shrinking).
    pub one_minimal: bool,
    /// Its state against the in-order run of the same events (`path: in-order → this`).
    pub state_diff: Vec<String>,
    /// Non-2xx answers to duplicates in it.
    pub duplicate_non_2xx: Vec<Non2xx>,
    /// The replayable JSONL file, if written.
    pub file: Option<PathBuf>,
    /// A short human explanation.
    pub explanation: String,
}

/// One mode's report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeReport {
    /// The mode.
    pub mode: Mode,
    /// The verdict.
    pub verdict: Verdict,
    /// Deliveries made in the full run.
    pub deliveries: usize,
    /// The full run's state against the baseline (`path: baseline → this`).
    pub state_diff: Vec<String>,
    /// Non-2xx answers to duplicates in the full run.
    pub duplicate_non_2xx: Vec<Non2xx>,
    /// The minimal sequence, when the mode diverged.
    pub minimal: Option<MinimalSequence>,
    /// Wall time of the mode, shrinking included, in seconds.
    pub seconds: f64,
    /// Why the mode was skipped, or how it ran (`shuffle` with `--keep-entity-order`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The whole run's report (`--json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The target URL.
    pub target: String,
    /// The seed.
    pub seed: u64,
    /// Number of events.
    pub events: usize,
    /// Events the baseline answered with a non-2xx (their duplicates are not findings).
    pub baseline_non_2xx: Vec<Non2xx>,
    /// Per mode.
    pub modes: Vec<ModeReport>,
    /// Wall time in seconds.
    pub seconds: f64,
    /// True only when every mode matched.
    pub passed: bool,
}

/// The result of replaying a minimal-sequence file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayReport {
    /// Deliveries replayed.
    pub deliveries: usize,
    /// Distinct events.
    pub events: usize,
    /// The state against the in-order run of the same events (`path: in-order → replayed`).
    pub state_diff: Vec<String>,
    /// Non-2xx answers to duplicates.
    pub duplicate_non_2xx: Vec<Non2xx>,
    /// Whether it diverged (a non-empty diff or a non-2xx answer to a duplicate).
    pub diverged: bool,
}

struct Outcome {
    snapshot: Snapshot,
    answers: Vec<Answer>,
    complete: bool,
}

struct Engine<'a> {
    events: &'a [EventRecord],
    target: &'a Target,
    commands: &'a Commands,
    deadline: Instant,
    /// In-order runs by their event set: the snapshot and which events were answered 2xx.
    references: HashMap<Vec<usize>, (Snapshot, Vec<bool>)>,
}

impl Engine<'_> {
    async fn execute(&self, plan: &[Delivery]) -> Result<Outcome, VerifyError> {
        self.commands.reset().await?;
        let answers = self
            .target
            .deliver(self.events, plan, self.deadline, self.commands.hooks())
            .await?;
        let snapshot = self.commands.snapshot().await?;
        Ok(Outcome {
            complete: answers.len() == plan.len(),
            snapshot,
            answers,
        })
    }

    fn accepted(&self, answers: &[Answer]) -> Vec<bool> {
        let mut ok = vec![false; self.events.len()];
        for a in answers {
            if (200..300).contains(&a.status) {
                ok[a.delivery.event] = true;
            }
        }
        ok
    }

    fn non_2xx(&self, answers: &[Answer], accepted: &[bool]) -> Vec<Non2xx> {
        answers
            .iter()
            .filter(|a| a.duplicate && !(200..300).contains(&a.status))
            .filter(|a| accepted[a.delivery.event])
            .map(|a| Non2xx {
                event_id: self.events[a.delivery.event].id.clone(),
                step: a.delivery.step,
                status: a.status,
            })
            .collect()
    }

    /// Runs `plan` and the in-order run of its events; returns `None` when the budget cut
    /// either, else (diff, non-2xx to duplicates).
    async fn compare(
        &mut self,
        plan: &[Delivery],
    ) -> Result<Option<(Vec<String>, Vec<Non2xx>)>, VerifyError> {
        let in_order = plan::in_order_of(plan, self.events);
        let key: Vec<usize> = in_order.iter().map(|d| d.event).collect();
        if !self.references.contains_key(&key) {
            let reference = self.execute(&in_order).await?;
            if !reference.complete {
                return Ok(None);
            }
            let ok = self.accepted(&reference.answers);
            self.references
                .insert(key.clone(), (reference.snapshot, ok));
        }
        let run = self.execute(plan).await?;
        if !run.complete {
            return Ok(None);
        }
        let Some((snapshot, ok)) = self.references.get(&key) else {
            return Ok(None);
        };
        Ok(Some((
            run.snapshot.diff(snapshot),
            self.non_2xx(&run.answers, ok),
        )))
    }

    async fn fails(&mut self, plan: &[Delivery]) -> Result<bool, VerifyError> {
        Ok(self
            .compare(plan)
            .await?
            .is_some_and(|(diff, non_2xx)| !diff.is_empty() || !non_2xx.is_empty()))
    }
}

/// Runs the baseline and every mode, shrinks each divergence, writes the minimal sequences
/// (when `out_dir` is set). `progress` is told what is running (for a progress bar).
///
/// # Errors
/// [`VerifyError::Command`] when `--reset` or `--state` fails, [`VerifyError::Http`] when the
/// target does not answer, [`VerifyError::Write`] for a minimal-sequence file. A difference is
/// not an error: it is in the report.
pub async fn run(options: &Options, progress: &dyn Fn(&str)) -> Result<Report, VerifyError> {
    if options.budget.is_zero() {
        return Err(VerifyError::ZeroBudget);
    }
    let started = Instant::now();
    let mut engine = Engine {
        events: &options.events,
        target: &options.target,
        commands: &options.commands,
        deadline: started + options.budget,
        references: HashMap::new(),
    };
    let n = options.events.len();
    progress(&format!("baseline: {n} deliveries in order"));
    let baseline_plan = plan::sequential(0..n);
    let baseline = engine.execute(&baseline_plan).await?;
    check_baseline(&baseline, &options.commands).await?;
    let accepted = engine.accepted(&baseline.answers);
    let baseline_non_2xx = baseline
        .answers
        .iter()
        .filter(|a| !(200..300).contains(&a.status))
        .map(|a| Non2xx {
            event_id: options.events[a.delivery.event].id.clone(),
            step: a.delivery.step,
            status: a.status,
        })
        .collect();
    let key: Vec<usize> = (0..n).collect();
    let baseline_complete = baseline.complete;
    engine
        .references
        .insert(key, (baseline.snapshot.clone(), accepted.clone()));
    let mut modes = Vec::new();
    for &mode in &options.modes {
        let mode_started = Instant::now();
        let plan = plan::schedule_with(
            mode,
            &options.events,
            options.seed,
            options.keep_entity_order,
        );
        let mut report = ModeReport {
            mode,
            verdict: Verdict::OutOfBudget,
            deliveries: 0,
            state_diff: Vec::new(),
            duplicate_non_2xx: Vec::new(),
            minimal: None,
            seconds: 0.0,
            note: None,
        };
        if mode == Mode::Shuffle && options.keep_entity_order {
            report.note = Some("--keep-entity-order: each entity's events in file order".into());
        }
        if let Some(note) = missing_command(mode, &options.commands) {
            report.verdict = Verdict::Skipped;
            progress(&format!("{mode}: {note}"));
            report.note = Some(note.into());
        } else if baseline_complete && Instant::now() < engine.deadline {
            progress(&format!("{mode}: {} deliveries", plan.len()));
            let run = engine.execute(&plan).await?;
            report.deliveries = run.answers.len();
            if run.complete {
                report.state_diff = run.snapshot.diff(&baseline.snapshot);
                report.duplicate_non_2xx = engine.non_2xx(&run.answers, &accepted);
                if report.state_diff.is_empty() && report.duplicate_non_2xx.is_empty() {
                    report.verdict = Verdict::Matched;
                } else {
                    report.verdict = Verdict::Diverged;
                    progress(&format!("{mode}: diverged, shrinking"));
                    report.minimal = Some(
                        shrink(
                            &mut engine,
                            mode,
                            &plan,
                            &report,
                            options.out_dir.as_deref(),
                        )
                        .await?,
                    );
                }
            }
        }
        report.seconds = mode_started.elapsed().as_secs_f64();
        modes.push(report);
    }
    let passed = baseline_complete && modes.iter().all(|m| m.verdict == Verdict::Matched);
    Ok(Report {
        target: options.target.url().to_owned(),
        seed: options.seed,
        events: n,
        baseline_non_2xx,
        modes,
        seconds: started.elapsed().as_secs_f64(),
        passed,
    })
}

/// Why `mode` cannot run with `commands`: `crash` needs `--restart`, `rebuild` needs
/// `--successor`.
fn missing_command(mode: Mode, commands: &Commands) -> Option<&'static str> {
    match mode {
        Mode::Crash if commands.restart.is_none() => Some(
            "skipped: crash mode needs --restart CMD (a command that kills and restarts the target, keeping its state)",
        ),
        Mode::Rebuild if commands.successor.is_none() => Some(
            "skipped: rebuild mode needs --successor CMD (a command that moves the target to its next consumer version, keeping its state)",
        ),
        _ => None,
    }
}

/// Refuses a baseline that proves nothing: more than half of its deliveries answered non-2xx
/// (the target rejects them), a `--state` that printed nothing, or a `--state` whose output
/// changes between two reads with no delivery in between.
async fn check_baseline(baseline: &Outcome, commands: &Commands) -> Result<(), VerifyError> {
    let total = baseline.answers.len();
    let rejected: Vec<u16> = baseline
        .answers
        .iter()
        .map(|a| a.status)
        .filter(|s| !(200..300).contains(s))
        .collect();
    if total > 0 && rejected.len() * 2 > total {
        let mut statuses = rejected.clone();
        statuses.sort_unstable();
        statuses.dedup();
        let statuses: Vec<String> = statuses.iter().map(u16::to_string).collect();
        return Err(VerifyError::BaselineRejected {
            rejected: rejected.len(),
            total,
            statuses: statuses.join(", "),
        });
    }
    if matches!(&baseline.snapshot, Snapshot::Text(lines) if lines.is_empty()) {
        return Err(VerifyError::EmptyState {
            command: commands.state.clone(),
        });
    }
    let again = commands.snapshot().await?;
    if let Some(first) = again.diff(&baseline.snapshot).into_iter().next() {
        return Err(VerifyError::UnstableState { first });
    }
    Ok(())
}

/// Ids and object ids named by the first difference (path segments with a digit or an
/// uppercase letter), used to try a small subset before delta debugging.
fn focus_tokens(report: &ModeReport) -> Vec<String> {
    if let Some(first) = report.state_diff.first() {
        let path = first.split(": ").next().unwrap_or_default();
        path.split(['.', '[', ']'])
            .filter(|s| {
                s.len() >= 6
                    && s.chars()
                        .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
            })
            .map(str::to_owned)
            .collect()
    } else {
        report
            .duplicate_non_2xx
            .iter()
            .take(1)
            .map(|n| n.event_id.clone())
            .collect()
    }
}

async fn shrink(
    engine: &mut Engine<'_>,
    mode: Mode,
    plan: &[Delivery],
    report: &ModeReport,
    out_dir: Option<&Path>,
) -> Result<MinimalSequence, VerifyError> {
    let events = engine.events;
    let tokens = focus_tokens(report);
    // A rebuild shrinks the history; each candidate is delivered, then delivered again to
    // the successor.
    let rebuild = mode == Mode::Rebuild;
    let expand = |sub: &[Delivery]| {
        if rebuild {
            plan::rebuild(sub)
        } else {
            sub.to_vec()
        }
    };
    let plan = if rebuild {
        let history = plan.iter().take_while(|d| !d.successor).count();
        &plan[..history]
    } else {
        plan
    };
    let mut start: Vec<Delivery> = plan.to_vec();
    if !tokens.is_empty() {
        let focused: Vec<Delivery> = plan
            .iter()
            .filter(|d| {
                let e = &events[d.event];
                let body = String::from_utf8_lossy(&e.body);
                tokens
                    .iter()
                    .any(|t| e.id == *t || body.contains(t.as_str()))
            })
            .copied()
            .collect();
        if !focused.is_empty()
            && focused.len() < plan.len()
            && engine.fails(&expand(&focused)).await?
        {
            start = focused;
        }
    }
    let deadline = engine.deadline;
    let (mut minimal, one_minimal) = ddmin(
        start,
        async |sub: &[Delivery]| engine.fails(&expand(sub)).await,
        deadline,
    )
    .await?;
    // Renumber the steps 0, 1, … keeping which deliveries share one.
    let mut previous = None;
    let mut step = 0;
    for d in &mut minimal {
        if previous.is_some_and(|p| p != d.step) {
            step += 1;
        }
        previous = Some(d.step);
        d.step = step;
    }
    let minimal = expand(&minimal);
    let (state_diff, duplicate_non_2xx) = engine.compare(&minimal).await?.unwrap_or_default();
    let file = match out_dir {
        Some(dir) => Some(write_sequence(
            &dir.join(format!("idem-verify-{mode}.jsonl")),
            events,
            &minimal,
        )?),
        None => None,
    };
    let deliveries: Vec<MinimalDelivery> = minimal
        .iter()
        .map(|d| MinimalDelivery {
            step: d.step,
            event_id: events[d.event].id.clone(),
            entity: events[d.event].entity.clone(),
            version: events[d.event].version,
            crash: d.crash,
            successor: d.successor,
        })
        .collect();
    let explanation = explain(
        mode,
        &deliveries,
        report,
        &state_diff,
        &duplicate_non_2xx,
        file.as_deref(),
        one_minimal,
    );
    Ok(MinimalSequence {
        deliveries,
        one_minimal,
        state_diff,
        duplicate_non_2xx,
        file,
        explanation,
    })
}

fn explain(
    mode: Mode,
    deliveries: &[MinimalDelivery],
    report: &ModeReport,
    state_diff: &[String],
    non_2xx: &[Non2xx],
    file: Option<&Path>,
    one_minimal: bool,
) -> String {
    let mut out = format!(
        "{mode}: {} deliveries{} diverge from the in-order run of the same events:\n",
        deliveries.len(),
        if one_minimal {
            ""
        } else {
            " (shrinking cut by the budget)"
        }
    );
    let mut i = 0;
    while let Some(d) = deliveries.get(i) {
        if d.successor {
            out.push_str(
                "  then the target moved to its successor consumer version (--successor)\n",
            );
        }
        // Copies of one event at one step are one line.
        let copies = deliveries[i..]
            .iter()
            .take_while(|o| o.step == d.step && o.event_id == d.event_id)
            .count();
        out.push_str(&format!(
            "  step {}: {}{}{}\n",
            d.step,
            d.event_id,
            d.entity
                .as_ref()
                .map(|e| format!(" ({e} @ {})", d.version.unwrap_or_default()))
                .unwrap_or_default(),
            if copies > 1 {
                format!(", {copies} copies at the same moment")
            } else if d.crash {
                ", then the target restarted before its answer counted".to_owned()
            } else {
                String::new()
            }
        ));
        i += copies;
    }
    out.push_str("  state, in-order run → this sequence:\n");
    for line in state_diff {
        out.push_str(&format!("    {line}\n"));
    }
    for n in non_2xx {
        out.push_str(&format!(
            "    duplicate {} at step {} answered {} (C3 asks for 2xx)\n",
            n.event_id, n.step, n.status
        ));
    }
    out.push_str(&format!(
        "  state, baseline → full {mode} run: {} differences{}\n",
        report.state_diff.len(),
        report
            .state_diff
            .first()
            .map(|f| format!(", first {f}"))
            .unwrap_or_default()
    ));
    if let Some(file) = file {
        out.push_str(&format!(
            "  replay: idem verify --replay {} (with the same --target, --sign, --reset, --state{})\n",
            file.display(),
            if mode == Mode::Rebuild {
                ", --successor"
            } else {
                ""
            }
        ));
    }
    out
}

/// Writes `plan` as replayable JSONL: `{"step", "seq", "id", "headers"?, "body"}` per delivery.
fn write_sequence(
    path: &Path,
    events: &[EventRecord],
    plan: &[Delivery],
) -> Result<PathBuf, VerifyError> {
    let mut text = String::new();
    for d in plan {
        let e = &events[d.event];
        let body: Value = serde_json::from_slice(&e.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&e.body).into_owned()));
        let mut line = json!({"step": d.step, "seq": e.seq, "id": e.id, "body": body});
        if d.crash {
            line["crash"] = Value::Bool(true);
        }
        if d.successor {
            line["successor"] = Value::Bool(true);
        }
        if !e.headers.is_empty() {
            line["headers"] = e
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|source| VerifyError::Write {
        path: path.to_owned(),
        source,
    })?;
    Ok(path.to_owned())
}

/// Replays a minimal-sequence file (lines as [`events::parse`](crate::events::parse) reads
/// them, `step` grouping concurrent copies, else one line per step) and the in-order run of
/// its distinct events, and compares the two.
///
/// # Errors
/// As [`run`].
pub async fn replay(
    lines: &[EventRecord],
    target: &Target,
    commands: &Commands,
    budget: Duration,
) -> Result<ReplayReport, VerifyError> {
    if budget.is_zero() {
        return Err(VerifyError::ZeroBudget);
    }
    let mut events: Vec<EventRecord> = Vec::new();
    let mut plan = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        let index = match events.iter().position(|e| e.id == line.id) {
            Some(i) => i,
            None => {
                events.push(line.clone());
                events.len() - 1
            }
        };
        plan.push(Delivery {
            event: index,
            step: line.step.unwrap_or(n),
            crash: false,
            successor: line.successor,
        });
    }
    plan.sort_by_key(|d| d.step);
    let mut engine = Engine {
        events: &events,
        target,
        commands,
        deadline: Instant::now() + budget,
        references: HashMap::new(),
    };
    let (state_diff, duplicate_non_2xx) = engine.compare(&plan).await?.unwrap_or_default();
    Ok(ReplayReport {
        deliveries: plan.len(),
        events: events.len(),
        diverged: !state_diff.is_empty() || !duplicate_non_2xx.is_empty(),
        state_diff,
        duplicate_non_2xx,
    })
}
