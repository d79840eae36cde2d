//! `idem-lint: allow` comments: with a reason they silence the rule on their line and the
//! next, without one (or naming an id idem-lint does not know) they are reported.

use std::path::Path;

use idem_lint::{Finding, Linter, RuleId};

fn lint(path: &str, source: &str) -> Vec<Finding> {
    Linter::new()
        .lint_source(Path::new(path), source)
        .expect("lints")
}

fn rules_and_lines(path: &str, source: &str) -> Vec<(RuleId, u32)> {
    lint(path, source)
        .iter()
        .map(|f| (f.rule, f.line))
        .collect()
}

/// A consumer whose one finding is DAT_RELATIVE_UPDATE on the line after `COMMENT`.
fn consumer(comment: &str) -> String {
    format!(
        "consumer.on(\"message\", async (msg) => {{\n{comment}\n  await pool.query(\"UPDATE accounts SET balance = balance - $1 WHERE id = $2\", [msg.amount, msg.account]);\n  msg.ack();\n}});\n"
    )
}

#[test]
fn the_unallowed_consumer_has_its_one_finding() {
    let lines = rules_and_lines("c.js", &consumer("  const x = 1;"));
    assert_eq!(lines, vec![(RuleId::DatRelativeUpdate, 3)]);
}

#[test]
fn an_unknown_rule_id_is_reported_and_suppresses_nothing() {
    let src = consumer(
        "  // idem-lint: allow DAT_RELATIVE_UPDATES the broker deduplicates by message id",
    );
    let found = lint("c.js", &src);
    let got: Vec<(RuleId, u32)> = found.iter().map(|f| (f.rule, f.line)).collect();
    assert_eq!(
        got,
        vec![
            (RuleId::LintAllowWithoutReason, 2),
            (RuleId::DatRelativeUpdate, 3)
        ]
    );
    let message = &found[0].message;
    assert!(message.contains("DAT_RELATIVE_UPDATES"), "{message}");
    assert!(message.contains("REL_TTL_MARKER"), "{message}");
}

/// Ways people write an allow that mean it: any case, a colon or full stop after the id,
/// parentheses, no space after `idem-lint:`, semicolons; and a reason that starts with an
/// UPPER_SNAKE word of its own is a reason, not a typo.
#[test]
fn allows_written_other_ways_are_read() {
    for comment in [
        "// idem-lint: allow DAT_RELATIVE_UPDATE FIFO_QUEUE dedups by message id",
        "// idem-lint: allow DAT_RELATIVE_UPDATE: the broker dedups",
        "// idem-lint: allow DAT_RELATIVE_UPDATE. The broker dedups",
        "// idem-lint: allow dat_relative_update the broker dedups",
        "// idem-lint: allow(DAT_RELATIVE_UPDATE) the broker dedups",
        "// idem-lint:allow DAT_RELATIVE_UPDATE the broker dedups",
        "// idem-lint: allow ARC_DUAL_WRITE;DAT_RELATIVE_UPDATE the broker dedups",
    ] {
        let src = consumer(&format!("  {comment}"));
        assert_eq!(rules_and_lines("c.js", &src), vec![], "{comment}");
    }
    // Not an allow at all: the finding stays and nothing else is said.
    let src = consumer("  // idem-lint: allowed to fail here DAT_RELATIVE_UPDATE");
    assert_eq!(
        rules_and_lines("c.js", &src),
        vec![(RuleId::DatRelativeUpdate, 3)]
    );
    // A typo with a rule's prefix after a good id is still a typo.
    let src =
        consumer("  // idem-lint: allow ARC_DUAL_WRITE DAT_RELATIVE_UPDATES the broker dedups");
    assert_eq!(
        rules_and_lines("c.js", &src),
        vec![
            (RuleId::LintAllowWithoutReason, 2),
            (RuleId::DatRelativeUpdate, 3)
        ]
    );
}

#[test]
fn ids_joined_by_commas_are_all_read() {
    for ids in [
        "ARC_DUAL_WRITE,DAT_RELATIVE_UPDATE",
        "ARC_DUAL_WRITE, DAT_RELATIVE_UPDATE",
    ] {
        let src = consumer(&format!(
            "  // idem-lint: allow {ids} the broker deduplicates"
        ));
        assert_eq!(rules_and_lines("c.js", &src), vec![], "{ids}");
    }
}

#[test]
fn a_block_comment_covers_the_line_after_its_end() {
    let src = consumer(
        "  /*\n   * idem-lint: allow DAT_RELATIVE_UPDATE the broker deduplicates\n   * by message id\n   */",
    );
    assert_eq!(rules_and_lines("c.js", &src), vec![]);
    // Without a reason it is reported at the mark's line, not the comment's first.
    let src = consumer("  /*\n   * idem-lint: allow DAT_RELATIVE_UPDATE\n   */");
    let found = lint("c.js", &src);
    let got: Vec<(RuleId, u32, u32)> = found.iter().map(|f| (f.rule, f.line, f.column)).collect();
    assert_eq!(
        got,
        vec![
            (RuleId::LintAllowWithoutReason, 3, 6),
            (RuleId::DatRelativeUpdate, 5, 14),
        ]
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    let src = consumer("  const é = \"ü\"; // idem-lint: allow DAT_RELATIVE_UPDATE");
    let found = lint("c.js", &src);
    let allow = found
        .iter()
        .find(|f| f.rule == RuleId::LintAllowWithoutReason)
        .expect("reported");
    // `  const é = "ü"; ` is 17 characters (19 bytes): the comment starts at column 18.
    assert_eq!((allow.line, allow.column), (2, 18));
}

#[test]
fn allow_comments_work_in_java_and_kotlin() {
    let java = r#"public class WalletListener {
    @RabbitListener(queues = "debits")
    public void debit(WalletDebited event) {
        // idem-lint: allow DAT_RELATIVE_UPDATE the queue deduplicates by message id
        jdbcTemplate.update("UPDATE wallets SET balance = balance - ? WHERE id = ?", event.getAmount(), event.getId());
        /* idem-lint: allow DAT_RELATIVE_UPDATE */
        jdbcTemplate.update("UPDATE wallets SET points = points + 1 WHERE id = ?", event.getId());
    }
}
"#;
    let kotlin = r#"class WalletListener {
    @RabbitListener(queues = ["debits"])
    fun debit(event: WalletDebited) {
        // idem-lint: allow DAT_RELATIVE_UPDATE the queue deduplicates by message id
        jdbcTemplate.update("UPDATE wallets SET balance = balance - ? WHERE id = ?", event.amount, event.id)
        /* idem-lint: allow DAT_RELATIVE_UPDATE */
        jdbcTemplate.update("UPDATE wallets SET points = points + 1 WHERE id = ?", event.id)
    }
}
"#;
    let expected = vec![
        (RuleId::LintAllowWithoutReason, 6),
        (RuleId::DatRelativeUpdate, 7),
    ];
    assert_eq!(rules_and_lines("WalletListener.java", java), expected);
    assert_eq!(rules_and_lines("WalletListener.kt", kotlin), expected);
}
