//! `GET /console/replay`: the replay form (source, time range, optional event type, force);
//! `POST /console/replay`: first a dry-run count (matched, would be sent again, still in
//! progress, older than their entity's newest, without a body) with the range fixed to the
//! times it was counted over, then, confirmed, the replay itself: `idem replay` and `POST
//! /admin/replay` by the same code. Force needs a second, named confirmation. Below it, the
//! rebuild form (`super::rebuild`).

use axum::Extension;
use axum::extract::State as StateOf;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::super::csrf;
use super::super::form::Fields;
use super::super::session::Session;
use super::super::state::State;
use super::super::templates::{Page, error_page, message_page, time};
use crate::gateway::Gateway;
use crate::operations::{ReplayReport, ReplayRequest};
use crate::store::GatewayDb;

const PATH: &str = super::REPLAY_PATH;

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
) -> Response {
    Page::new("Replay")
        .of(&session, PATH)
        .render(html! {
            (form(&state.gateway, &session, &Fields::default(), None))
            (super::rebuild::form(&state.gateway, &session, &Fields::default()))
        })
        .into_response()
}

/// The replay form, filled with `fields`, with `problem` above it.
fn form<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    session: &Session,
    fields: &Fields,
    problem: Option<&str>,
) -> Markup {
    html! {
        p { "Send a source's events of a time range again: each finished delivery (delivered, stale, dead) becomes due again, a new attempt of the same event under the same Idempotency-Key. The first step only counts." }
        @if let Some(problem) = problem { p.problem role="alert" { (problem) } }
        form method="post" action=(PATH) {
            input type="hidden" name=(csrf::FIELD) value=(session.csrf);
            p {
                label for="r-source" { "Source" }
                select #r-source name="source" required {
                    @for source in &gateway.config().sources {
                        option value=(source.name) selected[fields.get("source") == Some(source.name.as_str())] { (source.name) }
                    }
                }
            }
            (super::range::range_fields(fields, "r"))
            p {
                input #r-force type="checkbox" name="force" value="yes" checked[fields.is("force", "yes")];
                label for="r-force" { "Force: also send stale events and events older than their entity's newest delivered one" }
            }
            p { button #count-replay type="submit" { "Count (dry run)" } }
        }
    }
}

pub(crate) async fn replay<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    fields: Fields,
) -> Response {
    let gateway = &state.gateway;
    let Some(source) = fields.get("source") else {
        return message_page(
            StatusCode::BAD_REQUEST,
            "Which source?",
            "Choose the source to replay.",
        );
    };
    let confirmed = fields.is("confirm", "yes");
    // The confirmed replay covers the range counted: its ends were fixed then, in ms.
    let now = gateway.now().as_millis();
    let times = fields.time_range(confirmed, now);
    let (since, until) = match times {
        Ok(times) => times,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Page::new("Replay").of(&session, PATH).render(form(
                    gateway,
                    &session,
                    &fields,
                    Some(&e.to_string()),
                )),
            )
                .into_response();
        }
    };
    let request = ReplayRequest {
        source: source.to_owned(),
        since,
        until: Some(until),
        event_type: fields.get("type").map(str::to_owned),
        dry_run: !confirmed,
        force: fields.is("force", "yes"),
    };
    let problem = (confirmed && request.force && !fields.is("force_confirmed", "yes"))
        .then_some("Forcing needs the second confirmation: tick it to send the older events.");
    // A count is made without force, so that it says how many force would add.
    let counting = request.dry_run || problem.is_some();
    let run = ReplayRequest {
        dry_run: counting,
        force: request.force && !counting,
        ..request.clone()
    };
    match gateway.replay(&run, &|_, _| {}).await {
        Ok(report) if counting => confirm(&session, &request, &report, problem),
        Ok(report) => done(&session, &request, &report),
        Err(crate::Error::Request(e)) => (
            StatusCode::BAD_REQUEST,
            Page::new("Replay").of(&session, PATH).render(form(
                gateway,
                &session,
                &fields,
                Some(&e.to_string()),
            )),
        )
            .into_response(),
        Err(e) => error_page(&e),
    }
}

/// The range and filter of `request` in words.
fn range(request: &ReplayRequest) -> Markup {
    html! {
        "events of " code { (request.source) }
        @if let Some(t) = &request.event_type { " of type " code { (t) } }
        " received from " (time(request.since)) " to " (time(request.until.unwrap_or(request.since)))
    }
}

fn confirm(
    session: &Session,
    request: &ReplayRequest,
    report: &ReplayReport,
    problem: Option<&str>,
) -> Response {
    let sent = report.requeued;
    let body = html! {
        @if let Some(problem) = problem { p.problem role="alert" { (problem) } }
        div.confirm #confirm {
            p { "Dry run over " (range(request)) ":" }
            table #dry-run {
                tbody {
                    tr { th scope="row" { "deliveries matched" } td.num #matched { (report.matched) } }
                    tr { th scope="row" { "would be sent again" } td.num #would-requeue { (sent) } }
                    tr { th scope="row" { "still pending or in flight (skipped)" } td.num #in-progress { (report.in_progress) } }
                    tr { th scope="row" {
                        "stale or older than their entity's newest delivered event"
                        @if request.force { " (sent: forced)" } @else { " (skipped)" }
                    } td.num #older { (report.older) } }
                    tr { th scope="row" { "bodies dropped by body_retention (skipped)" } td.num #no-body { (report.no_body) } }
                    tr { th scope="row" { "not taken by their route's filter as configured now (skipped)" } td.num #filtered { (report.filtered) } }
                }
            }
            form method="post" action=(PATH) {
                input type="hidden" name=(csrf::FIELD) value=(session.csrf);
                input type="hidden" name="confirm" value="yes";
                input type="hidden" name="source" value=(request.source);
                input type="hidden" name="since_ms" value=(request.since);
                input type="hidden" name="until_ms" value=(request.until.unwrap_or(request.since));
                @if let Some(t) = &request.event_type { input type="hidden" name="type" value=(t); }
                @if request.force {
                    input type="hidden" name="force" value="yes";
                    p {
                        input #force-confirmed type="checkbox" name="force_confirmed" value="yes";
                        label for="force-confirmed" {
                            "Force: send the " (report.older) " stale or older events again: the destination then receives older state after newer state, and should refetch."
                        }
                    }
                }
                p {
                    button.danger #confirm-replay type="submit" {
                        "Replay " (sent + if request.force { report.older } else { 0 }) " deliveries"
                    }
                    " "
                    a href=(PATH) { "Cancel" }
                }
            }
        }
    };
    Page::new("Confirm replay")
        .of(session, PATH)
        .render(body)
        .into_response()
}

fn done(session: &Session, request: &ReplayRequest, report: &ReplayReport) -> Response {
    let body = html! {
        p.notice #result role="status" {
            (report.requeued) " deliveries of " (report.matched) " matched are due again: the dispatchers send them now."
        }
        p { "Skipped: " (report.in_progress) " still in progress, " (report.older) " older than their entity's newest, " (report.no_body) " without a body." }
        p { "Over " (range(request)) "." }
        p { a href=(PATH) { "Another replay" } }
    };
    Page::new("Replayed")
        .of(session, PATH)
        .render(body)
        .into_response()
}
