//! Expected findings and precision/recall, shared by the fixture test and the accuracy
//! report (`examples/accuracy.rs`).
//!
//! A fixture states its expected findings in comments on the flagged line:
//! `// expect: RULE_ID` (or `# expect: RULE_ID` in Python); several ids may follow, separated
//! by commas. A fixture with no such comment must have no finding at all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use idem_lint::RuleId;

/// One finding as scored: rule, file, line.
pub(crate) type Key = (RuleId, PathBuf, u32);

/// The language a file is scored under.
pub(crate) fn language(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "ts" | "tsx" | "mts" | "cts" => "typescript",
        "js" | "jsx" | "mjs" | "cjs" => "javascript",
        "py" => "python",
        "go" => "go",
        "rb" | "rake" => "ruby",
        "java" => "java",
        "kt" | "kts" => "kotlin",
        // Spring Boot's configuration, read with the JVM sources.
        "yml" | "yaml" | "properties" => "jvm-config",
        "rs" => "rust",
        _ => "other",
    }
}

/// The `expect:` annotations of a fixture's text.
pub(crate) fn expected_in(path: &Path, text: &str) -> Vec<Key> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some(at) = line.find("expect: ") else {
            continue;
        };
        for word in line[at + "expect: ".len()..].split([',', ' ']) {
            if let Ok(rule) = word.trim().parse::<RuleId>() {
                out.push((rule, path.to_path_buf(), i as u32 + 1));
            }
        }
    }
    out
}

/// True positives, false positives and false negatives.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Score {
    pub tp: u32,
    pub fp: u32,
    pub fn_: u32,
}

impl Score {
    pub(crate) fn precision(&self) -> Option<f64> {
        let d = self.tp + self.fp;
        (d > 0).then(|| f64::from(self.tp) / f64::from(d))
    }

    pub(crate) fn recall(&self) -> Option<f64> {
        let d = self.tp + self.fn_;
        (d > 0).then(|| f64::from(self.tp) / f64::from(d))
    }

    fn add(&mut self, other: Score) {
        self.tp += other.tp;
        self.fp += other.fp;
        self.fn_ += other.fn_;
    }
}

/// Scores found against expected findings, by rule and language.
pub(crate) fn score(
    found: &BTreeSet<Key>,
    expected: &BTreeSet<Key>,
) -> BTreeMap<(RuleId, &'static str), Score> {
    let mut by: BTreeMap<(RuleId, &'static str), Score> = BTreeMap::new();
    for k in found.union(expected) {
        let s = by.entry((k.0, language(&k.1))).or_default();
        match (found.contains(k), expected.contains(k)) {
            (true, true) => s.tp += 1,
            (true, false) => s.fp += 1,
            (false, true) => s.fn_ += 1,
            (false, false) => {}
        }
    }
    by
}

/// A table of precision and recall per rule and language, with totals per rule and overall.
pub(crate) fn table(by: &BTreeMap<(RuleId, &'static str), Score>) -> String {
    let fmt = |v: Option<f64>| v.map_or_else(|| "   -".to_string(), |v| format!("{v:.2}"));
    let mut out = format!(
        "{:<26} {:<11} {:>4} {:>4} {:>4} {:>9} {:>6}\n",
        "rule", "language", "tp", "fp", "fn", "precision", "recall"
    );
    let mut per_rule: BTreeMap<RuleId, Score> = BTreeMap::new();
    let mut all = Score::default();
    for ((rule, lang), s) in by {
        out.push_str(&format!(
            "{:<26} {:<11} {:>4} {:>4} {:>4} {:>9} {:>6}\n",
            rule.as_str(),
            lang,
            s.tp,
            s.fp,
            s.fn_,
            fmt(s.precision()),
            fmt(s.recall())
        ));
        per_rule.entry(*rule).or_default().add(*s);
        all.add(*s);
    }
    out.push('\n');
    for (rule, s) in &per_rule {
        out.push_str(&format!(
            "{:<26} {:<11} {:>4} {:>4} {:>4} {:>9} {:>6}\n",
            rule.as_str(),
            "all",
            s.tp,
            s.fp,
            s.fn_,
            fmt(s.precision()),
            fmt(s.recall())
        ));
    }
    out.push_str(&format!(
        "{:<26} {:<11} {:>4} {:>4} {:>4} {:>9} {:>6}\n",
        "all rules",
        "all",
        all.tp,
        all.fp,
        all.fn_,
        fmt(all.precision()),
        fmt(all.recall())
    ));
    out
}

/// The scan units of a fixture tree: each file or folder directly inside a rule's folder.
pub(crate) fn units(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rules) = std::fs::read_dir(root) else {
        return out;
    };
    for rule in rules.flatten() {
        if !rule.path().is_dir() {
            continue;
        }
        if let Ok(entries) = std::fs::read_dir(rule.path()) {
            out.extend(entries.flatten().map(|e| e.path()));
        }
    }
    out.sort();
    out
}

/// The source files of a unit (the file itself, or the files of the folder).
pub(crate) fn sources(unit: &Path) -> Vec<PathBuf> {
    if unit.is_file() {
        return vec![unit.to_path_buf()];
    }
    let mut out: Vec<PathBuf> = std::fs::read_dir(unit)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.retain(|p| language(p) != "other");
    out.sort();
    out
}
