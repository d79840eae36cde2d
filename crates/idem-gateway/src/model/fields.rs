//! Reading an event's id, type, entity and version from a delivery's headers and raw body: the
//! fields a source's configuration sets, which ingest (webhooks) and the broker sources read.

use http::{HeaderMap, HeaderName};
use idem_core::{Entity, EventId, MAX_ID_BYTES, Name, Version};
use serde_json::Value;

use crate::model::body_path::{self, BodyPath};
use crate::model::forwarded::{ForwardedError, ForwardedHeaders};

// Broker message properties, visible to the fields as headers of these names.

/// The NATS header that carries a message's id (JetStream's duplicate window is keyed on it):
/// a NATS source's event id by default.
pub(crate) const NATS_MSG_ID: &str = "nats-msg-id";
/// The pseudo-header holding a NATS message's subject: a NATS source's event type by default.
pub(crate) const NATS_SUBJECT: &str = "nats-subject";
/// The pseudo-header holding the AMQP `message_id` property: a RabbitMQ source's event id by
/// default.
pub(crate) const AMQP_MESSAGE_ID: &str = "amqp-message-id";
/// The pseudo-header holding the AMQP `type` property.
pub(crate) const AMQP_TYPE: &str = "amqp-type";
/// The pseudo-header holding the routing key a RabbitMQ message was published with.
pub(crate) const AMQP_ROUTING_KEY: &str = "amqp-routing-key";
/// The Kafka header the outbox relay sets to a row's stable message id
/// ([`idem_broker::MESSAGE_ID_HEADER`]): a Kafka source's event id by default.
pub(crate) const KAFKA_MESSAGE_ID: &str = idem_broker::MESSAGE_ID_HEADER;
/// The pseudo-header holding a Kafka record's `{topic}/{partition}@{offset}`: a Kafka source's
/// event id when the record has no [`KAFKA_MESSAGE_ID`].
pub(crate) const KAFKA_POSITION: &str = "kafka-position";
/// The pseudo-header holding a Kafka record's topic: a Kafka source's event type by default.
pub(crate) const KAFKA_TOPIC: &str = "kafka-topic";
/// The pseudo-header holding a Kafka record's key (when it is UTF-8), for `entity`.
pub(crate) const KAFKA_KEY: &str = "kafka-key";

/// Where one value of an event is read from.
#[derive(Debug, Clone)]
pub(crate) enum Field {
    /// A request header, read as text.
    Header(HeaderName),
    /// A JSON path into the body, with its text for messages.
    Json(BodyPath, String),
    /// The first of these that is present (Shopify: `X-Shopify-Event-Id`, then
    /// `X-Shopify-Webhook-Id`).
    FirstOf(Vec<Field>),
}

/// The aggregate type of an entity: fixed in the configuration, or read from the event (Stripe:
/// `data.object.object`).
#[derive(Debug, Clone)]
pub(crate) enum EntityType {
    Fixed(Name),
    Read(Field),
}

/// How a version (or its secondary value) is read and compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VersionKind {
    /// `type = "integer"`: an integer compared as it is; as a version, a dense sequence (a
    /// skipped number is a gap).
    Sequence,
    /// Stripe's built-in `$.created`: integer Unix seconds, compared as they are (the versions
    /// stored before `type = "timestamp"` took RFC 3339 stay comparable).
    UnixSeconds,
    /// `type = "timestamp"`: an RFC 3339 time, or an integer in `unit`; compared as
    /// microseconds since the Unix epoch, UTC.
    Timestamp(TimeUnit),
}

/// The unit of integer values of a `type = "timestamp"` field (`unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeUnit {
    /// `unit = "s"`, the default: Unix seconds.
    Seconds,
    /// `unit = "ms"`: Unix milliseconds.
    Millis,
}

impl VersionKind {
    /// What a value of this kind looks like, for errors.
    fn expected(self) -> &'static str {
        match self {
            Self::Sequence => "an integer version",
            Self::UnixSeconds => "an integer version (Unix seconds)",
            Self::Timestamp(TimeUnit::Seconds) => {
                "an RFC 3339 time (\"2026-10-06T07:06:30.500Z\") or integer Unix seconds"
            }
            Self::Timestamp(TimeUnit::Millis) => {
                "an RFC 3339 time (\"2026-10-06T07:06:30.500Z\") or integer Unix milliseconds"
            }
        }
    }

    /// What an integer of this kind must be when [`value`](Self::value) refused one: a time is
    /// compared in microseconds, which an `i64` holds up to about the year 294,000.
    fn expected_in_range(self) -> &'static str {
        match self {
            Self::Timestamp(TimeUnit::Seconds) => {
                "integer Unix seconds from -9223372036854 to 9223372036854 (times are compared in microseconds)"
            }
            Self::Timestamp(TimeUnit::Millis) => {
                "integer Unix milliseconds from -9223372036854775 to 9223372036854775 (times are compared in microseconds)"
            }
            Self::Sequence | Self::UnixSeconds => self.expected(),
        }
    }

    /// The value compared, or `None` when `value` is not of this kind (or out of range).
    fn value(self, value: &Scalar<'_>) -> Option<i64> {
        match self {
            Self::Sequence | Self::UnixSeconds => value.integer(),
            Self::Timestamp(unit) => match value.integer() {
                Some(n) => n.checked_mul(match unit {
                    TimeUnit::Seconds => 1_000_000,
                    TimeUnit::Millis => 1_000,
                }),
                None => match value {
                    Scalar::Text(text) => rfc3339_micros(text.trim()),
                    Scalar::Number(_) => None,
                },
            },
        }
    }

    fn version(self, value: i64) -> Version {
        match self {
            Self::Sequence => Version::sequence(value),
            Self::UnixSeconds | Self::Timestamp(_) => Version::timestamp(value),
        }
    }
}

/// The microseconds since the Unix epoch (UTC) of an RFC 3339 `date-time` (RFC 3339 §5.6:
/// `2026-10-06T07:06:30.500Z`, `2026-10-06T09:06:30.5+02:00`): the offset is subtracted, so
/// one instant written with two offsets gives one value; digits past the sixth of the
/// fraction are dropped. `t`, `z` and a space for the `T` are taken too (§5.6's note). `None`
/// for any other text, for a field out of its range, and for a leap second (`:60`), which
/// no Unix time can hold.
pub(crate) fn rfc3339_micros(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0_i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let at = |i: usize, allowed: &[u8]| b.get(i).is_some_and(|c| allowed.contains(c));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt ") && at(13, b":") && at(16, b":")) {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let days_in_month = *month_days.get(usize::try_from(month - 1).ok()?)?;
    if !(1..=days_in_month).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0;
    if at(i, b".") {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let kept = digits(start..start + (i - start).min(6))?;
        micros = kept * 10_i64.pow(u32::try_from(6 - (i - start).min(6)).ok()?);
    }
    let offset_secs = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (digits(i + 1..i + 3)?, digits(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let offset = h * 3600 + m * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };
    // Days from 1970-01-01 to the date (the proleptic Gregorian calendar), by H. Hinnant's
    // days_from_civil.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(secs * 1_000_000 + micros)
}

/// Everything a source reads from a delivery.
#[derive(Debug, Clone)]
pub(crate) struct Fields {
    pub id: Field,
    pub event_type: Option<Field>,
    pub entity: Option<(EntityType, Field)>,
    pub version: Option<(Field, VersionKind)>,
    /// `version_secondary`: the value that breaks a tie of equal versions (idem-core's
    /// `Version::secondary`).
    pub version_secondary: Option<(Field, VersionKind)>,
    /// More headers kept and forwarded with the event: those its routes' filters read by name,
    /// so that a replay's filter sees what ingest's saw.
    pub kept_headers: Vec<HeaderName>,
}

/// What [`Fields::entity_and_version`] read: the entity and version when the event has both,
/// and the fields it lacks when the source reads them and it does not have them all.
type Ordering = (Option<(Entity, Version)>, Option<String>);

/// What was read from one delivery.
#[derive(Debug, Clone)]
pub(crate) struct Extracted {
    pub event_id: EventId,
    pub event_type: Option<String>,
    /// Present only with a version: an entity without one cannot be ordered.
    pub entity: Option<(Entity, Version)>,
    /// When the source reads an entity and a version and this event lacks some of what they
    /// are read from: those fields (`body field `$.created``), for the warning that the event
    /// is not ordered.
    pub unordered: Option<String>,
    /// The headers forwarded with the body: `content-type` and those the fields read.
    pub headers: ForwardedHeaders,
}

/// Why the event could not be read from a delivery: a webhook is answered 400 with it, a broker
/// message is dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtractError {
    /// A field reads the body, and the body is not JSON (the parser's message).
    #[error("the body is not valid JSON: {0}")]
    MalformedJson(String),
    /// No event id where the source reads it (which header or body field).
    #[error("no event id: {0} is missing")]
    MissingId(String),
    /// The event id is there but breaks idem's rules for ids (blank, longer than 255 bytes).
    #[error("the event id from {field} is unusable: {problem}")]
    BadId {
        /// Where it was read.
        field: String,
        /// Which rule it breaks.
        problem: String,
    },
    /// A field holds a value of the wrong shape (a JSON object where a string was expected, a
    /// version that is not an integer, a header that is not text).
    #[error("{field} holds {found}; expected {expected}")]
    BadValue {
        /// Where it was read.
        field: String,
        /// What was found.
        found: String,
        /// What was expected.
        expected: &'static str,
    },
}

impl ExtractError {
    /// The problem's short name, used in the problem+json `type` (`malformed-json`,
    /// `no-event-id`, `bad-event-field`) and in metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MalformedJson(_) => "malformed-json",
            Self::MissingId(_) | Self::BadId { .. } => "no-event-id",
            Self::BadValue { .. } => "bad-event-field",
        }
    }
}

impl Field {
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Header(name) => format!("header `{name}`"),
            Self::Json(_, text) => format!("body field `{text}`"),
            Self::FirstOf(fields) => fields
                .iter()
                .map(Field::describe)
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }

    fn body_paths<'a>(&'a self, out: &mut Vec<&'a BodyPath>) {
        match self {
            Self::Header(_) => {}
            Self::Json(path, _) => out.push(path),
            Self::FirstOf(fields) => fields.iter().for_each(|f| f.body_paths(out)),
        }
    }

    fn header_names<'a>(&'a self, out: &mut Vec<&'a HeaderName>) {
        match self {
            Self::Header(name) => out.push(name),
            Self::Json(..) => {}
            Self::FirstOf(fields) => fields.iter().for_each(|f| f.header_names(out)),
        }
    }

    /// The value, or `None` when absent (JSON `null` counts as absent).
    fn read<'a>(
        &self,
        headers: &'a HeaderMap,
        body: Option<&'a Value>,
    ) -> Result<Option<Scalar<'a>>, ExtractError> {
        match self {
            Self::Header(name) => match headers.get(name) {
                None => Ok(None),
                Some(value) => value.to_str().map(|s| Some(Scalar::Text(s))).map_err(|_| {
                    ExtractError::BadValue {
                        field: self.describe(),
                        found: "bytes that are not visible ASCII".into(),
                        expected: "visible ASCII text",
                    }
                }),
            },
            Self::Json(path, _) => {
                let Some(body) = body else { return Ok(None) };
                match path.find(body) {
                    Ok(None | Some(Value::Null)) => Ok(None),
                    // Databases refuse NUL in text (PostgreSQL) and no sender's id holds one.
                    Ok(Some(Value::String(s))) if s.contains('\0') => Err(ExtractError::BadValue {
                        field: self.describe(),
                        found: "text with a NUL character".into(),
                        expected: "text without NUL characters",
                    }),
                    Ok(Some(Value::String(s))) => Ok(Some(Scalar::Text(s))),
                    Ok(Some(Value::Number(n))) => Ok(Some(Scalar::Number(n))),
                    Ok(Some(other)) => Err(ExtractError::BadValue {
                        field: self.describe(),
                        found: json_kind(other).into(),
                        expected: "a string or a number",
                    }),
                    Err(_) => Err(ExtractError::BadValue {
                        field: self.describe(),
                        found: "several values".into(),
                        expected: "exactly one value",
                    }),
                }
            }
            Self::FirstOf(fields) => {
                for field in fields {
                    if let Some(value) = field.read(headers, body)? {
                        return Ok(Some(value));
                    }
                }
                Ok(None)
            }
        }
    }
}

/// A value read from a header or the body.
enum Scalar<'a> {
    Text(&'a str),
    Number(&'a serde_json::Number),
}

impl Scalar<'_> {
    fn text(&self) -> String {
        match self {
            Self::Text(s) => (*s).to_owned(),
            Self::Number(n) => n.to_string(),
        }
    }

    fn integer(&self) -> Option<i64> {
        match self {
            Self::Text(s) => s.trim().parse().ok(),
            Self::Number(n) => n.as_i64(),
        }
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl Fields {
    fn all(&self) -> impl Iterator<Item = &Field> {
        let entity = self.entity.iter().flat_map(|(ty, id)| {
            let ty = match ty {
                EntityType::Read(field) => Some(field),
                EntityType::Fixed(_) => None,
            };
            ty.into_iter().chain(std::iter::once(id))
        });
        std::iter::once(&self.id)
            .chain(self.event_type.iter())
            .chain(entity)
            .chain(self.version.iter().map(|(field, _)| field))
            .chain(self.version_secondary.iter().map(|(field, _)| field))
    }

    /// Reads the event from a delivery whose signature was already checked. The body is parsed
    /// as JSON only when a field reads it; parsing never changes the stored bytes.
    ///
    /// # Errors
    /// [`ExtractError`] for a body that is not JSON (when read), a missing or blank id, or a
    /// field of the wrong shape.
    pub(crate) fn extract(
        &self,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, ExtractError> {
        let mut paths = Vec::new();
        self.all().for_each(|f| f.body_paths(&mut paths));
        let json = if paths.is_empty() {
            None
        } else {
            Some(body_path::parse_for(body, &paths).map_err(ExtractError::MalformedJson)?)
        };
        let json = json.as_ref();
        let id = self
            .id
            .read(headers, json)?
            .ok_or_else(|| ExtractError::MissingId(self.id.describe()))?;
        let event_id = EventId::new(id.text()).map_err(|e| ExtractError::BadId {
            field: self.id.describe(),
            problem: e.to_string(),
        })?;
        let event_type = match &self.event_type {
            Some(field) => match field.read(headers, json)?.map(|v| v.text()) {
                // As an id: every store keeps it in a key column of at most this many bytes
                // (MySQL's `VARBINARY(255)`; a longer one was answered 503 there, for ever).
                Some(text) if text.len() > MAX_ID_BYTES => {
                    return Err(ExtractError::BadValue {
                        field: field.describe(),
                        found: format!("an event type of {} bytes", text.len()),
                        expected: "an event type of at most 255 bytes",
                    });
                }
                text => text,
            },
            None => None,
        };
        let (entity, unordered) = self.entity_and_version(headers, json)?;
        let mut names = Vec::new();
        self.all().for_each(|f| f.header_names(&mut names));
        let content_type = HeaderName::from_static("content-type");
        for kept in &self.kept_headers {
            if !names.contains(&kept) && *kept != content_type {
                names.push(kept);
            }
        }
        let forwarded =
            ForwardedHeaders::collect(headers, std::iter::once(&content_type).chain(names))
                .map_err(|e| match e {
                    ForwardedError::NotText(name) => ExtractError::BadValue {
                        field: format!("header `{name}`"),
                        found: "bytes that are not visible ASCII".into(),
                        expected: "visible ASCII text (it is forwarded to destinations)",
                    },
                    ForwardedError::Unreadable(detail) => ExtractError::MalformedJson(detail),
                })?;
        Ok(Extracted {
            event_id,
            event_type,
            entity,
            unordered,
            headers: forwarded,
        })
    }

    /// The entity and version, when the source reads both and the event has them; otherwise
    /// `None` and, when the source reads both, the fields the event lacks.
    fn entity_and_version(
        &self,
        headers: &HeaderMap,
        json: Option<&Value>,
    ) -> Result<Ordering, ExtractError> {
        let (Some((ty, id_field)), Some((version_field, kind))) = (&self.entity, &self.version)
        else {
            return Ok((None, None));
        };
        let (aggregate_type, type_field) = match ty {
            EntityType::Fixed(name) => (Some(name.to_string()), None),
            EntityType::Read(field) => (field.read(headers, json)?.map(|v| v.text()), Some(field)),
        };
        let aggregate_id = id_field.read(headers, json)?.map(|v| v.text());
        let version = version_field.read(headers, json)?;
        let (Some(aggregate_type), Some(aggregate_id), Some(version)) =
            (&aggregate_type, &aggregate_id, &version)
        else {
            let missing: Vec<String> = [
                (aggregate_type.is_none(), type_field),
                (aggregate_id.is_none(), Some(id_field)),
                (version.is_none(), Some(version_field)),
            ]
            .into_iter()
            .filter_map(|(absent, field)| field.filter(|_| absent).map(Field::describe))
            .collect();
            return Ok((None, Some(missing.join(" and "))));
        };
        // The error names the field that holds the bad part: the type or the id.
        let entity = Entity::new(aggregate_type.clone(), aggregate_id.clone()).map_err(|e| {
            if matches!(e, idem_core::Error::InvalidName { .. }) {
                ExtractError::BadValue {
                    field: type_field.map_or_else(|| "the entity type".to_owned(), Field::describe),
                    found: format!("{aggregate_type:?}"),
                    expected: "an entity type of 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'",
                }
            } else {
                ExtractError::BadValue {
                    field: id_field.describe(),
                    found: format!("{aggregate_id:?}"),
                    expected: "an entity id that is not blank and at most 255 bytes",
                }
            }
        })?;
        let value = kind.value(version).ok_or_else(|| ExtractError::BadValue {
            field: version_field.describe(),
            found: version.text(),
            expected: if version.integer().is_some() {
                kind.expected_in_range()
            } else {
                kind.expected()
            },
        })?;
        let mut version = kind.version(value);
        if let Some((field, kind)) = &self.version_secondary {
            // An event without one still has its version: the tie rule then has nothing to
            // decide by (a tie).
            if let Some(secondary) = field.read(headers, json)? {
                let value = kind
                    .value(&secondary)
                    .ok_or_else(|| ExtractError::BadValue {
                        field: field.describe(),
                        found: secondary.text(),
                        expected: kind.expected(),
                    })?;
                version = version.with_secondary(value);
            }
        }
        Ok((Some((entity, version)), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn json(path: &str) -> Field {
        Field::Json(BodyPath::parse(path).unwrap(), path.to_owned())
    }

    fn stripe_fields() -> Fields {
        Fields {
            id: json("$.id"),
            event_type: Some(json("$.type")),
            entity: Some((
                EntityType::Read(json("$.data.object.object")),
                json("$.data.object.id"),
            )),
            version: Some((json("$.created"), VersionKind::UnixSeconds)),
            version_secondary: None,
            kept_headers: Vec::new(),
        }
    }

    /// An event type past 255 bytes is refused as a bad field, naming where it was read; 255
    /// bytes are taken.
    #[test]
    fn an_event_type_past_255_bytes_is_a_bad_field() {
        let body = |ty: &str| format!(r#"{{"id":"evt_t","type":"{ty}","created":1}}"#);
        let taken = stripe_fields()
            .extract(&HeaderMap::new(), body(&"t".repeat(255)).as_bytes())
            .unwrap();
        assert_eq!(taken.event_type.map(|t| t.len()), Some(255));
        let refused = stripe_fields()
            .extract(&HeaderMap::new(), body(&"t".repeat(256)).as_bytes())
            .unwrap_err();
        assert_eq!(refused.code(), "bad-event-field");
        assert_eq!(
            refused.to_string(),
            "body field `$.type` holds an event type of 256 bytes; expected an event type of at \
             most 255 bytes"
        );
    }

    #[test]
    fn stripe_event_gives_id_type_entity_and_created() {
        let body = br#"{"id":"evt_2","type":"customer.subscription.updated","created":1623979266,
            "data":{"object":{"id":"sub_1","object":"subscription"}}}"#;
        let got = stripe_fields().extract(&HeaderMap::new(), body).unwrap();
        assert_eq!(got.event_id.as_str(), "evt_2");
        assert_eq!(
            got.event_type.as_deref(),
            Some("customer.subscription.updated")
        );
        let (entity, version) = got.entity.unwrap();
        assert_eq!(entity.to_string(), "subscription:sub_1");
        assert_eq!(version, Version::timestamp(1_623_979_266));
    }

    #[test]
    fn a_stripe_event_without_created_or_object_type_names_what_it_lacks() {
        let fields = stripe_fields();
        let headers = HeaderMap::new();
        let no_created = br#"{"id":"evt_3","type":"x","data":{"object":{"id":"pi_1","object":"payment_intent"}}}"#;
        let got = fields.extract(&headers, no_created).unwrap();
        assert!(got.entity.is_none());
        assert_eq!(got.unordered.as_deref(), Some("body field `$.created`"));
        let no_object = br#"{"id":"evt_4","type":"x","created":5,"data":{"object":{"id":"pi_1"}}}"#;
        let got = fields.extract(&headers, no_object).unwrap();
        assert_eq!(
            got.unordered.as_deref(),
            Some("body field `$.data.object.object`")
        );
        let neither = br#"{"id":"evt_5","type":"x"}"#;
        let got = fields.extract(&headers, neither).unwrap();
        assert_eq!(
            got.unordered.as_deref(),
            Some(
                "body field `$.data.object.object` and body field `$.data.object.id` and body \
                 field `$.created`"
            )
        );
        let whole = br#"{"id":"evt_6","type":"x","created":5,"data":{"object":{"id":"pi_1","object":"payment_intent"}}}"#;
        assert_eq!(fields.extract(&headers, whole).unwrap().unordered, None);
    }

    /// An integer time too large to count in microseconds is said to be out of range, not to be
    /// of the wrong shape.
    #[test]
    fn an_integer_time_out_of_range_is_said_so() {
        let fields = Fields {
            version: Some((json("$.v"), VersionKind::Timestamp(TimeUnit::Millis))),
            ..stripe_fields()
        };
        let body =
            br#"{"id":"evt_9","v":99999999999999999,"data":{"object":{"id":"a","object":"b"}}}"#;
        let message = fields
            .extract(&HeaderMap::new(), body)
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "body field `$.v` holds 99999999999999999; expected integer Unix milliseconds from \
             -9223372036854775 to 9223372036854775 (times are compared in microseconds)"
        );
    }

    /// A bad entity type or id is reported on the field that holds it.
    #[test]
    fn a_bad_entity_type_or_id_names_its_own_field() {
        let fields = stripe_fields();
        let headers = HeaderMap::new();
        let bad_type =
            br#"{"id":"evt_7","created":5,"data":{"object":{"id":"ok","object":"a b"}}}"#;
        assert_eq!(
            fields.extract(&headers, bad_type).unwrap_err().to_string(),
            "body field `$.data.object.object` holds \"a b\"; expected an entity type of 1 to 64 \
             characters of A-Z, a-z, 0-9, '_', '.', '-'"
        );
        let blank_id =
            br#"{"id":"evt_8","created":5,"data":{"object":{"id":"  ","object":"charge"}}}"#;
        assert_eq!(
            fields.extract(&headers, blank_id).unwrap_err().to_string(),
            "body field `$.data.object.id` holds \"  \"; expected an entity id that is not blank \
             and at most 255 bytes"
        );
    }

    /// Issue 15, item 4: RFC 3339 times as microseconds since the epoch, offsets normalised
    /// (expected values from Python's `datetime`).
    #[test]
    fn rfc3339_times_are_microseconds_in_utc() {
        let cases = [
            ("2026-10-06T07:06:30.500Z", 1_791_270_390_500_000),
            ("2026-10-06T09:06:30.400+02:00", 1_791_270_390_400_000),
            ("2026-10-06t07:06:30z", 1_791_270_390_000_000),
            ("2026-10-06 07:06:30.5000009Z", 1_791_270_390_500_000),
            ("2024-02-29T00:00:00-05:30", 1_709_184_600_000_000),
            ("1969-12-31T23:59:59.999999Z", -1),
        ];
        for (text, micros) in cases {
            assert_eq!(rfc3339_micros(text), Some(micros), "{text}");
        }
        for bad in [
            "2026-10-06",
            "2026-10-06T07:06:30",
            "2026-10-06T07:06:30.Z",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-10-06T24:00:00Z",
            "2016-12-31T23:59:60Z",
            "2026-10-06T07:06:30+0200",
            "2026-10-06T07:06:30Z ",
            "1791270390",
        ] {
            assert_eq!(rfc3339_micros(bad), None, "{bad}");
        }
    }

    #[test]
    fn timestamps_compare_rfc3339_and_integers_in_their_unit() {
        let text = |s: &'static str| Scalar::Text(s);
        let seconds = VersionKind::Timestamp(TimeUnit::Seconds);
        let millis = VersionKind::Timestamp(TimeUnit::Millis);
        assert_eq!(
            seconds.value(&text("2026-10-06T07:06:30.500Z")),
            Some(1_791_270_390_500_000)
        );
        assert_eq!(
            seconds.value(&text("1791270390")),
            Some(1_791_270_390_000_000)
        );
        assert_eq!(
            millis.value(&text("1791270390500")),
            Some(1_791_270_390_500_000)
        );
        assert_eq!(seconds.value(&text("i64::MAX")), None);
        assert_eq!(seconds.value(&text("9223372036854775807")), None);
        assert_eq!(
            VersionKind::Sequence.value(&text("2026-10-06T07:06:30Z")),
            None
        );
        assert_eq!(
            VersionKind::UnixSeconds.value(&text("1791270390")),
            Some(1_791_270_390)
        );
    }

    #[test]
    fn bad_bodies_name_their_problem() {
        let fields = stripe_fields();
        let headers = HeaderMap::new();
        let err = fields.extract(&headers, b"{not json").unwrap_err();
        assert_eq!(err.code(), "malformed-json");
        let err = fields.extract(&headers, br#"{"type":"x"}"#).unwrap_err();
        assert_eq!(err, ExtractError::MissingId("body field `$.id`".into()));
        let err = fields.extract(&headers, br#"{"id":"  "}"#).unwrap_err();
        assert_eq!(err.code(), "no-event-id");
        let err = fields.extract(&headers, br#"{"id":{"a":1}}"#).unwrap_err();
        assert_eq!(err.code(), "bad-event-field");
        let err = fields
            .extract(&headers, br#"{"id":"evt\u0000x"}"#)
            .unwrap_err();
        assert_eq!(err.code(), "bad-event-field");
    }

    #[test]
    fn shopify_falls_back_to_the_webhook_id() {
        let fields = Fields {
            id: Field::FirstOf(vec![
                Field::Header(HeaderName::from_static("x-shopify-event-id")),
                Field::Header(HeaderName::from_static("x-shopify-webhook-id")),
            ]),
            event_type: None,
            entity: None,
            version: None,
            version_secondary: None,
            kept_headers: Vec::new(),
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-shopify-webhook-id", HeaderValue::from_static("w-1"));
        // The body is not read, so it need not be JSON.
        let got = fields.extract(&headers, b"not json").unwrap();
        assert_eq!(got.event_id.as_str(), "w-1");
        headers.insert("x-shopify-event-id", HeaderValue::from_static("e-1"));
        assert_eq!(
            fields.extract(&headers, b"").unwrap().event_id.as_str(),
            "e-1"
        );
        assert_eq!(
            fields.extract(&HeaderMap::new(), b"").unwrap_err(),
            ExtractError::MissingId(
                "header `x-shopify-event-id` or header `x-shopify-webhook-id`".into()
            )
        );
    }
}
