//! `GET /console/event?source=…&id=…`: one event's whole story: its headers (those that could
//! hold a secret hidden), its body pretty-printed (or why it is gone), its entity and version
//! with the version guard's decision on each route, and each route's delivery with its attempts
//! as a timeline.

use axum::Extension;
use axum::extract::{RawQuery, State as StateOf};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::super::csrf;
use super::super::form::Fields;
use super::super::session::Session;
use super::super::state::State;
use super::super::templates::{
    Page, delivery_state, duration, encode, error_page, message_page, state_badge, time,
};
use crate::DeliveryState;
use crate::config::{Config, Ordering};
use crate::model::forwarded::ForwardedHeaders;
use crate::model::guard_note::{self, Note};
use crate::store::{DeliveryRecord, EventContent, GatewayDb, StoredAttempt, StoredEvent};

/// The largest body shown; past it the page says how much more there is.
const MAX_BODY_SHOWN: usize = 256 * 1024;

/// Header names that can carry a credential: their values are never shown.
const SECRET_HEADERS: [&str; 4] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];

/// Words that make a header name look like it carries a credential.
const SECRET_WORDS: [&str; 6] = ["signature", "secret", "token", "key", "password", "hmac"];

/// Whether the value of header `name` is hidden.
pub(crate) fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    // Idempotency-Key is the dedup key, no credential.
    if name == "idempotency-key" {
        return false;
    }
    SECRET_HEADERS.contains(&name.as_str()) || SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// Everything the page shows, read in one go.
struct Story {
    event: StoredEvent,
    content: Option<EventContent>,
    deliveries: Vec<(DeliveryRecord, Vec<StoredAttempt>)>,
}

pub(crate) async fn page<DB: GatewayDb>(
    StateOf(state): StateOf<State<DB>>,
    Extension(session): Extension<Session>,
    RawQuery(raw): RawQuery,
) -> Response {
    let fields = Fields::parse(raw.unwrap_or_default().as_bytes());
    let (Some(source), Some(event_id)) = (fields.get("source"), fields.get("id")) else {
        return message_page(
            StatusCode::BAD_REQUEST,
            "Which event?",
            "This page needs the event's source and id: /console/event?source=…&id=…",
        );
    };
    let gateway = &state.gateway;
    let read = async {
        let mut conn = gateway.store().pool().acquire().await?;
        let Some(event) = DB::find_event(&mut conn, source, event_id).await? else {
            return Ok::<_, sqlx::Error>(None);
        };
        let content = DB::event_content(&mut conn, event.id).await?;
        let mut deliveries = Vec::new();
        for delivery in DB::delivery_records(&mut conn, event.id).await? {
            let attempts = DB::attempts_of(&mut conn, delivery.id).await?;
            deliveries.push((delivery, attempts));
        }
        Ok(Some(Story {
            event,
            content,
            deliveries,
        }))
    };
    let story = match read.await {
        Ok(Some(story)) => story,
        Ok(None) => {
            return message_page(
                StatusCode::NOT_FOUND,
                "Unknown event",
                &format!("No event {event_id:?} of source {source:?} is stored."),
            );
        }
        Err(e) => return error_page(&crate::Error::Store(e.into())),
    };
    let title = format!("Event {}", story.event.event_id);
    Page::new(&title)
        .of(&session, "/console/events")
        .render(render(&gateway.config(), &story, &session))
        .into_response()
}

fn render(config: &Config, story: &Story, session: &Session) -> Markup {
    let event = &story.event;
    let entity = match (&event.aggregate_type, &event.aggregate_id) {
        (Some(t), Some(id)) => Some(format!("{t}:{id}")),
        _ => None,
    };
    html! {
        dl.facts #facts {
            dt { "source" } dd { (event.source) }
            dt { "event id" } dd { code { (event.event_id) } }
            @if let Some(content) = &story.content {
                dt { "dedup key (Idempotency-Key)" } dd { code { (content.dedup_key) } }
            }
            dt { "type" } dd { (event.event_type.as_deref().unwrap_or("none")) }
            dt { "received" } dd { (time(event.received_at)) }
            dt { "entity" } dd { (entity.as_deref().unwrap_or("none")) }
            dt { "version" } dd {
                @match event.version {
                    Some(v) => {
                        (v)
                        @if let Some(s) = story.content.as_ref().and_then(|c| c.version_secondary) { " (secondary " (s) ")" }
                    }
                    None => "none",
                }
            }
        }
        h2 { "Deliveries" }
        @if !story.deliveries.is_empty() {
            form.inline #resend method="post" action="/console/event/resend" {
                input type="hidden" name=(csrf::FIELD) value=(session.csrf);
                input type="hidden" name="source" value=(event.source);
                input type="hidden" name="id" value=(event.event_id);
                button type="submit" { "Resend" }
                " its finished deliveries under the same Idempotency-Key (an older event of its entity is refused; a provider's own resend is a duplicate and not forwarded)."
            }
        }
        @let filtered = event.filtered_by();
        @if story.deliveries.is_empty() {
            p { "No route takes this event: it was stored and is sent nowhere." }
        }
        @if !filtered.is_empty() {
            ul #filtered {
                @for route in &filtered {
                    li {
                        "Filtered by route " strong { (route) } ": its filter did not take the event, so it has no delivery there"
                        @if let Some(filter) = config.routes.iter().find(|r| r.name.as_str() == route).and_then(|r| r.filter.as_ref()) {
                            " (filter now: " code { (filter.text()) } ")"
                        }
                        "."
                    }
                }
            }
        }
        @for (delivery, attempts) in &story.deliveries {
            (delivery_section(config, event, delivery, attempts))
        }
        h2 { "Headers" }
        (headers(story.content.as_ref()))
        h2 { "Body" }
        (body(story.content.as_ref()))
    }
}

/// Why the version guard let the delivery through, or did not, as far as the stored rows tell
/// (see `guard_note`).
fn decision(config: &Config, event: &StoredEvent, delivery: &DeliveryRecord) -> String {
    let ordering = config
        .routes
        .iter()
        .find(|r| r.name.as_str() == delivery.route)
        .map(|r| r.ordering);
    let note = delivery.note.as_deref().map(guard_note::read);
    if let Some(Note::Versions(versions)) = note {
        return if delivery.state == DeliveryState::Stale {
            format!(
                "Stale: not sent. {versions}. An event older than its entity's newest is \
                 acknowledged and recorded, never forwarded (C5)."
            )
        } else {
            format!(
                "Stale when it arrived ({versions}), so not sent then; sent since by a forced \
                 replay or redrive."
            )
        };
    }
    if delivery.tie {
        return "Version tie: the same version as the entity's newest; sent with \
                Idem-Version-Tie: true so the application fetches the current state."
            .to_owned();
    }
    let event_entity = event
        .aggregate_type
        .as_ref()
        .zip(event.aggregate_id.as_ref())
        .map(|(t, id)| format!("{t}:{id}"));
    match (ordering, &delivery.entity, event.version, note) {
        (Some(Ordering::None), ..) => {
            "Route ordering = \"none\": sent without a version check, in no particular order."
                .to_owned()
        }
        (_, _, _, Some(Note::NotComparable(reason))) => format!(
            "Not ordered: its version could not be compared with the version stored for entity \
             {} ({reason}; the source's version type was changed), so it was sent without a \
             version check.",
            event_entity.as_deref().unwrap_or("?")
        ),
        (_, Some(entity), Some(version), Some(Note::First)) => format!(
            "In order: the first event of entity {entity} on this route, so there was no stored \
             version to compare with; version {version} became the entity's version."
        ),
        (_, Some(entity), Some(version), Some(Note::Gap(gap))) => format!(
            "In order, after a gap in the version sequence ({gap}): version {version} was newer \
             than entity {entity}'s stored version; sent after the entity's earlier events on \
             this route (a gap is applied and counted)."
        ),
        (_, Some(entity), Some(version), _) => format!(
            "In order: version {version} was newer than entity {entity}'s stored version; sent \
             after the entity's earlier events on this route."
        ),
        _ if event_entity.is_some() && event.version.is_some() => {
            "Not ordered: its delivery records no entity (the route did not keep entity order \
             when it was stored), so it was sent without a version check."
                .to_owned()
        }
        _ => "Not ordered: the event has no entity or version, so it is sent whatever its \
              entity's newest version."
            .to_owned(),
    }
}

fn delivery_section(
    config: &Config,
    event: &StoredEvent,
    delivery: &DeliveryRecord,
    attempts: &[StoredAttempt],
) -> Markup {
    let state = delivery_state(delivery.state, delivery.failures);
    html! {
        section.delivery data-route=(delivery.route) data-state=(state) {
            h3 { "Route " code { (delivery.route) } " → " (delivery.destination) " " (state_badge(state)) }
            p.decision { (decision(config, event, delivery)) }
            dl.facts {
                dt { "delivery id" } dd { (delivery.id) }
                dt { "attempts" } dd { (delivery.attempts) }
                @if delivery.state.is_open() {
                    dt { @if delivery.state == DeliveryState::InFlight { "claim lapses" } @else { "next attempt" } }
                    dd { (time(delivery.next_attempt_at)) }
                }
                dt { "last change" } dd { (time(delivery.updated_at)) }
            }
            @if delivery.state == DeliveryState::Dead {
                p { a href={ "/console/dead-letters?destination=" (encode(&delivery.destination)) } { "Redrive it from the dead letters" } }
            }
            @if attempts.is_empty() && delivery.state != DeliveryState::InFlight {
                p.hint { "No attempt made." }
            } @else {
                ol.timeline aria-label={ "Attempts on route " (delivery.route) } {
                    @for (i, attempt) in attempts.iter().enumerate() {
                        li {
                            strong { "Attempt " (attempt.attempt) } " at " (time(attempt.started_at))
                            ": "
                            @match attempt.status {
                                Some(status) => { "HTTP " (status) }
                                None => "no answer",
                            }
                            " in " (duration(attempt.duration_ms)) ", " (attempt.outcome.as_str())
                            @if let Some(next) = next_attempt(delivery, attempts, i) {
                                "; next attempt " (time(next))
                            }
                            @if !attempt.excerpt.is_empty() {
                                pre.excerpt { (attempt.excerpt) }
                            }
                        }
                    }
                    // Its outcome is recorded once it ends.
                    @if delivery.state == DeliveryState::InFlight {
                        li { strong { "Attempt " (delivery.attempts) } ": being sent, no outcome yet" }
                    }
                }
            }
        }
    }
}

/// When the attempt after `attempts[i]` was (or is) due: the next attempt's start, or for
/// the last one of a delivery still pending, its due time.
fn next_attempt(delivery: &DeliveryRecord, attempts: &[StoredAttempt], i: usize) -> Option<i64> {
    match attempts.get(i + 1) {
        Some(next) => Some(next.started_at),
        None => (delivery.state == DeliveryState::Pending).then_some(delivery.next_attempt_at),
    }
}

fn headers(content: Option<&EventContent>) -> Markup {
    let Some(content) = content else {
        return html! { p.hint { "Not stored." } };
    };
    match ForwardedHeaders::from_json(&content.headers) {
        Ok(headers) => html! {
            p.hint { "The headers kept with the event and forwarded with it; a value that could hold a credential is hidden." }
            table #headers {
                thead { tr { th scope="col" { "header" } th scope="col" { "value" } } }
                tbody {
                    @for (name, value) in headers.iter() {
                        tr {
                            th scope="row" { code { (name.as_str()) } }
                            td { @if is_secret_header(name.as_str()) { em { "(hidden)" } } @else { code { (value.to_str().unwrap_or_default()) } } }
                        }
                    }
                }
            }
        },
        Err(e) => html! { p.problem { (e.to_string()) } },
    }
}

fn body(content: Option<&EventContent>) -> Markup {
    let Some(body) = content.and_then(|c| c.body.as_deref()) else {
        return html! {
            p #body-dropped { "The body was dropped by body_retention: it can no longer be shown, replayed or redriven." }
        };
    };
    // JSON is shown pretty-printed, anything else as received (invalid UTF-8 replaced); either
    // is cut at MAX_BODY_SHOWN bytes, at a character's start.
    let (mut text, whole, what) = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(json) => {
            let pretty = serde_json::to_string_pretty(&json).unwrap_or_default();
            let whole = pretty.len();
            (pretty, whole, "of the pretty-printed body")
        }
        Err(_) => (
            String::from_utf8_lossy(&body[..body.len().min(MAX_BODY_SHOWN)]).into_owned(),
            body.len(),
            "of the body",
        ),
    };
    let mut end = text.len().min(MAX_BODY_SHOWN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    html! {
        p.hint { (body.len()) " bytes, forwarded byte for byte" }
        pre #body { (text) }
        @if text.len() < whole {
            p.hint #body-cut {
                "Only the first " (text.len()) " of the " (whole) " bytes " (what) " are shown."
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(body: Vec<u8>) -> EventContent {
        EventContent {
            dedup_key: "k".into(),
            body: Some(body),
            headers: "{}".into(),
            version_secondary: None,
        }
    }

    /// The text of the element with `id` in `html` (no tag inside), as maud escaped it.
    fn element(html: &str, id: &str, close: &str) -> String {
        let start = html.find(&format!("id=\"{id}\"")).expect(id);
        let start = start + html[start..].find('>').unwrap() + 1;
        let end = start + html[start..].find(close).unwrap();
        html[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }

    #[test]
    fn a_json_body_past_the_limit_is_cut_and_says_so() {
        // 300 entries of 1 KiB strings: about 300 KiB compact, more pretty-printed.
        let items: Vec<String> = (0..300)
            .map(|i| format!("{i:04}{}", "é".repeat(510)))
            .collect();
        let json = serde_json::to_vec(&serde_json::json!({ "items": items })).unwrap();
        let pretty = serde_json::to_string_pretty(
            &serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
        )
        .unwrap();
        assert!(json.len() > MAX_BODY_SHOWN);
        let html = body(Some(&content(json.clone()))).into_string();
        let shown = element(&html, "body", "</pre>");
        // "é" is two bytes: the cut falls on a character's start, at most the limit.
        assert!(shown.len() <= MAX_BODY_SHOWN && shown.len() > MAX_BODY_SHOWN - 2);
        assert!(pretty.starts_with(&shown));
        assert_eq!(
            element(&html, "body-cut", "</p>"),
            format!(
                "Only the first {} of the {} bytes of the pretty-printed body are shown.",
                shown.len(),
                pretty.len()
            )
        );
        let small = body(Some(&content(br#"{"a":1}"#.to_vec()))).into_string();
        assert_eq!(element(&small, "body", "</pre>"), "{\n  \"a\": 1\n}");
        assert!(!small.contains("body-cut"), "{small}");
    }

    #[test]
    fn another_body_past_the_limit_is_cut_too() {
        let text = vec![b'x'; MAX_BODY_SHOWN + 10];
        let html = body(Some(&content(text))).into_string();
        assert_eq!(element(&html, "body", "</pre>").len(), MAX_BODY_SHOWN);
        assert_eq!(
            element(&html, "body-cut", "</p>"),
            format!(
                "Only the first {MAX_BODY_SHOWN} of the {} bytes of the body are shown.",
                MAX_BODY_SHOWN + 10
            )
        );
    }

    #[test]
    fn credentials_are_hidden_and_event_headers_shown() {
        for hidden in [
            "Authorization",
            "stripe-signature",
            "x-hub-signature-256",
            "X-Shopify-Hmac-Sha256",
            "x-api-key",
            "Cookie",
        ] {
            assert!(is_secret_header(hidden), "{hidden}");
        }
        for shown in [
            "content-type",
            "x-github-event",
            "x-github-delivery",
            "idempotency-key",
        ] {
            assert!(!is_secret_header(shown), "{shown}");
        }
    }
}
