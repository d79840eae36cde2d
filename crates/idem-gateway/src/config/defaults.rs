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
/// How long a client may take to send a request's headers, without a configuration: 10 s, then
/// the connection is closed (a slow client holds no connection for ever).
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's body, without a configuration: 30 s, then
/// 408 and the connection is closed.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a request may wait for the database (a connection, then its statements), without a
/// configuration: 2 s, then 503 with `Retry-After` (so a sender with a 10 s timeout always
/// gets an answer).
pub const DEFAULT_DATABASE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest `/readyz` takes to answer, without a configuration: 1 s (a load balancer's
/// health check gives up after a few seconds).
pub const DEFAULT_READYZ_TIMEOUT: Duration = Duration::from_secs(1);
/// How long shutdown waits for open connections, without a configuration: 10 s, then they are
/// cut (every request answered 200 before is already durable).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The shortest of those deadlines.
pub(crate) const MIN_DEADLINE: Duration = Duration::from_millis(100);
/// The longest header or body read deadline and shutdown grace.
pub(crate) const MAX_DEADLINE: Duration = Duration::from_secs(3600);
/// The longest database and `/readyz` deadline.
pub(crate) const MAX_DATABASE_TIMEOUT: Duration = Duration::from_secs(60);
/// The smallest `max_body_bytes`: 1 KiB.
pub(crate) const MIN_MAX_BODY_BYTES: usize = 1024;

/// A destination's retry delays without a configuration: then the dead letter.
pub(crate) fn default_retry_schedule() -> Vec<Duration> {
    [5, 30, 300, 1800, 7200, 28_800, 86_400]
        .into_iter()
        .map(Duration::from_secs)
        .collect()
}
