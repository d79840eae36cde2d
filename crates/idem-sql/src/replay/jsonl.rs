//! An event log kept as JSON lines: one event per line, read by [`JsonlLog`].

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use idem_core::{DedupKey, Entity, EventId, Name, Timestamp, Version, VersionValue};
use serde_json::{Map, Value};

use super::log::{EventLog, LogEntries, LoggedEvent};
use crate::{Error, Event};

/// What the dedup key of a line is made of, for error messages.
const KEY_FORMS: &str = "a dedup key: \"source\" and \"event_id\" (the key {source}:{event id}), or \
     \"command_id\", or an \"entity\" with a \"sequence\" (the key aggregate/{type}:{id}:{sequence})";

/// An application's event log as JSON lines (JSONL), one event per line, in the original order;
/// blank lines are passed over. Each line is an object:
///
/// ```json
/// {"source": "stripe", "event_id": "evt_1", "occurred_at": "2026-12-01T13:29:18Z",
///  "entity": {"type": "subscription", "id": "sub_1", "sequence": 7},
///  "payload": {"status": "active"}}
/// ```
///
/// - the dedup key, one of: `source` and `event_id` (`DedupKey::from_event`: `stripe:evt_1`,
///   what the events were claimed under when they were delivered); `command_id`
///   (`DedupKey::command`); neither, with an `entity` that has a `sequence`
///   (`DedupKey::aggregate`);
/// - `occurred_at`: milliseconds since the Unix epoch, or an RFC 3339 time in UTC
///   (`2026-12-01T13:29:18Z`, fractions of a second allowed);
/// - `entity` (optional): `type` and `id`, and the version: `sequence` (a dense integer) or
///   `timestamp` (an integer), with an optional integer `secondary` that settles ties;
/// - `payload` (optional, `null` when missing): any JSON, given to the handler as a
///   [`serde_json::Value`].
///
/// A line that is not such an object is [`Error::InvalidLogLine`], naming the line's number and
/// what was expected; the replay reads the whole log before it runs any event, so nothing is
/// applied.
#[derive(Debug, Clone)]
pub struct JsonlLog {
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    File(PathBuf),
    Text(String),
}

impl JsonlLog {
    /// The log in the file at `path`, opened each time it is read; a file that cannot be opened
    /// or read is [`Error::LogUnreadable`] when the replay reads it.
    pub fn open(path: impl Into<PathBuf>) -> Self {
        Self {
            source: Source::File(path.into()),
        }
    }

    /// The log held in `text`.
    pub fn from_text(text: impl Into<String>) -> Self {
        Self {
            source: Source::Text(text.into()),
        }
    }
}

impl EventLog for JsonlLog {
    type Payload = Value;

    fn events(&self) -> LogEntries<'_, Value> {
        match &self.source {
            Source::Text(text) => Box::new(numbered(text.lines().map(|l| Ok(l.to_owned())))),
            Source::File(path) => {
                let unreadable = |source| Error::LogUnreadable {
                    log: path.display().to_string(),
                    source,
                };
                match File::open(path) {
                    Ok(file) => Box::new(numbered(
                        BufReader::new(file)
                            .lines()
                            .map(move |l| l.map_err(unreadable)),
                    )),
                    Err(e) => Box::new(std::iter::once(Err(unreadable(e)))),
                }
            }
        }
    }
}

/// Parses each non-blank line, numbered from 1; stops after the first error.
fn numbered(
    lines: impl Iterator<Item = Result<String, Error>> + Send,
) -> impl Iterator<Item = Result<(u64, LoggedEvent<Value>), Error>> + Send {
    let mut failed = false;
    lines
        .zip(1..)
        .filter(|(line, _)| !matches!(line, Ok(text) if text.trim().is_empty()))
        .map_while(move |(line, number)| {
            if failed {
                return None;
            }
            let parsed = line.and_then(|text| parse_line(number, &text).map(|e| (number, e)));
            failed = parsed.is_err();
            Some(parsed)
        })
}

/// One line of the log as an event.
///
/// # Errors
/// [`Error::InvalidLogLine`] naming `number` and what was expected.
pub(crate) fn parse_line(number: u64, text: &str) -> Result<LoggedEvent<Value>, Error> {
    let invalid = |expected: String| Error::InvalidLogLine {
        line: number,
        expected,
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| invalid(format!("one JSON object per line ({e})")))?;
    let Value::Object(mut object) = value else {
        return Err(invalid("one JSON object per line".into()));
    };
    let occurred_at = occurred_at(object.get("occurred_at")).map_err(&invalid)?;
    let entity = object
        .get("entity")
        .map(entity)
        .transpose()
        .map_err(&invalid)?;
    let key = dedup_key(&object, entity.as_ref()).map_err(&invalid)?;
    let event = Event { key, entity };
    Ok(LoggedEvent {
        event,
        occurred_at,
        payload: object.remove("payload").unwrap_or(Value::Null),
    })
}

/// The event's time: integer milliseconds, or RFC 3339 in UTC.
fn occurred_at(value: Option<&Value>) -> Result<Timestamp, String> {
    const EXPECTED: &str = "\"occurred_at\": milliseconds since the Unix epoch, or an RFC 3339 time in UTC such as \"2026-12-01T13:29:18Z\"";
    match value {
        Some(Value::Number(n)) => n.as_i64().map(Timestamp).ok_or_else(|| EXPECTED.into()),
        Some(Value::String(s)) => {
            let time = humantime::parse_rfc3339(s).map_err(|e| format!("{EXPECTED} ({e})"))?;
            let since = time
                .duration_since(UNIX_EPOCH)
                .map_err(|_| format!("{EXPECTED} (a time before 1970)"))?;
            Ok(Timestamp(
                i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
            ))
        }
        Some(other) => Err(format!("{EXPECTED}, not {other}")),
        None => Err(EXPECTED.into()),
    }
}

/// The `entity` object: its type, id and version.
fn entity(value: &Value) -> Result<(Entity, Version), String> {
    const EXPECTED: &str = "\"entity\": an object with \"type\", \"id\", and \"sequence\" or \"timestamp\" (integers), optionally \"secondary\" (an integer)";
    let fail = |why: &str| format!("{EXPECTED}: {why}");
    let Value::Object(fields) = value else {
        return Err(fail("not an object"));
    };
    let text = |name: &str| fields.get(name).and_then(Value::as_str);
    let integer = |name: &str| match fields.get(name) {
        None => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| fail(&format!("\"{name}\" is {v}"))),
    };
    let (Some(kind), Some(id)) = (text("type"), text("id")) else {
        return Err(fail("\"type\" and \"id\" must be strings"));
    };
    let entity = Entity::new(kind, id).map_err(|e| fail(&e.to_string()))?;
    let version = match (integer("sequence")?, integer("timestamp")?) {
        (Some(n), None) => Version::sequence(n),
        (None, Some(t)) => Version::timestamp(t),
        _ => return Err(fail("exactly one of \"sequence\" and \"timestamp\"")),
    };
    let version = match integer("secondary")? {
        Some(secondary) => version.with_secondary(secondary),
        None => version,
    };
    Ok((entity, version))
}

/// The dedup key from `source` and `event_id`, `command_id`, or the entity's sequence.
fn dedup_key(
    object: &Map<String, Value>,
    entity: Option<&(Entity, Version)>,
) -> Result<DedupKey, String> {
    let text = |name: &str| match object.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(format!("{KEY_FORMS}; \"{name}\" is {other}, not a string")),
    };
    let invalid = |e: idem_core::Error| format!("{KEY_FORMS} ({e})");
    match (text("source")?, text("event_id")?, text("command_id")?) {
        (Some(source), Some(id), None) => Ok(DedupKey::from_event(
            &Name::new("source", source).map_err(invalid)?,
            &EventId::new(id).map_err(invalid)?,
        )),
        (None, None, Some(command)) => DedupKey::command(command).map_err(invalid),
        (None, None, None) => match entity {
            Some((
                entity,
                Version {
                    primary: VersionValue::Sequence(n),
                    ..
                },
            )) => Ok(DedupKey::aggregate(entity, *n)),
            _ => Err(KEY_FORMS.into()),
        },
        _ => Err(format!("{KEY_FORMS}: one of them, not parts of several")),
    }
}
