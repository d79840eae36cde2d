//! `idem check-config`: the configuration as it was read, checked and shown without a credential;
//! no database is opened (but with `--database`, in `super`) and no file created.

use std::process::ExitCode;

use idem_gateway::Config;
use idem_sql::redact_url;

/// Shows `config`; with `strict`, exits 1 when it has warnings.
pub(super) fn check_config(config: &Config, strict: bool) -> anyhow::Result<ExitCode> {
    outln!("configuration is valid")?;
    outln!("  listen        {}", config.listen)?;
    if let Some(admin) = config.admin_listen {
        outln!("  admin listen  {admin}")?;
    }
    if let Some(metrics) = config.metrics_listen {
        outln!("  metrics listen {metrics}")?;
    }
    outln!("  database      {}", redact_url(&config.database_url))?;
    outln!("  retention     {}", config.retention)?;
    for source in &config.sources {
        match source.broker() {
            // Checked here as written; `idem serve` connects and finds the stream or queue.
            Some(broker) => outln!(
                "  source        {} ({}, {} at {})",
                source.name,
                source.kind,
                broker.describe(),
                broker.display_url()
            )?,
            None => outln!(
                "  source        {} ({}, redelivery horizon {})",
                source.name,
                source.kind,
                humantime::format_duration(source.kind.redelivery_horizon())
            )?,
        }
    }
    for destination in &config.destinations {
        // The TLS files were read and checked with the configuration; the rate limit applies
        // per gateway process.
        let mut extra = Vec::new();
        if let Some(tls) = destination.tls.as_ref().and_then(|tls| tls.describe()) {
            extra.push(tls);
        }
        if let Some(limit) = destination.rate_limit {
            extra.push(format!("rate limit {limit} per process"));
        }
        let extra = if extra.is_empty() {
            String::new()
        } else {
            format!(" ({})", extra.join(", "))
        };
        outln!(
            "  destination   {} -> {}{extra}",
            destination.name,
            destination.describe_target()
        )?;
    }
    for route in &config.routes {
        // A route without event_types takes every event of its source.
        let types = if route.event_types.is_empty() {
            String::new()
        } else {
            format!(", event types {}", route.event_types.join(", "))
        };
        let filter = route
            .filter
            .as_ref()
            .map(|f| format!(", filter {:?}", f.text()))
            .unwrap_or_default();
        // `idem serve` carries the former name's stored rows over at start.
        let renamed = route
            .renamed_from
            .as_ref()
            .map(|old| format!(", renamed from {old}"))
            .unwrap_or_default();
        outln!(
            "  route         {}: {} -> {} (ordering {}{types}{filter}{renamed})",
            route.name,
            route.source,
            route.destination,
            route.ordering.as_str()
        )?;
    }
    for retired in &config.retired_routes {
        outln!("  retired route {retired}")?;
    }
    for relay in &config.relays {
        // Checked here as written; `idem serve` opens the database and reaches the target.
        outln!(
            "  relay         {}: idem_outbox of {} -> {} at {} (batch {}, poll {})",
            relay.name,
            relay.display_database_url(),
            relay.target.kind(),
            relay.target.display_url(),
            relay.batch_size,
            humantime::format_duration(relay.poll_interval)
        )?;
    }
    match &config.telemetry {
        Some(telemetry) => outln!(
            "  traces        {} (service {}, sample ratio {})",
            telemetry.traces_url,
            telemetry.service_name,
            telemetry.sample_ratio
        )?,
        None => outln!("  traces        off")?,
    }
    let warnings = config.warnings();
    for warning in &warnings {
        outln!("warning: {warning}")?;
    }
    if strict && !warnings.is_empty() {
        outln!(
            "refused (--strict): {} warning(s); fix them or run without --strict",
            warnings.len()
        )?;
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
