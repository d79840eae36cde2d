//! What a delivery's `note` says of the version guard's decision on its route (docs/design.md
//! C5). Ingest writes it in the transaction that stores the delivery, in the `note` column
//! every delivery row already carries (no statement or column is added for it); the console's
//! event page reads it back, and `idem events show` and `/admin` show it as it is.
//!
//! | decision | note |
//! |---|---|
//! | stale | both versions: `entity invoice:in_1 is at timestamp=200; this event is timestamp=100` |
//! | the entity's first event on the route | [`FIRST`] |
//! | newer, with a gap in a dense sequence | `version gap: 3 was next, 5 arrived` |
//! | versions of two kinds (the source's version type was changed) | `version not comparable: ` and the reason |
//! | newer, or a tie (its own column), or not ordered | none |
//!
//! Rows stored before the first, gap and not-comparable notes were written have a note only when
//! stale: their first events read as newer ones.

use std::fmt::Display;

/// The note of an entity's first event on a route: there was no stored version to compare.
pub(crate) const FIRST: &str = "first event of its entity";

const GAP: &str = "version gap: ";

const NOT_COMPARABLE: &str = "version not comparable: ";

/// The note of a stale event: `entity`'s stored version `current`, and the event's `got`.
pub(crate) fn stale(entity: impl Display, current: impl Display, got: impl Display) -> String {
    format!("entity {entity} is at {current}; this event is {got}")
}

/// The note of a newer event of a dense sequence that skipped numbers: `expected` was next,
/// `got` arrived.
pub(crate) fn gap(expected: i64, got: i64) -> String {
    format!("{GAP}{expected} was next, {got} arrived")
}

/// The note of an event whose version cannot be compared with its entity's, for `reason`.
pub(crate) fn not_comparable(reason: &str) -> String {
    format!("{NOT_COMPARABLE}{reason}")
}

/// A note read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Note<'a> {
    /// The entity's first event on the route.
    First,
    /// A gap: what was next and what arrived.
    Gap(&'a str),
    /// Not comparable, and why.
    NotComparable(&'a str),
    /// Any other note: a stale event's versions.
    Versions(&'a str),
}

/// What `note` says.
pub(crate) fn read(note: &str) -> Note<'_> {
    if note == FIRST {
        Note::First
    } else if let Some(detail) = note.strip_prefix(GAP) {
        Note::Gap(detail)
    } else if let Some(reason) = note.strip_prefix(NOT_COMPARABLE) {
        Note::NotComparable(reason)
    } else {
        Note::Versions(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_note_reads_back_as_written() {
        assert_eq!(read(FIRST), Note::First);
        assert_eq!(read(&gap(3, 5)), Note::Gap("3 was next, 5 arrived"));
        assert_eq!(
            read(&not_comparable("kinds differ")),
            Note::NotComparable("kinds differ")
        );
        let stale = stale("invoice:in_1", "timestamp=200", "timestamp=100");
        assert_eq!(
            stale,
            "entity invoice:in_1 is at timestamp=200; this event is timestamp=100"
        );
        assert_eq!(read(&stale), Note::Versions(&stale));
    }
}
