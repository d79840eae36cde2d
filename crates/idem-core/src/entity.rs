//! The entity an event is about: `(aggregate_type, aggregate_id)`.

use std::fmt;

use crate::id::check_id;
use crate::{Error, Name};

/// The entity an event changes, such as `("subscription", "sub_1")`. The version guard keeps one
/// highest version per (consumer, entity).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entity {
    aggregate_type: Name,
    aggregate_id: String,
}

impl Entity {
    /// Builds an entity from its type (a [`Name`]) and its id (any non-blank text up to
    /// [`MAX_ID_BYTES`](crate::MAX_ID_BYTES)).
    ///
    /// # Errors
    /// [`Error::InvalidName`] for a bad type; [`Error::BlankId`] or [`Error::IdTooLong`] for a bad id.
    pub fn new(
        aggregate_type: impl Into<String>,
        aggregate_id: impl Into<String>,
    ) -> Result<Self, Error> {
        Ok(Self {
            aggregate_type: Name::new("aggregate type", aggregate_type)?,
            aggregate_id: check_id("aggregate id", aggregate_id.into())?,
        })
    }

    /// The aggregate type, such as `subscription`.
    pub fn aggregate_type(&self) -> &Name {
        &self.aggregate_type
    }

    /// The aggregate id, such as `sub_1`.
    pub fn aggregate_id(&self) -> &str {
        &self.aggregate_id
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.aggregate_type, self.aggregate_id)
    }
}
