//! Every rule has its doc page (`docs/rules/RULE_ID.md`) with what it finds, why, a wrong and a
//! right example and the fix; the README documents every rule, flag and exit code.

use std::path::Path;

use idem_lint::RuleId;

#[test]
fn every_rule_has_a_complete_doc_page() {
    for rule in RuleId::ALL {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rule.doc_path());
        let page =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            page.starts_with(&format!("# {} ", rule.as_str())),
            "{rule}: title"
        );
        for section in [
            "**What it finds.**",
            "**Why it matters.**",
            "**Wrong**",
            "**Right**",
            "**Fix.**",
        ] {
            assert!(page.contains(section), "{rule}: missing {section}");
        }
    }
}

#[test]
fn readme_documents_rules_flags_and_exit_codes() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md reads");
    for rule in RuleId::ALL {
        assert!(readme.contains(rule.as_str()), "README lists {rule}");
    }
    for flag in [
        "--diff",
        "--format",
        "--rules",
        "--exclude",
        "--fail-on",
        "--config",
        "idem-lint: allow",
    ] {
        assert!(readme.contains(flag), "README documents {flag}");
    }
    for code in ["| 0 |", "| 1 |", "| 2 |"] {
        assert!(readme.contains(code), "README exit code row {code}");
    }
}

/// The pre-commit hook runs an installed `idem-lint` (a Rust hook would `cargo install` the
/// virtual workspace and fail); the CI example uploads SARIF and fetches the merge base.
#[test]
fn the_pre_commit_hook_and_the_ci_example_are_where_teams_look() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let hooks = std::fs::read_to_string(crate_dir.join("../../.pre-commit-hooks.yaml"))
        .expect(".pre-commit-hooks.yaml at the repository root");
    assert!(hooks.contains("- id: idem-lint"), "{hooks}");
    assert!(hooks.contains("language: system"), "{hooks}");
    assert!(hooks.contains("entry: idem-lint "), "{hooks}");
    let ci = std::fs::read_to_string(crate_dir.join("examples/ci/idem-lint.yml"))
        .expect("examples/ci/idem-lint.yml");
    for needed in [
        "github/codeql-action/upload-sarif",
        "security-events: write",
        "fetch-depth: 0",
        "--format sarif",
        "--diff",
    ] {
        assert!(ci.contains(needed), "the CI example has {needed}");
    }
}
