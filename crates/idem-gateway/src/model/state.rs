//! Where a delivery stands and how an attempt ended: typed in code, text in the tables (the
//! migrations' `CHECK` constraints list the same words). Read and written at the SQL boundary
//! only, so a misspelt state does not compile.

use serde::Serialize;

use super::text_enum::text_enum;

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
            include_str!("../../migrations/mysql/0001_gateway.sql"),
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
