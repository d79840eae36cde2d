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
    /// `--target` is not an `http://` or `https://` URL.
    #[error(
        "--target {given:?} is not an http:// or https:// URL; expected for example http://127.0.0.1:3000/webhooks"
    )]
    BadTarget {
        /// What was given.
        given: String,
    },
    /// A mode name is not known.
    #[error(
        "unknown mode {given:?}: expected duplicate, concurrent, shuffle, lost-ack, crash, replay-later or rebuild"
    )]
    UnknownMode {
        /// The name given.
        given: String,
    },
    /// `--reset`, `--state`, `--restart` or `--successor` could not be run or exited non-zero.
    #[error("the --{which} command {command:?} failed: {reason}")]
    Command {
        /// `reset`, `state`, `restart` or `successor`.
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
    /// Most of the baseline's deliveries (more than half) were answered non-2xx: the target
    /// rejects them (a wrong `--sign` secret, no signing, a wrong path), so comparing runs
    /// would prove nothing.
    #[error(
        "the baseline: {rejected} of {total} deliveries were rejected ({statuses}): check --sign and --target"
    )]
    BaselineRejected {
        /// Deliveries answered non-2xx.
        rejected: usize,
        /// Deliveries of the baseline.
        total: usize,
        /// The non-2xx statuses seen, comma-separated (`400` or `400, 401`).
        statuses: String,
    },
    /// `--state` printed nothing (only whitespace) after the baseline.
    #[error("--state printed nothing (command {command:?})")]
    EmptyState {
        /// The shell command.
        command: String,
    },
    /// Two reads of `--state` with no delivery in between differ.
    #[error(
        "--state output differs between two reads with no deliveries in between; make it deterministic or use --ignore (first difference: {first})"
    )]
    UnstableState {
        /// The first difference, `path: first read → second read`.
        first: String,
    },
    /// A sequence moves the target to its successor (a rebuild's minimal sequence, a line with
    /// `"successor": true`) and no `--successor` command was given.
    #[error(
        "the sequence moves the target to its successor consumer version: give --successor CMD (a command that switches the target to its next consumer version, keeping its state)"
    )]
    NoSuccessor,
    /// `--budget` is zero.
    #[error("--budget must be greater than 0")]
    ZeroBudget,
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
