//! `GET /console/consumers`: the consumer inventory as `idem consumers list` shows it (kind,
//! first and last seen, the last 24 hours' counts, lag, flags as words); `GET
//! /console/consumer?name=…`: one consumer's windows, effects and outbox by status, holds,
//! successor and flags with their reasons.

use axum::Extension;
use axum::extract::{RawQuery, State as StateOf};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use idem_sql::{ConsumerFlag, ListOptions};
use maud::{Markup, html};

use super::super::form::Fields;
use super::super::session::Session;
use super::super::state::State;
use super::super::templates::{Page, duration, encode, error_page, message_page, time};
use crate::consumers::ConsumerEntry;
use crate::store::GatewayDb;

/// The list's path, in the navigation.
pub(crate) const PATH: &str = "/console/consumers";

/// The window the list's figures are of: the last 24 hours.
const DAY_SECS: u64 = 24 * 3600;

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
) -> Response {
    let options = ListOptions::at(state.gateway.now());
    let entries = match state.gateway.consumers(&options).await {
        Ok(entries) => entries,
        Err(e) => return error_page(&e),
    };
    Page::new("Consumers")
        .of(&session, PATH)
        .render(list(&entries))
        .into_response()
}

/// One consumer, named by `name` in the query.
pub(crate) async fn one<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    RawQuery(raw): RawQuery,
) -> Response {
    let fields = Fields::parse(raw.unwrap_or_default().as_bytes());
    let Some(name) = fields.get("name") else {
        let text = "Which consumer? Pick one on the consumers page (the link names it: ?name=…).";
        return message_page(StatusCode::BAD_REQUEST, "No consumer named", text);
    };
    let options = ListOptions::at(state.gateway.now());
    match state.gateway.consumer(name, &options).await {
        Ok(entry) => Page::new("Consumer")
            .of(&session, PATH)
            .render(detail(&entry))
            .into_response(),
        Err(crate::Error::Store(e @ idem_sql::Error::UnknownConsumer { .. })) => {
            message_page(StatusCode::NOT_FOUND, "Unknown consumer", &e.to_string())
        }
        Err(e) => error_page(&e),
    }
}

fn list(entries: &[ConsumerEntry]) -> Markup {
    html! {
        p.hint { "Every consumer in the registry. Counts are of the last 24 hours; flags are explained in docs/consumers.md." }
        p #consumer-count { (entries.len()) " consumers" }
        @if !entries.is_empty() {
            table #consumers {
                thead { tr {
                    th scope="col" { "name" } th scope="col" { "kind" }
                    th scope="col" { "first seen" } th scope="col" { "last seen" }
                    th.num scope="col" { "claimed" } th.num scope="col" { "duplicates" }
                    th.num scope="col" { "repeat rate" } th.num scope="col" { "stale" }
                    th.num scope="col" { "gaps" } th.num scope="col" { "dead letters" }
                    th scope="col" { "lag" } th scope="col" { "flags" }
                } }
                tbody {
                    @for e in entries {
                        @let r = &e.report;
                        @let day = r.windows.iter().find(|w| w.window_secs == DAY_SECS);
                        tr data-consumer=(r.name) {
                            th scope="row" { a href={ "/console/consumer?name=" (encode(&r.name)) } { (r.name) } }
                            td { (r.kind.as_str()) }
                            td { @if !r.first_seen_exact { "≤ " } (time(r.first_seen.as_millis())) }
                            td { (time(r.last_seen.as_millis())) }
                            td.num data-metric="claimed" { (day.map_or(0, |w| w.claimed)) }
                            td.num data-metric="duplicates" { (day.map_or(0, |w| w.duplicates)) }
                            td.num data-metric="repeat_rate" { (format!("{:.0} %", day.map_or(0.0, |w| w.repeat_rate) * 100.0)) }
                            td.num data-metric="stale" { (day.map_or(0, |w| w.stale)) }
                            td.num data-metric="gaps" { (day.map_or(0, |w| w.gaps)) }
                            td.num data-metric="dead_letters" { (day.map_or(0, |w| w.dead_letters)) }
                            td data-metric="lag" { (lag(e)) }
                            td data-metric="flags" { (flag_words(&r.flags)) }
                        }
                    }
                }
            }
        }
    }
}

fn detail(entry: &ConsumerEntry) -> Markup {
    let r = &entry.report;
    let by_status = |m: &std::collections::BTreeMap<String, u64>| -> String {
        if m.is_empty() {
            return "none".to_owned();
        }
        m.iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    html! {
        h2 #consumer-name { (r.name) }
        table #consumer-facts {
            tbody {
                tr { th scope="row" { "kind" } td { (r.kind.as_str()) } }
                tr { th scope="row" { "first seen" } td { @if !r.first_seen_exact { "at or before " } (time(r.first_seen.as_millis())) } }
                tr { th scope="row" { "last seen" } td { (time(r.last_seen.as_millis())) } }
                tr { th scope="row" { "lag" } td { (lag(entry)) } }
                tr { th scope="row" { "successor" } td { (r.successor.as_deref().unwrap_or("none")) } }
                tr { th scope="row" { "effects" } td { (by_status(&r.effects_by_status)) } }
                tr { th scope="row" { "outbox" } td { (by_status(&r.outbox_by_status)) } }
                tr { th scope="row" { "holds" } td {
                    (r.holds.leases) " leases, " (r.holds.kafka_offsets) " Kafka offsets, "
                    (r.holds.pending_effects) " pending effects, " (r.holds.open_outbox) " open outbox rows"
                } }
            }
        }
        h2 { "Windows" }
        table #consumer-windows {
            thead { tr {
                th scope="col" { "window" } th.num scope="col" { "claimed" } th.num scope="col" { "duplicates" }
                th.num scope="col" { "repeat rate" } th.num scope="col" { "stale" } th.num scope="col" { "gaps" }
                th.num scope="col" { "dead letters" }
            } }
            tbody {
                @for w in &r.windows {
                    tr {
                        th scope="row" { (duration(i64::try_from(w.window_secs).unwrap_or(0) * 1000)) }
                        td.num { (w.claimed) } td.num { (w.duplicates) }
                        td.num { (format!("{:.1} %", w.repeat_rate * 100.0)) }
                        td.num { (w.stale) } td.num { (w.gaps) } td.num { (w.dead_letters) }
                    }
                }
            }
        }
        h2 { "Flags" }
        @if r.flags.is_empty() {
            p #consumer-flags { "none" }
        } @else {
            ul #consumer-flags {
                @for flag in &r.flags { li { (flag_reason(flag)) } }
            }
        }
    }
}

/// A destination's oldest due delivery's age, or the messages behind a consumer reported.
fn lag(entry: &ConsumerEntry) -> String {
    match (entry.delivery_lag_ms, entry.report.lag) {
        (Some(ms), _) => format!("{} due", duration(i64::try_from(ms).unwrap_or(i64::MAX))),
        (None, Some(lag)) => format!("{} messages", lag.value),
        (None, None) => "—".to_owned(),
    }
}

/// The flags as words: `superseded, unhealthy`; `none` for none.
fn flag_words(flags: &[ConsumerFlag]) -> String {
    let words: Vec<&str> = flags.iter().map(flag_word).collect();
    if words.is_empty() {
        "none".to_owned()
    } else {
        words.join(", ")
    }
}

fn flag_word(flag: &ConsumerFlag) -> &'static str {
    match flag {
        ConsumerFlag::Superseded { .. } => "superseded",
        ConsumerFlag::Orphaned { .. } => "orphaned",
        ConsumerFlag::Unhealthy { .. } => "unhealthy",
        _ => "flagged",
    }
}

/// A flag with its reason.
fn flag_reason(flag: &ConsumerFlag) -> String {
    match flag {
        ConsumerFlag::Superseded { by } => format!("superseded by {by}, seen after it"),
        ConsumerFlag::Orphaned { days_unseen } => {
            format!("orphaned: not seen for {days_unseen} days, no successor, still holding rows")
        }
        ConsumerFlag::Unhealthy { reasons } => format!("unhealthy: {}", reasons.join("; ")),
        other => flag_word(other).to_owned(),
    }
}
