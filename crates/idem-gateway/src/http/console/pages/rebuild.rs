//! `POST /console/rebuild`: the rebuild form of the replay page (source, destination, time
//! range, optional event type, skip missing bodies). First a dry-run count (matched, would be
//! queued, new deliveries, stale included, in progress, without a body, not taken) with the
//! range fixed to the times it was counted over, then, confirmed, the rebuild itself: `idem
//! replay --rebuild` and `POST /admin/replay` with `"rebuild": true` by the same code.

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
use crate::operations::{RebuildReport, RebuildRequest};
use crate::store::GatewayDb;

/// Where the rebuild form posts (the router names the same path).
const PATH: &str = "/console/rebuild";

/// The rebuild form, filled with `fields`: shown under the replay form.
pub(crate) fn form<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    session: &Session,
    fields: &Fields,
) -> Markup {
    let config = gateway.config();
    html! {
        h2 { "Rebuild a consumer" }
        p { "Send EVERY stored event of a source's time range to one destination, with the header Idem-Replay: rebuild: delivered ones, stale ones and those with no delivery there yet, one per entity at a time in the entity's version order, each under its own Idempotency-Key. For a new consumer version behind the destination. The first step only counts." }
        form method="post" action=(PATH) {
            input type="hidden" name=(csrf::FIELD) value=(session.csrf);
            p {
                label for="b-source" { "Source" }
                select #b-source name="source" required {
                    @for source in &config.sources {
                        option value=(source.name) selected[fields.get("source") == Some(source.name.as_str())] { (source.name) }
                    }
                }
            }
            p {
                label for="b-destination" { "Destination" }
                select #b-destination name="destination" required {
                    @for destination in &config.destinations {
                        option value=(destination.name) selected[fields.get("destination") == Some(destination.name.as_str())] { (destination.name) }
                    }
                }
            }
            (super::range::range_fields(fields, "b"))
            p {
                input #b-skip type="checkbox" name="skip_missing_bodies" value="yes" checked[fields.is("skip_missing_bodies", "yes")];
                label for="b-skip" { "Skip events whose body body_retention dropped (otherwise the rebuild is refused when there is any)" }
            }
            p { button #count-rebuild type="submit" { "Count rebuild (dry run)" } }
        }
    }
}

pub(crate) async fn rebuild<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    fields: Fields,
) -> Response {
    let gateway = &state.gateway;
    let (Some(source), Some(destination)) = (fields.get("source"), fields.get("destination"))
    else {
        return message_page(
            StatusCode::BAD_REQUEST,
            "Which source and destination?",
            "Choose the source whose events are sent and the destination rebuilt.",
        );
    };
    let confirmed = fields.is("confirm", "yes");
    let now = gateway.now().as_millis();
    let times = fields.time_range(confirmed, now);
    let (since, until) = match times {
        Ok(times) => times,
        Err(e) => return refused(gateway, &session, &fields, &e.to_string()),
    };
    let request = RebuildRequest {
        source: source.to_owned(),
        since,
        until: Some(until),
        event_type: fields.get("type").map(str::to_owned),
        destination: destination.to_owned(),
        dry_run: !confirmed,
        skip_missing_bodies: fields.is("skip_missing_bodies", "yes"),
    };
    match gateway.rebuild(&request).await {
        Ok(report) if request.dry_run => confirm(&session, &request, &report),
        Ok(report) => done(&session, &request, &report),
        Err(crate::Error::Request(e)) => refused(gateway, &session, &fields, &e.to_string()),
        Err(e) => error_page(&e),
    }
}

/// The replay page with the rebuild form and `problem` above it (400).
fn refused<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    session: &Session,
    fields: &Fields,
    problem: &str,
) -> Response {
    let body = html! {
        p.problem role="alert" { (problem) }
        (form(gateway, session, fields))
    };
    (
        StatusCode::BAD_REQUEST,
        Page::new("Rebuild")
            .of(session, super::REPLAY_PATH)
            .render(body),
    )
        .into_response()
}

/// The range, filter and destination of `request` in words.
fn range(request: &RebuildRequest) -> Markup {
    html! {
        "events of " code { (request.source) }
        @if let Some(t) = &request.event_type { " of type " code { (t) } }
        " received from " (time(request.since)) " to " (time(request.until.unwrap_or(request.since)))
        ", to " code { (request.destination) }
    }
}

fn confirm(session: &Session, request: &RebuildRequest, report: &RebuildReport) -> Response {
    let refused = (report.no_body > 0 && !request.skip_missing_bodies) || report.in_progress > 0;
    let body = html! {
        div.confirm #confirm {
            p { "Dry run of a rebuild over " (range(request)) ":" }
            table #dry-run {
                tbody {
                    tr { th scope="row" { "events matched" } td.num #matched { (report.matched) } }
                    tr { th scope="row" { "would be queued with Idem-Replay: rebuild" } td.num #would-queue { (report.queued) } }
                    tr { th scope="row" { "of them, new deliveries (none there yet)" } td.num #created { (report.created) } }
                    tr { th scope="row" { "of them, stale ones (never sent before)" } td.num #stale-included { (report.stale_included) } }
                    tr { th scope="row" { "still pending or in flight (refuses the rebuild)" } td.num #in-progress { (report.in_progress) } }
                    tr { th scope="row" {
                        "bodies dropped by body_retention"
                        @if request.skip_missing_bodies { " (skipped)" } @else { " (refuses the rebuild)" }
                    } td.num #no-body { (report.no_body) } }
                    tr { th scope="row" { "not taken by a route to the destination (skipped)" } td.num #filtered { (report.filtered) } }
                }
            }
            @if refused {
                p.problem role="alert" { "The rebuild would be refused: wait for the deliveries in progress, or skip the missing bodies." }
            }
            form method="post" action=(PATH) {
                input type="hidden" name=(csrf::FIELD) value=(session.csrf);
                input type="hidden" name="confirm" value="yes";
                input type="hidden" name="source" value=(request.source);
                input type="hidden" name="destination" value=(request.destination);
                input type="hidden" name="since_ms" value=(request.since);
                input type="hidden" name="until_ms" value=(request.until.unwrap_or(request.since));
                @if let Some(t) = &request.event_type { input type="hidden" name="type" value=(t); }
                @if request.skip_missing_bodies { input type="hidden" name="skip_missing_bodies" value="yes"; }
                p {
                    button.danger #confirm-rebuild type="submit" { "Rebuild: queue " (report.queued) " events" }
                    " "
                    a href=(super::REPLAY_PATH) { "Cancel" }
                }
            }
        }
    };
    Page::new("Confirm rebuild")
        .of(session, super::REPLAY_PATH)
        .render(body)
        .into_response()
}

fn done(session: &Session, request: &RebuildRequest, report: &RebuildReport) -> Response {
    let body = html! {
        p.notice #result role="status" {
            (report.queued) " events of " (report.matched) " matched are queued as a rebuild: the dispatcher sends them now, with Idem-Replay: rebuild, in each entity's version order."
        }
        p { "Skipped: " (report.no_body) " without a body, " (report.filtered) " not taken by a route to the destination, " (report.in_progress) " in progress." }
        p { "Over " (range(request)) "." }
        p { a href=(super::REPLAY_PATH) { "Another replay or rebuild" } }
    };
    Page::new("Rebuild queued")
        .of(session, super::REPLAY_PATH)
        .render(body)
        .into_response()
}
