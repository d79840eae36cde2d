//! `idem replay --source S --since T [--until T] [--type T] [--dry-run] [--force] [--json]`:
//! send a source's events of a time range again (new attempts of the same events, under the
//! same Idempotency-Key); with `--backfill`, give them deliveries on the routes that have none
//! of them; with `--rebuild --destination D [--skip-missing-bodies]`, send every one of them to
//! D as a rebuild (`Idem-Replay: rebuild`, per-entity version order).

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::bail;
use idem_gateway::operations::{RebuildReport, RebuildRequest, ReplayReport, ReplayRequest};
use idem_gateway::time::{format_time, parse_time};
use idem_gateway::{Gateway, GatewayDb};
use indicatif::{ProgressBar, ProgressStyle};

use crate::cli::ReplayArgs;

pub(super) async fn replay<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    args: ReplayArgs,
) -> anyhow::Result<ExitCode> {
    // An unknown source is refused by `Gateway::replay`, naming the configured ones; the range
    // is checked here too, to name the options as typed.
    let now = gateway.now().as_millis();
    let since = parse_time("--since", &args.since, now)?;
    let until = args
        .until
        .as_deref()
        .map(|t| parse_time("--until", t, now))
        .transpose()?;
    if since >= until.unwrap_or(now + 1) {
        bail!(
            "--since {} ({}) is not before --until {} ({}): the range is empty",
            args.since,
            format_time(since),
            args.until.as_deref().unwrap_or("(now)"),
            format_time(until.unwrap_or(now))
        );
    }
    let request = ReplayRequest {
        source: args.source,
        since,
        until,
        event_type: args.event_type,
        dry_run: args.dry_run,
        force: args.force,
    };
    if args.backfill {
        return backfill(gateway, &request, args.json).await;
    }
    if let (true, Some(destination)) = (args.rebuild, args.destination) {
        let request = RebuildRequest {
            source: request.source,
            since,
            until,
            event_type: request.event_type,
            destination,
            dry_run: request.dry_run,
            skip_missing_bodies: args.skip_missing_bodies,
        };
        return rebuild(gateway, &request, args.json).await;
    }
    // A bar only on a terminal: logs and pipes get the summary line alone.
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(0)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} deliveries")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report = gateway.replay(&request, &progress).await?;
    bar.finish_and_clear();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!("{}", requeued_line(&report, request.dry_run, request.force))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What a replay or a resend did: deliveries matched, sent again (or, `dry_run`, would be),
/// skipped and why.
pub(super) fn requeued_line(report: &ReplayReport, dry_run: bool, force: bool) -> String {
    let not_configured = if report.not_configured > 0 {
        format!(
            ", {} of a route not configured (no dispatcher would send them)",
            report.not_configured
        )
    } else {
        String::new()
    };
    format!(
        "{} deliveries matched: {} {}, {} still in progress, {} older than their entity's newest{}, {} without a stored body, {} not taken by their route's filter{}",
        report.matched,
        report.requeued,
        if dry_run {
            "would be sent again"
        } else {
            "sent again"
        },
        report.in_progress,
        report.older,
        if force {
            ""
        } else {
            " (use --force to send them)"
        },
        report.no_body,
        report.filtered,
        not_configured
    )
}

/// `--backfill`: deliveries for today's routes for the range's stored events that have none.
async fn backfill<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    request: &ReplayRequest,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let r = gateway.backfill(request).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} events matched: {} {} ({} new deliveries{}), {} already have a delivery on every route that takes them, {} not taken by the routes without one ({} route filters said no, {} read a header the event was stored without), {} without a stored body, {} unreadable with today's fields",
        r.matched,
        r.events,
        if request.dry_run {
            "would get deliveries"
        } else {
            "got deliveries"
        },
        r.created,
        if request.dry_run {
            String::new()
        } else {
            format!(", {} of them stale: recorded, not sent", r.stale)
        },
        r.covered,
        r.not_taken,
        r.filtered,
        r.undecided,
        r.no_body,
        r.unreadable
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `--rebuild`: every stored event of the range to one destination, as a rebuild.
async fn rebuild<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    request: &RebuildRequest,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let r = gateway.rebuild(request).await?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
    } else {
        outln!("{}", rebuild_line(&r, request))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What a rebuild did (or, dry, would do, and whether it would be refused).
fn rebuild_line(r: &RebuildReport, request: &RebuildRequest) -> String {
    let mut line = format!(
        "{} events matched: {} {} to {} with Idem-Replay: rebuild ({} new deliveries, {} stale ones included), {} still pending or in flight there, {} without a stored body{}, {} not taken by a route to {}",
        r.matched,
        r.queued,
        if request.dry_run {
            "would be queued"
        } else {
            "queued"
        },
        request.destination,
        r.created,
        r.stale_included,
        r.in_progress,
        r.no_body,
        if request.skip_missing_bodies {
            " (skipped)"
        } else {
            ""
        },
        r.filtered,
        request.destination
    );
    if request.dry_run && r.no_body > 0 && !request.skip_missing_bodies {
        line.push_str("; the rebuild would be refused for the missing bodies (--skip-missing-bodies skips them)");
    }
    if request.dry_run && r.in_progress > 0 {
        line.push_str("; the rebuild would be refused until those in progress finish");
    }
    line
}
