//! Retries through TTL'd retry queues: the topology a [`RabbitMqSource`](crate::RabbitMqSource)
//! retries through with [`RetryVia::RetryQueues`](crate::RetryVia), and the delivery count it
//! reads from a message's headers.
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

use std::time::Duration;

use lapin::Channel;
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable};

use crate::amqp::{amqp, as_i64, as_text, long_string};
use crate::{ConsumerError, RetryPolicy};

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

    /// The retry queue a failed `delivered`-th delivery (1-based) waits in: the policy's backoff
    /// step for that delivery, the last one repeating.
    pub(crate) fn queue_for(&self, delivered: u32) -> &str {
        let step = (delivered.max(1) as usize - 1).min(self.retry_queues.len().saturating_sub(1));
        self.retry_queues[step].0.as_str()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RetryPolicy;
    use crate::amqp::long_string;
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
}
