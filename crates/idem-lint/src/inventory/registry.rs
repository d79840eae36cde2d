//! The inventory joined with idem's consumer registry (`idem_consumers`): consumers running
//! with no handler in the code, handlers with no marker, handlers never seen running.
//!
//! The rows come from the database through `idem lint --database URL` (the `idem` command
//! reads them and passes them to `idem-lint --registry -` as JSON), so this crate holds no
//! database code.

use std::collections::HashSet;

use serde::Deserialize;

use super::{Handler, Inventory, MarkerKind};
use crate::error::LintError;

/// One row of the consumer registry (`idem_consumers`), as `--registry` takes it in JSON.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryRow {
    /// The consumer's name.
    pub consumer: String,
    /// What runs it: `runner`, `jetstream`, `rabbitmq`, `kafka`, `gateway_source`,
    /// `gateway_destination`, `effect_worker`, `relay`, `idempotency_key`, `lineage`.
    pub kind: String,
    /// When it was first seen, in milliseconds since the Unix epoch.
    pub first_seen: i64,
    /// `false` when `first_seen` is "at or before" (a row back-filled from older tables).
    pub first_seen_exact: bool,
    /// When it was last seen, in milliseconds since the Unix epoch.
    pub last_seen: i64,
}

/// The registry kinds whose consumers are handlers in application code. Gateway sources and
/// destinations are configured in `idem.toml`; effect workers, relays, the Idempotency-Key
/// layer and lineage scopes are idem's own parts: none has a handler to find.
const CODE_KINDS: &[&str] = &["runner", "jetstream", "rabbitmq", "kafka"];

/// The join of an inventory with the registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryJoin {
    /// Registry rows of application consumers (kinds runner, jetstream, rabbitmq, kafka) that
    /// no handler found in the code names: "running, not in code". Sorted by name.
    pub running_not_in_code: Vec<RegistryRow>,
    /// Handlers with no marker at all: "in code, no marker".
    pub in_code_no_marker: Vec<Handler>,
    /// Handlers whose consumer name has no registry row: "in code, never seen running".
    pub in_code_never_seen: Vec<Handler>,
}

impl Inventory {
    /// Joins the handlers with the registry's `rows` (matched by consumer name, exactly).
    pub fn join(&self, rows: &[RegistryRow]) -> RegistryJoin {
        let in_code: HashSet<&str> = self
            .handlers
            .iter()
            .filter_map(|h| h.consumer.as_ref().map(|c| c.name.as_str()))
            .collect();
        let running: HashSet<&str> = rows.iter().map(|r| r.consumer.as_str()).collect();
        let mut running_not_in_code: Vec<RegistryRow> = rows
            .iter()
            .filter(|r| {
                CODE_KINDS.contains(&r.kind.as_str()) && !in_code.contains(r.consumer.as_str())
            })
            .cloned()
            .collect();
        running_not_in_code.sort_by(|a, b| a.consumer.cmp(&b.consumer));
        RegistryJoin {
            running_not_in_code,
            in_code_no_marker: self
                .handlers
                .iter()
                .filter(|h| h.marker == MarkerKind::None)
                .cloned()
                .collect(),
            in_code_never_seen: self
                .handlers
                .iter()
                .filter(|h| {
                    h.consumer
                        .as_ref()
                        .is_some_and(|c| !running.contains(c.name.as_str()))
                })
                .cloned()
                .collect(),
        }
    }
}

impl RegistryRow {
    /// Parses the rows `--registry` reads: a JSON array of objects with `consumer`, `kind`,
    /// `first_seen`, `first_seen_exact` and `last_seen`; `from` names where the text came
    /// from, for the error.
    ///
    /// # Errors
    /// [`LintError::Registry`] when the text is not such an array (the parser's message, with
    /// its line and column, and the shape expected).
    pub fn parse_all(text: &str, from: &str) -> Result<Vec<RegistryRow>, LintError> {
        serde_json::from_str(text).map_err(|e| LintError::Registry {
            from: from.to_string(),
            reason: format!(
                "{e}; expected a JSON array of {{\"consumer\", \"kind\", \"first_seen\", \"first_seen_exact\", \"last_seen\"}}"
            ),
        })
    }
}
