//! The per-minute counts one ingest commit adds: what each request was told, and how the
//! version guard judged each delivery (written in the same transaction, docs/design.md C2).

use super::answer::Answer;
use crate::model::counts::{Counts, Metric, Scope};
use crate::wiring::Wiring;

/// How the version guard judged one delivery at ingest.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Judged {
    /// The route's index in the configuration.
    pub route: usize,
    pub stale: bool,
    pub tie: bool,
    pub gap: bool,
}

/// The counts of one ingest commit at `now` (ms): each answer of `answers` (the source's index
/// and what it was told) and each delivery of `judged`, counted for the route's source and
/// destination.
pub(crate) fn of_ingest(
    wiring: &Wiring,
    now: i64,
    answers: impl IntoIterator<Item = (usize, Answer)>,
    judged: impl IntoIterator<Item = Judged>,
) -> Counts {
    let mut counts = Counts::new();
    for (source, answer) in answers {
        let metric = match answer {
            Answer::Accepted => Metric::Accepted,
            Answer::Duplicate => Metric::Duplicate,
        };
        counts.add(
            now,
            Scope::Source,
            wiring.source(source).name.as_str(),
            metric,
        );
    }
    for judged in judged {
        let route = &wiring.config().routes[judged.route];
        for (on, metric) in [
            (judged.stale, Metric::Stale),
            (judged.tie, Metric::Tie),
            (judged.gap, Metric::Gap),
        ] {
            if on {
                counts.add(now, Scope::Source, route.source.as_str(), metric);
                counts.add(now, Scope::Destination, route.destination.as_str(), metric);
            }
        }
    }
    counts
}
