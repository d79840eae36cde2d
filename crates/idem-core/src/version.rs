//! Versions of an entity and the rule that compares them (docs/design.md C5).

use std::cmp::Ordering;
use std::fmt;
use std::time::Duration;

use crate::Error;

/// The primary value of a [`Version`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionValue {
    /// A dense per-entity sequence (1, 2, 3, …): a skipped number is a gap.
    Sequence(i64),
    /// A timestamp in the sender's unit, compared as an integer; no gap detection. Stripe's
    /// `created` is in seconds (1 s resolution, so two events of one object can tie).
    Timestamp(i64),
}

impl VersionValue {
    /// The integer value, whatever the kind.
    pub fn get(self) -> i64 {
        match self {
            Self::Sequence(v) | Self::Timestamp(v) => v,
        }
    }

    /// `"sequence"` or `"timestamp"`, as stored and as named in errors.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Sequence(_) => "sequence",
            Self::Timestamp(_) => "timestamp",
        }
    }
}

/// A version: a primary value and an optional secondary value that breaks ties (for example a
/// Stripe object's own `updated` field, or a per-second counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Version {
    /// The value compared first.
    pub primary: VersionValue,
    /// Compared only when the primaries are equal and both versions carry one.
    pub secondary: Option<i64>,
}

impl Version {
    /// A dense sequence number without secondary value.
    pub fn sequence(n: i64) -> Self {
        Self {
            primary: VersionValue::Sequence(n),
            secondary: None,
        }
    }

    /// A timestamp (for Stripe: `created`, in seconds) without secondary value.
    pub fn timestamp(t: i64) -> Self {
        Self {
            primary: VersionValue::Timestamp(t),
            secondary: None,
        }
    }

    /// The same version with a secondary value.
    pub fn with_secondary(self, secondary: i64) -> Self {
        Self {
            secondary: Some(secondary),
            ..self
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.primary.kind(), self.primary.get())?;
        if let Some(s) = self.secondary {
            write!(f, "/{s}")?;
        }
        Ok(())
    }
}

/// What the version guard decided for an event of an entity (docs/design.md C5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// Newer than the stored version (or the first for the entity): applied.
    Applied {
        /// The version it replaced; `None` for the entity's first event.
        previous: Option<Version>,
    },
    /// Older than the stored version: recorded and acknowledged, never applied.
    Stale {
        /// The stored, newer version.
        current: Version,
    },
    /// The same primary version as the stored one, from another event, and no secondary value
    /// decides: applied, and reported so that the application can refetch the object.
    Tie {
        /// The stored version it tied with.
        current: Version,
    },
    /// A dense sequence skipped numbers: `got` arrived while `expected` was next. Applied and
    /// reported under the default [`GapPolicy::Apply`].
    Gap {
        /// The sequence number that was due (stored + 1).
        expected: i64,
        /// The sequence number that arrived.
        got: i64,
    },
}

impl Advance {
    /// Whether the event's version becomes the entity's version (all but [`Advance::Stale`]).
    pub fn is_applied(&self) -> bool {
        !matches!(self, Self::Stale { .. })
    }
}

/// What to do with an event that leaves a gap in a dense sequence (docs/design.md C5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GapPolicy {
    /// Apply it and report the gap (counter, gap size, [`Advance::Gap`]). The default.
    #[default]
    Apply,
    /// Refuse it for now: nothing is committed, the delivery is not acknowledged, and the sender's
    /// retry comes back later, when the gap may have filled.
    Reject,
    /// Hold it like `Reject` until the gap fills or until it has been held for `timeout`
    /// (measured from the first delivery that saw the gap, to millisecond precision); after that
    /// it is applied as a gap.
    Park {
        /// How long to hold.
        timeout: Duration,
    },
}

/// Compares an event's version `got` with the entity's stored version `current` (C5).
///
/// - no stored version: [`Advance::Applied`] with `previous: None` (the first event of an entity
///   never counts as a gap, since the stream may have started before idem saw it);
/// - greater primary: [`Advance::Applied`], or [`Advance::Gap`] for a sequence more than one
///   ahead;
/// - smaller primary: [`Advance::Stale`];
/// - equal primary: the secondary values decide when both are present (greater: applied,
///   smaller: stale, equal: tie); otherwise [`Advance::Tie`]. A tie is never stale.
///
/// # Errors
/// [`Error::VersionKindMismatch`] when one is a sequence and the other a timestamp.
pub fn decide(current: Option<&Version>, got: &Version) -> Result<Advance, Error> {
    let Some(current) = current else {
        return Ok(Advance::Applied { previous: None });
    };
    if current.primary.kind() != got.primary.kind() {
        return Err(Error::VersionKindMismatch {
            stored: current.primary.kind(),
            got: got.primary.kind(),
        });
    }
    let previous = Some(*current);
    let ordering = match current.primary.get().cmp(&got.primary.get()) {
        Ordering::Equal => match (current.secondary, got.secondary) {
            (Some(c), Some(g)) => c.cmp(&g),
            _ => Ordering::Equal,
        },
        other => other,
    };
    Ok(match ordering {
        Ordering::Greater => Advance::Stale { current: *current },
        Ordering::Equal => Advance::Tie { current: *current },
        Ordering::Less => match (current.primary, got.primary) {
            (VersionValue::Sequence(c), VersionValue::Sequence(g)) if g > c.saturating_add(1) => {
                Advance::Gap {
                    expected: c + 1,
                    got: g,
                }
            }
            _ => Advance::Applied { previous },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripe_subscription_updated_before_created_is_stale() {
        // `updated` (1623979266) arrives first, then `created` (1623979265).
        let updated = Version::timestamp(1_623_979_266);
        let created = Version::timestamp(1_623_979_265);
        assert_eq!(
            decide(None, &updated),
            Ok(Advance::Applied { previous: None })
        );
        assert_eq!(
            decide(Some(&updated), &created),
            Ok(Advance::Stale { current: updated })
        );
    }

    #[test]
    fn equal_timestamps_tie_unless_a_secondary_value_decides() {
        let t = Version::timestamp(100);
        assert_eq!(decide(Some(&t), &t), Ok(Advance::Tie { current: t }));
        let (a, b) = (t.with_secondary(1), t.with_secondary(2));
        assert_eq!(
            decide(Some(&a), &b),
            Ok(Advance::Applied { previous: Some(a) })
        );
        assert_eq!(decide(Some(&b), &a), Ok(Advance::Stale { current: b }));
        assert_eq!(decide(Some(&a), &a), Ok(Advance::Tie { current: a }));
        // Only one side carries a secondary value: nothing decides, so it is a tie.
        assert_eq!(decide(Some(&a), &t), Ok(Advance::Tie { current: a }));
    }

    #[test]
    fn sequences_report_gaps_and_timestamps_never_do() {
        let s3 = Version::sequence(3);
        assert_eq!(
            decide(Some(&s3), &Version::sequence(4)),
            Ok(Advance::Applied { previous: Some(s3) })
        );
        assert_eq!(
            decide(Some(&s3), &Version::sequence(7)),
            Ok(Advance::Gap {
                expected: 4,
                got: 7
            })
        );
        let t3 = Version::timestamp(3);
        assert_eq!(
            decide(Some(&t3), &Version::timestamp(70)),
            Ok(Advance::Applied { previous: Some(t3) })
        );
        assert_eq!(
            decide(Some(&s3), &t3),
            Err(Error::VersionKindMismatch {
                stored: "sequence",
                got: "timestamp"
            })
        );
    }
}
