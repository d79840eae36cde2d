//! One consumer as the gateway reports it.

use idem_sql::ConsumerReport;
use serde::Serialize;

/// One consumer as [`Gateway::consumers`](crate::Gateway::consumers) reports it: idem-sql's
/// [`ConsumerReport`] (serialized flat, its fields at the top level) with, for a gateway
/// destination, the age of its oldest due delivery.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ConsumerEntry {
    /// The registry's report, its windows, last seen and flags filled from the gateway's
    /// per-minute counts for the gateway's own consumers.
    #[serde(flatten)]
    pub report: ConsumerReport,
    /// A gateway destination's lag: how long its oldest due delivery has been due, in ms (0:
    /// none is due, or it fell due just now); `None` for every other kind of consumer, whose
    /// lag (messages behind) is the report's `lag`.
    pub delivery_lag_ms: Option<u64>,
}

impl From<ConsumerReport> for ConsumerEntry {
    /// A report of a consumer that is not the gateway's, as the registry has it.
    fn from(report: ConsumerReport) -> Self {
        Self {
            report,
            delivery_lag_ms: None,
        }
    }
}
