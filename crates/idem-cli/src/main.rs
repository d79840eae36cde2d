//! `idem`: the gateway's command line. Parses arguments and hands each command to the
//! `idem_gateway` library.

/// `print!` to stdout that returns the write's `io::Result` instead of panicking, so that a
/// reader that went away (`idem … | head -1`) ends the command quietly: see [`is_broken_pipe`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `println!` to stdout that returns the write's `io::Result` instead of panicking (see
/// [`out!`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

mod cli;
mod commands;
mod logging;
mod printable;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Err(error) = cli.check() {
        error.exit();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        // The reader of stdout is gone (`| head -1`): what it wanted was written.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, joined by `: `, leaving out each cause whose text is already in
/// what is printed (the library's messages often include their source).
pub(crate) fn chain(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

/// Whether `error` comes from writing to a pipe whose reader closed it (`idem … | head -1`):
/// not a failure of the command, which then exits 0 without a message.
pub(crate) fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
