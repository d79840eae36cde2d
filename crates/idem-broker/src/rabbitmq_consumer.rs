//! A RabbitMQ consumer that acknowledges a message only after its transaction committed, with
//! retries through TTL'd retry queues and dead letters in idem's store.
//!
//! RabbitMQ behaviour this relies on (RabbitMQ 3.10 docs):
//! - **quorum queues** (`x-queue-type: quorum`, <https://www.rabbitmq.com/quorum-queues.html>)
//!   count the deliveries of a message that were returned to the queue (consumer channel closed,
//!   nack or reject with requeue) and put that count in the **`x-delivery-count`** header of the
//!   next delivery (section "Poison Message Handling");
//! - a queue with **`x-message-ttl`** and a **dead-letter exchange** (`x-dead-letter-exchange`,
//!   `x-dead-letter-routing-key`, <https://www.rabbitmq.com/dlx.html>) republishes an expired
//!   message to that exchange and records the hop in the message's **`x-death`** header, one entry
//!   per (queue, reason) with a `count` of how often it happened;
//! - quorum queues since 3.10 dead-letter **at least once** with
//!   `x-dead-letter-strategy: at-least-once` and `x-overflow: reject-publish`
//!   (<https://www.rabbitmq.com/quorum-queues.html#dead-lettering>), so a message waiting in a
//!   retry queue is not lost on its way back.
//!
//! The retry path: when a delivery fails and may be retried, the consumer publishes a copy of the
//! message (same properties, `message_id`, body and headers, without `x-delivery-count`, with
//! [`X_IDEM_DELIVERY_COUNT`] set to the deliveries so far) to retry queue *i* with publisher
//! confirms, and acknowledges the original only after the broker
//! confirmed the copy; retry queue *i* holds it for `backoff[i]` (its `x-message-ttl`) and then
//! dead-letters it through the default exchange back to the main queue. A crash between the
//! confirm and the ack leaves two copies: the inbox answers the second as a duplicate.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use idem_sql::Backend;
use lapin::message::Delivery as AmqpDelivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::consumer::{
    ConsumerError, Delivery, DeliveryStats, Disposition, Processor, RetryPolicy,
};

const BROKER: &str = "rabbitmq";

/// The header quorum queues set on a redelivery: how many earlier deliveries were returned.
pub const X_DELIVERY_COUNT: &str = "x-delivery-count";
/// The header RabbitMQ adds when it dead-letters a message (here: when a retry copy expires).
pub const X_DEATH: &str = "x-death";
/// The header idem sets on each retry copy: how many deliveries of the message there were so far
/// (the failed one included). The delivery count does not rely on [`X_DEATH`] alone because
/// RabbitMQ 3.13.0 to 3.13.2 dropped the `x-death` header of messages republished by a client,
/// so a failing message was never seen to reach its limit and was retried forever
/// (<https://github.com/rabbitmq/rabbitmq-server/issues/11331>, fixed in 3.13.3 by
/// <https://github.com/rabbitmq/rabbitmq-server/pull/11339>).
pub const X_IDEM_DELIVERY_COUNT: &str = "x-idem-delivery-count";

/// The queues of one consumed queue: the main quorum queue and one retry queue per step of the
/// retry policy's backoff schedule, named `{queue}.retry.{i}` (i from 0), each holding messages
/// for `backoff[i]` and then dead-lettering them back to the main queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryTopology {
    queue: String,
    retry_queues: Vec<(String, Duration)>,
}

impl RetryTopology {
    /// The topology of `queue` under `policy`.
    ///
    /// # Errors
    /// [`ConsumerError::InvalidConfig`] when `queue` is empty or its retry queue names would pass
    /// AMQP's 255-byte limit for a queue name.
    pub fn new(queue: &str, policy: &RetryPolicy) -> Result<Self, ConsumerError> {
        let retry_queues: Vec<(String, Duration)> = policy
            .backoff()
            .iter()
            .enumerate()
            .map(|(i, delay)| (format!("{queue}.retry.{i}"), *delay))
            .collect();
        if queue.is_empty() || retry_queues.iter().any(|(name, _)| name.len() > 255) {
            return Err(ConsumerError::InvalidConfig(format!(
                "queue name {queue:?} must be 1 to ~240 bytes (its retry queues add `.retry.N`)"
            )));
        }
        Ok(Self {
            queue: queue.to_owned(),
            retry_queues,
        })
    }

    /// The main queue.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The retry queues with their hold times, in backoff order.
    pub fn retry_queues(&self) -> &[(String, Duration)] {
        &self.retry_queues
    }

    /// Declares the queues on `channel` (idempotent when they exist with the same arguments):
    /// the main queue durable with `x-queue-type: quorum`; each retry queue durable, quorum, with
    /// `x-message-ttl` = its hold time in ms, `x-dead-letter-exchange: ""` (the default exchange),
    /// `x-dead-letter-routing-key` = the main queue, `x-dead-letter-strategy: at-least-once` and
    /// `x-overflow: reject-publish`.
    ///
    /// Binding the main queue to the exchanges the application publishes to is left to the
    /// application.
    ///
    /// # Errors
    /// [`ConsumerError::Amqp`] (`queue.declare`), for example PRECONDITION_FAILED when a queue
    /// exists with other arguments (which also closes the channel).
    pub async fn declare(&self, channel: &Channel) -> Result<(), ConsumerError> {
        let durable = QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        };
        let mut main = FieldTable::default();
        main.insert("x-queue-type".into(), long_string("quorum"));
        channel
            .queue_declare(self.queue.as_str().into(), durable, main)
            .await
            .map_err(amqp("queue.declare"))?;
        for (name, hold) in &self.retry_queues {
            let mut args = FieldTable::default();
            args.insert("x-queue-type".into(), long_string("quorum"));
            let ttl = i64::try_from(hold.as_millis()).unwrap_or(i64::MAX);
            args.insert("x-message-ttl".into(), AMQPValue::LongLongInt(ttl));
            args.insert("x-dead-letter-exchange".into(), long_string(""));
            args.insert("x-dead-letter-routing-key".into(), long_string(&self.queue));
            args.insert(
                "x-dead-letter-strategy".into(),
                long_string("at-least-once"),
            );
            args.insert("x-overflow".into(), long_string("reject-publish"));
            channel
                .queue_declare(name.as_str().into(), durable, args)
                .await
                .map_err(amqp("queue.declare"))?;
        }
        Ok(())
    }

    /// The number of the delivery `headers` belong to (1 for the first): 1 + the quorum queue's
    /// `x-delivery-count` (returns in this pass through the main queue) + the deliveries of
    /// earlier passes, which is the larger of idem's [`X_IDEM_DELIVERY_COUNT`] (set on each retry
    /// copy) and the sum of the `count`s of the [`X_DEATH`] entries of this topology's retry
    /// queues (which RabbitMQ 3.13.0 to 3.13.2 lose, see [`X_IDEM_DELIVERY_COUNT`]).
    pub fn delivered(&self, headers: Option<&FieldTable>) -> u32 {
        let Some(headers) = headers else {
            return 1;
        };
        let returned = headers
            .inner()
            .get(X_DELIVERY_COUNT)
            .and_then(as_i64)
            .unwrap_or(0);
        let retried: i64 = match headers.inner().get(X_DEATH) {
            Some(AMQPValue::FieldArray(deaths)) => deaths
                .as_slice()
                .iter()
                .filter_map(|death| match death {
                    AMQPValue::FieldTable(t) => Some(t),
                    _ => None,
                })
                .filter(|t| {
                    t.inner()
                        .get("queue")
                        .and_then(as_text)
                        .is_some_and(|q| self.retry_queues.iter().any(|(name, _)| *name == q))
                })
                .filter_map(|t| t.inner().get("count").and_then(as_i64))
                .sum(),
            _ => 0,
        };
        let earlier = headers
            .inner()
            .get(X_IDEM_DELIVERY_COUNT)
            .and_then(as_i64)
            .unwrap_or(0)
            .max(retried);
        let total = 1i64
            .saturating_add(returned.max(0))
            .saturating_add(earlier.max(0));
        u32::try_from(total).unwrap_or(u32::MAX)
    }
}

/// A RabbitMQ consumer running a [`Processor`] for each message of a quorum queue: claim +
/// handler + version guard + effects + outbox rows in one transaction, then `basic.ack` (C2).
/// Handler failures go through the [`RetryTopology`]'s retry queues; after N deliveries the
/// message becomes a dead letter in idem's store and is acknowledged.
///
/// ```no_run
/// # async fn example(store: idem_sql::PgStore, processor: idem_broker::Processor<idem_sql::sqlx::Postgres>) -> Result<(), Box<dyn std::error::Error>> {
/// use idem_broker::RabbitMqConsumer;
///
/// let connection = lapin::Connection::connect(
///     "amqp://guest:guest@127.0.0.1:5672/%2f",
///     lapin::ConnectionProperties::default(),
/// )
/// .await?;
/// let channel = connection.create_channel().await?;
/// let consumer = RabbitMqConsumer::new(channel, "orders", processor)?.concurrency(8);
/// consumer.topology().declare(consumer.channel()).await?;
/// consumer.run(async { tokio::signal::ctrl_c().await.ok(); }).await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RabbitMqConsumer<DB: Backend> {
    channel: Channel,
    topology: RetryTopology,
    processor: Processor<DB>,
    concurrency: u16,
}

impl<DB: Backend> RabbitMqConsumer<DB> {
    /// A consumer of `queue` on `channel` (which it puts in confirm mode and sets the prefetch
    /// of), one message at a time, with the retry queues of `processor`'s retry policy.
    ///
    /// # Errors
    /// As [`RetryTopology::new`].
    pub fn new(
        channel: Channel,
        queue: &str,
        processor: Processor<DB>,
    ) -> Result<Self, ConsumerError> {
        let topology = RetryTopology::new(queue, processor.retry_policy())?;
        Ok(Self {
            channel,
            topology,
            processor,
            concurrency: 1,
        })
    }

    /// Sets how many messages are processed at once (each in its own transaction), which is
    /// also the channel's prefetch (`basic.qos`); 1 to 65,535.
    pub fn concurrency(self, concurrency: u16) -> Self {
        Self {
            concurrency: concurrency.max(1),
            ..self
        }
    }

    /// The queues this consumer reads and retries through; declare them with
    /// [`RetryTopology::declare`].
    pub fn topology(&self) -> &RetryTopology {
        &self.topology
    }

    /// The channel.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// The live delivery counters (the processor's).
    pub fn stats(&self) -> DeliveryStats {
        self.processor.stats()
    }

    /// Consumes until `shutdown` completes or the channel fails. On shutdown it cancels the
    /// subscription (`basic.cancel`: no new deliveries), finishes the messages already delivered
    /// and settles them, then returns `Ok(())`.
    ///
    /// # Errors
    /// [`ConsumerError::Amqp`] when confirm mode, `basic.qos` or `basic.consume` fails, or the
    /// subscription ends with an error (channel or connection closed); in-flight messages are
    /// finished first, and the broker redelivers every message that was not acknowledged.
    pub async fn run<S>(self, shutdown: S) -> Result<(), ConsumerError>
    where
        S: Future<Output = ()> + Send,
    {
        self.channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(amqp("confirm.select"))?;
        self.channel
            .basic_qos(self.concurrency, BasicQosOptions::default())
            .await
            .map_err(amqp("basic.qos"))?;
        let mut deliveries = self
            .channel
            .basic_consume(
                self.topology.queue.as_str().into(),
                ShortString::from(""),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(amqp("basic.consume"))?;
        let tag = deliveries.tag();
        let slots = Arc::new(Semaphore::new(usize::from(self.concurrency)));
        let topology = Arc::new(self.topology.clone());
        let mut in_flight = JoinSet::new();
        tokio::pin!(shutdown);
        let mut cancelled = false;
        let result = loop {
            let next = if cancelled {
                deliveries.next().await
            } else {
                tokio::select! {
                    next = deliveries.next() => next,
                    () = &mut shutdown => {
                        cancelled = true;
                        if let Err(e) = self.channel.basic_cancel(tag.clone(), BasicCancelOptions::default()).await {
                            break Err(ConsumerError::Amqp { operation: "basic.cancel", source: e });
                        }
                        continue;
                    }
                }
            };
            match next {
                Some(Ok(delivery)) => {
                    let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
                        break Ok(());
                    };
                    in_flight.spawn(handle(
                        self.processor.clone(),
                        self.channel.clone(),
                        Arc::clone(&topology),
                        delivery,
                        permit,
                    ));
                    while in_flight.try_join_next().is_some() {}
                }
                Some(Err(e)) => {
                    break Err(ConsumerError::Amqp {
                        operation: "basic.consume",
                        source: e,
                    });
                }
                None => break Ok(()),
            }
        };
        while in_flight.join_next().await.is_some() {}
        result
    }
}

/// Processes one delivery, then settles it: ack, or a confirmed copy to a retry queue and ack.
async fn handle<DB: Backend>(
    processor: Processor<DB>,
    channel: Channel,
    topology: Arc<RetryTopology>,
    amqp_delivery: AmqpDelivery,
    _permit: OwnedSemaphorePermit,
) {
    let delivered = topology.delivered(amqp_delivery.properties.headers().as_ref());
    let delivery = Arc::new(delivery_of(&topology, &amqp_delivery, delivered));
    let disposition = processor.process(Arc::clone(&delivery), BROKER).await;
    if let Disposition::Retry { .. } = disposition {
        let step = processor.retry_policy().step(delivered);
        let retry_queue = topology.retry_queues[step].0.as_str();
        if let Err(e) = publish_retry(&channel, retry_queue, &amqp_delivery, delivered).await {
            // The copy may not exist: return the message to the queue instead (an immediate
            // redelivery, counted by x-delivery-count) rather than acknowledging it.
            processor.ack_failed(BROKER, &e);
            let requeue = BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            };
            if let Err(e) = amqp_delivery.acker.nack(requeue).await {
                processor.ack_failed(BROKER, &e);
            }
            return;
        }
    }
    if let Err(e) = amqp_delivery.acker.ack(BasicAckOptions::default()).await {
        processor.ack_failed(BROKER, &e);
    }
}

/// Why a retry copy was not confirmed.
#[derive(Debug, thiserror::Error)]
enum RetryPublishError {
    #[error("publishing to retry queue {queue} failed: {source}")]
    Publish {
        queue: String,
        #[source]
        source: lapin::Error,
    },
    #[error("the broker did not confirm the copy in retry queue {queue} (nack or unroutable)")]
    NotConfirmed { queue: String },
}

/// Publishes a copy of `original`, its `delivered`-th delivery, to `retry_queue` through the
/// default exchange and waits for the publisher confirm.
async fn publish_retry(
    channel: &Channel,
    retry_queue: &str,
    original: &AmqpDelivery,
    delivered: u32,
) -> Result<(), RetryPublishError> {
    let publish_error = |source| RetryPublishError::Publish {
        queue: retry_queue.to_owned(),
        source,
    };
    let mut headers = original.properties.headers().clone().unwrap_or_default();
    let mut kept: std::collections::BTreeMap<ShortString, AMQPValue> = headers
        .inner()
        .iter()
        .filter(|(name, _)| name.as_str() != X_DELIVERY_COUNT)
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    kept.insert(
        X_IDEM_DELIVERY_COUNT.into(),
        AMQPValue::LongLongInt(i64::from(delivered)),
    );
    headers = FieldTable::from(kept);
    let properties: BasicProperties = original
        .properties
        .clone()
        .with_headers(headers)
        .with_delivery_mode(2);
    let confirm = channel
        .basic_publish(
            ShortString::from(""),
            retry_queue.into(),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            &original.data,
            properties,
        )
        .await
        .map_err(publish_error)?;
    let confirmation = confirm.await.map_err(publish_error)?;
    if confirmation.is_ack() && confirmation.take_message().is_none() {
        Ok(())
    } else {
        Err(RetryPublishError::NotConfirmed {
            queue: retry_queue.to_owned(),
        })
    }
}

/// The broker-neutral view of an AMQP delivery.
fn delivery_of(topology: &RetryTopology, delivery: &AmqpDelivery, delivered: u32) -> Delivery {
    let headers = delivery
        .properties
        .headers()
        .as_ref()
        .map(|h| {
            h.inner()
                .iter()
                .map(|(name, value)| (name.to_string(), render(value)))
                .collect()
        })
        .unwrap_or_default();
    Delivery {
        destination: topology.queue.clone(),
        message_id: delivery
            .properties
            .message_id()
            .as_ref()
            .map(|id| id.to_string()),
        headers,
        payload: bytes::Bytes::copy_from_slice(&delivery.data),
        delivered,
    }
}

/// A header value as text: strings as they are (bytes as lossy UTF-8), numbers and booleans in
/// decimal, anything else in its debug form.
fn render(value: &AMQPValue) -> String {
    if let Some(text) = as_text(value) {
        return text;
    }
    if let Some(n) = as_i64(value) {
        return n.to_string();
    }
    match value {
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::Float(f) => f.to_string(),
        AMQPValue::Double(f) => f.to_string(),
        other => format!("{other:?}"),
    }
}

fn as_text(value: &AMQPValue) -> Option<String> {
    match value {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

fn as_i64(value: &AMQPValue) -> Option<i64> {
    Some(match value {
        AMQPValue::ShortShortInt(n) => i64::from(*n),
        AMQPValue::ShortShortUInt(n) => i64::from(*n),
        AMQPValue::ShortInt(n) => i64::from(*n),
        AMQPValue::ShortUInt(n) => i64::from(*n),
        AMQPValue::LongInt(n) => i64::from(*n),
        AMQPValue::LongUInt(n) => i64::from(*n),
        AMQPValue::LongLongInt(n) => *n,
        AMQPValue::Timestamp(n) => i64::try_from(*n).ok()?,
        _ => return None,
    })
}

fn long_string(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

fn amqp(operation: &'static str) -> impl Fn(lapin::Error) -> ConsumerError {
    move |source| ConsumerError::Amqp { operation, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::FieldArray;

    fn death(queue: &str, count: i64) -> AMQPValue {
        let mut t = FieldTable::default();
        t.insert("queue".into(), long_string(queue));
        t.insert("reason".into(), long_string("expired"));
        t.insert("count".into(), AMQPValue::LongLongInt(count));
        AMQPValue::FieldTable(t)
    }

    #[test]
    fn delivery_number_adds_returns_and_retry_queue_passes() {
        let policy = RetryPolicy::new(
            5,
            vec![Duration::from_millis(100), Duration::from_millis(200)],
        )
        .unwrap();
        let topology = RetryTopology::new("orders", &policy).unwrap();
        assert_eq!(
            topology
                .retry_queues()
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>(),
            ["orders.retry.0", "orders.retry.1"]
        );
        assert_eq!(topology.delivered(None), 1, "first delivery");

        let mut headers = FieldTable::default();
        headers.insert(X_DELIVERY_COUNT.into(), AMQPValue::LongInt(2));
        assert_eq!(topology.delivered(Some(&headers)), 3, "returned twice");

        let mut deaths = FieldArray::default();
        deaths.push(death("orders.retry.1", 1));
        deaths.push(death("orders.retry.0", 3));
        // Another queue's dead-lettering is not one of this consumer's retries.
        deaths.push(death("elsewhere", 7));
        headers.insert(X_DEATH.into(), AMQPValue::FieldArray(deaths));
        assert_eq!(
            topology.delivered(Some(&headers)),
            7,
            "1 + 2 returns + 4 retries"
        );
    }

    /// RabbitMQ 3.13.0 to 3.13.2 drop `x-death` from a client's retry copy (rabbitmq-server
    /// issue 11331): idem's own count still says which delivery it is.
    #[test]
    fn delivery_number_from_idems_count_alone() {
        let policy = RetryPolicy::new(3, vec![Duration::from_millis(100)]).unwrap();
        let topology = RetryTopology::new("orders", &policy).unwrap();

        // The copy of the 2nd delivery, back from the retry queue without x-death: the 3rd,
        // the last allowed by N = 3.
        let mut headers = FieldTable::default();
        headers.insert(X_IDEM_DELIVERY_COUNT.into(), AMQPValue::LongLongInt(2));
        assert_eq!(topology.delivered(Some(&headers)), 3);
        assert!(policy.exhausted(topology.delivered(Some(&headers))));

        // Returned once to the main queue in this pass as well: the 4th.
        headers.insert(X_DELIVERY_COUNT.into(), AMQPValue::LongInt(1));
        assert_eq!(topology.delivered(Some(&headers)), 4);

        // Where both are present, the larger count of earlier deliveries wins: x-death says 5
        // passes through the retry queue, idem's header 2.
        let mut deaths = FieldArray::default();
        deaths.push(death("orders.retry.0", 5));
        headers.insert(X_DEATH.into(), AMQPValue::FieldArray(deaths));
        assert_eq!(
            topology.delivered(Some(&headers)),
            7,
            "1 + 1 return + 5 passes"
        );
    }

    #[test]
    fn header_values_render_as_text() {
        assert_eq!(render(&long_string("evt_1")), "evt_1");
        assert_eq!(render(&AMQPValue::LongInt(-3)), "-3");
        assert_eq!(render(&AMQPValue::Boolean(true)), "true");
    }
}
