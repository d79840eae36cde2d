//! Bad Ruby input is skipped or lowered, never a panic: a file that does not parse, deep
//! nesting, a huge chain of blocks, a file in Latin-1.

use std::path::Path;

use crate::{Linter, RuleId};

const INCREMENT: &str = "class CreditJob < ApplicationJob\n  def perform(event)\n    Wallet.find(event[\"id\"]).increment!(:balance, event[\"amount\"])\n  end\nend\n";

#[test]
fn a_ruby_job_is_linted() {
    let findings = Linter::new()
        .lint_source(Path::new("app/jobs/credit_job.rb"), INCREMENT)
        .expect("parses");
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].rule, RuleId::DatRelativeUpdate);
    assert_eq!(findings[0].line, 3);
}

#[test]
fn a_file_that_does_not_parse_is_skipped() {
    let broken = "class Broken < ApplicationJob\n  def perform(event\n    Wallet.find(\n  end\n";
    let skipped = Linter::new()
        .lint_source(Path::new("broken.rb"), broken)
        .expect_err("a syntax error skips the file");
    assert!(
        skipped.reason.contains("does not parse"),
        "{}",
        skipped.reason
    );
}

#[test]
fn deep_nesting_is_lowered_without_a_panic() {
    let depth = 3_000;
    let mut src = String::from("class DeepJob < ApplicationJob\n  def perform(event)\n    x = ");
    src.push_str(&"[".repeat(depth));
    src.push('1');
    src.push_str(&"]".repeat(depth));
    src.push('\n');
    for _ in 0..depth {
        src.push_str("    if event\n");
    }
    src.push_str("    Wallet.find(event[\"id\"]).increment!(:balance, 1)\n");
    for _ in 0..depth {
        src.push_str("    end\n");
    }
    src.push_str("  end\nend\n");
    // Deeper than the lowering goes: the result may miss the write, but it returns.
    let _ = Linter::new().lint_source(Path::new("deep.rb"), &src);
    let blocks = format!(
        "items{}\n",
        ".each do |x|\n  x".repeat(2_000) + &"\nend".repeat(2_000)
    );
    let _ = Linter::new().lint_source(Path::new("blocks.rb"), &blocks);
}

#[test]
fn a_latin1_file_is_skipped_and_the_rest_linted() {
    let d = tempfile::tempdir().expect("tmp");
    std::fs::write(d.path().join("caf\u{e9}.rb"), b"# caf\xe9\nputs 1\n").expect("write");
    std::fs::write(d.path().join("credit_job.rb"), INCREMENT).expect("write");
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.skipped.len(), 1);
    assert!(
        report.skipped[0].reason.contains("UTF-8"),
        "{:?}",
        report.skipped
    );
}
