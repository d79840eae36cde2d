//! Broker sources: messages from a NATS JetStream stream, a RabbitMQ queue or a Kafka topic go
//! through the same durable ingest as webhooks (their dedup key `{dedup scope}:{message id}` claimed in the
//! inbox, the event and its deliveries stored in the group-commit transaction), and are
//! acknowledged to the broker only after that commit (docs/design.md C2):
//!
//! | outcome | NATS JetStream | RabbitMQ |
//! |---|---|---|
//! | stored now, or a duplicate (C3) | ack | ack |
//! | not stored: the database failed (C4) | NAK with a delay | requeue after a delay |
//! | can never be an event: no message id, unreadable body, oversize | dead-letter row, then term | dead-letter row, then reject (no requeue) |
//!
//! A message that can never be an event is written to idem's dead-letter table
//! (`idem dead-letters list --consumer idem-gateway`) with its headers, body (cut at
//! `max_body_bytes`: an oversize body's full length is in the reason) and the reason,
//! under the dedup key `{dedup scope}:{message id}` when it has an id (a copy that arrives again
//! updates that row: its headers, body, reason, delivery count and last failure time),
//! logged at WARN and counted in [`BROKER_REJECTED_TOTAL`]; only then is it terminated or
//! rejected. If that row cannot be written either, the message is retried like a store failure:
//! it is never dropped unrecorded.
//!
//! A Kafka source has no acks: its partition offsets are stored in the commit of the events
//! read before them, and a record that can never be an event is a dead letter written in that
//! same commit (see [`kafka`]).
//!
//! The dispatcher then forwards stored events to destinations exactly as it does webhooks.
//!
//! This module connects and runs the readers; what they share is in `intake`, so that they
//! never import this module.

mod intake;
pub(crate) mod kafka;
pub(crate) mod nats;
pub(crate) mod rabbitmq;

use tokio::sync::{mpsc, watch};

use crate::Error;
use crate::config::Broker;
use crate::gateway::Gateway;
use crate::ingest::unit::Pending;
use crate::store::GatewayDb;
use intake::Intake;

/// A broker source connected at start: its consumer exists and its queue or stream was found.
pub(crate) enum Connected {
    // Boxed: a JetStream consumer is large, and these live only until their task starts.
    Nats(Box<nats::Reader>),
    RabbitMq(Box<rabbitmq::Reader>),
    Kafka(Box<kafka::Reader>),
}

/// Connects broker source `index` of `gateway`: at start, so that a wrong URL, stream, queue
/// or consumer stops the gateway with a message naming it instead of failing quietly later.
///
/// # Errors
/// [`Error::Broker`] naming the source and what failed.
pub(crate) async fn connect<DB: GatewayDb>(
    gateway: &Gateway<DB>,
    index: usize,
) -> Result<Connected, Error> {
    let wiring = gateway.wiring();
    let source = wiring.source(index);
    let fail = |reason: String| Error::Broker {
        source_name: source.name.to_string(),
        reason,
    };
    match source.broker() {
        Some(Broker::Nats(settings)) => nats::Reader::connect(settings.clone())
            .await
            .map(|reader| Connected::Nats(Box::new(reader)))
            .map_err(fail),
        Some(Broker::RabbitMq(settings)) => {
            rabbitmq::Reader::connect(source.name.as_str(), settings.clone())
                .await
                .map(|reader| Connected::RabbitMq(Box::new(reader)))
                .map_err(fail)
        }
        Some(Broker::Kafka(settings)) => kafka::Reader::connect(settings.clone())
            .await
            .map(|reader| Connected::Kafka(Box::new(reader)))
            .map_err(fail),
        None => Err(fail("it is not a broker source".into())),
    }
}

/// Reads `connected` (source `index`) until `stopped` turns true; then stops taking messages,
/// finishes those in flight (stored and acknowledged, or handed back) and returns. Connection
/// failures are logged and retried.
///
/// # Errors
/// Why the reader stopped before `stopped`: its JetStream durable or stream was deleted.
pub(crate) async fn run<DB: GatewayDb>(
    gateway: Gateway<DB>,
    index: usize,
    queue: Option<mpsc::Sender<Pending>>,
    connected: Connected,
    stopped: watch::Receiver<bool>,
) -> Result<(), String> {
    let intake = Intake::new(gateway, queue, index, stopped.clone());
    match connected {
        Connected::Nats(reader) => reader.run(intake, stopped).await,
        Connected::RabbitMq(reader) => reader.run(intake, stopped).await,
        Connected::Kafka(reader) => reader.run(intake, stopped).await,
    }
}
