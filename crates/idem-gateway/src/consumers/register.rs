//! Registering the gateway's sources, destinations and Kafka cursors in idem's consumer
//! registry (`idem_consumers`), at start and after a reload.

use idem_sql::ConsumerKind;

use crate::config::{Broker, Config};
use crate::error::Error;
use crate::gateway::Gateway;
use crate::store::GatewayDb;

/// Every consumer `config` runs, with its kind: each source (`gateway_source`), the consumer
/// name of each Kafka source (`kafka`: the cursor its offsets are stored under) and each
/// destination (`gateway_destination`).
fn configured(config: &Config) -> Vec<(&idem_core::Name, ConsumerKind)> {
    let mut consumers = Vec::new();
    for source in &config.sources {
        consumers.push((&source.name, ConsumerKind::GatewaySource));
        if let Some(Broker::Kafka(kafka)) = source.broker() {
            consumers.push((&kafka.consumer, ConsumerKind::Kafka));
        }
    }
    for destination in &config.destinations {
        consumers.push((&destination.name, ConsumerKind::GatewayDestination));
    }
    consumers
}

impl<DB: GatewayDb> Gateway<DB> {
    /// Registers every consumer of the running configuration in idem's registry: each source
    /// (`gateway_source`), each Kafka source's consumer name (`kafka`) and each destination
    /// (`gateway_destination`); writes the rows now (upserts: a consumer seen before keeps its
    /// first seen, its last seen becomes now). Called by [`Server::start`](crate::Server::start) and after
    /// each applied reload; the counts themselves are never written here (they ride in
    /// ingest's and dispatch's commits, `idem_gateway_counts`).
    ///
    /// # Errors
    /// [`Error::Store`] when the rows cannot be written.
    pub async fn register_consumers(&self) -> Result<(), Error> {
        let config = self.config();
        for (name, kind) in configured(&config) {
            self.store().register_consumer(name, kind);
        }
        self.store().flush_consumer_counts().await?;
        Ok(())
    }
}
