//! `idem-lint: allow` in Java's and Kotlin's `//` and `/* */` comments: with a reason it
//! silences the rule on the next line, without one it is reported.

use std::path::Path;

use idem_lint::{Linter, RuleId};

fn rules_and_lines(path: &str, source: &str) -> Vec<(RuleId, u32)> {
    Linter::new()
        .lint_source(Path::new(path), source)
        .expect("lints")
        .iter()
        .map(|f| (f.rule, f.line))
        .collect()
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
