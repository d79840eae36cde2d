//! `idem lint …`: runs the `idem-lint` program, as git runs its subcommands, so that its
//! tree-sitter grammars stay out of the `idem` binary's build.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// The exit code of `idem lint` when `idem-lint` cannot be found or started (as its own
/// "could not run").
const LINT_NOT_RUN: u8 = 2;

/// Runs `idem-lint args…` and exits with its code.
pub(super) fn lint(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let Some(program) = find() else {
        eprintln!(
            "error: idem lint needs the idem-lint program beside {} or on PATH; install it with \
             `cargo install --path crates/idem-lint` (from a clone of idem)",
            std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| "idem".to_owned())
        );
        return Ok(ExitCode::from(LINT_NOT_RUN));
    };
    let status = std::process::Command::new(&program)
        .args(args)
        .status()
        .with_context(|| format!("running {}", program.display()))?;
    // A code outside 0..=255 (or none: killed by a signal) is reported as "could not run".
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(LINT_NOT_RUN),
    ))
}

/// `idem-lint` beside the running `idem`, else the first on PATH.
fn find() -> Option<PathBuf> {
    let name = format!("idem-lint{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)))
        .filter(|p| p.is_file());
    beside.or_else(|| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(&name))
                .find(|p| p.is_file())
        })
    })
}
