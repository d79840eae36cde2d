//! How the reports' times and durations are serialized: plain numbers, so that `--json` output
//! is read by any tool.

use std::time::Duration;

use idem_core::Timestamp;
use serde::Serializer;

/// A time as milliseconds since the Unix epoch.
pub(crate) fn millis<S: Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64(t.as_millis())
}

/// A duration as whole seconds.
pub(crate) fn seconds<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_secs())
}
