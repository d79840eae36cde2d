//! The `idem-lint` command line as `idem lint` runs it: exit codes, formats, rule selection,
//! exclusions, the config file, suppressions, skipped files, `.gitignore` and `--diff`.

use std::path::Path;
use std::process::{Command, Output};

const RELATIVE: &str = r#"const { Pool } = require("pg");
const pool = new Pool();

async function handleWithdrawal(event) {
  await pool.query("UPDATE accounts SET balance = balance - $1 WHERE id = $2", [event.amount, event.account]);
}

module.exports = { handleWithdrawal };
"#;

const INSERT: &str = r#"const { Pool } = require("pg");
const pool = new Pool();

async function handleSignup(event) {
  await pool.query("INSERT INTO welcome_emails (user_id) VALUES ($1)", [event.userId]);
}

module.exports = { handleSignup };
"#;

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idem-lint"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("idem-lint runs")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    std::fs::write(path, body).expect("write");
}

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .status()
        .expect("git runs");
    assert!(st.success(), "git {args:?}");
}

#[test]
fn findings_exit_1_and_name_rule_file_line() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "withdraw.js", RELATIVE);
    let o = run(d.path(), &["withdraw.js"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("withdraw.js:5:"), "{}", text(&o));
    assert!(
        text(&o).contains("DAT_RELATIVE_UPDATE [high]"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("fix: "), "{}", text(&o));
}

#[test]
fn clean_code_exits_0() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "ok.py", "def add(a, b):\n    return a + b\n");
    let o = run(d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("0 findings in 1 file"), "{}", text(&o));
}

#[test]
fn fail_on_high_ignores_medium_findings() {
    let d = tempfile::tempdir().expect("tmp");
    // No schema says whether welcome_emails has a unique key: medium.
    write(d.path(), "signup.js", INSERT);
    assert_eq!(run(d.path(), &["."]).status.code(), Some(1));
    let o = run(d.path(), &[".", "--fail-on", "high"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("DAT_UNCONDITIONAL_INSERT [medium]"),
        "{}",
        text(&o)
    );
}

#[test]
fn could_not_run_exits_2_with_the_reason() {
    let d = tempfile::tempdir().expect("tmp");
    let o = run(d.path(), &["no-such-dir"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("cannot read no-such-dir"), "{}", err(&o));

    let o = run(d.path(), &["--rules", "REL_NOPE"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("unknown rule \"REL_NOPE\""), "{}", err(&o));
    // The list of expected ids is every rule's, the three added last included.
    for id in idem_lint::RuleId::ALL {
        assert!(err(&o).contains(id.as_str()), "{id:?}: {}", err(&o));
    }

    write(d.path(), "idem-lint.toml", "disable = [\"NOT_A_RULE\"]\n");
    let o = run(d.path(), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("bad config file idem-lint.toml"),
        "{}",
        err(&o)
    );
    assert!(err(&o).contains("NOT_A_RULE"), "{}", err(&o));

    let o = run(d.path(), &["--config", "missing.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("cannot read the config file missing.toml"),
        "{}",
        err(&o)
    );

    let o = run(d.path(), &["--format", "xml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn json_report_has_every_field() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "withdraw.js", RELATIVE);
    let o = run(d.path(), &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let f = &v["findings"][0];
    assert_eq!(f["rule"], "DAT_RELATIVE_UPDATE");
    assert_eq!(f["path"], "./withdraw.js");
    assert_eq!(f["line"], 5);
    assert_eq!(f["confidence"], "high");
    assert!(f["column"].as_u64().is_some_and(|c| c > 1));
    assert!(f["message"].as_str().is_some_and(|m| m.contains("balance")));
    assert!(f["fix"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(v["files_linted"], 1);
}

#[test]
fn rules_and_exclude_narrow_the_report() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "withdraw.js", RELATIVE);
    write(d.path(), "vendor/signup.js", INSERT);
    let o = run(d.path(), &["--rules", "DAT_UNCONDITIONAL_INSERT"]);
    assert!(!text(&o).contains("DAT_RELATIVE_UPDATE"), "{}", text(&o));
    assert!(
        text(&o).contains("DAT_UNCONDITIONAL_INSERT"),
        "{}",
        text(&o)
    );
    let o = run(d.path(), &["--exclude", "vendor/**"]);
    assert!(!text(&o).contains("signup.js"), "{}", text(&o));
    assert!(text(&o).contains("withdraw.js"), "{}", text(&o));
}

#[test]
fn config_disables_and_scopes_rules() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "app/withdraw.js", RELATIVE);
    write(d.path(), "legacy/withdraw.js", RELATIVE);
    write(
        d.path(),
        "idem-lint.toml",
        "[rules.DAT_RELATIVE_UPDATE]\nexclude = [\"legacy/**\"]\n",
    );
    let o = run(d.path(), &[]);
    assert!(text(&o).contains("app/withdraw.js:5"), "{}", text(&o));
    assert!(!text(&o).contains("legacy/withdraw.js"), "{}", text(&o));
    write(
        d.path(),
        "other.toml",
        "disable = [\"DAT_RELATIVE_UPDATE\"]\n",
    );
    let o = run(d.path(), &["--config", "other.toml"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn suppression_needs_a_reason() {
    let d = tempfile::tempdir().expect("tmp");
    let with_reason = RELATIVE.replace(
        "  await pool.query(\"UPDATE",
        "  // idem-lint: allow DAT_RELATIVE_UPDATE the broker deduplicates by message id\n  await pool.query(\"UPDATE",
    );
    write(d.path(), "a.js", &with_reason);
    let o = run(d.path(), &["a.js"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    let without = RELATIVE.replace(
        "  await pool.query(\"UPDATE",
        "  // idem-lint: allow DAT_RELATIVE_UPDATE\n  await pool.query(\"UPDATE",
    );
    write(d.path(), "b.js", &without);
    let o = run(d.path(), &["b.js"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("b.js:5:3: LINT_ALLOW_WITHOUT_REASON"),
        "{}",
        text(&o)
    );
    assert!(text(&o).contains("b.js:6:"), "{}", text(&o));
    assert!(text(&o).contains("DAT_RELATIVE_UPDATE"), "{}", text(&o));

    // Inside a string it is no comment.
    let in_string = RELATIVE.replace(
        "module.exports",
        "const note = \"idem-lint: allow DAT_RELATIVE_UPDATE\";\nmodule.exports",
    );
    write(d.path(), "c.js", &in_string);
    let o = run(d.path(), &["c.js"]);
    assert!(
        !text(&o).contains("LINT_ALLOW_WITHOUT_REASON"),
        "{}",
        text(&o)
    );
}

/// A line of thousands of blanks (trailing spaces left by an editor) does not make a handler
/// "minified": it is linted.
#[test]
fn a_long_blank_run_is_not_minified() {
    let d = tempfile::tempdir().expect("tmp");
    let padded = RELATIVE.replacen("\n", &format!("{}\n", " ".repeat(6_000)), 1);
    write(d.path(), "padded.js", &padded);
    let t = text(&run(d.path(), &[]));
    assert!(!t.contains("minified"), "{t}");
    assert!(t.contains("padded.js:5:"), "{t}");
}

#[test]
fn unparseable_minified_generated_and_binary_files_are_skipped() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "broken.py", "def handler(event:\n    return\n");
    write(
        d.path(),
        "bundle.min.js",
        &format!("var a={};\n", "1+".repeat(2000) + "1"),
    );
    write(
        d.path(),
        "gen.go",
        "// Code generated by protoc-gen-go. DO NOT EDIT.\npackage gen\n",
    );
    std::fs::write(d.path().join("blob.ts"), [0u8, 159, 146, 150]).expect("write");
    let o = run(d.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "skips do not fail: {}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("warning: skipped ./broken.py: does not parse (python syntax error at line 1)"),
        "{t}"
    );
    assert!(t.contains("skipped ./bundle.min.js: minified"), "{t}");
    assert!(t.contains("skipped ./gen.go: generated"), "{t}");
    assert!(t.contains("skipped ./blob.ts: binary"), "{t}");
    assert!(t.contains("0 findings in 0 files (4 skipped)"), "{t}");
}

/// A file over 2 MiB (a generated bundle), a symlink loop (of files and of folders) and a file
/// in Latin-1: each is skipped with a warning, the rest is linted, nothing crashes.
#[cfg(unix)]
#[test]
fn huge_looping_and_non_utf8_files_are_skipped_with_a_warning() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "withdraw.js", RELATIVE);
    let huge = "export const table = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];\n".repeat(50_000);
    write(d.path(), "generated_table.js", &huge);
    std::os::unix::fs::symlink("b.js", d.path().join("a.js")).expect("symlink");
    std::os::unix::fs::symlink("a.js", d.path().join("b.js")).expect("symlink");
    std::os::unix::fs::symlink(".", d.path().join("again")).expect("symlink");
    std::fs::write(
        d.path().join("latin1.py"),
        b"# caf\xe9\ndef handler(event):\n    return 1\n",
    )
    .expect("write");
    let o = run(d.path(), &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t} {}", err(&o));
    assert!(t.contains("withdraw.js:5:"), "{t}");
    assert!(
        t.contains("skipped ./generated_table.js: larger than 2 MiB"),
        "{t}"
    );
    assert!(t.contains("skipped ./a.js: unreadable"), "{t}");
    assert!(t.contains("skipped ./b.js: unreadable"), "{t}");
    assert!(t.contains("skipped ./latin1.py: not UTF-8 text"), "{t}");
    assert!(t.contains("1 finding in 1 file (4 skipped)"), "{t}");
}

/// A symlink to a FIFO (which would block a read for ever) or to `/dev/zero` (which never
/// ends) is skipped as not a regular file; the rest of the tree is linted.
#[cfg(unix)]
#[test]
fn links_to_fifos_and_devices_are_skipped() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "withdraw.js", RELATIVE);
    let made = std::process::Command::new("mkfifo")
        .arg(d.path().join("queue"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::os::unix::fs::symlink("queue", d.path().join("job.rb")).expect("symlink");
    std::os::unix::fs::symlink("/dev/zero", d.path().join("zero.rs")).expect("symlink");
    let o = run(d.path(), &[]);
    let t = text(&o);
    assert!(t.contains("skipped ./job.rb: not a regular file"), "{t}");
    assert!(t.contains("skipped ./zero.rs: not a regular file"), "{t}");
    assert!(t.contains("1 finding in 1 file (2 skipped)"), "{t}");
}

/// A schema file past the 2 MiB of source files (a large database's `db/schema.rb`) is still
/// read: its unique index keeps the insert it referees safe.
#[test]
fn a_schema_past_two_mib_keeps_its_unique_keys() {
    let d = tempfile::tempdir().expect("tmp");
    let mut schema = String::from("ActiveRecord::Schema[7.1].define(version: 1) do\n");
    for i in 0..50_000 {
        schema.push_str(&format!(
            "  create_table \"audit_{i}\" do |t|\n    t.string \"note\"\n  end\n"
        ));
    }
    schema.push_str("  create_table \"payments\" do |t|\n    t.string \"stripe_id\"\n    t.index [\"stripe_id\"], unique: true\n  end\nend\n");
    assert!(schema.len() > 2 * 1024 * 1024);
    write(d.path(), "db/schema.rb", &schema);
    write(
        d.path(),
        "app/jobs/payment_job.rb",
        "class PaymentJob < ApplicationJob\n  def perform(event)\n    Payment.create!(stripe_id: event[\"id\"])\n  end\nend\n",
    );
    let o = run(d.path(), &[]);
    let t = text(&o);
    assert!(t.contains("0 findings in 2 files (0 skipped)"), "{t}");
    // The same job without the schema is an unrefereed insert.
    std::fs::remove_file(d.path().join("db/schema.rb")).expect("remove");
    let t = text(&run(d.path(), &[]));
    assert!(t.contains("DAT_UNCONDITIONAL_INSERT"), "{t}");
}

#[test]
fn gitignored_files_are_not_scanned() {
    let d = tempfile::tempdir().expect("tmp");
    git(d.path(), &["init", "-q"]);
    write(d.path(), ".gitignore", "build/\n");
    write(d.path(), "build/withdraw.js", RELATIVE);
    write(d.path(), "src/signup.js", INSERT);
    let o = run(d.path(), &[]);
    assert!(!text(&o).contains("build/withdraw.js"), "{}", text(&o));
    assert!(text(&o).contains("src/signup.js"), "{}", text(&o));
}

#[test]
fn diff_reports_only_changed_lines() {
    let d = tempfile::tempdir().expect("tmp");
    git(d.path(), &["init", "-q"]);
    write(d.path(), "withdraw.js", RELATIVE);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "base"]);
    // A new relative update on a new line 6; the old one on line 5 is unchanged.
    let changed = RELATIVE.replace(
        "[event.amount, event.account]);\n}",
        "[event.amount, event.account]);\n  await pool.query(\"UPDATE accounts SET fees = fees + $1 WHERE id = $2\", [event.fee, event.account]);\n}",
    );
    write(d.path(), "withdraw.js", &changed);
    write(d.path(), "new.js", INSERT);
    let o = run(d.path(), &["--diff", "HEAD"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("withdraw.js:6:"), "{t}");
    assert!(!t.contains("withdraw.js:5:"), "{t}");
    assert!(t.contains("new.js:5:"), "untracked files are new: {t}");

    let o = run(d.path(), &["--diff", "no-such-rev"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("git diff no-such-rev failed"),
        "{}",
        err(&o)
    );
}

/// `--diff main` on a branch: the branch's commits, its uncommitted edits and its new files
/// count; a commit that landed on `main` after the branch started does not (three dots: with
/// two, the line `main` removed from `shared.js` would look added by the branch).
#[test]
fn diff_is_the_pull_request_since_the_merge_base() {
    let d = tempfile::tempdir().expect("tmp");
    git(d.path(), &["init", "-q", "-b", "main"]);
    write(d.path(), "withdraw.js", RELATIVE);
    write(d.path(), "shared.js", RELATIVE);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "base"]);
    git(d.path(), &["checkout", "-q", "-b", "feature"]);
    write(d.path(), "signup.js", INSERT);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "feature"]);
    git(d.path(), &["checkout", "-q", "main"]);
    let fixed = RELATIVE.replace("balance = balance - $1", "balance = $1");
    write(d.path(), "shared.js", &fixed);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "landed on main"]);
    git(d.path(), &["checkout", "-q", "feature"]);
    let edited = RELATIVE.replace(
        "[event.amount, event.account]);\n}",
        "[event.amount, event.account]);\n  await pool.query(\"UPDATE accounts SET fees = fees + $1 WHERE id = $2\", [event.fee, event.account]);\n}",
    );
    write(d.path(), "withdraw.js", &edited);
    write(d.path(), "untracked.js", RELATIVE);
    let o = run(d.path(), &["--diff", "main"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t} {}", err(&o));
    assert!(t.contains("signup.js:5:"), "the branch's commit: {t}");
    assert!(t.contains("withdraw.js:6:"), "an uncommitted edit: {t}");
    assert!(!t.contains("withdraw.js:5:"), "an unchanged line: {t}");
    assert!(t.contains("untracked.js:5:"), "an untracked file: {t}");
    assert!(!t.contains("shared.js"), "main's own commit: {t}");
}

/// A file moved on the branch counts only its edited lines, not every line, as a pull request
/// shows it; a file added under a non-ASCII name is new.
#[test]
fn diff_counts_a_moved_file_by_its_edits() {
    let d = tempfile::tempdir().expect("tmp");
    git(d.path(), &["init", "-q", "-b", "main"]);
    write(d.path(), "withdraw.js", RELATIVE);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "base"]);
    git(d.path(), &["checkout", "-q", "-b", "feature"]);
    git(d.path(), &["mv", "withdraw.js", "payouts.js"]);
    write(d.path(), "zahlungsausgänge.js", INSERT);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "move"]);
    let o = run(d.path(), &["--diff", "main"]);
    let t = text(&o);
    assert!(
        !t.contains("payouts.js"),
        "a pure move changes no line: {t}"
    );
    assert!(t.contains("zahlungsausgänge.js:5:"), "{t}");
    let edited = RELATIVE.replace(
        "[event.amount, event.account]);\n}",
        "[event.amount, event.account]);\n  await pool.query(\"UPDATE accounts SET fees = fees + $1 WHERE id = $2\", [event.fee, event.account]);\n}",
    );
    write(d.path(), "payouts.js", &edited);
    let t = text(&run(d.path(), &["--diff", "main"]));
    assert!(
        t.contains("payouts.js:6:"),
        "the edit in the moved file: {t}"
    );
    assert!(!t.contains("payouts.js:5:"), "{t}");
}

/// Names git quotes or ends with a tab in its diff (a space, a quote) and untracked names
/// with accents are read, not left out.
#[test]
fn diff_reads_names_git_quotes() {
    let d = tempfile::tempdir().expect("tmp");
    git(d.path(), &["init", "-q", "-b", "main"]);
    write(d.path(), "keep.js", "const x = 1;\n");
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "base"]);
    git(d.path(), &["checkout", "-q", "-b", "feature"]);
    write(d.path(), "a b.js", RELATIVE);
    write(d.path(), "q\"uote.js", RELATIVE);
    git(d.path(), &["add", "."]);
    git(d.path(), &["commit", "-q", "-m", "feature"]);
    write(d.path(), "ünversioned.js", RELATIVE);
    let t = text(&run(d.path(), &["--diff", "main"]));
    for name in ["a b.js:5:", "q\"uote.js:5:", "ünversioned.js:5:"] {
        assert!(t.contains(name), "{name}: {t}");
    }
}

#[test]
fn help_calls_it_idem_lint() {
    let d = tempfile::tempdir().expect("tmp");
    let o = run(d.path(), &["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let t = text(&o);
    assert!(t.contains("Usage: idem lint"), "{t}");
    for flag in [
        "--diff",
        "--format",
        "--rules",
        "--exclude",
        "--fail-on",
        "--config",
    ] {
        assert!(t.contains(flag), "{flag} in help: {t}");
    }
}

#[test]
fn deeply_nested_files_do_not_crash() {
    let d = tempfile::tempdir().expect("tmp");
    let mut js = String::from("const s = \"a\"\n");
    for _ in 0..60_000 {
        js.push_str("  + \"a\"\n");
    }
    js.push_str(";\n");
    let mut py = String::from("x = (\n");
    py.push_str(&"(\n".repeat(2_000));
    py.push_str("1\n");
    py.push_str(&")\n".repeat(2_001));
    write(d.path(), "deep.js", &js);
    write(d.path(), "deep.py", &py);
    write(d.path(), "withdraw.js", RELATIVE);
    let o = run(d.path(), &[]);
    assert_eq!(o.status.code(), Some(1), "{} {}", text(&o), err(&o));
    assert!(text(&o).contains("1 finding in 3 files"), "{}", text(&o));
}

/// Method chains thousands of links long (a CLI's `.option(…)` list, a promise chain) in
/// TypeScript, Python and Go are linted like any file: before chains were cut at a few dozen
/// links, each link copied the whole chain and 1,000 links took 23 GB.
#[test]
fn long_method_chains_are_linted_without_blowing_up() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "withdraw.js", RELATIVE);
    let links = 3_000;
    write(
        d.path(),
        "cli.ts",
        &format!(
            "const y = yargs\n{};\n",
            "  .option(\"a\", {})\n".repeat(links)
        ),
    );
    write(
        d.path(),
        "chain.ts",
        &format!("const y = p\n{};\n", "  .then((x) => x)\n".repeat(links)),
    );
    write(
        d.path(),
        "chain.py",
        &format!("y = (a\n{})\n", "    .b()\n".repeat(links)),
    );
    write(
        d.path(),
        "chain.go",
        &format!(
            "package main\n\nfunc f() {{\n\t_ = a.\n{}\t\tb()\n}}\n",
            "\t\tb().\n".repeat(links)
        ),
    );
    let o = run(d.path(), &[]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t} {}", err(&o));
    assert!(t.contains("1 finding in 5 files (0 skipped)"), "{t}");
}
