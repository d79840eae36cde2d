//! `idem lint …`: runs the `idem-lint` program, as git runs its subcommands, so that its
//! tree-sitter grammars stay out of the `idem` binary's build. `--inventory --database URL` is
//! read here: the consumer registry's rows go to `idem-lint --registry -` on its standard input.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};

use anyhow::{Context, bail};

/// The exit code of `idem lint` when `idem-lint` cannot be found or started (as its own
/// "could not run").
const LINT_NOT_RUN: u8 = 2;

/// Runs `idem-lint args…` and exits with its code. With `--database URL` (only beside
/// `--inventory`), the registry's rows at URL are read first and passed on as `--registry -`.
///
/// `--database` without `--inventory` or without a URL, and the errors of opening and reading
/// the registry ([`lint_registry::rows`](super::lint_registry::rows)), are printed and exit 2,
/// as idem-lint's own bad input does.
///
/// # Errors
/// `idem-lint` failing to start.
pub(super) async fn lint(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let (args, registry) = match registry(args).await {
        Ok(found) => found,
        // As idem-lint's own bad input: "could not run", not "findings".
        Err(e) => {
            eprintln!("error: {}", crate::chain(&e));
            return Ok(ExitCode::from(LINT_NOT_RUN));
        }
    };
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
    let status = run(&program, &args, registry.as_deref())?;
    // A code outside 0..=255 (or none: killed by a signal) is reported as "could not run".
    Ok(ExitCode::from(
        status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .unwrap_or(LINT_NOT_RUN),
    ))
}

/// `args` without `--database URL`, plus `--registry -` and the registry's rows (JSON) to
/// write to idem-lint's standard input when `--database` was given.
async fn registry(args: Vec<OsString>) -> anyhow::Result<(Vec<OsString>, Option<Vec<u8>>)> {
    let (mut args, database) = take_database(args)?;
    let Some(url) = database else {
        return Ok((args, None));
    };
    if !args.iter().any(|a| a == "--inventory") {
        bail!(
            "--database joins the handler inventory with the consumer registry: add --inventory \
             (idem lint --inventory --database URL)"
        );
    }
    let rows = super::lint_registry::rows(&url).await?;
    args.extend(["--registry".into(), "-".into()]);
    let json = serde_json::to_vec(&rows).context("cannot render the registry rows")?;
    Ok((args, Some(json)))
}

/// Runs `program` with `args`, writing `stdin` to its standard input when given.
fn run(
    program: &std::path::Path,
    args: &[OsString],
    stdin: Option<&[u8]>,
) -> anyhow::Result<std::process::ExitStatus> {
    let mut command = std::process::Command::new(program);
    command.args(args);
    let Some(input) = stdin else {
        return command
            .status()
            .with_context(|| format!("running {}", program.display()));
    };
    let mut child = command
        .stdin(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", program.display()))?;
    if let Some(mut pipe) = child.stdin.take() {
        // A program that exits before reading (bad arguments) closes the pipe: its own
        // message and exit code are the answer, not the broken pipe.
        let _ = pipe.write_all(input);
    }
    child
        .wait()
        .with_context(|| format!("running {}", program.display()))
}

/// `args` without `--database URL` (or `--database=URL`), and the URL.
fn take_database(args: Vec<OsString>) -> anyhow::Result<(Vec<OsString>, Option<String>)> {
    let mut rest = Vec::with_capacity(args.len());
    let mut url = None;
    let mut iter = args.into_iter();
    while let Some(arg) = iter.next() {
        let text = arg.to_str();
        if text == Some("--database") {
            let value = iter
                .next()
                .filter(|v| !v.to_string_lossy().starts_with("--"));
            let Some(value) = value else {
                bail!("--database needs a URL (idem lint --inventory --database sqlite://app.db)");
            };
            url = Some(utf8(&value)?);
        } else if let Some(value) = text.and_then(|t| t.strip_prefix("--database=")) {
            url = Some(value.to_owned());
        } else {
            rest.push(arg);
        }
    }
    Ok((rest, url))
}

fn utf8(value: &OsStr) -> anyhow::Result<String> {
    value
        .to_str()
        .map(str::to_owned)
        .with_context(|| format!("--database {value:?} is not UTF-8 text"))
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
