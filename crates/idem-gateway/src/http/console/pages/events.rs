//! `GET /console/events`: events newest first, filtered by source, type, entity, event id,
//! time range and delivery state (on one route or any), paged by a cursor: the next page
//! starts after the last event shown (its received time and row id), so events arriving
//! meanwhile never shift a page.

use axum::Extension;
use axum::extract::{RawQuery, State as StateOf};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::super::form::Fields;
use super::super::session::Session;
use super::super::state::State;
use super::super::templates::{
    Page, delivery_state, encode, error_page, event_link, state_badge, time,
};
use crate::DeliveryState;
use crate::error::RequestError;
use crate::gateway::Gateway;
use crate::model::time::parse_time;
use crate::store::{DeliveryRecord, EventFilter, GatewayDb, StateFilter, StoredEvent};

/// Events per page.
pub(crate) const PAGE_SIZE: usize = 50;

/// The delivery states the filter offers, as the console names them.
const STATES: [&str; 6] = [
    "pending",
    "in_flight",
    "retrying",
    "delivered",
    "stale",
    "dead",
];

/// The filter as given in the query string, each field as typed.
#[derive(Debug, Default)]
struct Query {
    source: Option<String>,
    event_type: Option<String>,
    entity: Option<String>,
    event_id: Option<String>,
    since: Option<String>,
    until: Option<String>,
    state: Option<String>,
    route: Option<String>,
    after: Option<String>,
}

impl Query {
    fn read(fields: &Fields) -> Self {
        let get = |name| fields.get(name).map(str::to_owned);
        Self {
            source: get("source"),
            event_type: get("type"),
            entity: get("entity"),
            event_id: get("event_id"),
            since: get("since"),
            until: get("until"),
            state: get("state"),
            route: get("route"),
            after: get("after"),
        }
    }

    /// The query string of this filter (without `after`), for the next page's link.
    fn query_string(&self) -> String {
        [
            ("source", &self.source),
            ("type", &self.event_type),
            ("entity", &self.entity),
            ("event_id", &self.event_id),
            ("since", &self.since),
            ("until", &self.until),
            ("state", &self.state),
            ("route", &self.route),
        ]
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}={}", encode(v))))
        .collect::<Vec<_>>()
        .join("&")
    }
}

/// One page of events with their deliveries, and the cursor of the next page.
struct Found {
    events: Vec<(StoredEvent, Vec<DeliveryRecord>)>,
    next: Option<String>,
}

/// Why the filter cannot be used: a message for the page.
fn refuse(message: String) -> crate::Error {
    crate::Error::Request(RequestError::BadFilter { message })
}

async fn search<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    query: &Query,
) -> Result<Found, crate::Error> {
    let config = gateway.config();
    if let Some(source) = &query.source
        && config.source(source).is_none()
    {
        return Err(refuse(format!("no source {source:?} is configured")));
    }
    if let Some(route) = &query.route
        && !config.routes.iter().any(|r| r.name.as_str() == route)
    {
        return Err(refuse(format!("no route {route:?} is configured")));
    }
    if let Some(pattern) = &query.event_type
        && !crate::config::is_type_pattern(pattern)
    {
        return Err(RequestError::BadEventType {
            value: pattern.clone(),
        }
        .into());
    }
    let state = match query.state.as_deref() {
        None => None,
        Some("pending") => Some(StateFilter::Pending),
        Some("retrying") => Some(StateFilter::Retrying),
        Some(other) => Some(StateFilter::Is(
            DeliveryState::parse(other)
                .ok_or_else(|| refuse(format!("{other:?} is not a delivery state")))?,
        )),
    };
    let now = gateway.now().as_millis();
    let since = query
        .since
        .as_deref()
        .map(|t| parse_time("since", t, now))
        .transpose()?;
    let until = query
        .until
        .as_deref()
        .map(|t| parse_time("until", t, now))
        .transpose()?;
    let after = match &query.after {
        None => None,
        Some(cursor) => Some(
            cursor
                .split_once('.')
                .and_then(|(at, id)| Some((at.parse().ok()?, id.parse().ok()?)))
                .ok_or_else(|| refuse(format!("{cursor:?} is not a page cursor")))?,
        ),
    };
    let (aggregate_type, aggregate_id) = match query.entity.as_deref() {
        Some(entity) => match entity.split_once(':') {
            Some((t, id)) => (Some(t), Some(id)),
            None => (None, Some(entity)),
        },
        None => (None, None),
    };
    let filter = EventFilter {
        source: query.source.as_deref(),
        event_type: query.event_type.as_deref(),
        aggregate_type,
        aggregate_id,
        event_id: query.event_id.as_deref(),
        since,
        until,
        state,
        route: query.route.as_deref(),
        after,
    };
    let mut conn = gateway.store().pool().acquire().await?;
    let mut rows = DB::search_events(&mut conn, &filter, PAGE_SIZE as i64 + 1).await?;
    let next = (rows.len() > PAGE_SIZE).then(|| {
        rows.truncate(PAGE_SIZE);
        rows.last()
            .map(|e| format!("{}.{}", e.received_at, e.id))
            .unwrap_or_default()
    });
    let mut events = Vec::with_capacity(rows.len());
    for row in rows {
        let deliveries = DB::delivery_records(&mut conn, row.id).await?;
        events.push((row, deliveries));
    }
    Ok(Found { events, next })
}

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    RawQuery(raw): RawQuery,
) -> Response {
    let query = Query::read(&Fields::parse(raw.unwrap_or_default().as_bytes()));
    let found = search(&state.gateway, &query).await;
    let (problem, found) = match found {
        Ok(found) => (None, Some(found)),
        Err(crate::Error::Request(e)) => (Some(e.to_string()), None),
        Err(e) => return error_page(&e),
    };
    let body = html! {
        (filters(&state.gateway, &query))
        @if let Some(problem) = problem {
            p.problem role="alert" { (problem) }
        }
        @if let Some(found) = found {
            (list(&found, &query))
        }
    };
    Page::new("Events")
        .of(&session, "/console/events")
        .render(body)
        .into_response()
}

fn filters<DB: GatewayDb>(gateway: &Gateway<DB>, query: &Query) -> Markup {
    let config = gateway.config();
    let text = |name: &'static str,
                label: &'static str,
                value: &Option<String>,
                hint: &'static str| {
        html! {
            p {
                label for={ "f-" (name) } { (label) }
                input id={ "f-" (name) } type="text" name=(name) value=(value.as_deref().unwrap_or_default())
                    placeholder=(hint);
            }
        }
    };
    html! {
        form.filters method="get" action="/console/events" aria-label="Filter events" {
            p {
                label for="f-source" { "Source" }
                select #f-source name="source" {
                    option value="" { "any" }
                    @for source in &config.sources {
                        option value=(source.name) selected[query.source.as_deref() == Some(source.name.as_str())] { (source.name) }
                    }
                }
            }
            (text("type", "Type", &query.event_type, "invoice.paid or invoice.*"))
            (text("entity", "Entity", &query.entity, "type:id"))
            (text("event_id", "Event id", &query.event_id, "evt_…"))
            (text("since", "Received since", &query.since, "1h or 2026-01-31T12:00:00Z"))
            (text("until", "Received before", &query.until, "now"))
            p {
                label for="f-state" { "Delivery state" }
                select #f-state name="state" {
                    option value="" { "any" }
                    @for state in STATES {
                        option value=(state) selected[query.state.as_deref() == Some(state)] { (state) }
                    }
                }
            }
            p {
                label for="f-route" { "On route" }
                select #f-route name="route" {
                    option value="" { "any" }
                    @for route in &config.routes {
                        option value=(route.name) selected[query.route.as_deref() == Some(route.name.as_str())] { (route.name) }
                    }
                }
            }
            p { button type="submit" { "Filter" } }
        }
    }
}

fn list(found: &Found, query: &Query) -> Markup {
    html! {
        @if found.events.is_empty() {
            p #no-events { "No event matches." }
        } @else {
            table #events {
                caption.hint { "Newest first" }
                thead { tr {
                    th scope="col" { "received" }
                    th scope="col" { "source" }
                    th scope="col" { "event id" }
                    th scope="col" { "type" }
                    th scope="col" { "entity" }
                    th scope="col" { "deliveries" }
                } }
                tbody {
                    @for (event, deliveries) in &found.events {
                        tr data-event-id=(event.event_id) {
                            td { (time(event.received_at)) }
                            td { (event.source) }
                            td { a href=(event_link(&event.source, &event.event_id)) { (event.event_id) } }
                            td { (event.event_type.as_deref().unwrap_or("—")) }
                            td {
                                @match (&event.aggregate_type, &event.aggregate_id) {
                                    (Some(t), Some(id)) => { (t) ":" (id) @if let Some(v) = event.version { " @ " (v) } }
                                    _ => "—",
                                }
                            }
                            td {
                                @for d in deliveries {
                                    span.delivery { (d.route) " " (state_badge(delivery_state(d.state, d.failures))) " " }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if let Some(next) = &found.next {
            p { a rel="next" href={ "/console/events?" (query.query_string()) "&after=" (encode(next)) } { "Older events" } }
        }
        @if query.after.is_some() {
            p { a href={ "/console/events?" (query.query_string()) } { "Back to the newest" } }
        }
    }
}
