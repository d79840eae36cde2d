//! `GET /console`: the overview.

use axum::Extension;
use axum::extract::{RawQuery, State as StateOf};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::super::charts::chart;
use super::super::form::Fields;
use super::super::overview::{
    AlertRow, BreakerState, DispatcherHealth, Health, HealthRow, Overview, Range, RejectedRow,
    SeriesRow,
};
use super::super::session::Session;
use super::super::state::{PREFIX, State};
use super::super::templates::{Page, duration, encode, error_page, time};
use crate::model::counts::Metric;
use crate::store::GatewayDb;

/// What each metric is called on the page.
fn label(metric: Metric) -> &'static str {
    match metric {
        Metric::Accepted => "accepted",
        Metric::Duplicate => "duplicates",
        Metric::Stale => "stale",
        Metric::Tie => "version ties",
        Metric::Gap => "version gaps",
        Metric::Delivered => "delivered",
        Metric::Retried => "retried",
        Metric::Dead => "dead",
    }
}

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    RawQuery(raw): RawQuery,
) -> Response {
    let fields = Fields::parse(raw.unwrap_or_default().as_bytes());
    let range = fields
        .get("range")
        .and_then(Range::parse)
        .unwrap_or_default();
    match state.gateway.overview_over(range).await {
        Ok(overview) => Page::new("Overview")
            .of(&session, PREFIX)
            .render(render(&overview))
            .into_response(),
        Err(e) => error_page(&e),
    }
}

fn render(overview: &Overview) -> Markup {
    let now = overview.now;
    let range = overview.range;
    html! {
        p.hint { "As of " (time(now)) ". Charts " (range.per()) "; hover a bar for its time and count." }
        nav.ranges aria-label="Time range" {
            "Range: "
            @for r in Range::ALL {
                @if r == range {
                    strong aria-current="true" { (r.as_str()) } " "
                } @else {
                    a href={ "/console?range=" (r.as_str()) } { (r.as_str()) } " "
                }
            }
        }
        h2 { "Destination health" }
        (health_table(&overview.health, now))
        h2 { "Alerts" }
        (alerts_table(&overview.alerts))
        h2 { "Rejected requests" }
        (rejected_table(&overview.rejected, overview))
        h2 { "Backlog and dispatchers" }
        p {
            "Store: "
            (health(&overview.store))
            " · Oldest undelivered event: "
            @match overview.oldest_undelivered {
                Some(t) => { (duration(now - t)) " old (received " (time(t)) ")" }
                None => "none waiting",
            }
        }
        table #backlog {
            caption.hint { "Deliveries per destination that are not finished, and dead letters" }
            thead { tr {
                th scope="col" { "destination" }
                th.num scope="col" { "pending" }
                th.num scope="col" { "retrying" }
                th.num scope="col" { "in flight" }
                th.num scope="col" { "dead" }
                th scope="col" { "oldest undelivered" }
                th scope="col" { "oldest due" }
                th scope="col" { "dispatcher" }
            } }
            tbody {
                @for row in &overview.backlog {
                    tr data-destination=(row.destination) {
                        th scope="row" { (row.destination) }
                        td.num data-metric="pending" { (row.pending) }
                        td.num data-metric="retrying" { (row.retrying) }
                        td.num data-metric="in_flight" { (row.in_flight) }
                        td.num data-metric="dead" {
                            @if row.dead > 0 {
                                a href={ "/console/dead-letters?destination=" (encode(&row.destination)) } { (row.dead) }
                            } @else { "0" }
                        }
                        td { @match row.oldest_undelivered {
                            Some(t) => (duration(now - t)),
                            None => "—",
                        } }
                        td data-metric="oldest_due" { @match row.dispatcher.oldest_due {
                            Some(t) => (duration(now - t)),
                            None => "—",
                        } }
                        td.dispatcher { (dispatcher(&row.dispatcher)) }
                    }
                }
            }
        }
        h2 { "Sources" }
        @for row in &overview.sources { (series("source", row, true, overview)) }
        h2 { "Destinations" }
        @for row in &overview.destinations { (series("destination", row, false, overview)) }
    }
}

fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "—".to_owned(), |rate| format!("{:.1} %", rate * 100.0))
}

fn millis(ms: Option<i64>) -> String {
    ms.map_or_else(|| "—".to_owned(), |ms| format!("{ms} ms"))
}

/// Each destination's health, success rate, latencies, oldest due delivery and breaker.
fn health_table(rows: &[HealthRow], now: i64) -> Markup {
    html! {
        table #health {
            caption.hint { "From each destination's attempts of its health window (every gateway process's)" }
            thead { tr {
                th scope="col" { "destination" }
                th scope="col" { "health" }
                th.num scope="col" { "success rate" }
                th.num scope="col" { "attempts" }
                th.num scope="col" { "latency p50" }
                th.num scope="col" { "latency p99" }
                th scope="col" { "oldest due" }
                th scope="col" { "circuit breaker" }
            } }
            tbody {
                @for row in rows {
                    @let a = &row.assessment;
                    tr data-health-of=(row.destination) data-health=(a.health.as_str()) {
                        th scope="row" { (row.destination) }
                        td data-metric="health" {
                            span class={ "state health-" (a.health.as_str()) } { (a.health.as_str()) }
                            @if let Some(reason) = &a.reason { " (" (reason) ")" }
                        }
                        td.num data-metric="success_rate" { (percent(a.success_rate)) }
                        td.num data-metric="attempts" { (a.attempts) }
                        td.num data-metric="p50" { (millis(a.p50_ms)) }
                        td.num data-metric="p99" { (millis(a.p99_ms)) }
                        td data-metric="oldest_due" { @match a.oldest_due_ms {
                            Some(age) => (duration(age)),
                            None => "—",
                        } }
                        td data-metric="breaker" { (breaker(&row.breaker, now)) }
                    }
                }
            }
        }
    }
}

fn breaker(state: &BreakerState, now: i64) -> Markup {
    match state {
        BreakerState::Closed => html! { "closed" },
        BreakerState::Off => html! { "off (circuit_breaker = false)" },
        BreakerState::Operator => html! { "paused by an operator" },
        BreakerState::Open {
            since,
            reason,
            last_errors,
            next_probe,
        } => html! {
            span.state.state-dead { "open" } ": paused since " (time(*since)) " — " (reason)
            @if let Some(at) = next_probe {
                "; next probe " @if *at > now { "in " (duration(at - now)) } @else { "now" }
            }
            @if !last_errors.is_empty() {
                ul.errors { @for error in last_errors { li { code { (error) } } } }
            }
        },
    }
}

fn alerts_table(rows: &[AlertRow]) -> Markup {
    html! {
        @if rows.is_empty() {
            p #alerts { "No alert has fired." }
        } @else {
            table #alerts {
                caption.hint { "The latest alerts fired and cleared, newest first" }
                thead { tr {
                    th scope="col" { "time" }
                    th scope="col" { "state" }
                    th scope="col" { "condition" }
                    th scope="col" { "subject" }
                    th scope="col" { "detail" }
                } }
                tbody {
                    @for row in rows {
                        tr data-condition=(row.condition) data-state=(row.state) {
                            td { (time(row.at)) }
                            td { @if row.state == "fired" { span.state.state-dead { "fired" } } @else { span.state.state-delivered { "cleared" } } }
                            td { code { (row.condition) } }
                            td { (row.subject) }
                            td { (row.detail) }
                        }
                    }
                }
            }
        }
    }
}

fn reason_label(reason: &str) -> &'static str {
    match reason {
        "bad_signature" => "bad signature",
        "too_large" => "too large",
        _ => "malformed",
    }
}

fn rejected_table(rows: &[RejectedRow], overview: &Overview) -> Markup {
    let range = overview.range;
    html! {
        table #rejected {
            caption.hint { "Webhook requests refused per source, over the range (written every health_interval)" }
            thead { tr {
                th scope="col" { "source" }
                th scope="col" { "reason" }
                th.num scope="col" { "refused" }
                th scope="col" { (range.per()) }
            } }
            tbody {
                @for row in rows {
                    @for (reason, total, bars) in &row.reasons {
                        tr data-source=(row.source) data-reason=(reason) {
                            th scope="row" { (row.source) }
                            td { (reason_label(reason)) }
                            td.num.total { (total) }
                            td { (chart(&format!("{} refused ({})", row.source, reason_label(reason)), bars, range.end(overview.now), range.bucket_ms())) }
                        }
                    }
                }
            }
        }
    }
}

/// A dispatcher's state: each thing that holds it back, or "working".
fn dispatcher(health: &DispatcherHealth) -> Markup {
    html! {
        @if health.is_working() {
            span.state.state-delivered { "working" } " "
        }
        @if let Some(reason) = &health.stopped {
            span.state.state-dead { "stopped: " (reason) } " "
        }
        @if let Some(failing) = &health.claims {
            span.state.state-dead { "claims failing since " (time(failing.since)) ": " (failing.reason) } " "
        }
        @if let Some(failing) = &health.outcomes {
            span.state.state-dead { "outcome writes failing since " (time(failing.since)) ": " (failing.reason) } " "
        }
        @if let Some(since) = health.paused_since {
            span.state.state-retrying { "paused since " (time(since)) }
        }
    }
}

fn health(health: &Health) -> Markup {
    match health {
        Health::Working => html! { span.state.state-delivered { "working" } },
        Health::Failing(reason) => html! { span.state.state-dead { "failing: " (reason) } },
    }
}

/// One source's or destination's table: a row per metric with its totals and chart.
fn series(kind: &str, row: &SeriesRow, repeat_rate: bool, overview: &Overview) -> Markup {
    let range = overview.range;
    let end = range.end(overview.now);
    html! {
        section.series data-kind=(kind) data-name=(row.name) {
            h3 { (kind) " " code { (row.name) } }
            @if repeat_rate {
                p { "Repeat rate (duplicates per delivery received, last hour): "
                    @match row.repeat_rate() {
                        Some(rate) => { (format!("{:.1} %", rate * 100.0)) }
                        None => "nothing received",
                    }
                }
            }
            table {
                thead { tr {
                    th scope="col" { "count" }
                    th.num scope="col" { "last hour" }
                    th.num scope="col" { "last day" }
                    th scope="col" { (range.per()) ", last " (range.as_str()) }
                } }
                tbody {
                    @for (metric, bars) in &row.chart {
                        tr data-metric=(metric.as_str()) {
                            th scope="row" { (label(*metric)) }
                            td.num.last-hour { (row.last_hour(*metric)) }
                            td.num.last-day { (row.last_day(*metric)) }
                            td { (chart(&format!("{} {}", row.name, label(*metric)), bars, end, range.bucket_ms())) }
                        }
                    }
                }
            }
        }
    }
}
