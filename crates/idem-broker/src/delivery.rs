//! One arrival of a broker message, in a form that does not depend on the broker.

use bytes::Bytes;

/// One arrival of a broker message, as a [`Sink`](crate::Sink) (the [`Processor`](crate::Processor),
/// its decoder, handler and observer, or the gateway's ingest) sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// Where the message was consumed from (not where a relay sends messages, despite the name):
    /// JetStream, the message's subject (the subject it was published to and stored under);
    /// RabbitMQ, the name of the consumer's main queue (not the exchange or routing key it was
    /// published with, nor the retry queue a retried copy came back through).
    pub destination: String,
    /// The broker message id: JetStream `Nats-Msg-Id` header, AMQP `message_id` property.
    pub message_id: Option<String>,
    /// The headers as (name, value) text pairs (AMQP values other than strings rendered as
    /// text), in the order the client library gives them.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub payload: Bytes,
    /// Which delivery of this message this is, 1 for the first: JetStream's delivered count;
    /// for RabbitMQ computed from `x-delivery-count` and the retry path's counts
    /// ([`RetryTopology::delivered`](crate::RetryTopology::delivered)).
    pub delivered: u32,
    /// The AMQP `type` property; `None` on JetStream.
    pub message_type: Option<String>,
    /// The routing key a RabbitMQ message was published with; `None` on JetStream.
    pub routing_key: Option<String>,
    /// The AMQP `content_type` property; `None` on JetStream (a `Content-Type` header is in
    /// [`headers`](Self::headers)).
    pub content_type: Option<String>,
    /// Where the message sits in the broker, for log lines: `stream ORDERS sequence 12`,
    /// `queue billing delivery tag 5`.
    pub position: String,
}

impl Delivery {
    /// The first value of header `name` (compared ignoring ASCII case), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
