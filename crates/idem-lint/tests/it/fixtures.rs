//! Every fixture's exact findings (rule and line), as its `expect:` comments state them; and
//! the fixture set's shape: for each check, at least two flagged and two look-alike units per
//! language family (TypeScript/JavaScript, Python, Go, Ruby, Java, Kotlin, Rust).

use crate::score;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use idem_lint::{Linter, RuleId};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn every_fixture_has_exactly_its_expected_findings() {
    let mut failures = Vec::new();
    let (mut all_found, mut all_expected) = (BTreeSet::new(), BTreeSet::new());
    for unit in score::units(&fixtures()) {
        let report = Linter::new()
            .scan(std::slice::from_ref(&unit))
            .expect("fixture scans");
        assert!(
            report.skipped.is_empty(),
            "{}: skipped {:?}",
            unit.display(),
            report.skipped
        );
        let found: BTreeSet<score::Key> = report
            .findings
            .iter()
            .flat_map(|f| f.locations().map(|(p, l)| (f.rule, p.to_path_buf(), l)))
            .collect();
        let expected: BTreeSet<score::Key> = score::sources(&unit)
            .iter()
            .flat_map(|p| {
                score::expected_in(p, &std::fs::read_to_string(p).expect("fixture reads"))
            })
            .collect();
        for k in found.difference(&expected) {
            let f = report.findings.iter().find(|f| {
                f.rule == k.0 && f.locations().any(|(p, l)| (p, l) == (k.1.as_path(), k.2))
            });
            failures.push(format!(
                "unexpected {} at {}:{} ({})",
                k.0,
                k.1.display(),
                k.2,
                f.map_or("", |f| f.message.as_str())
            ));
        }
        for k in expected.difference(&found) {
            failures.push(format!("missed {} at {}:{}", k.0, k.1.display(), k.2));
        }
        all_found.extend(found);
        all_expected.extend(expected);
    }
    let by = score::score(&all_found, &all_expected);
    println!("{}", score::table(&by));
    for ((rule, lang), s) in &by {
        if s.precision() != Some(1.0) || s.recall() != Some(1.0) {
            failures.push(format!("{rule} {lang}: {s:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn family(p: &Path) -> &'static str {
    match score::language(p) {
        "typescript" | "javascript" => "ts/js",
        other => other,
    }
}

#[test]
fn every_check_has_two_flagged_and_two_safe_units_per_language() {
    let mut counts: BTreeMap<(String, &'static str, bool), usize> = BTreeMap::new();
    for unit in score::units(&fixtures()) {
        let rule_dir = unit
            .parent()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let rule: RuleId = rule_dir
            .parse()
            .expect("fixture folders are named by rule id");
        let name = unit
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let flagged = name.starts_with("flag_");
        assert!(
            flagged || name.starts_with("safe_"),
            "{name}: fixture names start with flag_ or safe_"
        );
        let sources = score::sources(&unit);
        let expected: Vec<score::Key> = sources
            .iter()
            .flat_map(|p| {
                score::expected_in(p, &std::fs::read_to_string(p).expect("fixture reads"))
            })
            .collect();
        if flagged {
            assert!(
                expected.iter().any(|k| k.0 == rule),
                "{}: a flag_ fixture expects {rule}",
                unit.display()
            );
        } else {
            assert!(
                expected.is_empty(),
                "{}: a safe_ fixture expects nothing",
                unit.display()
            );
        }
        let fam = sources.first().map(|p| family(p)).unwrap_or("other");
        *counts.entry((rule_dir, fam, flagged)).or_default() += 1;
    }
    for rule in RuleId::ALL
        .iter()
        .filter(|r| **r != RuleId::LintAllowWithoutReason)
    {
        for fam in ["ts/js", "python", "go", "ruby", "java", "kotlin", "rust"] {
            for flagged in [true, false] {
                let n = counts
                    .get(&(rule.as_str().to_string(), fam, flagged))
                    .copied()
                    .unwrap_or(0);
                assert!(
                    n >= 2,
                    "{rule} {fam}: {n} {} units, need 2",
                    if flagged { "flag_" } else { "safe_" }
                );
            }
        }
    }
}
