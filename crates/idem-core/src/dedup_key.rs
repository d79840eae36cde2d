//! Dedup keys: a pure function of the event.

use std::fmt;

use crate::id::check_id;
use crate::{Entity, Error, EventId, Name};

/// The key an event is claimed under in the inbox (docs/design.md §1).
///
/// A dedup key is built only from the event: every constructor takes parts of the event and
/// nothing else, so the same event gives the same key at any time, on any host, on any attempt.
/// There is no constructor from the clock, a random value or an attempt counter, and no
/// `Default`.
///
/// The text form ([`as_str`](Self::as_str)) is what the inbox stores:
///
/// | constructor | text |
/// |---|---|
/// | [`from_event`](Self::from_event) | `{source}:{event id}`, e.g. `stripe:evt_1` |
/// | [`command`](Self::command) | `command/{command id}` |
/// | [`aggregate`](Self::aggregate) | `aggregate/{type}:{id}:{sequence}` |
///
/// Names never hold `:` or `/`, so two different events never share a text form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DedupKey(String);

impl DedupKey {
    /// The default key: the source name and the event id, e.g. `stripe:evt_1`.
    pub fn from_event(source: &Name, event_id: &EventId) -> Self {
        Self(format!("{source}:{event_id}"))
    }

    /// A key for a command with a client-chosen command id.
    ///
    /// # Errors
    /// [`Error::BlankId`] or [`Error::IdTooLong`] for a bad command id.
    pub fn command(command_id: impl Into<String>) -> Result<Self, Error> {
        let id = check_id("command id", command_id.into())?;
        Ok(Self(format!("command/{id}")))
    }

    /// A key for the `sequence`-th event of an entity (event-sourced streams), e.g.
    /// `aggregate/order:o_1:7`.
    pub fn aggregate(entity: &Entity, sequence: i64) -> Self {
        Self(format!(
            "aggregate/{}:{}:{sequence}",
            entity.aggregate_type(),
            entity.aggregate_id()
        ))
    }

    /// The text stored in the inbox.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DedupKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name() -> impl Strategy<Value = Name> {
        "[A-Za-z0-9_.-]{1,12}".prop_map(|s| Name::new("source", s).unwrap())
    }

    fn id() -> impl Strategy<Value = String> {
        "[ -~]{0,20}[!-~][ -~]{0,20}"
    }

    #[test]
    fn text_forms() {
        let stripe = Name::new("source", "stripe").unwrap();
        let evt = EventId::new("evt_1").unwrap();
        assert_eq!(DedupKey::from_event(&stripe, &evt).as_str(), "stripe:evt_1");
        assert_eq!(DedupKey::command("c-9").unwrap().as_str(), "command/c-9");
        let order = Entity::new("order", "o:1").unwrap();
        assert_eq!(
            DedupKey::aggregate(&order, 7).as_str(),
            "aggregate/order:o:1:7"
        );
        assert_eq!(
            DedupKey::command("  "),
            Err(Error::BlankId { what: "command id" })
        );
    }

    proptest! {
        // The same event, keyed twice (another time, another host, another attempt), gives one key;
        // different events give different keys.
        #[test]
        fn key_is_a_function_of_the_event_only(
            (s1, i1) in (name(), id()),
            (s2, i2) in (name(), id()),
        ) {
            let k = |s: &Name, i: &str| DedupKey::from_event(s, &EventId::new(i).unwrap());
            prop_assert_eq!(k(&s1, &i1), k(&s1.clone(), &i1.clone()));
            prop_assert_eq!(k(&s1, &i1) == k(&s2, &i2), s1 == s2 && i1 == i2);
        }

        #[test]
        fn kinds_never_collide(source in name(), a in id(), b in id(), seq in any::<i64>()) {
            let ty = Name::new("aggregate type", source.as_str()).unwrap();
            let entity = Entity::new(ty.as_str(), b.clone()).unwrap();
            let keys = [
                DedupKey::from_event(&source, &EventId::new(a.clone()).unwrap()),
                DedupKey::command(a.clone()).unwrap(),
                DedupKey::aggregate(&entity, seq),
            ];
            prop_assert_ne!(&keys[0], &keys[1]);
            prop_assert_ne!(&keys[0], &keys[2]);
            prop_assert_ne!(&keys[1], &keys[2]);
        }
    }
}
