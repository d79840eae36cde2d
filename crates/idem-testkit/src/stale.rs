//! Which test databases are left over from earlier runs: named `idem_test_{unix seconds}_{pid}…`
//! by this crate, on PostgreSQL and MySQL alike.

/// Test databases older than this (seconds) are dropped when a new one is made.
pub const STALE_AFTER_SECS: u64 = 900;

/// Whether the test database `name` was made more than [`STALE_AFTER_SECS`] before `now` (unix
/// seconds); `false` for a name of another form.
pub fn is_stale(name: &str, now: u64) -> bool {
    let created = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
    created.is_some_and(|t| t + STALE_AFTER_SECS < now)
}
