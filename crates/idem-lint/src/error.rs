//! Why a lint could not run (a finding is not an error).

use std::path::PathBuf;

/// Why a lint could not run. Every variant names what was wrong and what was expected; the
/// binary exits with code 2 on any of them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LintError {
    /// A path given to scan does not exist or cannot be read.
    #[error("cannot read {path}: {source}")]
    Path {
        /// The path as given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config file cannot be read.
    #[error("cannot read the config file {path}: {source}")]
    ConfigRead {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The config file is not valid TOML of the expected shape.
    #[error("bad config file {path}: {reason}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong, from the TOML parser or the rule and glob checks.
        reason: String,
    },
    /// A rule id that is not one of [`RuleId::ALL`](crate::RuleId::ALL).
    #[error("unknown rule {given:?}: expected one of {expected}")]
    UnknownRule {
        /// The id given.
        given: String,
        /// Every rule's id, comma-separated ([`RuleId::id_list`](crate::RuleId::id_list)).
        expected: String,
    },
    /// A path glob (`--exclude`, `paths` in the config) that does not parse.
    #[error("bad glob {glob:?}: {reason}")]
    Glob {
        /// The glob.
        glob: String,
        /// Why it does not parse.
        reason: String,
    },
    /// The consumer registry given to `--registry` is not the JSON expected.
    #[error("bad consumer registry from {from}: {reason}")]
    Registry {
        /// Where the rows came from (a file, or `standard input`).
        from: String,
        /// What is wrong.
        reason: String,
    },
    /// `git diff` could not run or failed (not a repository, unknown revision).
    #[error("git diff {base} failed in {dir}: {reason}")]
    Git {
        /// The base revision given to `--diff`.
        base: String,
        /// Where git ran.
        dir: PathBuf,
        /// git's standard error, or why it could not start.
        reason: String,
    },
}

/// The kind of a [`LintError`], for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LintErrorKind {
    /// A scanned path is missing or unreadable.
    Path,
    /// The config file is missing, unreadable or invalid.
    Config,
    /// A rule id or glob given on the command line or in the config is invalid.
    Argument,
    /// git could not produce the diff.
    Git,
    /// The consumer registry given to the inventory is not valid.
    Registry,
}

impl LintError {
    /// The kind of error.
    pub fn kind(&self) -> LintErrorKind {
        match self {
            LintError::Path { .. } => LintErrorKind::Path,
            LintError::ConfigRead { .. } | LintError::Config { .. } => LintErrorKind::Config,
            LintError::UnknownRule { .. } | LintError::Glob { .. } => LintErrorKind::Argument,
            LintError::Git { .. } => LintErrorKind::Git,
            LintError::Registry { .. } => LintErrorKind::Registry,
        }
    }
}
