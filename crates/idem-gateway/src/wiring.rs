//! The wiring between sources, routes and destinations that a configuration reload swaps as
//! one: each destination's [`Lane`], the sources by name and the routes leaving each source.
//! [`Gateway`](crate::Gateway) keeps it behind one swap point; ingest reads it once per batch,
//! a dispatcher takes its lane once when it starts, and a webhook looks its source up without
//! a lock. Nothing swaps it yet: the operator's reload builds a new one and swaps it, and the
//! supervisor starts and stops the tasks of what was added or removed.

use std::collections::HashMap;
use std::sync::Arc;

use idem_core::Timestamp;

use crate::config::{Config, Route};
use crate::lanes::Lane;

/// See the module docs.
pub(crate) struct Wiring {
    /// One lane per destination (same index as the configuration's destinations).
    lanes: Vec<Arc<Lane>>,
    /// Source indices by name: the webhook path is looked up once per request.
    sources: HashMap<String, usize>,
    /// For each source (same index), the indices of the routes leaving it.
    routes_by_source: Vec<Vec<usize>>,
}

impl Wiring {
    /// The wiring of `config` at `now` (each lane's rate limit starts with a full bucket).
    pub(crate) fn new(config: &Config, now: Timestamp) -> Self {
        let lanes = (config.destinations.iter())
            .map(|destination| Arc::new(Lane::new(destination, now)))
            .collect();
        let sources = (config.sources.iter().enumerate())
            .map(|(index, source)| (source.name.to_string(), index))
            .collect();
        let routes_by_source = (config.sources.iter())
            .map(|source| {
                (config.routes.iter().enumerate())
                    .filter(|(_, route)| route.source == source.name)
                    .map(|(index, _)| index)
                    .collect()
            })
            .collect();
        Self {
            lanes,
            sources,
            routes_by_source,
        }
    }

    /// Destination `index`'s lane.
    pub(crate) fn lane(&self, index: usize) -> &Lane {
        &self.lanes[index]
    }

    /// Destination `index`'s lane, to keep (a dispatcher holds its own for its life).
    pub(crate) fn lane_arc(&self, index: usize) -> Arc<Lane> {
        Arc::clone(&self.lanes[index])
    }

    /// Every lane, in the configuration's order.
    pub(crate) fn lanes(&self) -> impl Iterator<Item = &Lane> {
        self.lanes.iter().map(AsRef::as_ref)
    }

    /// The index of the source named `name`.
    pub(crate) fn source_index(&self, name: &str) -> Option<usize> {
        self.sources.get(name).copied()
    }

    /// The routes of `config` leaving source `source` (an index), with their indices.
    pub(crate) fn routes_of<'a>(
        &'a self,
        config: &'a Config,
        source: usize,
    ) -> impl Iterator<Item = (usize, &'a Route)> + 'a {
        self.routes_by_source[source]
            .iter()
            .map(|&index| (index, &config.routes[index]))
    }
}
