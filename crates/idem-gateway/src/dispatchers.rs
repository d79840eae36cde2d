//! Starting a destination's dispatcher: its HTTP client, its transport (connected first, so
//! that a wrong broker destination is named before anything runs) and its supervised task. The
//! server starts one per destination; a reload starts those of the destinations it adds or
//! changes.

use std::sync::Arc;

use crate::config::Destination;
use crate::dispatch::{self, Transport};
use crate::error::{Error, Task};
use crate::gateway::Gateway;
use crate::lanes::Lane;
use crate::store::GatewayDb;
use crate::supervise::Supervisor;

/// The `User-Agent` of every request to a destination: `idem/` and the version.
pub const USER_AGENT: &str = concat!("idem/", env!("CARGO_PKG_VERSION"));

/// The transport of each of `destinations`, in order, each over its HTTP client: one client
/// (one connection pool) shared by the destinations without TLS settings, one of its own for
/// each destination with them. Broker destinations connect here, so that an unreachable server
/// or a missing stream, exchange or topic is named before anything starts; on an error the
/// transports already connected are closed.
///
/// # Errors
/// [`Error::Io`] when a client cannot be built; [`Error::Destination`] when a destination
/// cannot connect.
pub(crate) async fn connect(destinations: &[&Destination]) -> Result<Vec<Transport>, Error> {
    let shared = client(
        "building the HTTP client".into(),
        crate::tls::default_client_builder(),
    )?;
    let mut transports = Vec::new();
    for destination in destinations.iter().copied() {
        let connected = connect_one(destination, &shared).await;
        match connected {
            Ok(transport) => transports.push(transport),
            Err(e) => {
                for transport in transports {
                    transport.close().await;
                }
                return Err(e);
            }
        }
    }
    Ok(transports)
}

async fn connect_one(
    destination: &Destination,
    shared: &reqwest::Client,
) -> Result<Transport, Error> {
    let http = match &destination.tls {
        None => shared.clone(),
        Some(tls) => client(
            format!(
                "building the HTTP client of destination {:?}",
                destination.name.as_str()
            ),
            tls.client_builder(),
        )?,
    };
    Transport::connect(destination, http)
        .await
        .map_err(|reason| Error::Destination {
            destination: destination.name.to_string(),
            reason,
        })
}

fn client(what: String, builder: reqwest::ClientBuilder) -> Result<reqwest::Client, Error> {
    builder
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| Error::Io {
            what,
            source: std::io::Error::other(e),
        })
}

/// Starts the supervised dispatcher of `lane`'s destination over `transport`.
pub(crate) fn start<DB: GatewayDb>(
    supervisor: &Supervisor<DB>,
    gateway: &Gateway<DB>,
    lane: Arc<Lane>,
    transport: Transport,
) {
    let task = Task::Dispatcher {
        destination: lane.destination().name.to_string(),
    };
    let gateway = gateway.clone();
    supervisor.start(task, move |stopped| async move {
        dispatch::run(gateway, lane, transport, stopped).await;
        Ok(())
    });
}
