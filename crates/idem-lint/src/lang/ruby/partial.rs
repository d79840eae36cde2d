//! A Ruby file that lacks its last `end` (a `module` left open, one `end` too few inside a
//! class) is rejected by Ruby, yet tree-sitter still reads every class and method in it
//! whole: only the root becomes an `ERROR` node. Such a file is lowered rather than skipped;
//! any error below the root (a broken method, an argument tree-sitter cannot read) still
//! skips it, since a lost statement could hide a guard and invent a finding.

use tree_sitter::Node;

/// Whether the only syntax error is the root itself: every statement under it parsed.
pub(super) fn only_the_file_is_unclosed(root: Node<'_>) -> bool {
    let mut cursor = root.walk();
    root.is_error()
        && root
            .children(&mut cursor)
            .all(|c| !c.is_error() && !c.is_missing() && !c.has_error())
}
