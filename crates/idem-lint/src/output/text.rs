//! `path:line:column: RULE_ID [confidence] message`, the fix indented below (and, for a write in
//! a helper, the helper's location), then a summary.

use std::fmt::Write;

use crate::scan::Report;

/// The report as text: one finding per entry (`path:line:column: RULE [high] message` and
/// `  fix: …`), skipped files as warnings, and a closing count line.
pub fn to_text(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let _ = writeln!(
            out,
            "{}:{}:{}: {} [{}] {}\n    fix: {}",
            f.path.display(),
            f.line,
            f.column,
            f.rule,
            f.confidence.as_str(),
            f.message,
            f.fix
        );
        if let Some(h) = &f.helper {
            for c in &h.via {
                let _ = writeln!(out, "    via: {}:{}:{}", c.path.display(), c.line, c.column);
            }
            let _ = writeln!(
                out,
                "    in: {}:{}:{}: {}()",
                h.path.display(),
                h.line,
                h.column,
                h.name
            );
        }
    }
    for s in &report.skipped {
        let _ = writeln!(out, "warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let _ = writeln!(
        out,
        "idem lint: {} finding{} in {} file{} ({} skipped)",
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" },
        report.files_linted,
        if report.files_linted == 1 { "" } else { "s" },
        report.skipped.len()
    );
    out
}
