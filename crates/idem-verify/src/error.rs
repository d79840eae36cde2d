//! The errors of `idem verify`.

use std::path::PathBuf;

/// Why a verification could not run (a difference between runs is not an error: it is a
/// finding in the [`Report`](crate::Report)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The events file or directory could not be read.
    #[error("cannot read the events at {path}: {source}")]
    ReadEvents {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// One line (or file) of the events is not a usable delivery.
    #[error("{path} line {line}: {reason}")]
    BadEvent {
        /// The file.
        path: PathBuf,
        /// The line, from 1 (for a directory: the file's position, from 1).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The events file holds no deliveries.
    #[error("{path} holds no events")]
    NoEvents {
        /// The file or directory.
        path: PathBuf,
    },
    /// `--sign` is not `none` or `SCHEME:SECRET` with a known scheme.
    #[error("--sign {given:?}: {reason}")]
    BadSign {
        /// What was given (the secret left out).
        given: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A mode name is not known.
    #[error(
        "unknown mode {given:?}: expected duplicate, concurrent, shuffle, lost-ack or replay-later"
    )]
    UnknownMode {
        /// The name given.
        given: String,
    },
    /// `--reset` or `--state` could not be run or exited non-zero.
    #[error("the --{which} command {command:?} failed: {reason}")]
    Command {
        /// `reset` or `state`.
        which: &'static str,
        /// The shell command.
        command: String,
        /// The exit status and standard error, or why it could not start.
        reason: String,
    },
    /// The target did not answer (connection refused, timeout); a non-2xx answer is not an error.
    #[error("cannot deliver to {target}: {source}")]
    Http {
        /// The target URL.
        target: String,
        /// The client's error.
        source: reqwest::Error,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    /// A file (the JSON report, a minimal sequence) could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}
