//! Where a delivery stands and how an attempt ended: typed in code, text in the tables (the
//! migrations' `CHECK` constraints list the same words). Read and written at the SQL boundary
//! only, so a misspelt state does not compile.

use std::fmt;

use serde::Serialize;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::{Database, Decode, Encode, Type};

/// The state of one delivery (an event on its way to one destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its first or next attempt (`pending`).
    Pending,
    /// Being sent, held by a fencing token until its lease lapses (`in_flight`).
    InFlight,
    /// Answered 2xx (`delivered`).
    Delivered,
    /// Older than its entity's newest event at ingest: never sent (`stale`).
    Stale,
    /// Every attempt of the schedule failed, or it can never be sent: kept for redrive (`dead`).
    Dead,
}

/// How one attempt of a delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// Answered 2xx (`delivered`).
    Delivered,
    /// Failed; another attempt follows on the schedule (`retry`).
    Retry,
    /// Failed, and it was the last: the delivery is a dead letter (`dead`).
    Dead,
}

/// `as_str`, `parse`, `Display` and the sqlx encoding (as TEXT) of a text-backed enum.
macro_rules! text_enum {
    ($ty:ident, $what:literal, { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The word stored in the table and shown to operators.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }

            /// The value stored as `text`, or `None` for any other word.
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl<DB: Database> Type<DB> for $ty
        where
            str: Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <str as Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <str as Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: Database> Encode<'q, DB> for $ty
        where
            &'q str: Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as Database>::ArgumentBuffer,
            ) -> Result<IsNull, BoxDynError> {
                <&'q str as Encode<'q, DB>>::encode(self.as_str(), buf)
            }
        }

        impl<'r, DB: Database> Decode<'r, DB> for $ty
        where
            &'r str: Decode<'r, DB>,
        {
            fn decode(value: <DB as Database>::ValueRef<'r>) -> Result<Self, BoxDynError> {
                let text = <&'r str as Decode<'r, DB>>::decode(value)?;
                Self::parse(text).ok_or_else(|| {
                    format!(concat!("unknown ", $what, " {:?} in the gateway's tables"), text).into()
                })
            }
        }
    };
}

text_enum!(DeliveryState, "delivery state", {
    Pending => "pending",
    InFlight => "in_flight",
    Delivered => "delivered",
    Stale => "stale",
    Dead => "dead",
});

text_enum!(AttemptOutcome, "attempt outcome", {
    Delivered => "delivered",
    Retry => "retry",
    Dead => "dead",
});

impl DeliveryState {
    /// Whether the delivery may still be sent by a dispatcher (pending or in flight).
    pub fn is_open(self) -> bool {
        matches!(self, Self::Pending | Self::InFlight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_its_value() {
        for state in DeliveryState::ALL {
            assert_eq!(DeliveryState::parse(state.as_str()), Some(*state));
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::Value::from(state.as_str())
            );
        }
        for outcome in AttemptOutcome::ALL {
            assert_eq!(AttemptOutcome::parse(outcome.as_str()), Some(*outcome));
        }
        assert_eq!(DeliveryState::parse("in-flight"), None);
        assert_eq!(AttemptOutcome::parse("Delivered"), None);
    }

    /// The tables' `CHECK` constraints list exactly these words, on both databases.
    #[test]
    fn the_tables_accept_exactly_these_words() {
        let quoted = |words: Vec<&str>| {
            words
                .iter()
                .map(|w| format!("'{w}'"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let states = quoted(DeliveryState::ALL.iter().map(|s| s.as_str()).collect());
        let outcomes = quoted(AttemptOutcome::ALL.iter().map(|o| o.as_str()).collect());
        for sql in [
            include_str!("../../migrations/sqlite/0001_gateway.sql"),
            include_str!("../../migrations/postgres/0001_gateway.sql"),
        ] {
            assert!(
                sql.contains(&format!("CHECK (state IN ({states}))")),
                "{states}"
            );
            assert!(
                sql.contains(&format!("CHECK (outcome IN ({outcomes}))")),
                "{outcomes}"
            );
        }
    }
}
