//! A RabbitMQ queue as a source of deliveries: a consumer with a prefetch, the settlement its
//! sink decides after the store was written, and retries through retry queues or by requeue.

use std::fmt;
use std::sync::Arc;

use futures_util::StreamExt;
use lapin::message::Delivery as AmqpDelivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, BasicRejectOptions, ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

use crate::amqp::{amqp, as_i64, render};
use crate::{
    ConsumerError, Delivery, RetryTopology, Settle, Sink, X_DELIVERY_COUNT, X_IDEM_DELIVERY_COUNT,
};

/// The `broker` label of RabbitMQ deliveries.
pub(crate) const BROKER: &str = "rabbitmq";

/// How a [`RabbitMqSource`] delivers a message again after its sink said [`Settle::Retry`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RetryVia {
    /// A copy (same properties, `message_id`, body and headers, with
    /// [`X_IDEM_DELIVERY_COUNT`](crate::X_IDEM_DELIVERY_COUNT)) is published with publisher
    /// confirms to the topology's retry queue for the delivery count, which holds it for its TTL
    /// and dead-letters it back; the original is acknowledged only after the broker confirmed
    /// the copy (a crash in between leaves two copies: the second is a duplicate). The queues
    /// must be declared ([`RetryTopology::declare`]). What idem's consumers use.
    RetryQueues(RetryTopology),
    /// RabbitMQ has no delayed requeue: the delivery is held for the delay (it counts against
    /// the prefetch, which slows the source while its sink fails), then `basic.nack` with
    /// requeue; on shutdown, at once. For a queue the consumer does not own, with no retry
    /// queues beside it: what the gateway's RabbitMQ sources use.
    Requeue,
}

/// A consumer on one RabbitMQ queue, handing each delivery to a [`Sink`] and settling it as the
/// sink decides ([`Settle`]): `basic.ack`; a retry ([`RetryVia`]); or `basic.reject` without
/// requeue (the message goes to the queue's dead-letter exchange, if it has one).
pub struct RabbitMqSource {
    channel: Channel,
    queue: String,
    prefetch: u16,
    tag: String,
    retry: RetryVia,
}

impl fmt::Debug for RabbitMqSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RabbitMqSource")
            .field("queue", &self.queue)
            .field("prefetch", &self.prefetch)
            .field("tag", &self.tag)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl RabbitMqSource {
    /// A source consuming `queue` on `channel`, one delivery at a time, retrying `retry`'s way.
    /// The consumer tag is chosen by the broker.
    pub fn new(channel: Channel, queue: &str, retry: RetryVia) -> Self {
        Self {
            channel,
            queue: queue.to_owned(),
            prefetch: 1,
            tag: String::new(),
            retry,
        }
    }

    /// Sets how many deliveries are worked on at once: the channel's prefetch (`basic.qos`) and
    /// the number of concurrent sink calls; 1 to 65,535.
    pub fn prefetch(self, prefetch: u16) -> Self {
        Self {
            prefetch: prefetch.max(1),
            ..self
        }
    }

    /// Sets the consumer tag (shown by `rabbitmqctl list_consumers`).
    pub fn consumer_tag(self, tag: impl Into<String>) -> Self {
        Self {
            tag: tag.into(),
            ..self
        }
    }

    /// The channel.
    pub fn channel(&self) -> &Channel {
        &self.channel
    }

    /// Consumes until `shutdown` completes or the channel fails. On shutdown it cancels the
    /// subscription (`basic.cancel`: no new deliveries), lets the sink finish the deliveries it
    /// holds and settles them (a held requeue is settled at once), then returns `Ok(())`.
    ///
    /// # Errors
    /// [`ConsumerError::Amqp`] when confirm mode (with [`RetryVia::RetryQueues`]), `basic.qos`
    /// or `basic.consume` fails, or the subscription ends with an error (channel or connection
    /// closed); the deliveries in flight are finished first, and the broker redelivers every
    /// message that was not acknowledged.
    pub async fn run<K, S>(self, sink: K, shutdown: S) -> Result<(), ConsumerError>
    where
        K: Sink,
        S: Future<Output = ()> + Send,
    {
        if matches!(self.retry, RetryVia::RetryQueues(_)) {
            self.channel
                .confirm_select(ConfirmSelectOptions::default())
                .await
                .map_err(amqp("confirm.select"))?;
        }
        self.channel
            .basic_qos(self.prefetch, BasicQosOptions::default())
            .await
            .map_err(amqp("basic.qos"))?;
        let mut deliveries = self
            .channel
            .basic_consume(
                self.queue.as_str().into(),
                ShortString::from(self.tag.as_str()),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(amqp("basic.consume"))?;
        let tag = deliveries.tag();
        let slots = Arc::new(Semaphore::new(usize::from(self.prefetch)));
        let shared = Arc::new(Shared {
            channel: self.channel.clone(),
            queue: self.queue.clone(),
            retry: self.retry.clone(),
        });
        let (stop, stopped) = watch::channel(false);
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
                        let _ = stop.send(true);
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
                        sink.clone(),
                        Arc::clone(&shared),
                        delivery,
                        stopped.clone(),
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
        let _ = stop.send(true);
        while in_flight.join_next().await.is_some() {}
        result
    }
}

/// What every delivery task of one source needs.
struct Shared {
    channel: Channel,
    queue: String,
    retry: RetryVia,
}

/// Hands one delivery to `sink`, then settles it.
async fn handle<K: Sink>(
    sink: K,
    shared: Arc<Shared>,
    amqp_delivery: AmqpDelivery,
    mut stopped: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let delivered = delivered(&shared.retry, &amqp_delivery);
    let delivery = Arc::new(delivery_of(&shared.queue, &amqp_delivery, delivered));
    let acker = &amqp_delivery.acker;
    let settled = match sink.take(delivery, BROKER).await {
        Settle::Ack => acker.ack(BasicAckOptions::default()).await,
        Settle::Reject => acker.reject(BasicRejectOptions { requeue: false }).await,
        Settle::Retry { delay } => match &shared.retry {
            RetryVia::RetryQueues(topology) => {
                let queue = topology.queue_for(delivered);
                match publish_retry(&shared.channel, queue, &amqp_delivery, delivered).await {
                    Ok(()) => acker.ack(BasicAckOptions::default()).await,
                    Err(e) => {
                        // The copy may not exist: return the message to the queue instead (an
                        // immediate redelivery, counted by x-delivery-count) rather than
                        // acknowledging it.
                        sink.ack_failed(BROKER, &e);
                        acker.nack(requeue()).await
                    }
                }
            }
            RetryVia::Requeue => {
                if !*stopped.borrow() {
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        _ = stopped.wait_for(|stop| *stop) => {}
                    }
                }
                acker.nack(requeue()).await
            }
        },
    };
    if let Err(e) = settled {
        sink.ack_failed(BROKER, &e);
    }
}

fn requeue() -> BasicNackOptions {
    BasicNackOptions {
        requeue: true,
        ..BasicNackOptions::default()
    }
}

/// The number of this delivery (1 for the first): with retry queues, as
/// [`RetryTopology::delivered`] counts it; otherwise 1 + the quorum queue's `x-delivery-count`.
/// A redelivery on a queue that does not count is at least the second.
fn delivered(retry: &RetryVia, delivery: &AmqpDelivery) -> u32 {
    let headers = delivery.properties.headers().as_ref();
    let counted = match retry {
        RetryVia::RetryQueues(topology) => topology.delivered(headers),
        RetryVia::Requeue => {
            let returned = headers
                .and_then(|h| h.inner().get(X_DELIVERY_COUNT))
                .and_then(as_i64)
                .unwrap_or(0);
            u32::try_from(returned.max(0).saturating_add(1)).unwrap_or(u32::MAX)
        }
    };
    if delivery.redelivered {
        counted.max(2)
    } else {
        counted
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

/// The broker-neutral view of an AMQP delivery from `queue`.
fn delivery_of(queue: &str, delivery: &AmqpDelivery, delivered: u32) -> Delivery {
    let properties = &delivery.properties;
    let headers = properties
        .headers()
        .as_ref()
        .map(|h| {
            h.inner()
                .iter()
                .map(|(name, value)| (name.to_string(), render(value)))
                .collect()
        })
        .unwrap_or_default();
    let text = |value: &Option<ShortString>| value.as_ref().map(|s| s.as_str().to_owned());
    Delivery {
        destination: queue.to_owned(),
        message_id: text(properties.message_id()),
        headers,
        payload: bytes::Bytes::copy_from_slice(&delivery.data),
        delivered,
        message_type: text(properties.kind()),
        routing_key: Some(delivery.routing_key.as_str().to_owned()).filter(|k| !k.is_empty()),
        content_type: text(properties.content_type()),
        position: format!("queue {queue} delivery tag {}", delivery.delivery_tag),
    }
}
