//! Loading the events to deliver: JSONL (one delivery per line) or a directory of payload files.
//!
//! A line is either the body itself (a JSON object such as a Stripe event) or a wrapper
//! `{"body": …, "headers": {…}, "id": "…", "seq": n, "step": n}` where `body` is a JSON value
//! (sent as compact JSON) or a string (sent as is), and everything else is optional. The
//! minimal sequences `idem verify` writes are wrappers with `step` (deliveries with one step are
//! sent at the same moment) and `seq` (the event's position in the original file); a rebuild's
//! has `"successor": true` on the first delivery after the target moved to its successor.

use std::path::Path;

use serde_json::Value;

use crate::VerifyError;

/// One event, as delivered: the body, extra headers, and what the schedules need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// The bytes sent as the request body.
    pub body: Vec<u8>,
    /// Extra headers sent with every copy (name, value), from the wrapper's `headers`.
    pub headers: Vec<(String, String)>,
    /// The event id, stable across copies: the wrapper's `id`, else a `webhook-id`,
    /// `X-GitHub-Delivery` or `X-Shopify-Event-Id` header, else the body's `id`, else
    /// `line-N`.
    pub id: String,
    /// The entity for reordering rules: the body's `data.object.id` (Stripe), if any.
    pub entity: Option<String>,
    /// The entity's version: the body's `created` (Unix seconds, Stripe), if any.
    pub version: Option<i64>,
    /// The position in the original file (0-based), used to order a subset "in order".
    pub seq: usize,
    /// The step a minimal-sequence line was delivered at, if the line names one.
    pub step: Option<usize>,
    /// A rebuild's minimal-sequence line (`"successor": true`): the target was moved to its
    /// successor consumer version (`--successor`) before this delivery.
    pub successor: bool,
}

/// Reads a JSONL file, or every file of a directory (sorted by name, one body per file).
///
/// # Errors
/// [`VerifyError::ReadEvents`] when it cannot be read, [`VerifyError::BadEvent`] for a line
/// that is not a JSON object, [`VerifyError::NoEvents`] when there is none.
pub fn load(path: &Path) -> Result<Vec<EventRecord>, VerifyError> {
    let read_err = |source| VerifyError::ReadEvents {
        path: path.to_owned(),
        source,
    };
    let records = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(read_err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        let mut records = Vec::with_capacity(files.len());
        for (n, file) in files.iter().enumerate() {
            let body = std::fs::read(file).map_err(read_err)?;
            let parsed = serde_json::from_slice::<Value>(&body).ok();
            records.push(record(body, Vec::new(), None, parsed.as_ref(), n, None));
        }
        records
    } else {
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        parse(path, &text)?
    };
    if records.is_empty() {
        return Err(VerifyError::NoEvents {
            path: path.to_owned(),
        });
    }
    Ok(records)
}

/// Parses JSONL text (see the module documentation); `path` only names the source in errors.
/// Blank lines are skipped.
///
/// # Errors
/// [`VerifyError::BadEvent`] for a line that is not a JSON object or whose wrapper fields have
/// the wrong type.
pub fn parse(path: &Path, text: &str) -> Result<Vec<EventRecord>, VerifyError> {
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| VerifyError::BadEvent {
            path: path.to_owned(),
            line: n + 1,
            reason,
        };
        let value: Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
        let Some(object) = value.as_object() else {
            return Err(bad("not a JSON object".into()));
        };
        let seq = records.len();
        let Some(body) = object.get("body") else {
            records.push(record(
                line.as_bytes().to_vec(),
                Vec::new(),
                None,
                Some(&value),
                seq,
                None,
            ));
            continue;
        };
        let bytes = match body {
            Value::String(s) => s.as_bytes().to_vec(),
            other => other.to_string().into_bytes(),
        };
        let parsed = match body {
            Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        };
        let mut headers = Vec::new();
        if let Some(h) = object.get("headers") {
            let Some(h) = h.as_object() else {
                return Err(bad("`headers` is not an object".into()));
            };
            for (name, v) in h {
                let Some(v) = v.as_str() else {
                    return Err(bad(format!("header {name:?} is not a string")));
                };
                headers.push((name.clone(), v.to_owned()));
            }
        }
        let id = match object.get("id") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(bad("`id` is not a string".into())),
        };
        let number = |key: &str| -> Result<Option<usize>, VerifyError> {
            match object.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| bad(format!("`{key}` is not a non-negative integer"))),
            }
        };
        let seq = number("seq")?.unwrap_or(seq);
        let step = number("step")?;
        let successor = match object.get("successor") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(bad("`successor` is not true or false".into())),
        };
        let mut record = record(bytes, headers, id, parsed.as_ref(), seq, step);
        record.successor = successor;
        records.push(record);
    }
    Ok(records)
}

fn record(
    body: Vec<u8>,
    headers: Vec<(String, String)>,
    id: Option<String>,
    parsed: Option<&Value>,
    seq: usize,
    step: Option<usize>,
) -> EventRecord {
    const ID_HEADERS: [&str; 3] = ["webhook-id", "x-github-delivery", "x-shopify-event-id"];
    let id = id
        .or_else(|| {
            headers
                .iter()
                .find(|(name, _)| ID_HEADERS.contains(&name.to_ascii_lowercase().as_str()))
                .map(|(_, v)| v.clone())
        })
        .or_else(|| {
            parsed
                .and_then(|v| v.get("id"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("line-{}", seq + 1));
    EventRecord {
        body,
        headers,
        id,
        entity: parsed
            .and_then(|v| v.pointer("/data/object/id"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        version: parsed
            .and_then(|v| v.get("created"))
            .and_then(Value::as_i64),
        seq,
        step,
        successor: false,
    }
}
