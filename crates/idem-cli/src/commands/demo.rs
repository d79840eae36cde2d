//! `idem demo [--console]`: the whole pipeline on the shipped payloads, with no set-up; with
//! `--console`, the demo's gateway keeps running with its web console on.

use std::process::ExitCode;

use idem_gateway::demo::{Demo, new_admin_token};

pub(super) async fn demo(console: bool) -> anyhow::Result<ExitCode> {
    outln!("idem demo: a gateway on SQLite in a temporary directory, an application behind it,")?;
    outln!("and the payloads of testdata/ sent 3x each (two copies at once), one Stripe object")?;
    outln!("out of order, one bad signature; the application fails the first attempt of some.\n")?;
    let token = console.then(new_admin_token);
    let demo = Demo::run(token.as_deref()).await?;
    let report = demo.report().await?;
    out!("{}", report.table())?;
    outln!(
        "\n{} unique events in {:.1} s",
        report.unique_events,
        report.elapsed.as_secs_f64()
    )?;
    if report.passed() {
        outln!("PASS: every unique non-stale event was delivered exactly once, in entity order")?;
    } else {
        outln!("FAIL:")?;
        for problem in &report.problems {
            outln!("  - {problem}")?;
        }
    }
    if let Some(token) = token {
        outln!("\nThe demo's gateway keeps running with its events. Open the console:")?;
        outln!("  {}/console", demo.url())?;
        outln!("  token: {token}   (made for this run: it stops working when the demo stops)")?;
        outln!("Ctrl-C stops the demo and deletes its database.")?;
        let _ = tokio::signal::ctrl_c().await;
    }
    demo.stop().await?;
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
