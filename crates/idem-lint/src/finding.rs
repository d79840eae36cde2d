//! What a check reports.

use std::path::PathBuf;

use crate::rule::RuleId;

/// How sure a finding is: `High` when the code shows the whole shape, `Medium` when a part of
/// it is inferred (a parsed body from a global JSON parser, a marker in Redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Confidence {
    /// Part of the shape is inferred.
    Medium,
    /// The code shows the whole shape.
    High,
}

impl Confidence {
    /// `high` or `medium`.
    pub fn as_str(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
        }
    }
}

/// One finding: where (1-based line and column, in characters), which rule, what was seen, the
/// fix and how sure it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule.
    pub rule: RuleId,
    /// The file, as given or found under a scanned folder.
    pub path: PathBuf,
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1, in characters.
    pub column: u32,
    /// One line naming what was seen.
    pub message: String,
    /// The suggested fix.
    pub fix: String,
    /// High or medium.
    pub confidence: Confidence,
    /// When the write happens in a helper the handler calls: where, in the helper. The finding
    /// is at the handler's line and here too (`--diff` keeps it when either line changed).
    pub helper: Option<HelperSite>,
}

impl Finding {
    /// Where the finding is: its file and line, then, when the write is in a helper, each
    /// call on the way to it and the helper's line.
    pub fn locations(&self) -> impl Iterator<Item = (&std::path::Path, u32)> {
        std::iter::once((self.path.as_path(), self.line)).chain(self.helper.iter().flat_map(|h| {
            (h.via.iter().map(|(path, line)| (path.as_path(), *line)))
                .chain(std::iter::once((h.path.as_path(), h.line)))
        }))
    }
}

/// The second location of a finding whose write is in a helper.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HelperSite {
    /// The helper's name as defined.
    pub name: String,
    /// The helper's file.
    pub path: PathBuf,
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1, in characters.
    pub column: u32,
    /// The calls between the handler and the helper, outermost first (file and line of
    /// each intermediate helper's call to the next): where the sequence is written when a
    /// listener delegates to a service that delegates to a store.
    pub via: Vec<(PathBuf, u32)>,
}
