//! Inline suppressions: a comment `idem-lint: allow RULE_ID reason` on the finding's line or
//! the line above silences that rule there. One without a reason silences nothing and is
//! itself reported as `LINT_ALLOW_WITHOUT_REASON`, as is a rule id idem-lint does not know (a
//! typo would otherwise leave the finding standing with no word of why). Comments are found as
//! tree-sitter comment nodes, so the text inside strings never counts.

use tree_sitter::Node;

use crate::checks::Hit;
use crate::finding::Confidence;
use crate::ir::Pos;
use crate::rule::RuleId;

/// One `idem-lint: allow` comment.
#[derive(Debug, Clone)]
pub(crate) struct Allow {
    /// The line the mark is on (a block comment can start lines above it).
    pub(crate) line: u32,
    /// The comment's last line: the allow covers the line after it.
    pub(crate) end_line: u32,
    pub(crate) rules: Vec<RuleId>,
    /// Words in the id list shaped like rule ids that name none.
    pub(crate) unknown: Vec<String>,
    pub(crate) has_reason: bool,
    pub(crate) pos: Pos,
}

impl Allow {
    fn covers(&self, line: u32) -> bool {
        line == self.line || line == self.end_line + 1
    }
}

const MARK: &str = "idem-lint:";

/// The `idem-lint: allow` comments of a parsed file.
pub(crate) fn allows(root: Node<'_>, src: &str) -> Vec<Allow> {
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        // Java, Kotlin and Rust name theirs `line_comment` and `block_comment`.
        if n.kind().ends_with("comment")
            && let Some(a) = allow_in(n, src)
        {
            out.push(a);
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
    out
}

/// The allow a comment node carries, if it carries one.
fn allow_in(n: Node<'_>, src: &str) -> Option<Allow> {
    let text = src.get(n.byte_range())?;
    let (at, rest) = find_mark(text)?;
    let (rules, unknown, has_reason) = read_ids(rest);
    let start = n.start_position();
    let line = (start.row + text[..at].matches('\n').count()) as u32 + 1;
    // Columns count characters, as every other finding's do; the mark's own column when the
    // comment started on an earlier line.
    let from = if line as usize == start.row + 1 {
        n.start_byte()
    } else {
        n.start_byte() + at
    };
    let line_start = src[..from].rfind('\n').map_or(0, |i| i + 1);
    let column = src[line_start..from].chars().count() as u32 + 1;
    Some(Allow {
        line,
        end_line: n.end_position().row as u32 + 1,
        rules,
        unknown,
        has_reason,
        pos: Pos { line, column },
    })
}

/// Where the mark starts in a comment's text, and the text after it. `idem-lint:allow` and
/// `allow(ID)` are read as `idem-lint: allow ID`.
fn find_mark(text: &str) -> Option<(usize, &str)> {
    let at = text.find(MARK)?;
    let rest = text[at + MARK.len()..].trim_start().strip_prefix("allow")?;
    let separated = rest.is_empty()
        || rest.starts_with(|c: char| c.is_whitespace() || c.is_ascii_punctuation());
    separated.then_some((at, rest))
}

/// Reads the rule ids after the mark (separated by spaces, commas or semicolons; any case; a
/// trailing `:` or `.`, parentheses around them) and whether words follow them. A word shaped
/// like a rule id (`UPPER_SNAKE`) that names none is kept as unknown when it can only be meant
/// as one: the first word, one joined to others by commas, or one with a rule's prefix
/// (`REL_`, `DAT_`…); otherwise it starts the reason (`FIFO_QUEUE dedups by message id`).
fn read_ids(rest: &str) -> (Vec<RuleId>, Vec<String>, bool) {
    let rest = rest
        .trim_end()
        .trim_end_matches("*/")
        .replace(['(', ')'], " ");
    let mut rules = Vec::new();
    let mut unknown = Vec::new();
    let mut words = rest.split_whitespace().peekable();
    let mut first = true;
    while let Some(word) = words.peek() {
        let parts: Vec<&str> = word
            .trim_end_matches([':', '.'])
            .split([',', ';'])
            .filter(|p| !p.is_empty())
            .collect();
        let joined = parts.len() > 1;
        let read: Option<Vec<Result<RuleId, &str>>> = parts
            .iter()
            .map(|p| match p.parse::<RuleId>() {
                Ok(r) => Some(Ok(r)),
                Err(_) if shaped_like_id(p) && (first || joined || rule_prefix(p)) => Some(Err(*p)),
                Err(_) => None,
            })
            .collect();
        let Some(read) = read.filter(|r| !r.is_empty()) else {
            break;
        };
        for id in read {
            match id {
                Ok(r) => rules.push(r),
                Err(p) => unknown.push(p.to_string()),
            }
        }
        words.next();
        first = false;
    }
    (rules, unknown, words.next().is_some())
}

/// `REL_KEY_VOLATILE`-like: capitals and digits in at least two parts joined by `_`.
fn shaped_like_id(word: &str) -> bool {
    word.contains('_')
        && !word.starts_with('_')
        && word
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Whether a word starts with a rule's category (`REL_`, `DAT_`, `ARC_`…).
fn rule_prefix(word: &str) -> bool {
    let category = word.split('_').next();
    RuleId::ALL
        .iter()
        .any(|r| r.as_str().split('_').next() == category)
}

/// Drops the hits an allow with a reason covers (its line or the line after the comment) and
/// adds a hit for each allow without a reason or naming an unknown rule id.
pub(crate) fn apply(hits: Vec<Hit>, allows: &[Allow]) -> Vec<Hit> {
    let mut kept: Vec<Hit> = hits
        .into_iter()
        .filter(|h| {
            !allows
                .iter()
                .any(|a| a.has_reason && a.rules.contains(&h.rule) && a.covers(h.pos.line))
        })
        .collect();
    for a in allows {
        if let Some(message) = problem(a) {
            kept.push(Hit {
                rule: RuleId::LintAllowWithoutReason,
                pos: a.pos,
                message,
                confidence: Confidence::High,
                origin: None,
            });
        }
    }
    kept
}

/// Why an allow suppresses nothing (or less than it names), if it does.
fn problem(a: &Allow) -> Option<String> {
    if !a.unknown.is_empty() {
        return Some(format!(
            "`idem-lint: allow` names {}, which is no idem-lint rule id, so nothing is suppressed for it; expected one of {}",
            a.unknown.join(", "),
            RuleId::id_list()
        ));
    }
    if a.has_reason {
        return None;
    }
    let named = if a.rules.is_empty() {
        "no rule id".to_string()
    } else {
        let ids: Vec<&str> = a.rules.iter().map(|r| r.as_str()).collect();
        ids.join(", ")
    };
    Some(format!(
        "`idem-lint: allow` ({named}) gives no reason, so it suppresses nothing"
    ))
}
