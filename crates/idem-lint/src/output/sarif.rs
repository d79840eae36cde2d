//! SARIF 2.1.0 (OASIS standard), as GitHub code scanning reads it: one run, the rules with
//! their help, results with physical locations relative to `%SRCROOT%`, skipped files as
//! tool execution notifications. High confidence is level `error`, medium `warning`.

use serde_json::{Value, json};

use crate::finding::Confidence;
use crate::rule::RuleId;
use crate::scan::Report;

const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// A path as a relative URI reference: `/` separators, `./` dropped, reserved characters
/// percent-encoded.
fn uri(path: &std::path::Path) -> String {
    let s = path.to_string_lossy().replace('\\', "/");
    let s = s.strip_prefix("./").unwrap_or(&s);
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn level(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "error",
        Confidence::Medium => "warning",
    }
}

/// The report as a SARIF 2.1.0 log.
pub fn to_sarif(report: &Report) -> Value {
    let rules: Vec<Value> = RuleId::ALL
        .iter()
        .map(|r| {
            json!({
                "id": r.as_str(),
                "name": r.as_str(),
                "shortDescription": { "text": r.summary() },
                "fullDescription": { "text": r.summary() },
                "help": {
                    "text": format!("{}. Fix: {}. See {}.", r.summary(), r.fix(), r.doc_path()),
                    "markdown": format!("{}.\n\n**Fix:** {}.\n\nSee `crates/idem-lint/{}`.", r.summary(), r.fix(), r.doc_path()),
                },
                "defaultConfiguration": { "level": "error" },
                "properties": { "tags": ["reliability", "idempotency"] },
            })
        })
        .collect();
    let index = |r: RuleId| RuleId::ALL.iter().position(|x| *x == r).unwrap_or(0);
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let mut result = json!({
                "ruleId": f.rule.as_str(),
                "ruleIndex": index(f.rule),
                "level": level(f.confidence),
                "message": { "text": format!("{} Fix: {}.", f.message, f.fix) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&f.path), "uriBaseId": "%SRCROOT%" },
                        "region": { "startLine": f.line, "startColumn": f.column },
                    }
                }],
                "properties": { "confidence": f.confidence.as_str() },
            });
            // A write in a helper: the helper's line is the finding's second location.
            // Calls between the handler and the helper come before it, outermost first.
            if let Some(h) = &f.helper {
                let via = h.via.iter().map(|c| {
                    let what = format!("a call on the way to {}()", h.name);
                    (what, uri(&c.path), c.line, c.column)
                });
                let write = (
                    format!("the write, in {}()", h.name),
                    uri(&h.path),
                    h.line,
                    h.column,
                );
                let related: Vec<Value> = via
                    .chain([write])
                    .enumerate()
                    .map(|(i, (what, uri, line, column))| {
                        json!({
                            "id": i + 1,
                            "message": { "text": what },
                            "physicalLocation": {
                                "artifactLocation": { "uri": uri, "uriBaseId": "%SRCROOT%" },
                                "region": { "startLine": line, "startColumn": column },
                            }
                        })
                    })
                    .collect();
                result["relatedLocations"] = json!(related);
            }
            result
        })
        .collect();
    let notifications: Vec<Value> = report
        .skipped
        .iter()
        .map(|s| {
            json!({
                "level": "warning",
                "message": { "text": format!("skipped: {}", s.reason) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&s.path), "uriBaseId": "%SRCROOT%" }
                    }
                }],
            })
        })
        .collect();
    json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "idem-lint",
                    "semanticVersion": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": results,
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications,
            }],
        }]
    })
}
