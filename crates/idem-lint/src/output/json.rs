//! `{"findings": [...], "skipped": [...], "files_linted": N}`.

use serde_json::{Value, json};

use crate::scan::Report;

/// The report as a JSON value: `findings` (rule, path, line, column, message, fix,
/// confidence, and `helper` — name, path, line, column — when the write is in a helper the
/// handler calls, else null), `skipped` (path, reason) and `files_linted`.
pub fn to_json(report: &Report) -> Value {
    json!({
        "findings": report.findings.iter().map(|f| json!({
            "rule": f.rule.as_str(),
            "path": f.path.to_string_lossy(),
            "line": f.line,
            "column": f.column,
            "message": f.message,
            "fix": f.fix,
            "confidence": f.confidence.as_str(),
            "helper": f.helper.as_ref().map(|h| json!({
                "name": h.name,
                "path": h.path.to_string_lossy(),
                "line": h.line,
                "column": h.column,
                "via": h.via.iter().map(|(path, line)| json!({
                    "path": path.to_string_lossy(),
                    "line": line,
                })).collect::<Vec<_>>(),
            })),
        })).collect::<Vec<_>>(),
        "skipped": report.skipped.iter().map(|s| json!({
            "path": s.path.to_string_lossy(),
            "reason": s.reason,
        })).collect::<Vec<_>>(),
        "files_linted": report.files_linted,
    })
}
