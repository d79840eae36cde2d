//! AMQP helpers: header values as text, lapin errors as [`ConsumerError`]s.

use lapin::types::{AMQPValue, LongString};

use crate::ConsumerError;

/// A header value as text: strings as they are (bytes as lossy UTF-8), numbers and booleans in
/// decimal, anything else in its debug form.
pub(crate) fn render(value: &AMQPValue) -> String {
    if let Some(text) = as_text(value) {
        return text;
    }
    if let Some(n) = as_i64(value) {
        return n.to_string();
    }
    match value {
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::Float(f) => f.to_string(),
        AMQPValue::Double(f) => f.to_string(),
        other => format!("{other:?}"),
    }
}

/// A string value's text (bytes as lossy UTF-8); `None` for other values.
pub(crate) fn as_text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

/// An integer value; `None` for other values.
pub(crate) fn as_i64(value: &AMQPValue) -> Option<i64> {
    Some(match value {
        AMQPValue::ShortShortInt(n) => i64::from(*n),
        AMQPValue::ShortShortUInt(n) => i64::from(*n),
        AMQPValue::ShortInt(n) => i64::from(*n),
        AMQPValue::ShortUInt(n) => i64::from(*n),
        AMQPValue::LongInt(n) => i64::from(*n),
        AMQPValue::LongUInt(n) => i64::from(*n),
        AMQPValue::LongLongInt(n) => *n,
        AMQPValue::Timestamp(n) => i64::try_from(*n).ok()?,
        _ => return None,
    })
}

/// `s` as an AMQP long string.
pub(crate) fn long_string(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// Maps a lapin error of AMQP method `operation` (`queue.declare`, …) to a [`ConsumerError`].
pub(crate) fn amqp(operation: &'static str) -> impl Fn(lapin::Error) -> ConsumerError {
    move |source| ConsumerError::Amqp { operation, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_render_as_text() {
        assert_eq!(render(&long_string("evt_1")), "evt_1");
        assert_eq!(render(&AMQPValue::LongInt(-3)), "-3");
        assert_eq!(render(&AMQPValue::Boolean(true)), "true");
    }
}
