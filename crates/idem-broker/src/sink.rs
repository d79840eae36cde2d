//! Where a broker source hands each delivery, and what it tells the broker afterwards: one
//! transport ([`JetStreamSource`](crate::JetStreamSource),
//! [`RabbitMqSource`](crate::RabbitMqSource)) under two sinks, the [`Processor`](crate::Processor)
//! of this crate's consumers and the gateway's group-commit ingest.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::Delivery;

/// How a source settles a delivery with the broker, once its sink has decided (after the
/// store was written: docs/design.md C2).
///
/// | settle | JetStream | RabbitMQ |
/// |---|---|---|
/// | `Ack` | ack | `basic.ack` |
/// | `Retry { delay }` | NAK with `delay` | a copy to a retry queue then `basic.ack`, or the delivery held for `delay` then `basic.nack` with requeue ([`RetryVia`](crate::RetryVia)) |
/// | `Reject` | TERM | `basic.reject` without requeue (to the queue's dead-letter exchange, if it has one) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Stored now, or before (a duplicate is a success, C3).
    Ack,
    /// Not stored: deliver it again after `delay`.
    Retry {
        /// The wait before the redelivery.
        delay: Duration,
    },
    /// Never to be stored (recorded as a dead letter first): do not deliver it again.
    Reject,
}

/// What a broker source hands its deliveries to. A sink stores each delivery (or records it as a
/// dead letter) before it returns, so that the source acknowledges only what is durable.
pub trait Sink: Clone + Send + Sync + 'static {
    /// Decides `delivery` (from broker `broker`: `jetstream` or `rabbitmq`) and says how to settle
    /// it. It may take long: a JetStream source sends in-progress acks meanwhile.
    fn take(
        &self,
        delivery: Arc<Delivery>,
        broker: &'static str,
    ) -> impl Future<Output = Settle> + Send;

    /// Called when the broker client could not send an acknowledgement (ack, NAK, TERM, a retry
    /// copy): the broker delivers the message again, and a sink that stored it answers the copy
    /// as a duplicate.
    fn ack_failed(&self, broker: &'static str, error: &dyn fmt::Display);

    /// Called with how many messages the broker still has for this consumer after a delivery
    /// (JetStream's `pending` from the message's metadata), for the consumer registry's lag.
    /// Does nothing unless the sink keeps it.
    fn report_lag(&self, pending: u64) {
        let _ = pending;
    }
}
