//! Reading the registry: the reports of `idem consumers list|show`.

use crate::backend::Backend;
use crate::{ConsumerReport, Error, ListOptions, Store};

/// The consumer registry of a store, read: [`Store::consumers`].
#[derive(Debug)]
pub struct Consumers<DB: Backend> {
    store: Store<DB>,
}

impl<DB: Backend> Store<DB> {
    /// The consumer registry, for reading reports ([`Consumers::list`], [`Consumers::show`]).
    /// Reads what was flushed: call [`flush_consumer_counts`](Self::flush_consumer_counts) first
    /// for this process's latest counts.
    pub fn consumers(&self) -> Consumers<DB> {
        Consumers {
            store: self.clone(),
        }
    }
}

impl<DB: Backend> Consumers<DB> {
    /// Every consumer in the registry (first seen at or after `options.since`, when given),
    /// sorted by name, each with its windows ending at `options.now`, its effects and outbox rows
    /// by status, what it holds, its lag, its successor and its flags.
    ///
    /// # Errors
    /// [`Error::Database`] when a query fails; [`Error::CorruptRow`] for a stored kind this
    /// idem does not know.
    pub async fn list(&self, options: &ListOptions) -> Result<Vec<ConsumerReport>, Error> {
        let _ = (&self.store, options);
        unimplemented!("list")
    }

    /// The report of the consumer called `name` (`options.since` does not apply).
    ///
    /// # Errors
    /// [`Error::UnknownConsumer`] when the registry has no such consumer (it lists the known
    /// names); as [`list`](Self::list).
    pub async fn show(&self, name: &str, options: &ListOptions) -> Result<ConsumerReport, Error> {
        let _ = (name, options);
        unimplemented!("show")
    }
}
