//! One attempt: POST the event's raw body to the destination with idem's headers and a
//! Standard Webhooks signature made with the destination's secret.

use std::time::Duration;

use idem_core::Timestamp;
use idem_http::verify::standard_webhooks;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue, RETRY_AFTER};
use sha2::{Digest, Sha256};

use super::attempted::{AttemptResult, Attempted};
use crate::config::Destination;
use crate::model::forwarded::ForwardedHeaders;
use crate::store::DueDelivery;
use crate::traces::{TRACEPARENT, TRACESTATE, TraceHeaders};

/// The event's dedup key (`{dedup scope}:{event id}`) as it was claimed in idem's inbox, as an
/// RFC 8941 String (draft-ietf-httpapi-idempotency-key-header §2.1): `"stripe:evt_1"`, with `"`
/// and `\` escaped by a backslash; a key holding a byte outside printable ASCII is sent as
/// `"#sha256:{64 hex digits of SHA-256(dedup key)}"` instead (see [`idempotency_key`]). The
/// same on every attempt, redrive and replay of one event.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The event id as the sender gave it, bare (not an sf-string): bytes outside visible ASCII
/// and spaces, and `%`, percent-encoded.
pub const EVENT_ID: &str = "idem-event-id";
/// The source name.
pub const SOURCE: &str = "idem-source";
/// The attempt number, from 1; redrives and replays continue the count.
pub const ATTEMPT: &str = "idem-attempt";
/// `true` when the event has the same version as its entity's newest (C5): refetch the object.
pub const VERSION_TIE: &str = "idem-version-tie";
/// The event type, when the source has one.
pub const EVENT_TYPE: &str = "idem-event-type";
/// `rebuild` on the attempts of a delivery a rebuild replay made due (`idem replay --rebuild`),
/// so the application can tell a rebuild of a new consumer version from live traffic; absent
/// on live deliveries and ordinary replays.
pub const REPLAY: &str = "idem-replay";

/// The most bytes of a response body kept with an attempt.
const EXCERPT_BYTES: usize = 256;

/// The `webhook-id` of `(scope, event id)` at `destination`: `msg_` and 32 hex digits of a
/// SHA-256, with no `.` (the signed content joins id, timestamp and body with dots), the same on
/// every attempt. `scope` is the source's `dedup_scope` (by default its name), so one event
/// arriving on two paths of one scope has one `webhook-id`.
pub fn webhook_id(scope: &str, event_id: &str, destination: &str) -> String {
    let mut hash = Sha256::new();
    for part in [scope, "\n", event_id, "\n", destination] {
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    format!("msg_{}", hex::encode(&digest[..16]))
}

/// The `webhook-id` of `delivery` at `destination` ([`webhook_id`] of its dedup scope, event id
/// and the destination's name): the message id of every attempt, HTTP or broker.
pub(crate) fn delivery_webhook_id(delivery: &DueDelivery, destination: &Destination) -> String {
    // The key is `{scope}:{event id}` and a scope holds no `:`; a key of another form (none is
    // stored) keys by the source's name.
    let scope = delivery
        .dedup_key
        .split_once(':')
        .map_or(delivery.source.as_str(), |(scope, _)| scope);
    webhook_id(scope, &delivery.event_id, destination.name.as_str())
}

/// The delay-seconds form of `Retry-After` (RFC 9110 §10.2.3: a non-negative decimal integer);
/// a number too large for 64 bits is the longest wait (capped later by `retry_after_cap`), not
/// ignored. The HTTP-date form is not read.
fn retry_after_secs(value: &str) -> Option<u64> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(value.parse().unwrap_or(u64::MAX))
}

/// The `Idempotency-Key` value of dedup key `key`: an RFC 8941 §3.3.3 String, which holds
/// printable ASCII only (`0x20`–`0x7E`), serialised as §4.1.6 says: in double quotes, each `"`
/// and `\` preceded by a backslash (`stripe:a"b\c` gives `"stripe:a\"b\\c"`). A key with any
/// other byte (an event id may hold any UTF-8 or a control character) cannot be such a String,
/// so it is sent as `"#sha256:"` and the 64 lower-case hex digits of SHA-256 of its UTF-8 bytes,
/// the form effect keys use: no dedup key starts with `#` (each starts with a name), so the two
/// forms never meet.
pub fn idempotency_key(key: &str) -> String {
    if key.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        let mut value = String::with_capacity(key.len() + 2);
        value.push('"');
        for c in key.chars() {
            if matches!(c, '"' | '\\') {
                value.push('\\');
            }
            value.push(c);
        }
        value.push('"');
        value
    } else {
        format!(
            "\"#sha256:{}\"",
            hex::encode(Sha256::digest(key.as_bytes()))
        )
    }
}

/// A header value for arbitrary text: as is when it is all visible ASCII and spaces; otherwise
/// every byte outside that set, and `%`, percent-encoded (event ids may hold any text; HTTP
/// headers should not carry raw non-ASCII bytes).
fn header_text(text: &str) -> HeaderValue {
    // `%` is encoded too, or the ids `café` and `caf%C3%A9` would share one header value.
    let plain = |b: u8| (b == b' ' || b.is_ascii_graphic()) && b != b'%';
    let encoded = if text.bytes().all(plain) {
        text.to_owned()
    } else {
        text.bytes()
            .map(|b| {
                if plain(b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    HeaderValue::from_str(&encoded).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

/// Where a destination's HTTP attempts go: its client (its TLS settings) and its URL, parsed
/// once instead of on every attempt. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Endpoint {
    client: reqwest::Client,
    /// The URL, or why it cannot be one (a destination built in code; configured ones are
    /// checked at load).
    url: std::sync::Arc<Result<reqwest::Url, String>>,
}

impl Endpoint {
    /// `url` reached through `client`.
    pub(crate) fn new(client: reqwest::Client, url: &str) -> Self {
        let url =
            reqwest::Url::parse(url).map_err(|e| format!("the url {url:?} is not valid: {e}"));
        Self {
            client,
            url: std::sync::Arc::new(url),
        }
    }
}

/// Sends one attempt of `delivery` as attempt number `attempt`, signed at `now`, in the trace
/// of `trace` (its `traceparent` and `tracestate` headers). A delivery whose raw body was
/// dropped (body_retention) or whose stored headers cannot be read is not sent: no attempt can
/// succeed.
pub(crate) async fn attempt(
    endpoint: &Endpoint,
    destination: &Destination,
    delivery: &DueDelivery,
    attempt: i64,
    now: Timestamp,
    trace: Option<&TraceHeaders>,
) -> Attempted {
    let unsendable = Attempted::unsendable;
    let url = match endpoint.url.as_ref() {
        Ok(url) => url.clone(),
        Err(e) => return unsendable(e.clone()),
    };
    let Some(body) = delivery.body.0.clone() else {
        return unsendable("the raw body was dropped by body_retention; it cannot be sent".into());
    };
    let stored = match ForwardedHeaders::from_json(&delivery.headers) {
        Ok(stored) => stored,
        Err(e) => return unsendable(e.to_string()),
    };
    let msg_id = delivery_webhook_id(delivery, destination);
    let timestamp = now.as_millis().div_euclid(1000);
    let signature = match standard_webhooks::sign(
        destination.signing_secret.expose(),
        &msg_id,
        timestamp,
        &body,
    ) {
        Ok(signature) => signature,
        Err(e) => return unsendable(format!("cannot sign: {e}")),
    };
    let signed = Signed {
        msg_id: &msg_id,
        timestamp,
        signature: &signature,
    };
    let headers = match headers_of(delivery, &stored, attempt, &signed, trace) {
        Ok(headers) => headers,
        Err(e) => return unsendable(e),
    };

    let sent = endpoint
        .client
        .post(url)
        .headers(headers)
        .body(body)
        .timeout(destination.timeout)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => {
            return Attempted {
                result: AttemptResult::Retryable,
                status: None,
                excerpt: transport_error(&e),
                retry_after: None,
            };
        }
    };
    answer(response, destination).await
}

/// The Standard Webhooks signature of one attempt.
struct Signed<'a> {
    msg_id: &'a str,
    timestamp: i64,
    signature: &'a str,
}

/// The headers of attempt number `attempt` of `delivery`: its forwarded headers (`stored`),
/// idem's, the signature's and the trace context's.
///
/// # Errors
/// Why the headers cannot be written (the delivery cannot be sent).
fn headers_of(
    delivery: &DueDelivery,
    stored: &ForwardedHeaders,
    attempt: i64,
    signed: &Signed<'_>,
    trace: Option<&TraceHeaders>,
) -> Result<HeaderMap, String> {
    let mut headers = unsigned_headers(delivery, stored, attempt, trace)?;
    headers.insert(standard_webhooks::ID_HEADER, header_text(signed.msg_id));
    headers.insert(
        standard_webhooks::TIMESTAMP_HEADER,
        HeaderValue::from(signed.timestamp),
    );
    headers.insert(
        standard_webhooks::SIGNATURE_HEADER,
        header_text(signed.signature),
    );
    Ok(headers)
}

/// The headers of attempt number `attempt` of `delivery` but the signature's: its forwarded
/// headers (`stored`), `Content-Type`, idem's (`Idempotency-Key`, `Idem-*`) and the trace
/// context's. A broker destination sends these as message headers.
///
/// # Errors
/// Why the headers cannot be written (the delivery cannot be sent).
pub(crate) fn unsigned_headers(
    delivery: &DueDelivery,
    stored: &ForwardedHeaders,
    attempt: i64,
    trace: Option<&TraceHeaders>,
) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in stored.iter() {
        headers.insert(name.clone(), value.clone());
    }
    if !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    // Printable ASCII only, always a valid header value; `%` is an sf-string character, not
    // encoded.
    match HeaderValue::from_str(&idempotency_key(&delivery.dedup_key)) {
        Ok(value) => headers.insert(IDEMPOTENCY_KEY, value),
        Err(e) => return Err(format!("cannot write the Idempotency-Key: {e}")),
    };
    headers.insert(EVENT_ID, header_text(&delivery.event_id));
    headers.insert(SOURCE, header_text(&delivery.source));
    headers.insert(ATTEMPT, HeaderValue::from(attempt));
    if let Some(ty) = &delivery.event_type {
        headers.insert(EVENT_TYPE, header_text(ty));
    }
    if delivery.tie {
        headers.insert(VERSION_TIE, HeaderValue::from_static("true"));
    }
    // Only a rebuild's attempts say so: a forwarded header of this name never goes out.
    if delivery.rebuild {
        headers.insert(REPLAY, HeaderValue::from_static("rebuild"));
    } else {
        headers.remove(REPLAY);
    }
    // Checked when read (visible ASCII), so always valid header values; inserted, so they
    // replace any forwarded header of these names.
    if let Some(trace) = trace {
        if let Ok(value) = HeaderValue::from_str(&trace.traceparent) {
            headers.insert(TRACEPARENT, value);
        }
        if let Some(Ok(value)) = trace.tracestate.as_deref().map(HeaderValue::from_str) {
            headers.insert(TRACESTATE, value);
        }
    }
    Ok(headers)
}

/// How an attempt answered with `response` went: its status, result, `Retry-After` and the
/// start of its body.
async fn answer(mut response: reqwest::Response, destination: &Destination) -> Attempted {
    let status = response.status();
    let retry_after = if matches!(status.as_u16(), 429 | 503) {
        response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after_secs)
            .map(Duration::from_secs)
    } else {
        None
    };
    let mut excerpt = Vec::new();
    // Read only the start of the body: a large answer must not be held in memory.
    while excerpt.len() < EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => excerpt.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    excerpt.truncate(EXCERPT_BYTES);
    let result = if status.is_success() {
        AttemptResult::Delivered
    } else if retryable(status.as_u16(), destination.retry_4xx) {
        AttemptResult::Retryable
    } else {
        AttemptResult::Permanent
    };
    Attempted {
        result,
        status: Some(status.as_u16()),
        excerpt: String::from_utf8_lossy(&excerpt).into_owned(),
        retry_after,
    }
}

/// Whether sending again may succeed after a non-2xx answer with `status`: every 5xx, and the
/// 4xx that say "not now" rather than "not this request": 408 Request Timeout and 409 Conflict
/// (RFC 9110 §15.5.9, §15.5.10), 425 Too Early (RFC 8470 §5.2), 429 Too Many Requests (RFC 6585
/// §4). Any other 4xx refuses the request itself, which would be refused again byte for byte,
/// unless the destination sets `retry_4xx`. 1xx and 3xx (a redirect is not followed) are
/// retried.
pub(crate) fn retryable(status: u16, retry_4xx: bool) -> bool {
    !(400..500).contains(&status) || retry_4xx || matches!(status, 408 | 409 | 425 | 429)
}

fn transport_error(e: &reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    // The TLS reason first: the 256 characters kept must name it, however long the URL.
    let mut text = match crate::tls::failure_reason(e) {
        Some(reason) => format!("{what}: TLS: {reason}: {e}"),
        None => format!("{what}: {e}"),
    };
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text.chars().take(EXCERPT_BYTES).collect()
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_transport_error_does_not_show_the_urls_password() {
        // Port 1 on loopback: nothing listens, so the connection is refused.
        let client = crate::tls::default_client_builder().build().unwrap();
        let error = client
            .post("http://hook:hookpw@127.0.0.1:1/events")
            .send()
            .await
            .unwrap_err();
        let text = super::transport_error(&error);
        assert!(text.starts_with("connection failed"), "{text}");
        // reqwest sends the user and password as an Authorization header and names the URL
        // without them; the excerpt is stored and shown, so this must hold.
        assert!(
            !text.contains("hookpw") && !text.contains("hook:"),
            "{text}"
        );
    }

    use super::*;

    #[test]
    fn webhook_id_is_stable_per_event_and_destination_and_has_no_dot() {
        let a = webhook_id("stripe", "evt_1", "app");
        assert_eq!(a, webhook_id("stripe", "evt_1", "app"));
        assert_ne!(a, webhook_id("stripe", "evt_1", "billing"));
        assert_ne!(a, webhook_id("stripe", "evt_2", "app"));
        assert!(
            a.starts_with("msg_") && a.len() == 36 && !a.contains('.'),
            "{a}"
        );
    }

    #[test]
    fn only_the_not_now_4xx_are_retried_unless_retry_4xx() {
        for status in [408, 409, 425, 429, 500, 502, 503, 504, 599, 302] {
            assert!(retryable(status, false), "{status}");
        }
        for status in [400, 401, 403, 404, 405, 410, 413, 415, 422, 499] {
            assert!(!retryable(status, false), "{status}");
            assert!(retryable(status, true), "{status}");
        }
    }

    /// Issue 15, item 1: RFC 8941 §4.1.6's serialisation, and the digest form for keys RFC
    /// 8941 Strings cannot hold (the digest of `stripe:évt` from `printf 'stripe:\xc3\xa9vt' |
    /// sha256sum`, as in idem-core's effect-key test, and of `gh:tab\\there` likewise).
    #[test]
    fn idempotency_key_is_an_sf_string() {
        assert_eq!(idempotency_key("stripe:evt_1"), r#""stripe:evt_1""#);
        assert_eq!(idempotency_key(r#"gh:a"b\c"#), r#""gh:a\"b\\c""#);
        assert_eq!(idempotency_key("gh:two  spaces "), r#""gh:two  spaces ""#);
        assert_eq!(idempotency_key("gh:100%"), r#""gh:100%""#);
        assert_eq!(
            idempotency_key("stripe:évt"),
            "\"#sha256:e630c21350a4098d76809cd5c30024e2c30b897c1e6555ee1db7fd1cc5ffa444\""
        );
        assert_eq!(
            idempotency_key("gh:tab\there"),
            "\"#sha256:30ee573d30be4362d632084dbe2fb1e7dcea061c5e4ad9838ce23d9c32fa8644\""
        );
    }

    #[test]
    fn header_text_keeps_ascii_and_encodes_the_rest() {
        assert_eq!(header_text("stripe:evt_1"), "stripe:evt_1");
        assert_eq!(header_text("gh:café"), "gh:caf%C3%A9");
        // Two ids that would otherwise share one Idempotency-Key.
        assert_eq!(header_text("stripe:%C3%A9vt"), "stripe:%25C3%25A9vt");
        assert_eq!(header_text("stripe:évt"), "stripe:%C3%A9vt");
        assert_eq!(header_text("100%"), "100%25");
    }

    #[test]
    fn retry_after_reads_delay_seconds_and_caps_what_overflows() {
        assert_eq!(retry_after_secs(" 120 "), Some(120));
        assert_eq!(retry_after_secs("99999999999999999999"), Some(u64::MAX));
        assert_eq!(retry_after_secs("-1"), None);
        assert_eq!(retry_after_secs("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(retry_after_secs(""), None);
    }
}
