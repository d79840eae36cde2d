//! `GET /console/dead-letters`: dead letters by destination; `POST
//! /console/dead-letters/redrive`: redrive one, the ticked ones, or all of a destination, by
//! the redrive of `idem dlq redrive` and `POST /admin/dlq/redrive`. The first post counts
//! (a dry run) and asks to confirm; only the confirmed post changes anything. Forcing dead
//! letters older than their entity's newest delivered event needs a second, named
//! confirmation.

use axum::Extension;
use axum::extract::{RawQuery, State as StateOf};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::super::csrf;
use super::super::form::Fields;
use super::super::session::Session;
use super::super::state::State;
use super::super::templates::{Page, encode, error_page, event_link, message_page, time};
use crate::operations::{RedriveReport, RedriveRequest};
use crate::store::GatewayDb;

/// Dead letters listed per page, oldest first.
const LISTED: u32 = 500;

const PATH: &str = "/console/dead-letters";

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    RawQuery(raw): RawQuery,
) -> Response {
    let fields = Fields::parse(raw.unwrap_or_default().as_bytes());
    let destination = fields.get("destination");
    let gateway = &state.gateway;
    let letters = match gateway.dead_letters(destination, LISTED).await {
        Ok(letters) => letters,
        Err(e) => return error_page(&e),
    };
    let body = html! {
        form.filters method="get" action=(PATH) aria-label="Choose a destination" {
            p {
                label for="f-destination" { "Destination" }
                select #f-destination name="destination" {
                    option value="" { "every destination" }
                    @for d in &gateway.config().destinations {
                        option value=(d.name) selected[destination == Some(d.name.as_str())] { (d.name) }
                    }
                }
            }
            p { button type="submit" { "Show" } }
        }
        p #dead-count { (letters.len()) " dead letters"
            @if let Some(d) = destination { " of " code { (d) } }
            @if letters.len() as u32 == LISTED { " (the oldest " (LISTED) " shown)" }
        }
        @if !letters.is_empty() {
            form method="post" action="/console/dead-letters/redrive" {
                input type="hidden" name=(csrf::FIELD) value=(session.csrf);
                @if let Some(d) = destination { input type="hidden" name="destination" value=(d); }
                table #dead-letters {
                    thead { tr {
                        th scope="col" { "select" }
                        th scope="col" { "id" }
                        th scope="col" { "destination" }
                        th scope="col" { "event" }
                        th scope="col" { "type" }
                        th.num scope="col" { "attempts" }
                        th scope="col" { "dead since" }
                        th scope="col" { "redrive" }
                    } }
                    tbody {
                        @for d in &letters {
                            tr data-id=(d.id) data-event-id=(d.event_id) {
                                td { input type="checkbox" name="id" value=(d.id) id={ "pick-" (d.id) }
                                    aria-label={ "Select dead letter " (d.id) " (" (d.event_id) ")" }; }
                                td { label for={ "pick-" (d.id) } { (d.id) } }
                                td { (d.destination) }
                                td { a href=(event_link(&d.source, &d.event_id)) { (d.source) " " (d.event_id) } }
                                td { (d.event_type.as_deref().unwrap_or("—")) }
                                td.num { (d.attempts) }
                                td { (time(d.updated_at)) }
                                td { button.secondary type="submit" name="one" value=(d.id) { "Redrive " (d.id) } }
                            }
                        }
                    }
                }
                p {
                    input #force type="checkbox" name="force" value="yes";
                    label for="force" { "Force: also send dead letters older than their entity's newest delivered event" }
                }
                p {
                    button type="submit" name="scope" value="ticked" { "Redrive ticked" }
                    " "
                    button type="submit" name="scope" value="all" {
                        "Redrive all"
                        @if let Some(d) = destination { " of " (d) } @else { " dead letters" }
                    }
                }
            }
        }
    };
    Page::new("Dead letters")
        .of(&session, PATH)
        .render(body)
        .into_response()
}

/// The redrive a form asks for, and how to say it.
struct Asked {
    request: RedriveRequest,
    /// "3 ticked dead letters", "every dead letter of app".
    what: String,
}

fn asked(fields: &Fields) -> Result<Asked, String> {
    let destination = fields.get("destination").map(str::to_owned);
    let parse = |id: &str| {
        id.parse::<i64>()
            .map_err(|_| format!("{id:?} is not a dead letter's id"))
    };
    let (deliveries, what) = if let Some(one) = fields.get("one") {
        (vec![parse(one)?], format!("dead letter {one}"))
    } else if fields.is("scope", "all") {
        let what = match &destination {
            Some(d) => format!("every dead letter of {d}"),
            None => "every dead letter".to_owned(),
        };
        (Vec::new(), what)
    } else {
        let ids = fields.all("id").map(parse).collect::<Result<Vec<_>, _>>()?;
        if ids.is_empty() {
            return Err("No dead letter is ticked: tick the ones to redrive.".to_owned());
        }
        let what = format!("{} ticked dead letters", ids.len());
        (ids, what)
    };
    Ok(Asked {
        request: RedriveRequest {
            destination,
            deliveries,
            force: fields.is("force", "yes"),
            dry_run: !fields.is("confirm", "yes"),
        },
        what,
    })
}

pub(crate) async fn redrive<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    fields: Fields,
) -> Response {
    let asked = match asked(&fields) {
        Ok(asked) => asked,
        Err(problem) => {
            return message_page(StatusCode::BAD_REQUEST, "Nothing to redrive", &problem);
        }
    };
    let problem = (!asked.request.dry_run
        && asked.request.force
        && !fields.is("force_confirmed", "yes"))
    .then_some("Forcing needs the second confirmation: tick it to send the older dead letters.");
    // A count is made without force, so that it says how many force would add.
    let counting = asked.request.dry_run || problem.is_some();
    let run = RedriveRequest {
        dry_run: counting,
        force: asked.request.force && !counting,
        ..asked.request.clone()
    };
    match state.gateway.redrive(&run).await {
        Ok(report) if counting => confirm(&session, &asked, &report, problem),
        Ok(report) => done(&session, &asked, &report),
        Err(e) => error_page(&e),
    }
}

/// The count of a dry run and the form that confirms it.
fn confirm(
    session: &Session,
    asked: &Asked,
    report: &RedriveReport,
    problem: Option<&str>,
) -> Response {
    let request = &asked.request;
    let body = html! {
        @if let Some(problem) = problem { p.problem role="alert" { (problem) } }
        div.confirm #confirm {
            p #count {
                "Redrive " (asked.what) ": " strong { (report.matched) } " dead letters match; "
                strong #would { (report.redriven) } " would be sent again (new attempts, same Idempotency-Key)"
                @if report.older > 0 {
                    "; " strong { (report.older) }
                    @if request.force { " older than their entity's newest delivered event would be sent too (forced)" }
                    @else { " are older than their entity's newest delivered event and stay dead letters" }
                }
                "."
            }
            @if request.deliveries.is_empty() {
                p.hint { "All means the dead letters there are when you confirm." }
            }
            form method="post" action="/console/dead-letters/redrive" {
                input type="hidden" name=(csrf::FIELD) value=(session.csrf);
                input type="hidden" name="confirm" value="yes";
                @if let Some(d) = &request.destination { input type="hidden" name="destination" value=(d); }
                @if request.deliveries.is_empty() {
                    input type="hidden" name="scope" value="all";
                } @else {
                    @for id in &request.deliveries { input type="hidden" name="id" value=(id); }
                }
                @if request.force {
                    input type="hidden" name="force" value="yes";
                    p {
                        input #force-confirmed type="checkbox" name="force_confirmed" value="yes";
                        label for="force-confirmed" {
                            "Force: send the " (report.older) " dead letters older than their entity's newest delivered event: the destination then receives older state after newer state."
                        }
                    }
                }
                p {
                    button.danger #confirm-redrive type="submit" { "Redrive " (report.redriven + if request.force { report.older } else { 0 }) " dead letters" }
                    " "
                    a href={ (PATH) @if let Some(d) = &request.destination { "?destination=" (encode(d)) } } { "Cancel" }
                }
            }
        }
    };
    Page::new("Confirm redrive")
        .of(session, PATH)
        .render(body)
        .into_response()
}

fn done(session: &Session, asked: &Asked, report: &RedriveReport) -> Response {
    let body = html! {
        p.notice #result role="status" {
            (report.redriven) " dead letters redriven: the dispatcher sends them now."
            @if report.older > 0 {
                " " (report.older) " refused as older than their entity's newest delivered event; they stay dead letters."
            }
        }
        p { a href={ (PATH) @if let Some(d) = &asked.request.destination { "?destination=" (encode(d)) } } { "Back to the dead letters" } }
    };
    Page::new("Redriven")
        .of(session, PATH)
        .render(body)
        .into_response()
}
