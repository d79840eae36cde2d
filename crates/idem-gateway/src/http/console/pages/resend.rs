//! `POST /console/event/resend`: the event page's "Resend" button — the event's finished
//! deliveries sent again under the same `Idempotency-Key`, by replay's order rules
//! ([`Gateway::resend`](crate::Gateway::resend); never forced from here: `idem events resend
//! --force` or the admin API send an older event).

use axum::Extension;
use axum::extract::State as StateOf;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::super::form::Fields;
use super::super::session::Session;
use super::super::state::State;
use super::super::templates::{Page, error_page, event_link, message_page};
use crate::store::GatewayDb;

pub(crate) async fn resend<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    fields: Fields,
) -> Response {
    let (Some(source), Some(event_id)) = (fields.get("source"), fields.get("id")) else {
        return message_page(
            StatusCode::BAD_REQUEST,
            "Which event?",
            "Resend needs the event's source and id.",
        );
    };
    let report = match state.gateway.resend(source, event_id, false, false).await {
        Ok(Some(report)) => report,
        Ok(None) => {
            return message_page(
                StatusCode::NOT_FOUND,
                "Unknown event",
                &format!("No event {event_id:?} of source {source:?} is stored."),
            );
        }
        Err(e) => return error_page(&e),
    };
    if report.matched == 0 {
        return message_page(
            StatusCode::CONFLICT,
            "Nothing to resend",
            &format!(
                "Event {event_id:?} of source {source:?} has no delivery: no route took it. Once a route takes it, `idem replay --backfill` gives it one."
            ),
        );
    }
    let body = html! {
        p #resent {
            strong { (report.requeued) } " of " (report.matched) " deliveries sent again (new attempts, same Idempotency-Key)"
            @if report.in_progress > 0 { "; " (report.in_progress) " still pending or in flight" }
            @if report.older > 0 { "; " (report.older) " refused: older than their entity's newest delivered event (idem events resend --force sends them)" }
            @if report.no_body > 0 { "; " (report.no_body) " without a stored body" }
            @if report.filtered > 0 { "; " (report.filtered) " not taken by their route's filter as configured now" }
            "."
        }
        p { a href=(event_link(source, event_id)) { "Back to the event" } }
    };
    Page::new("Resend")
        .of(&session, "/console/events")
        .render(body)
        .into_response()
}
