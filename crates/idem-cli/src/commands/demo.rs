//! `idem demo`: the whole pipeline on the shipped payloads, with no set-up.

use std::process::ExitCode;

pub(super) async fn demo() -> anyhow::Result<ExitCode> {
    outln!("idem demo: a gateway on SQLite in a temporary directory, an application behind it,")?;
    outln!("and the payloads of testdata/ sent 3x each (two copies at once), one Stripe object")?;
    outln!("out of order, one bad signature; the application fails the first attempt of some.\n")?;
    let report = idem_gateway::demo::run().await?;
    out!("{}", report.table())?;
    outln!(
        "\n{} unique events in {:.1} s",
        report.unique_events,
        report.elapsed.as_secs_f64()
    )?;
    if report.passed() {
        outln!("PASS: every unique non-stale event was delivered exactly once, in entity order")?;
        Ok(ExitCode::SUCCESS)
    } else {
        outln!("FAIL:")?;
        for problem in &report.problems {
            outln!("  - {problem}")?;
        }
        Ok(ExitCode::FAILURE)
    }
}
