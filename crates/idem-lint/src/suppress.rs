//! Inline suppressions: a comment `idem-lint: allow RULE_ID reason` on the finding's line or
//! the line above silences that rule there. One without a reason silences nothing and is
//! itself reported as `LINT_ALLOW_WITHOUT_REASON`. Comments are found as tree-sitter comment
//! nodes, so the text inside strings never counts.

use tree_sitter::Node;

use crate::checks::Hit;
use crate::finding::Confidence;
use crate::ir::Pos;
use crate::rule::RuleId;

/// One `idem-lint: allow` comment.
#[derive(Debug, Clone)]
pub(crate) struct Allow {
    pub(crate) line: u32,
    pub(crate) rules: Vec<RuleId>,
    pub(crate) has_reason: bool,
    pub(crate) pos: Pos,
}

const MARK: &str = "idem-lint: allow";

/// The `idem-lint: allow` comments of a parsed file.
pub(crate) fn allows(root: Node<'_>, src: &str) -> Vec<Allow> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        // Java, Kotlin and Rust name theirs `line_comment` and `block_comment`.
        if n.kind().ends_with("comment") {
            let text = src.get(n.byte_range()).unwrap_or("");
            if let Some(at) = text.find(MARK) {
                let rest = &text[at + MARK.len()..];
                let rest = rest.trim_end_matches("*/").trim();
                let mut words = rest.split_whitespace().peekable();
                let mut rules = Vec::new();
                while let Some(w) = words.peek() {
                    match w.trim_end_matches(',').parse::<RuleId>() {
                        Ok(r) => {
                            rules.push(r);
                            words.next();
                        }
                        Err(_) => break,
                    }
                }
                let has_reason = words.next().is_some();
                let p = n.start_position();
                out.push(Allow {
                    line: p.row as u32 + 1,
                    rules,
                    has_reason,
                    pos: Pos {
                        line: p.row as u32 + 1,
                        column: p.column as u32 + 1,
                    },
                });
            }
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    out
}

/// Drops the hits an allow with a reason covers (same line or the line above) and adds a hit
/// for each allow without one.
pub(crate) fn apply(hits: Vec<Hit>, allows: &[Allow]) -> Vec<Hit> {
    let mut kept: Vec<Hit> = hits
        .into_iter()
        .filter(|h| {
            !allows.iter().any(|a| {
                a.has_reason
                    && a.rules.contains(&h.rule)
                    && (a.line == h.pos.line || a.line + 1 == h.pos.line)
            })
        })
        .collect();
    for a in allows.iter().filter(|a| !a.has_reason) {
        let named = if a.rules.is_empty() {
            "no rule id".to_string()
        } else {
            a.rules
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        kept.push(Hit {
            rule: RuleId::LintAllowWithoutReason,
            pos: a.pos,
            message: format!(
                "`idem-lint: allow` ({named}) gives no reason, so it suppresses nothing"
            ),
            confidence: Confidence::High,
            origin: None,
        });
    }
    kept
}
