//! A file a lint or an inventory did not read, and why.

use std::path::PathBuf;

/// A file that was not linted, and why (binary, minified, generated, does not parse,
/// unreadable). Skipping is a warning: it never changes the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The file.
    pub path: PathBuf,
    /// Why, in a few words (`does not parse (line 12)`, `minified`, `generated`, …).
    pub reason: String,
}
