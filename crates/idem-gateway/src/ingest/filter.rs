//! Route filters at ingest: each route's `filter` evaluated once per event, in the request's
//! own task before the group commit (never inside SQLite's one-writer section, never per
//! attempt). A route whose filter says no — or fails on the event, which counts as no — is
//! recorded on the event and gets no delivery; the event is stored and its key claimed all the
//! same, so a resend is a duplicate.

use idem_core::Name;

use super::unit::Unit;
use crate::gateway::Gateway;
use crate::metric_definitions::ROUTE_FILTER_ERRORS_TOTAL;
use crate::model::route_filter::FilterInput;
use crate::store::GatewayDb;
use crate::wiring::Wiring;

/// Sets each event's `filtered` to the routes of `wiring` its type matches whose filter does
/// not take it, unless they were set under this `wiring` already.
pub(super) fn apply<DB: GatewayDb>(gateway: &Gateway<DB>, wiring: &Wiring, unit: &mut Unit) {
    if unit.filtered_with == Some(wiring.generation()) {
        return;
    }
    unit.filtered_with = Some(wiring.generation());
    for incoming in &mut unit.events {
        incoming.filtered.clear();
        let event_type = incoming.event.event_type.as_deref();
        // Parsed once per event, and only for an event some filter reads.
        let mut input = None;
        for (_, route) in wiring.routes_of(incoming.source) {
            let Some(filter) = &route.filter else {
                continue;
            };
            if !route.matches(event_type) {
                continue;
            }
            let input = input.get_or_insert_with(|| {
                FilterInput::new(incoming.event.headers.pairs(), &incoming.body, event_type)
            });
            let taken = filter.matches(input).unwrap_or_else(|error| {
                metrics::counter!(ROUTE_FILTER_ERRORS_TOTAL, "route" => route.name.to_string())
                    .increment(1);
                if filter.error_log_due(gateway.now().as_millis()) {
                    tracing::warn!(
                        route = %route.name,
                        event_id = %incoming.event.event_id,
                        error = %error,
                        "route filter failed on an event; counted as no match (logged once a minute per route)"
                    );
                }
                false
            });
            if !taken {
                incoming.filtered.push(Name::clone(&route.name));
            }
        }
    }
}
