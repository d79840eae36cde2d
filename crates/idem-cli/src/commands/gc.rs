//! `idem gc`: delete what the retention no longer needs (inbox keys, finished events, old raw
//! bodies), in small batches.

use std::process::ExitCode;

use idem_gateway::{Gateway, GatewayDb};

pub(super) async fn gc<DB: GatewayDb>(gateway: &Gateway<DB>) -> anyhow::Result<ExitCode> {
    let report = gateway.gc().await?;
    outln!(
        "deleted {} inbox keys and {} finished events; dropped {} raw bodies",
        report.inbox_keys,
        report.events,
        report.bodies
    )?;
    Ok(ExitCode::SUCCESS)
}
