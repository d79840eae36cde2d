//! `--format sarif` output validates against the published SARIF 2.1.0 JSON schema (vendored in
//! tests/sarif/, see its NOTICE.md), with findings of several rules, a medium-confidence one,
//! a path that needs percent-encoding and a skipped file.

use std::path::Path;
use std::process::Command;

fn schema() -> serde_json::Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sarif/sarif-schema-2.1.0.json"),
    )
    .expect("vendored schema reads");
    serde_json::from_str(&text).expect("vendored schema is JSON")
}

#[test]
fn sarif_output_is_valid_sarif_2_1_0() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    for (from, to) in [
        (
            "DAT_RELATIVE_UPDATE/flag_balance_consumer.js",
            "balance consumer.js",
        ),
        ("SEC_SIG_PARSED_BODY/flag_flask_hmac.py", "flask_hmac.py"),
        (
            "DAT_UNCONDITIONAL_INSERT/flag_clicks_consumer.go",
            "clicks#1.go",
        ),
    ] {
        std::fs::copy(fixtures.join(from), dir.path().join(to)).expect("fixture copies");
    }
    std::fs::write(dir.path().join("broken.ts"), "export function (").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_idem-lint"))
        .args(["--format", "sarif", "."])
        .current_dir(dir.path())
        .output()
        .expect("idem-lint runs");
    assert_eq!(out.status.code(), Some(1), "findings exit 1");
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");

    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&log).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "SARIF schema errors: {errors:#?}");

    let run = &log["runs"][0];
    let results = run["results"].as_array().expect("results");
    let mut seen: Vec<(String, String, u64)> = results
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap_or("").to_string(),
                r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                r["locations"][0]["physicalLocation"]["region"]["startLine"]
                    .as_u64()
                    .unwrap_or(0),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            (
                "DAT_RELATIVE_UPDATE".to_string(),
                "balance%20consumer.js".to_string(),
                12
            ),
            (
                "DAT_UNCONDITIONAL_INSERT".to_string(),
                "clicks%231.go".to_string(),
                30
            ),
            (
                "SEC_SIG_PARSED_BODY".to_string(),
                "flask_hmac.py".to_string(),
                15
            ),
        ]
    );
    // The insert's table has no schema in the tree: medium confidence, SARIF level warning.
    let insert = results
        .iter()
        .find(|r| r["ruleId"] == "DAT_UNCONDITIONAL_INSERT")
        .expect("insert result");
    assert_eq!(insert["level"], "warning");
    let notes = run["invocations"][0]["toolExecutionNotifications"]
        .as_array()
        .expect("notifications");
    assert_eq!(notes.len(), 1);
    assert_eq!(
        notes[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "broken.ts"
    );
}

#[test]
fn an_empty_run_is_valid_sarif_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(env!("CARGO_BIN_EXE_idem-lint"))
        .args(["--format", "sarif", "."])
        .current_dir(dir.path())
        .output()
        .expect("idem-lint runs");
    assert_eq!(out.status.code(), Some(0));
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    assert!(validator.is_valid(&log));
    assert_eq!(log["runs"][0]["results"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_write_in_a_helper_is_a_related_location() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    std::fs::copy(
        fixtures.join("DAT_RELATIVE_UPDATE/flag_clicks_consumer.py"),
        dir.path().join("clicks.py"),
    )
    .expect("fixture copies");
    let out = Command::new(env!("CARGO_BIN_EXE_idem-lint"))
        .args(["--format", "sarif", "."])
        .current_dir(dir.path())
        .output()
        .expect("idem-lint runs");
    let log: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&log).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "SARIF schema errors: {errors:#?}");
    let results = log["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "one defect, one finding: {results:#?}");
    let r = &results[0];
    assert_eq!(
        r["locations"][0]["physicalLocation"]["region"]["startLine"],
        15
    );
    let related = &r["relatedLocations"][0]["physicalLocation"];
    assert_eq!(related["artifactLocation"]["uri"], "clicks.py");
    assert_eq!(related["region"]["startLine"], 11);
}
