//! The inventory as JSON: `{"handlers": [...], "registry": {...} | null, "skipped": [...],
//! "files_linted": N}`.

use serde_json::{Value, json};

use crate::inventory::{Handler, Inventory, RegistryJoin, RegistryRow};

/// One handler: `path`, `line`, `function`, `kind` (`webhook_route`, `broker_consumer`,
/// `job`), `registration` (or null), `consumer` (or null), `consumer_source` (`config`,
/// `idem`, `registration`, or null), `marker` (`idem`, `table`, `redis`, `none`) and
/// `verdict` (`same_transaction`, `outside_transaction`, `not_applicable`).
pub(crate) fn handler_json(h: &Handler) -> Value {
    json!({
        "path": h.path.to_string_lossy(),
        "line": h.line,
        "function": h.function,
        "kind": h.role.as_str(),
        "registration": h.registration,
        "consumer": h.consumer.as_ref().map(|c| c.name.clone()),
        "consumer_source": h.consumer.as_ref().map(|c| c.source.as_str()),
        "marker": h.marker.as_str(),
        "verdict": h.verdict.as_str(),
    })
}

fn row_json(r: &RegistryRow) -> Value {
    json!({
        "consumer": r.consumer,
        "kind": r.kind,
        "first_seen": r.first_seen,
        "first_seen_exact": r.first_seen_exact,
        "last_seen": r.last_seen,
    })
}

/// The inventory as a JSON value: `handlers` (see the fields above), `registry` — null
/// without `--registry`/`--database`, else `running_not_in_code` (registry rows: consumer,
/// kind, first_seen and last_seen in ms since the epoch, first_seen_exact),
/// `in_code_no_marker` and `in_code_never_seen` (handlers) — `skipped` (path, reason) and
/// `files_linted`.
pub fn inventory_to_json(inventory: &Inventory, join: Option<&RegistryJoin>) -> Value {
    json!({
        "handlers": inventory.handlers.iter().map(handler_json).collect::<Vec<_>>(),
        "registry": join.map(|j| json!({
            "running_not_in_code": j.running_not_in_code.iter().map(row_json).collect::<Vec<_>>(),
            "in_code_no_marker": j.in_code_no_marker.iter().map(handler_json).collect::<Vec<_>>(),
            "in_code_never_seen": j.in_code_never_seen.iter().map(handler_json).collect::<Vec<_>>(),
        })),
        "skipped": inventory.skipped.iter().map(|s| json!({
            "path": s.path.to_string_lossy(),
            "reason": s.reason,
        })).collect::<Vec<_>>(),
        "files_linted": inventory.files_linted,
    })
}
