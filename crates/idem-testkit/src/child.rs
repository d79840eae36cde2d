//! Child processes of crash tests without a binary of their own: the test binary runs itself
//! again, as a real process the test can `kill -9`, executing one ignored test that is the
//! child's `main`.
//!
//! In the parent, [`command`] makes the `Command`; in the child, the ignored test calls
//! [`args`] and, when it is `Some`, runs the child and exits. The child's protocol lines (what
//! it reports to the parent) are written with [`report`] and read with [`protocol_line`], which
//! tells them apart from the test harness's own output.

use std::ffi::OsString;

/// The environment variable holding a child's arguments (a JSON list of strings).
const ARGS_VAR: &str = "IDEM_TEST_CHILD_ARGS";
/// The environment variable naming the child to run.
const NAME_VAR: &str = "IDEM_TEST_CHILD";
/// What starts each protocol line of a child.
const PREFIX: &str = "idem-child: ";

/// A command that runs this test binary again as child `name`, with `args`: it runs only the
/// ignored test `test` (its full path, such as `crash::consumer`), whose body calls [`args`].
/// Stdin is null; stdout is piped for the protocol; the child is killed when the command's
/// `Child` is dropped.
///
/// # Panics
/// When this test binary's path cannot be read.
pub fn command(test: &str, name: &str, args: &[OsString]) -> tokio::process::Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut command = tokio::process::Command::new(exe);
    command
        .args([
            test,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(NAME_VAR, name)
        .env(
            ARGS_VAR,
            serde_json::to_string(&args).expect("strings serialize"),
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

/// In a child started by [`command`] as `name`: its arguments, with `name` first (as a
/// program's `argv`); `None` in any other process (a plain `cargo test -- --ignored` run).
///
/// # Panics
/// When the arguments are not the JSON list [`command`] writes.
pub fn args(name: &str) -> Option<Vec<String>> {
    if std::env::var(NAME_VAR).ok()? != name {
        return None;
    }
    let args: Vec<String> =
        serde_json::from_str(&std::env::var(ARGS_VAR).ok()?).expect("the child's arguments");
    Some(std::iter::once(name.to_owned()).chain(args).collect())
}

/// Writes one protocol line to the parent (flushed at once: the parent may kill the child the
/// moment it reads it).
pub fn report(line: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{PREFIX}{line}");
    let _ = out.flush();
}

/// The protocol line in `text` as the child reported it, or `None` for the harness's output.
/// The prefix is looked for anywhere in the line: the test harness writes
/// `test name ... ` without a line break before running the child's test, so the child's first
/// report shares that line (reading only line starts lost it, and a test waiting for it failed
/// whenever it came first).
pub fn protocol_line(text: &str) -> Option<&str> {
    text.find(PREFIX).map(|at| &text[at + PREFIX.len()..])
}
