//! The console's page layout and the pieces every page uses: the navigation, times and ages,
//! message pages. HTML is built with maud, which escapes every value it inserts.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::assets::STYLESHEET;
use super::csrf;
use super::session::Session;
use super::state::PREFIX;
use crate::model::time::format_time;

/// The navigation's entries: (path, label).
const NAV: [(&str, &str); 6] = [
    (PREFIX, "Overview"),
    ("/console/events", "Events"),
    ("/console/dead-letters", "Dead letters"),
    ("/console/replay", "Replay"),
    ("/console/consumers", "Consumers"),
    ("/console/configuration", "Configuration"),
];

/// A page being laid out.
#[derive(Debug)]
pub(crate) struct Page<'a> {
    title: &'a str,
    /// The signed-in session (navigation and sign-out); `None` on public pages.
    session: Option<&'a Session>,
    /// The navigation entry this page belongs to.
    active: Option<&'static str>,
}

impl<'a> Page<'a> {
    pub(crate) fn new(title: &'a str) -> Self {
        Self {
            title,
            session: None,
            active: None,
        }
    }

    /// A page of the signed-in `session`, under navigation entry `active` (a path of
    /// [`NAV`]).
    pub(crate) fn of(mut self, session: &'a Session, active: &'static str) -> Self {
        self.session = Some(session);
        self.active = Some(active);
        self
    }

    /// The whole document around `body`.
    pub(crate) fn render(self, body: Markup) -> Markup {
        html! {
            (DOCTYPE)
            html lang="en" {
                head {
                    meta charset="utf-8";
                    meta name="viewport" content="width=device-width, initial-scale=1";
                    title { (self.title) " · idem console" }
                    link rel="stylesheet" href=(STYLESHEET);
                    // No favicon request (it would be a 404 in the browser's console).
                    link rel="icon" href="data:,";
                }
                body {
                    a.skip href="#main" { "Skip to content" }
                    header {
                        span.brand { "idem console" }
                        @if let Some(session) = self.session {
                            nav aria-label="Console" {
                                ul {
                                    @for (path, label) in NAV {
                                        li {
                                            @if self.active == Some(path) {
                                                a href=(path) aria-current="page" { (label) }
                                            } @else {
                                                a href=(path) { (label) }
                                            }
                                        }
                                    }
                                }
                            }
                            form.sign-out method="post" action="/console/sign-out" {
                                input type="hidden" name=(csrf::FIELD) value=(session.csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                    main #main tabindex="-1" {
                        h1 { (self.title) }
                        (body)
                    }
                }
            }
        }
    }
}

/// A page of its own saying `message` under `title`, answered with `status`.
pub(crate) fn message_page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = html! {
        p.problem role="alert" { (message) }
        p { a href=(PREFIX) { "Back to the overview" } }
    };
    (status, Page::new(title).render(body)).into_response()
}

/// 503: the database failed (`reason`); nothing was changed, or part.
pub(crate) fn store_unavailable(reason: &str) -> Response {
    message_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Store unavailable",
        &format!("The database failed: {reason}. Nothing was changed, or part of it; try again."),
    )
}

/// An error of the operations: 400 for a refused request (an unknown name, a bad time), 503
/// for the store.
pub(crate) fn error_page(error: &crate::Error) -> Response {
    match error {
        crate::Error::Request(e) => {
            message_page(StatusCode::BAD_REQUEST, "Refused", &e.to_string())
        }
        other => store_unavailable(&other.to_string()),
    }
}

/// A time (ms since the epoch) as RFC 3339 UTC in a `<time>` element.
pub(crate) fn time(ms: i64) -> Markup {
    let text = format_time(ms);
    html! { time datetime=(text) { (text) } }
}

/// A duration in ms as operators read it: `950 ms`, `42 s`, `5 min`, `3 h 10 min`, `2 d 4 h`.
pub(crate) fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    let (s, m, h, d) = (ms / 1000, ms / 60_000, ms / 3_600_000, ms / 86_400_000);
    match () {
        () if ms < 1000 => format!("{ms} ms"),
        () if s < 120 => format!("{s} s"),
        () if m < 120 => format!("{m} min"),
        () if h < 48 => format!("{h} h {} min", m % 60),
        () => format!("{d} d {} h", h % 24),
    }
}

/// `text` percent-encoded for a query string.
pub(crate) fn encode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The link to the page of event `event_id` of `source`.
pub(crate) fn event_link(source: &str, event_id: &str) -> String {
    format!(
        "/console/event?source={}&id={}",
        encode(source),
        encode(event_id)
    )
}

/// Where a delivery stands, as the console names it: its stored state, with a pending one
/// after a failed attempt called `retrying`.
pub(crate) fn delivery_state(state: crate::DeliveryState, failures: i64) -> &'static str {
    match state {
        crate::DeliveryState::Pending if failures > 0 => "retrying",
        other => other.as_str(),
    }
}

/// A delivery state as a badge.
pub(crate) fn state_badge(state: &str) -> Markup {
    html! { span class={ "state state-" (state) } { (state) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_an_operator_would() {
        assert_eq!(duration(-5), "0 ms");
        assert_eq!(duration(950), "950 ms");
        assert_eq!(duration(42_000), "42 s");
        assert_eq!(duration(5 * 60_000), "5 min");
        assert_eq!(duration(3 * 3_600_000 + 10 * 60_000), "3 h 10 min");
        assert_eq!(duration(2 * 86_400_000 + 4 * 3_600_000), "2 d 4 h");
    }
}
