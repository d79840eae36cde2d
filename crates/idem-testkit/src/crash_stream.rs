//! The delivery stream of the crash test: `events` distinct events over [`ENTITIES`] entities,
//! interleaved with redeliveries of earlier ones, as a broker sends them after lost acks,
//! rebalances and replays. The stream is a pure function of its parameters, so the
//! `crash-consumer` binary (which processes it) and the crash test (which checks the database
//! against it) build the same one from the same seed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How many entities the events are spread over.
pub const ENTITIES: usize = 50;

/// The consumer name the crash consumer runs under.
pub const CONSUMER: &str = "crash_v1";

/// The source name of the crash stream's events (the first part of their dedup keys).
pub const SOURCE: &str = "crash";

/// The aggregate type of the crash stream's entities.
pub const AGGREGATE_TYPE: &str = "account";

/// A redelivery picks among this many most recent distinct events (a broker redelivering
/// unacknowledged messages), unless it is a replay.
const RECENT: usize = 20;

/// The share of redeliveries that replay any earlier event instead of a recent one.
const REPLAY_SHARE: f64 = 0.2;

/// One delivery in the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// The event delivered: an index in `0..events`, in the order events first appear.
    pub event: usize,
    /// The entity the event is about: an index in `0..ENTITIES`.
    pub entity: usize,
    /// The event's version of its entity: 1 for the entity's first event, then 2, 3, …
    pub sequence: i64,
    /// Whether this is the event's first delivery (`false`: a redelivery).
    pub first: bool,
}

/// A deterministic delivery stream. Made by [`Stream::generate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stream {
    deliveries: Vec<Delivery>,
    events: usize,
}

impl Stream {
    /// Builds the stream for `events` distinct events, where `duplicates` is the expected share
    /// of redeliveries among all deliveries (0.3: 30 % of deliveries are duplicates, so about
    /// `events / 0.7` deliveries in all), from `seed`.
    ///
    /// Returns the same stream for the same three arguments (within one build of this crate).
    ///
    /// # Panics
    /// When `duplicates` is not in `0.0..1.0` (at 1.0 the stream would never end).
    pub fn generate(events: usize, duplicates: f64, seed: u64) -> Self {
        assert!(
            (0.0..1.0).contains(&duplicates),
            "duplicates must be in 0.0..1.0, got {duplicates}"
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let mut deliveries = Vec::new();
        // Per event: (entity, sequence), in first-delivery order.
        let mut emitted: Vec<(usize, i64)> = Vec::with_capacity(events);
        let mut next_sequence = [1i64; ENTITIES];
        while emitted.len() < events {
            if !emitted.is_empty() && rng.random_bool(duplicates) {
                let event = if rng.random_bool(REPLAY_SHARE) {
                    rng.random_range(0..emitted.len())
                } else {
                    emitted.len() - 1 - rng.random_range(0..emitted.len().min(RECENT))
                };
                let (entity, sequence) = emitted[event];
                deliveries.push(Delivery {
                    event,
                    entity,
                    sequence,
                    first: false,
                });
            } else {
                let entity = rng.random_range(0..ENTITIES);
                let sequence = next_sequence[entity];
                next_sequence[entity] += 1;
                deliveries.push(Delivery {
                    event: emitted.len(),
                    entity,
                    sequence,
                    first: true,
                });
                emitted.push((entity, sequence));
            }
        }
        Self { deliveries, events }
    }

    /// The deliveries, in stream order (a position is an index into this slice).
    pub fn deliveries(&self) -> &[Delivery] {
        &self.deliveries
    }

    /// The number of distinct events.
    pub fn events(&self) -> usize {
        self.events
    }

    /// The number of distinct events delivered at positions `0..end`: how many effect rows a
    /// consumer has once it committed every delivery before `end`.
    pub fn distinct_before(&self, end: usize) -> usize {
        self.deliveries[..end.min(self.deliveries.len())]
            .iter()
            .filter(|d| d.first)
            .count()
    }

    /// The number of distinct events per entity (indexed by entity): what each entity's counter
    /// holds once the whole stream is processed.
    pub fn per_entity(&self) -> [i64; ENTITIES] {
        let mut counts = [0i64; ENTITIES];
        for d in self.deliveries.iter().filter(|d| d.first) {
            counts[d.entity] += 1;
        }
        counts
    }
}

/// The event id of event `event` (`evt_000042`).
pub fn event_id(event: usize) -> String {
    format!("evt_{event:06}")
}

/// The aggregate id of entity `entity` (`acct_07`).
pub fn entity_id(entity: usize) -> String {
    format!("acct_{entity:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_with_the_asked_share_of_duplicates() {
        let a = Stream::generate(3000, 0.3, 7);
        assert_eq!(a, Stream::generate(3000, 0.3, 7));
        assert_ne!(a, Stream::generate(3000, 0.3, 8));
        assert_eq!(a.distinct_before(usize::MAX), 3000);
        assert_eq!(a.per_entity().iter().sum::<i64>(), 3000);
        let dup = a.deliveries().iter().filter(|d| !d.first).count() as f64;
        let share = dup / a.deliveries().len() as f64;
        assert!((0.27..0.33).contains(&share), "duplicate share {share}");
        // A redelivery always follows its event's first delivery.
        let mut seen = vec![false; 3000];
        for d in a.deliveries() {
            assert_eq!(d.first, !seen[d.event]);
            seen[d.event] = true;
        }
    }
}
