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

/// Ruby rejects a file whose `module` lacks its `end`, but tree-sitter reads every class in
/// it whole: the file is linted, not skipped.
#[test]
fn a_file_missing_only_its_last_end_is_linted() {
    let unclosed = format!("module Billing\n{INCREMENT}");
    let findings = Linter::new()
        .lint_source(Path::new("app/jobs/billing/credit_job.rb"), &unclosed)
        .expect("lowered despite the missing end");
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].rule, RuleId::DatRelativeUpdate);
    assert_eq!(findings[0].line, 4);
}

/// A top-level class that lacks its `end` leaves its methods outside any class in
/// tree-sitter's reading: the job would vanish without a word, so the file is skipped with
/// its syntax error instead.
#[test]
fn a_class_missing_its_end_is_skipped_not_lost() {
    let unclosed = INCREMENT.strip_suffix("end\n").expect("ends with end");
    let skipped = Linter::new()
        .lint_source(Path::new("app/jobs/credit_job.rb"), unclosed)
        .expect_err("skipped with its syntax error");
    assert!(
        skipped.reason.contains("does not parse"),
        "{}",
        skipped.reason
    );
}

/// Deeper than the lowering goes (it stops at a fixed depth): the file is linted as far as
/// it is lowered, or skipped, on the scan's threads, and the rest of the tree is linted.
#[test]
fn deep_nesting_is_lowered_without_a_panic() {
    let depth = 3_000;
    let d = tempfile::tempdir().expect("tmp");
    let arrays = format!(
        "class DeepJob < ApplicationJob\n  def perform(event)\n    x = {}1{}\n  end\nend\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let ifs = format!(
        "class DeepJob < ApplicationJob\n  def perform(event)\n{}    Wallet.find(1).increment!(:balance, 1)\n{}  end\nend\n",
        "    if event\n".repeat(depth),
        "    end\n".repeat(depth)
    );
    let blocks = format!(
        "items{}\n",
        ".each do |x|\n  x".repeat(2_000) + &"\nend".repeat(2_000)
    );
    for (name, text) in [
        ("arrays.rb", &arrays),
        ("ifs.rb", &ifs),
        ("blocks.rb", &blocks),
    ] {
        std::fs::write(d.path().join(name), text).expect("write");
    }
    std::fs::write(d.path().join("credit_job.rb"), INCREMENT).expect("write");
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert!(report.findings[0].path.ends_with("credit_job.rb"));
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

#[test]
fn migrations_declare_unique_indexes() {
    let src = r#"class AddKeys < ActiveRecord::Migration[7.1]
  def change
    create_table :payments, id: :uuid do |t|
      t.string :stripe_id, null: false, index: { unique: true }
      t.references :order, index: { unique: true }
    end
    change_table :refunds do |t|
      t.index [:charge_id, :event_id], unique: true
    end
    add_index "invoices", ["number"], unique: true
    add_index :invoices, :customer_id
    add_reference :carts, :user, index: { unique: true }
    create_table "logs", id: false do |t|
      t.string "line"
    end
  end
end
"#;
    let tree = {
        let mut p = tree_sitter::Parser::new();
        p.set_language(&tree_sitter_ruby::LANGUAGE.into())
            .expect("grammar");
        p.parse(src, None).expect("parses")
    };
    let keys: Vec<(String, Vec<String>)> = super::schema::unique_keys(tree.root_node(), src)
        .into_iter()
        .map(|k| (k.table, k.columns))
        .collect();
    let key = |t: &str, c: &[&str]| (t.to_string(), c.iter().map(|s| s.to_string()).collect());
    assert_eq!(
        keys,
        vec![
            key("payments", &["id"]),
            key("payments", &["stripe_id"]),
            key("payments", &["order_id"]),
            key("refunds", &["charge_id", "event_id"]),
            key("invoices", &["number"]),
            key("carts", &["user_id"]),
        ]
    );
}

/// `lint_source` runs on its caller's thread: 2,000 nested blocks, 3,000 nested `if`s and
/// arrays lower within an ordinary thread's 2 MiB stack.
#[test]
fn deep_input_fits_an_ordinary_threads_stack() {
    let depth = 3_000;
    let texts = [
        format!("x = {}1{}\n", "[".repeat(depth), "]".repeat(depth)),
        format!(
            "def f(e)\n{}  g\n{}end\n",
            "if e\n".repeat(depth),
            "end\n".repeat(depth)
        ),
        format!(
            "items{}\n",
            ".each do |x|\n  x".repeat(2_000) + &"\nend".repeat(2_000)
        ),
    ];
    for text in texts {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let _ = Linter::new().lint_source(Path::new("deep.rb"), &text);
            })
            .expect("spawns")
            .join()
            .expect("no overflow, no panic");
    }
}

/// A model stored in its parent's table (single-table inheritance) or a named table gets
/// that table's unique indexes from `db/schema.rb`.
#[test]
fn inherited_and_named_tables_reach_their_indexes() {
    let d = tempfile::tempdir().expect("tmp");
    let files = [
        (
            "schema.rb",
            "ActiveRecord::Schema[7.1].define(version: 1) do\n  create_table \"merchants\" do |t|\n    t.string \"name\"\n    t.string \"source\"\n    t.index [\"source\", \"name\"], unique: true\n  end\n  create_table \"legacy_charges\" do |t|\n    t.string \"stripe_id\"\n    t.index [\"stripe_id\"], unique: true\n  end\nend\n",
        ),
        ("merchant.rb", "class Merchant < ApplicationRecord\nend\n"),
        (
            "provider_merchant.rb",
            "class ProviderMerchant < Merchant\nend\n",
        ),
        (
            "charge.rb",
            "class Charge < ApplicationRecord\n  self.table_name = \"legacy_charges\"\nend\n",
        ),
        (
            "sync_job.rb",
            "class SyncJob < ApplicationJob\n  def perform(event)\n    ProviderMerchant.find_or_create_by!(source: \"ai\", name: event[\"name\"])\n    Charge.create!(stripe_id: event[\"id\"])\n  end\nend\n",
        ),
    ];
    for (name, text) in files {
        std::fs::write(d.path().join(name), text).expect("write");
    }
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    std::fs::remove_file(d.path().join("schema.rb")).expect("remove");
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    assert_eq!(report.findings.len(), 2, "{:?}", report.findings);
}
