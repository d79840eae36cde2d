//! `GET /console`: the overview.

use axum::Extension;
use axum::extract::State as StateOf;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::super::charts::bars;
use super::super::overview::{DispatcherHealth, Health, Overview, SeriesRow};
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
) -> Response {
    match state.gateway.overview().await {
        Ok(overview) => Page::new("Overview")
            .of(&session, PREFIX)
            .render(render(&overview))
            .into_response(),
        Err(e) => error_page(&e),
    }
}

fn render(overview: &Overview) -> Markup {
    let now = overview.now;
    html! {
        p.hint { "As of " (time(now)) ". Counts per minute over the last hour and per hour over the last day." }
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
        @for row in &overview.sources { (series("source", row, true)) }
        h2 { "Destinations" }
        @for row in &overview.destinations { (series("destination", row, false)) }
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

/// One source's or destination's table: a row per metric with its totals and charts.
fn series(kind: &str, row: &SeriesRow, repeat_rate: bool) -> Markup {
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
                    th scope="col" { "per minute" }
                    th.num scope="col" { "last day" }
                    th scope="col" { "per hour" }
                } }
                tbody {
                    @for ((metric, minutes), (_, hours)) in row.per_minute.iter().zip(&row.per_hour) {
                        tr data-metric=(metric.as_str()) {
                            th scope="row" { (label(*metric)) }
                            td.num.last-hour { (row.last_hour(*metric)) }
                            td { (bars(&format!("{} {} per minute, last hour", row.name, label(*metric)), minutes)) }
                            td.num.last-day { (row.last_day(*metric)) }
                            td { (bars(&format!("{} {} per hour, last day", row.name, label(*metric)), hours)) }
                        }
                    }
                }
            }
        }
    }
}
