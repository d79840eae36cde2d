//! The metrics this crate records (through the `metrics` facade), defined once here.

/// Counter of requests the layer handled, by `outcome`:
/// - `executed`: the handler ran and its response was stored (in transactional mode: committed
///   with the claim and the handler's writes);
/// - `replayed`: a stored response was sent again (a duplicate: a success, docs/design.md C3);
/// - `released`: the handler ran and the claim was released (5xx, transient 4xx, panic, error;
///   in transactional mode, rolled back with the handler's writes);
/// - `in_progress`: 409, the first request with the key is still running (transactional mode
///   on SQLite waits instead, so it counts the outcome it then sees);
/// - `mismatch`: 422, the key was used for another request;
/// - `rejected`: refused before the store was asked (key, principal or body problems);
/// - `passthrough`: no key on a method where it is optional;
/// - `unrecorded`: the handler ran but its response could not be stored (fenced or store
///   failure): a retry after the lease may run it again;
/// - `store_error`: the store failed (503): before the handler ran or, in transactional mode,
///   at the commit, which was then rolled back.
pub const REQUESTS_TOTAL: &str = "idem_idempotency_requests_total";
