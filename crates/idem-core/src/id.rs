//! Ids taken from the event: event ids, command ids, aggregate ids.

use std::fmt;

use crate::Error;

/// The longest id accepted, in bytes. Stripe event ids are about 30 bytes and GitHub delivery
/// GUIDs 36; 255 leaves room for any sender while keeping index keys small.
pub const MAX_ID_BYTES: usize = 255;

/// Checks an id: not empty, not only whitespace, at most [`MAX_ID_BYTES`]. The id is kept
/// byte for byte (no trimming), since senders compare ids exactly.
pub(crate) fn check_id(what: &'static str, value: String) -> Result<String, Error> {
    if value.trim().is_empty() {
        return Err(Error::BlankId { what });
    }
    if value.len() > MAX_ID_BYTES {
        return Err(Error::IdTooLong {
            what,
            len: value.len(),
            max: MAX_ID_BYTES,
        });
    }
    Ok(value)
}

/// An event id: the id that stays the same across every delivery and replay of one event
/// (Stripe `evt_…`, GitHub `X-GitHub-Delivery`, Shopify `X-Shopify-Event-Id`, Standard Webhooks
/// `webhook-id`, a broker message id). See docs/design.md §1.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(String);

impl EventId {
    /// Wraps an event id read from a delivery.
    ///
    /// # Errors
    /// [`Error::BlankId`] when `value` is empty or whitespace, [`Error::IdTooLong`] past
    /// [`MAX_ID_BYTES`].
    pub fn new(value: impl Into<String>) -> Result<Self, Error> {
        check_id("event id", value.into()).map(Self)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_and_oversized_ids_are_errors_never_defaults() {
        for blank in ["", " ", "\t\n"] {
            assert_eq!(
                EventId::new(blank),
                Err(Error::BlankId { what: "event id" })
            );
        }
        let long = "e".repeat(MAX_ID_BYTES + 1);
        assert_eq!(
            EventId::new(long),
            Err(Error::IdTooLong {
                what: "event id",
                len: MAX_ID_BYTES + 1,
                max: MAX_ID_BYTES
            })
        );
        assert_eq!(EventId::new(" evt_1").unwrap().as_str(), " evt_1");
    }
}
