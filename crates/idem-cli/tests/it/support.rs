//! What the binary's tests share.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use idem_testkit::downstream::Downstream;
pub(crate) use idem_testkit::pg_database;

/// The `idem` executable built for these tests.
pub(crate) const IDEM: &str = env!("CARGO_BIN_EXE_idem");

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// Puts an executable copy of `from` at `to` (mode 755) through `install`, a child process, so
/// that this process never holds `to` open for writing: tests run on many threads, and a process
/// another test spawns while a file is open for writing here inherits that descriptor until it
/// execs, so running the file at that moment fails with ETXTBSY ("Text file busy"), as
/// `binary::lint_runs_the_idem_lint_beside_it_with_every_argument` once did in CI.
pub(crate) fn install_executable(from: &std::path::Path, to: &std::path::Path) {
    let status = std::process::Command::new("install")
        .args(["-m", "755"])
        .arg(from)
        .arg(to)
        .status()
        .expect("run install");
    assert!(
        status.success(),
        "install {} {}",
        from.display(),
        to.display()
    );
}

/// Writes a shell script with `text` as an executable at `to`: written to `{to}.sh` first (a
/// file never run), then put in place by [`install_executable`].
pub(crate) fn install_script(to: &std::path::Path, text: &str) {
    let source = to.with_extension("sh");
    std::fs::write(&source, text).expect("write the script");
    install_executable(&source, to);
}
