//! A Ruby file that lacks its last `end` (a `module` left open, one `end` too few inside a
//! class) is rejected by Ruby, yet tree-sitter still reads every class and method in it
//! whole: only the root becomes an `ERROR` node. Such a file is lowered rather than skipped;
//! any error below the root (a broken method, an argument tree-sitter cannot read) still
//! skips it, since a lost statement could hide a guard and invent a finding.

use tree_sitter::Node;

/// Whether the only syntax error is the root itself and what it holds is whole: statements
/// before the `module` (or `class`) left open, its keyword and name, and complete classes and
/// modules after them. Anything else after the keyword (a method, a body, a superclass)
/// belongs to the open `class` or `module`, and lowered at the top a job or controller would
/// vanish without a word: such a file is skipped with its syntax error instead.
pub(super) fn only_the_file_is_unclosed(root: Node<'_>) -> bool {
    let mut cursor = root.walk();
    let mut opened = false;
    root.is_error()
        && root.children(&mut cursor).all(|c| {
            let whole = !c.is_error() && !c.is_missing() && !c.has_error();
            let keyword = !c.is_named() && matches!(c.kind(), "module" | "class");
            opened |= keyword;
            let inside = matches!(
                c.kind(),
                "constant" | "scope_resolution" | "class" | "module" | "comment"
            );
            whole && (!opened || keyword || (c.is_named() && inside))
        })
}
