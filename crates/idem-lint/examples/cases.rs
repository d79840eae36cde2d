//! Precision and recall of idem-lint on a validation set (`validation/v2/cases.toml` and its
//! successors: v3, v4, v5), one half at a time:
//!
//! ```text
//! python3 crates/idem-lint/validation/v2/fetch.py train /tmp/v2-train
//! cargo run -p idem-lint --release --example cases -- \
//!     crates/idem-lint/validation/v2/cases.toml train /tmp/v2-train
//! ```
//!
//! A case is one file, one check and a line range. A positive case is found (true positive)
//! when the linter reports that check on a line of the range, else missed (false negative); a
//! negative case is a false positive when it does, else a true negative. Findings outside the
//! labelled ranges are not judged. Each repository's folder is scanned as one tree, so a handler
//! is linted with the helpers it calls into. A check the linter does not know yet finds nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use idem_lint::{Finding, Linter, RuleId};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
struct Case {
    half: String,
    repo: String,
    path: String,
    language: String,
    check: String,
    lines: [u32; 2],
    positive: bool,
}

/// True and false positives and negatives of one group of cases.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    tp: u32,
    fp: u32,
    fn_: u32,
    tn: u32,
}

impl Tally {
    fn add(&mut self, positive: bool, flagged: bool) {
        match (positive, flagged) {
            (true, true) => self.tp += 1,
            (true, false) => self.fn_ += 1,
            (false, true) => self.fp += 1,
            (false, false) => self.tn += 1,
        }
    }

    fn precision(self) -> Option<f64> {
        let flagged = self.tp + self.fp;
        (flagged > 0).then(|| f64::from(self.tp) / f64::from(flagged))
    }

    fn recall(self) -> Option<f64> {
        let positives = self.tp + self.fn_;
        (positives > 0).then(|| f64::from(self.tp) / f64::from(positives))
    }

    fn row(self, name: &str) -> String {
        let show = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
        format!(
            "{name:<26} {:>4} {:>4} {:>4} {:>4} {:>9} {:>7}",
            self.tp,
            self.fp,
            self.fn_,
            self.tn,
            show(self.precision()),
            show(self.recall())
        )
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [cases, half, dir] = args.as_slice() else {
        bail!("usage: cases CASES.toml train|test DIR");
    };
    let cases_path = cases;
    let text = std::fs::read_to_string(cases).with_context(|| format!("reading {cases}"))?;
    let cases: Cases = toml::from_str(&text).with_context(|| format!("parsing {cases}"))?;
    let cases: Vec<Case> = cases.case.into_iter().filter(|c| &c.half == half).collect();
    if cases.is_empty() {
        bail!("no case of half {half:?}");
    }
    let dir = Path::new(dir);
    let mut findings: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
    for case in &cases {
        let local = case.repo.replace('/', "+");
        if !findings.contains_key(&local) {
            let root = dir.join(&local);
            let found = if root.is_dir() {
                let report = Linter::new().scan(&[root])?;
                for s in &report.skipped {
                    eprintln!("skipped {}: {}", s.path.display(), s.reason);
                }
                report.findings
            } else {
                eprintln!("missing {}", root.display());
                Vec::new()
            };
            findings.insert(local.clone(), found);
        }
    }
    let mut by_check: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut by_language: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut all = Tally::default();
    let mut wrong = Vec::new();
    for case in &cases {
        let local = case.repo.replace('/', "+");
        let file: PathBuf = dir.join(&local).join(&case.path);
        let rule = case.check.parse::<RuleId>().ok();
        let flagged = findings[&local].iter().any(|f| {
            Some(f.rule) == rule
                && f.locations().any(|(path, line)| {
                    path == file && (case.lines[0]..=case.lines[1]).contains(&line)
                })
        });
        by_check
            .entry(&case.check)
            .or_default()
            .add(case.positive, flagged);
        by_language
            .entry(&case.language)
            .or_default()
            .add(case.positive, flagged);
        all.add(case.positive, flagged);
        if case.positive != flagged {
            let what = if flagged { "false positive" } else { "missed" };
            wrong.push(format!(
                "{what}: {} {} {}:{}-{}",
                case.check, case.repo, case.path, case.lines[0], case.lines[1]
            ));
        }
    }
    println!(
        "validation set {cases_path}, {half} half: {} cases\n",
        cases.len()
    );
    println!(
        "{:<26} {:>4} {:>4} {:>4} {:>4} {:>9} {:>7}",
        "", "tp", "fp", "fn", "tn", "precision", "recall"
    );
    for (check, tally) in &by_check {
        println!("{}", tally.row(check));
    }
    println!();
    for (language, tally) in &by_language {
        println!("{}", tally.row(language));
    }
    println!("\n{}", all.row("all checks"));
    println!(
        "targets (test half): precision >= 0.8, recall >= 0.6, no check with positives at recall 0"
    );
    let zero: Vec<&str> = by_check
        .iter()
        .filter(|(_, t)| t.recall() == Some(0.0))
        .map(|(c, _)| *c)
        .collect();
    println!("checks with positives at recall 0: {}", zero.len());
    for line in wrong {
        println!("{line}");
    }
    Ok(())
}
