//! Bad Java and Kotlin input: a file that does not parse or is not UTF-8 is skipped with the
//! reason, a deeply nested one is lowered without exhausting the stack, and broken Spring
//! configuration or Liquibase changelogs are read for what they hold; the rest of the tree is
//! still linted.

use std::path::Path;

use idem_lint::{Linter, RuleId};

/// A listener the tree still has to report (an increment with no ledger).
const DEBIT: &str = r#"
public class WalletListener {
    @RabbitListener(queues = "debits")
    public void debit(WalletDebited event) {
        jdbcTemplate.update("UPDATE wallets SET balance = balance - ? WHERE id = ?", event.getAmount(), event.getId());
    }
}
"#;

fn write(dir: &Path, name: &str, text: impl AsRef<[u8]>) {
    std::fs::write(dir.join(name), text).expect("write");
}

#[test]
fn broken_and_non_utf8_jvm_files_are_skipped_with_the_reason() {
    let d = tempfile::tempdir().expect("tmp");
    write(d.path(), "WalletListener.java", DEBIT);
    write(
        d.path(),
        "Broken.java",
        "public class Broken { void f( { }\n",
    );
    write(d.path(), "Broken.kt", "class Broken { fun f( = }\n");
    write(d.path(), "Latin1.java", b"// caf\xe9\nclass Latin1 {}\n");
    write(d.path(), "application.yml", b"spring:\n  kafka: [\xff\n");
    write(
        d.path(),
        "changelog.xml",
        "<databaseChangeLog><createTable tableName=\"x\"><column name=",
    );
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    let skipped: Vec<(String, String)> = report
        .skipped
        .iter()
        .map(|s| {
            let name = s.path.file_name().map(|n| n.to_string_lossy().into_owned());
            (name.unwrap_or_default(), s.reason.clone())
        })
        .collect();
    assert!(
        skipped.contains(&(
            "Broken.java".into(),
            "does not parse (java syntax error at line 1)".into()
        )),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|(n, r)| n == "Broken.kt" && r.starts_with("does not parse (kotlin syntax error")),
        "{skipped:?}"
    );
    assert!(
        skipped.contains(&("Latin1.java".into(), "not UTF-8 text".into())),
        "{skipped:?}"
    );
    // Its consumer settings would go unread: a warning, not silence.
    assert!(
        skipped.contains(&(
            "application.yml".into(),
            "not UTF-8 text (YAML is UTF-8)".into()
        )),
        "{skipped:?}"
    );
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert_eq!(report.findings[0].rule, RuleId::DatRelativeUpdate);
}

/// `java.util.Properties` reads ISO 8859-1: such a file's settings are read, not dropped.
#[test]
fn latin1_properties_are_read() {
    let d = tempfile::tempdir().expect("tmp");
    write(
        d.path(),
        "application.properties",
        b"# R\xe9ception des commandes\nspring.kafka.consumer.group-id=orders\nspring.kafka.consumer.enable-auto-commit=true\n",
    );
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    let found: Vec<(RuleId, u32)> = report.findings.iter().map(|f| (f.rule, f.line)).collect();
    assert_eq!(found, vec![(RuleId::RelAckBeforeCommit, 3)]);
}

#[test]
fn deeply_nested_jvm_files_do_not_crash() {
    let d = tempfile::tempdir().expect("tmp");
    let mut java = String::from("class Deep { String s = \"a\"\n");
    java.push_str(&"  + \"a\"\n".repeat(30_000));
    java.push_str(";\n void f() { g(");
    java.push_str(&"(\n".repeat(3_000));
    java.push('1');
    java.push_str(&")\n".repeat(3_000));
    java.push_str("); }\n}\n");
    let mut kotlin = String::from("fun f() {\n");
    kotlin.push_str(&"run {\n".repeat(1_500));
    kotlin.push_str("save(x)\n");
    kotlin.push_str(&"}\n".repeat(1_500));
    kotlin.push_str("}\n");
    write(d.path(), "Deep.java", java);
    write(d.path(), "Deep.kt", kotlin);
    write(d.path(), "WalletListener.java", DEBIT);
    let report = Linter::new()
        .scan(&[d.path().to_path_buf()])
        .expect("scans");
    // Lowered, not skipped: the depth bound of the lowering holds.
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.files_linted, 3);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
}
