//! The time range and event type fields the replay and rebuild forms share (both read them
//! back with `Fields::time_range`).

use maud::{Markup, html};

use super::super::form::Fields;

/// The time range and event type fields of the replay and rebuild forms, filled with
/// `fields`; their ids start with `prefix` (`r-since`, `b-since`, …).
pub(super) fn range_fields(fields: &Fields, prefix: &str) -> Markup {
    let value = |name| fields.get(name).unwrap_or_default().to_owned();
    let id = |field: &str| format!("{prefix}-{field}");
    let hint = id("times");
    html! {
        p {
            label for=(id("since")) { "Received since" }
            input id=(id("since")) type="text" name="since" required value=(fields.get("since").unwrap_or("1h"))
                aria-describedby=(hint);
        }
        p {
            label for=(id("until")) { "Received before" }
            input id=(id("until")) type="text" name="until" value=(value("until")) placeholder="now" aria-describedby=(hint);
        }
        p.hint id=(hint) { "A duration ago (90s, 2h, 3d), an RFC 3339 time in UTC (2026-01-31T12:00:00Z) or milliseconds since the epoch." }
        p {
            label for=(id("type")) { "Event type (optional)" }
            input id=(id("type")) type="text" name="type" value=(value("type")) placeholder="invoice.paid or invoice.*";
        }
    }
}
