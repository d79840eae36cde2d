//! Delivery schedules: which event is delivered when, per mode, deterministic from a seed.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::VerifyError;
use crate::events::EventRecord;

/// One delivery: an event (index into the events) at a step. Deliveries that share a step are
/// sent at the same moment (behind a barrier); steps run one after another, in increasing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// Index of the event in the loaded events.
    pub event: usize,
    /// The step; equal steps are concurrent.
    pub step: usize,
    /// Crash mode: the target is restarted (`--restart`) right after this delivery was
    /// handled and before its answer counts, so it is not acknowledged; its redelivery is a
    /// later delivery of the plan.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crash: bool,
    /// Rebuild mode: the target is moved to its successor consumer version (`--successor`)
    /// before this delivery is sent; the deliveries from here on are the replay of history
    /// into the new version.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub successor: bool,
}

/// A schedule: deliveries sorted by step.
pub type Plan = Vec<Delivery>;

/// The kinds of chaos.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Mode {
    /// Each event 2 or 3 times in a row.
    Duplicate,
    /// Each event 2 or 3 times at the same moment.
    Concurrent,
    /// Every event once, in a random order (ties of one entity keep their order).
    Shuffle,
    /// In order, and about a third of the events again 1–5 deliveries later, as when the 2xx
    /// was lost.
    LostAck,
    /// In order, then about a quarter of the events again at the end, in a random order.
    ReplayLater,
    /// In order; at about one delivery in twenty (at least one) the target is restarted with
    /// `--restart` after handling it and before the sender saw its 2xx, and the delivery is
    /// redelivered once the target answers again. Skipped without `--restart`.
    Crash,
    /// In order; then the target moves to its successor consumer version (`--successor`) and
    /// the same history is delivered again, in order, as a rebuild does: the state must match
    /// the baseline, the effects the first version ran included (none runs again). Skipped
    /// without `--successor`.
    Rebuild,
}

impl Mode {
    /// Every mode, in the order they run by default.
    pub const ALL: [Mode; 7] = [
        Mode::Duplicate,
        Mode::Concurrent,
        Mode::Shuffle,
        Mode::LostAck,
        Mode::Crash,
        Mode::ReplayLater,
        Mode::Rebuild,
    ];

    /// The name used on the command line and in reports (`lost-ack`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Duplicate => "duplicate",
            Mode::Concurrent => "concurrent",
            Mode::Shuffle => "shuffle",
            Mode::LostAck => "lost-ack",
            Mode::ReplayLater => "replay-later",
            Mode::Crash => "crash",
            Mode::Rebuild => "rebuild",
        }
    }

    /// Parses a comma-separated list (`duplicate,shuffle`), keeping the given order.
    ///
    /// # Errors
    /// [`VerifyError::UnknownMode`] for a name that is not a mode.
    pub fn parse_list(list: &str) -> Result<Vec<Mode>, VerifyError> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Mode::from_str)
            .collect()
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = VerifyError;

    /// Errors: [`VerifyError::UnknownMode`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| VerifyError::UnknownMode { given: s.into() })
    }
}

/// Each of `events` once, one at a time, in the order given.
pub fn sequential(events: impl IntoIterator<Item = usize>) -> Plan {
    events
        .into_iter()
        .enumerate()
        .map(|(step, event)| Delivery {
            event,
            step,
            crash: false,
            successor: false,
        })
        .collect()
}

/// The rebuild of `history` (a plan, in the order the first version got it): `history`, then
/// the target moved to its successor, then each event of `history` once more, in the same
/// order, one at a time.
pub fn rebuild(history: &[Delivery]) -> Plan {
    let mut plan = history.to_vec();
    let next = history.last().map_or(0, |d| d.step + 1);
    plan.extend(history.iter().enumerate().map(|(i, d)| Delivery {
        event: d.event,
        step: next + i,
        crash: false,
        successor: i == 0,
    }));
    plan
}

/// The in-order run of the distinct events of `plan`: each once, by their position in the
/// original file (`seq`).
pub fn in_order_of(plan: &[Delivery], events: &[EventRecord]) -> Plan {
    let mut distinct: Vec<usize> = plan.iter().map(|d| d.event).collect();
    distinct.sort_by_key(|&i| (events[i].seq, i));
    distinct.dedup();
    sequential(distinct)
}

/// The schedule of `mode` over `events` (indices `0..events.len()` in file order), from `seed`.
/// Reordering modes keep the events of one entity that share a version in their relative order
/// (docs/design.md C5: no handler can order those without more information).
pub fn schedule(mode: Mode, events: &[EventRecord], seed: u64) -> Plan {
    schedule_with(mode, events, seed, false)
}

/// As [`schedule`]; with `keep_entity_order` (`--keep-entity-order`), `shuffle` keeps the
/// events of each entity in their file order (it interleaves entities only), for handlers that
/// do not claim to handle reordering within an entity.
pub fn schedule_with(
    mode: Mode,
    events: &[EventRecord],
    seed: u64,
    keep_entity_order: bool,
) -> Plan {
    // One stream per mode, so that adding a mode does not change the others.
    let mut rng =
        StdRng::seed_from_u64(seed ^ (mode as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let n = events.len();
    match mode {
        Mode::Duplicate => sequential(
            (0..n)
                .flat_map(|i| std::iter::repeat_n(i, rng.random_range(2..=3)))
                .collect::<Vec<_>>(),
        ),
        Mode::Concurrent => (0..n)
            .flat_map(|i| {
                std::iter::repeat_n(
                    Delivery {
                        event: i,
                        step: i,
                        crash: false,
                        successor: false,
                    },
                    rng.random_range(2..=3),
                )
            })
            .collect(),
        Mode::Shuffle => {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut rng);
            if keep_entity_order {
                keep_entities(&mut order, events);
            } else {
                keep_ties(&mut order, events);
            }
            sequential(order)
        }
        Mode::Crash => {
            let mut crashes: Vec<bool> = (0..n).map(|_| rng.random_ratio(1, 20)).collect();
            if n > 0 && !crashes.contains(&true) {
                crashes[rng.random_range(0..n)] = true;
            }
            let mut plan = Vec::with_capacity(n + n / 10);
            for (event, crash) in crashes.into_iter().enumerate() {
                let step = plan.len();
                plan.push(Delivery {
                    event,
                    step,
                    crash,
                    successor: false,
                });
                if crash {
                    plan.push(Delivery {
                        event,
                        step: step + 1,
                        crash: false,
                        successor: false,
                    });
                }
            }
            plan
        }
        Mode::LostAck => {
            let next_tie = next_tie_member(events);
            let mut order = Vec::new();
            let mut pending: Vec<(usize, usize)> = Vec::new();
            for (i, next_tie) in next_tie.iter().enumerate() {
                order.push(i);
                if rng.random_ratio(1, 3) {
                    let mut due = i + rng.random_range(1..=5);
                    if let Some(next) = *next_tie {
                        due = due.min(next - 1);
                    }
                    pending.push((due, i));
                }
                pending.sort_unstable();
                while pending.first().is_some_and(|&(due, _)| due <= i) {
                    order.push(pending.remove(0).1);
                }
            }
            order.extend(pending.into_iter().map(|(_, e)| e));
            sequential(order)
        }
        Mode::ReplayLater => {
            let next_tie = next_tie_member(events);
            let mut chosen = vec![false; n];
            for slot in &mut chosen {
                *slot = rng.random_ratio(1, 4);
            }
            // A replayed event takes the later events of its tie group with it, in order.
            for i in 0..n {
                if chosen[i] {
                    let mut j = i;
                    while let Some(next) = next_tie[j] {
                        chosen[next] = true;
                        j = next;
                    }
                }
            }
            let mut replays: Vec<usize> = (0..n).filter(|&i| chosen[i]).collect();
            replays.shuffle(&mut rng);
            keep_ties(&mut replays, events);
            sequential((0..n).chain(replays).collect::<Vec<_>>())
        }
        Mode::Rebuild => rebuild(&sequential(0..n)),
    }
}

/// Within each (entity, version) group, refills the slots its members landed in with the
/// members in file order.
fn keep_ties(order: &mut [usize], events: &[EventRecord]) {
    let mut groups: HashMap<(&str, i64), Vec<usize>> = HashMap::new();
    for (slot, &i) in order.iter().enumerate() {
        if let (Some(entity), Some(version)) = (&events[i].entity, events[i].version) {
            groups.entry((entity, version)).or_default().push(slot);
        }
    }
    for slots in groups.values() {
        let mut members: Vec<usize> = slots.iter().map(|&s| order[s]).collect();
        members.sort_unstable_by_key(|&i| (events[i].seq, i));
        for (&slot, member) in slots.iter().zip(members) {
            order[slot] = member;
        }
    }
}

/// Within each entity, refills the slots its events landed in with its events in file order.
fn keep_entities(order: &mut [usize], events: &[EventRecord]) {
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    for (slot, &i) in order.iter().enumerate() {
        if let Some(entity) = &events[i].entity {
            groups.entry(entity).or_default().push(slot);
        }
    }
    for slots in groups.values() {
        let mut members: Vec<usize> = slots.iter().map(|&s| order[s]).collect();
        members.sort_unstable_by_key(|&i| (events[i].seq, i));
        for (&slot, member) in slots.iter().zip(members) {
            order[slot] = member;
        }
    }
}

/// For each event, the next event (by index) of its (entity, version) group, if any.
fn next_tie_member(events: &[EventRecord]) -> Vec<Option<usize>> {
    let mut next = vec![None; events.len()];
    let mut last: HashMap<(&str, i64), usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let (Some(entity), Some(version)) = (&e.entity, e.version)
            && let Some(prev) = last.insert((entity, version), i)
        {
            next[prev] = Some(i);
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: usize, entity: &str, version: i64) -> EventRecord {
        EventRecord {
            body: Vec::new(),
            headers: Vec::new(),
            id: format!("evt_{seq}"),
            entity: Some(entity.into()),
            version: Some(version),
            seq,
            step: None,
            successor: false,
        }
    }

    #[test]
    fn schedules_are_deterministic_and_keep_ties() {
        let events: Vec<_> = (0..40)
            .map(|i| ev(i, &format!("obj_{}", i % 4), (i / 8) as i64))
            .collect();
        for mode in Mode::ALL {
            let a = schedule(mode, &events, 7);
            assert_eq!(a, schedule(mode, &events, 7), "{mode}");
            let mut seen: Vec<usize> = a.iter().map(|d| d.event).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), 40, "{mode}: every event delivered");
            // Last delivery of each member of a tie group keeps file order.
            let mut last = HashMap::new();
            for (pos, d) in a.iter().enumerate() {
                last.insert(d.event, pos);
            }
            for i in 0..40 {
                for j in i + 1..40 {
                    if events[i].entity == events[j].entity
                        && events[i].version == events[j].version
                    {
                        assert!(last[&i] < last[&j], "{mode}: tie {i} {j} reordered");
                    }
                }
            }
        }
        assert_ne!(
            schedule(Mode::Shuffle, &events, 1),
            schedule(Mode::Shuffle, &events, 2)
        );
    }

    #[test]
    fn keep_entity_order_and_crash_points() {
        let events: Vec<_> = (0..40)
            .map(|i| ev(i, &format!("obj_{}", i % 4), i as i64))
            .collect();
        let plan = schedule_with(Mode::Shuffle, &events, 7, true);
        assert_ne!(plan, sequential(0..40), "entities interleave differently");
        let mut last: HashMap<&str, usize> = HashMap::new();
        for d in &plan {
            let entity = events[d.event].entity.as_deref().unwrap();
            if let Some(&prev) = last.get(entity) {
                assert!(prev < d.event, "per-entity order kept");
            }
            last.insert(entity, d.event);
        }
        let crash = schedule(Mode::Crash, &events, 7);
        let points: Vec<&Delivery> = crash.iter().filter(|d| d.crash).collect();
        assert!(!points.is_empty());
        for p in points {
            let next = crash[p.step + 1];
            assert_eq!(
                (next.event, next.crash),
                (p.event, false),
                "redelivered next"
            );
        }
    }

    #[test]
    fn rebuild_delivers_history_again_after_the_successor() {
        let events: Vec<EventRecord> = (0..3).map(|i| ev(i, "cus_1", i as i64)).collect();
        let plan = schedule(Mode::Rebuild, &events, 7);
        let order: Vec<(usize, usize, bool)> = plan
            .iter()
            .map(|d| (d.event, d.step, d.successor))
            .collect();
        assert_eq!(
            order,
            [
                (0, 0, false),
                (1, 1, false),
                (2, 2, false),
                (0, 3, true),
                (1, 4, false),
                (2, 5, false)
            ]
        );
        assert_eq!(in_order_of(&plan, &events), sequential(0..3));
    }

    #[test]
    fn mode_names_round_trip() {
        assert_eq!(
            Mode::parse_list("duplicate, lost-ack").unwrap(),
            [Mode::Duplicate, Mode::LostAck]
        );
        assert_eq!(Mode::parse_list("crash").unwrap(), [Mode::Crash]);
        assert_eq!(Mode::parse_list("rebuild").unwrap(), [Mode::Rebuild]);
        assert!(matches!(
            Mode::parse_list("reboot"),
            Err(VerifyError::UnknownMode { .. })
        ));
    }

    #[test]
    fn unknown_mode_error_lists_every_mode() {
        let message = Mode::parse_list("reboot").unwrap_err().to_string();
        for mode in Mode::ALL {
            assert!(message.contains(mode.name()), "{mode} missing: {message}");
        }
    }
}
