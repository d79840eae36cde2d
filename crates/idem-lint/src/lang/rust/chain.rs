//! The syntax shared by expressions, query builders and macro arguments: a call chain's links,
//! what is transparent around a value, raw string literals.

use tree_sitter::Node;

use super::kids;

/// One call of a chain: the first is a path call (`sqlx::query(…)`, `self.repo.save(…)`) or a
/// macro; the others are methods on the previous one's result.
#[derive(Clone, Copy)]
pub(super) struct Link<'t> {
    /// The callee node (a path, a field expression or a macro invocation).
    pub(super) callee: Node<'t>,
    /// The arguments node (`arguments`, or a macro's `token_tree`).
    pub(super) args: Option<Node<'t>>,
    /// The method name node (the callee's last name).
    pub(super) method: Option<Node<'t>>,
    pub(super) node: Node<'t>,
}

/// Strips what is transparent around a value: `.await`, `?`, `&`, `&mut`, `*`, parentheses.
pub(super) fn strip(mut n: Node<'_>) -> Node<'_> {
    for _ in 0..64 {
        let inner = match n.kind() {
            "await_expression" | "try_expression" | "parenthesized_expression" => {
                kids(n).into_iter().next()
            }
            "reference_expression" => n.child_by_field_name("value"),
            "unary_expression" if n.child(0).is_some_and(|o| o.kind() == "*") => {
                kids(n).into_iter().next()
            }
            _ => None,
        };
        match inner {
            Some(i) => n = i,
            None => break,
        }
    }
    n
}

/// The text of `r"…"`, `r#"…"#`, `br#"…"#`.
pub(super) fn raw_string(t: &str) -> String {
    let t = t.strip_prefix('b').unwrap_or(t);
    let t = t.strip_prefix('r').unwrap_or(t);
    let hashes = t.chars().take_while(|c| *c == '#').count();
    let t = t.get(hashes..).unwrap_or("");
    let t = t.strip_prefix('"').unwrap_or(t);
    let t = t.get(..t.len().saturating_sub(hashes)).unwrap_or(t);
    t.strip_suffix('"').unwrap_or(t).to_string()
}
