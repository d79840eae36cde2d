//! The configuration's defaults and bounds: what a key is when it is not written, and the
//! range it must fall in.

use std::time::Duration;

/// Where the gateway listens without a configuration.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The database without a configuration: SQLite in `./idem-data`.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://./idem-data/idem.db";
/// How long keys are kept without a configuration: 30 days, past every sender's horizon.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The largest body accepted without a configuration: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// A destination's request timeout without a configuration.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The shortest timeout a destination may have.
pub(crate) const MIN_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest timeout a destination may have.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(3600);
/// How many deliveries a destination has in flight at most, without a configuration.
pub(crate) const DEFAULT_CONCURRENCY: usize = 8;
/// The most deliveries a destination may have in flight at once.
pub(crate) const MAX_CONCURRENCY: usize = 1024;
/// The longest delay a `Retry-After` may ask for, without a configuration.
pub(crate) const DEFAULT_RETRY_AFTER_CAP: Duration = Duration::from_secs(3600);
/// The longest delay of a retry schedule step or of `retry_after_cap`: 7 days.
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(7 * 86_400);
/// How often dispatchers look for due deliveries when nothing woke them.
pub(crate) const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest poll interval.
pub(crate) const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);
/// The smallest `max_body_bytes`: 1 KiB.
pub(crate) const MIN_MAX_BODY_BYTES: usize = 1024;

/// A destination's retry delays without a configuration: then the dead letter.
pub(crate) fn default_retry_schedule() -> Vec<Duration> {
    [5, 30, 300, 1800, 7200, 28_800, 86_400]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}
