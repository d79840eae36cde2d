//! `idem gc`: delete what the retention no longer needs (inbox keys, finished events, old raw
//! bodies, the console's old count rows), in small batches.

use std::process::ExitCode;

use idem_gateway::{Gateway, GatewayDb};

pub(super) async fn gc<DB: GatewayDb>(gateway: &Gateway<DB>) -> anyhow::Result<ExitCode> {
    let report = gateway.gc().await?;
    outln!(
        "deleted {} inbox keys, {} finished events and {} count rows older than a week; \
         dropped {} raw bodies",
        report.inbox_keys,
        report.events,
        report.counts,
        report.bodies
    )?;
    Ok(ExitCode::SUCCESS)
}
