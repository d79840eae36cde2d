//! What the binary's tests share.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) use idem_testkit::downstream::Downstream;
pub(crate) use idem_testkit::pg_database;

/// The `idem` executable built for these tests.
pub(crate) const IDEM: &str = env!("CARGO_BIN_EXE_idem");

/// Now, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}
