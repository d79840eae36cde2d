//! The per-consumer gauges (`idem_consumer_lag`, `idem_consumer_seconds_since_last_seen`), set
//! from one read of the consumer inventory per monitor round. Read only: no background task
//! writes to the registry (the counts ride in the consumers' own commits).

use idem_sql::ListOptions;

use crate::error::Error;
use crate::gateway::Gateway;
use crate::metric_definitions::{CONSUMER_LAG, CONSUMER_SECONDS_SINCE_LAST_SEEN};
use crate::store::GatewayDb;

/// Reads every consumer's report now and sets its gauges.
///
/// # Errors
/// [`Error::Store`] when the registry cannot be read (the gauges keep their last values).
pub(super) async fn set<DB: GatewayDb>(gateway: &Gateway<DB>) -> Result<(), Error> {
    let now = gateway.now();
    for entry in gateway.consumers_seen(&ListOptions::at(now)).await? {
        let report = &entry.report;
        let consumer = report.name.clone();
        let lag = match (entry.delivery_lag_ms, report.lag) {
            (Some(ms), _) => Some(("seconds", ms as f64 / 1000.0)),
            (None, Some(lag)) => Some(("messages", lag.value as f64)),
            (None, None) => None,
        };
        if let Some((unit, value)) = lag {
            metrics::gauge!(CONSUMER_LAG, "consumer" => consumer.clone(), "unit" => unit)
                .set(value);
        }
        let unseen_ms = now.as_millis().saturating_sub(report.last_seen.as_millis());
        metrics::gauge!(CONSUMER_SECONDS_SINCE_LAST_SEEN, "consumer" => consumer)
            .set(unseen_ms.max(0) as f64 / 1000.0);
    }
    Ok(())
}
