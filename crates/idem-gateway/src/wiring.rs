//! The configuration and the wiring between sources, routes and destinations that a
//! configuration reload swaps as one: the [`Config`], each destination's [`Lane`], the sources
//! by name and the routes leaving each source. [`Gateway`](crate::Gateway) keeps it behind one
//! swap point; ingest reads it once per batch (so that the route indices it decides with and
//! the routes it writes are of one configuration), a dispatcher takes its lane, which carries
//! its destination's settings, once when it starts, and a webhook looks its source up without
//! a lock. A reload (`crate::reload`) builds a new one and swaps it, and the supervisor starts
//! and stops the dispatchers of what was added, changed or removed.

use std::collections::HashMap;
use std::sync::Arc;

use idem_core::Timestamp;

use crate::config::{Config, Route, Source};
use crate::lanes::Lane;

/// See the module docs.
pub(crate) struct Wiring {
    /// The configuration these lanes and indices are of.
    config: Arc<Config>,
    /// Which reload made it (0: the start); a unit filtered under another is filtered again.
    generation: u64,
    /// One lane per destination (same index as the configuration's destinations).
    lanes: Vec<Arc<Lane>>,
    /// Source indices by name: the webhook path is looked up once per request.
    sources: HashMap<String, usize>,
    /// For each source (same index), the indices of the routes leaving it.
    routes_by_source: Vec<Vec<usize>>,
}

impl Wiring {
    /// The wiring of `config` at `now` (each lane's rate limit starts with a full bucket).
    pub(crate) fn new(config: Config, now: Timestamp) -> Self {
        let lanes = (config.destinations.iter())
            .map(|destination| Arc::new(Lane::new(destination, now)))
            .collect();
        Self::with_lanes(Arc::new(config), lanes, 0)
    }

    /// The wiring of `config` over `lanes`, one per destination in its order (a reload keeps
    /// the lanes of the destinations it leaves as they were).
    pub(crate) fn with_lanes(config: Arc<Config>, lanes: Vec<Arc<Lane>>, generation: u64) -> Self {
        debug_assert_eq!(lanes.len(), config.destinations.len());
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
            config,
            generation,
            lanes,
            sources,
            routes_by_source,
        }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Which reload made it (0: the start).
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// Source `index` (an index of this wiring's configuration).
    pub(crate) fn source(&self, index: usize) -> &Source {
        &self.config.sources[index]
    }

    /// Destination `index`'s lane.
    pub(crate) fn lane(&self, index: usize) -> &Lane {
        &self.lanes[index]
    }

    /// Destination `index`'s lane, to keep (a dispatcher holds its own for its life).
    pub(crate) fn lane_arc(&self, index: usize) -> Arc<Lane> {
        Arc::clone(&self.lanes[index])
    }

    /// Every lane, in the configuration's order, to keep.
    pub(crate) fn lanes_arc(&self) -> impl Iterator<Item = &Arc<Lane>> {
        self.lanes.iter()
    }

    /// Every lane, in the configuration's order.
    pub(crate) fn lanes(&self) -> impl Iterator<Item = &Lane> {
        self.lanes.iter().map(AsRef::as_ref)
    }

    /// The index of the source named `name`.
    pub(crate) fn source_index(&self, name: &str) -> Option<usize> {
        self.sources.get(name).copied()
    }

    /// The routes leaving source `source` (an index), with their indices.
    pub(crate) fn routes_of(&self, source: usize) -> impl Iterator<Item = (usize, &Route)> + '_ {
        self.routes_by_source[source]
            .iter()
            .map(|&index| (index, &self.config.routes[index]))
    }
}
