//! A RabbitMQ consumer that acknowledges a message only after its transaction committed, with
//! retries through TTL'd retry queues and dead letters in idem's store: a [`RabbitMqSource`]
//! whose sink is a [`Processor`], retrying through a [`RetryTopology`].

use idem_sql::Backend;
use lapin::Channel;

use crate::{ConsumerError, DeliveryStats, Processor, RabbitMqSource, RetryTopology, RetryVia};

/// A RabbitMQ consumer running a [`Processor`] for each message of a quorum queue: claim +
/// handler + version guard + effects + outbox rows in one transaction, then `basic.ack` (C2).
/// Handler failures go through the [`RetryTopology`]'s retry queues; after N deliveries the
/// message becomes a dead letter in idem's store and is rejected without requeue (the main
/// queue the topology declares has no dead-letter exchange, so it is then gone).
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
        processor.register(idem_sql::ConsumerKind::Rabbitmq);
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
    /// and settles them, then returns `Ok(())`. Either way it then flushes the consumer
    /// registry's pending counts ([`Store::flush_consumer_counts`](idem_sql::Store::flush_consumer_counts),
    /// a failure logged); [`new`](Self::new) registers the consumer as
    /// [`ConsumerKind::Rabbitmq`](idem_sql::ConsumerKind::Rabbitmq).
    ///
    /// # Errors
    /// As [`RabbitMqSource::run`]: [`ConsumerError::Amqp`] when confirm mode, `basic.qos` or
    /// `basic.consume` fails, or the subscription ends with an error (channel or connection
    /// closed); in-flight messages are finished first, and the broker redelivers every message
    /// that was not acknowledged.
    pub async fn run<S>(self, shutdown: S) -> Result<(), ConsumerError>
    where
        S: Future<Output = ()> + Send,
    {
        let queue = self.topology.queue().to_owned();
        let processor = self.processor.clone();
        let result =
            RabbitMqSource::new(self.channel, &queue, RetryVia::RetryQueues(self.topology))
                .prefetch(self.concurrency)
                .run(self.processor, shutdown)
                .await;
        processor.flush_counts().await;
        result
    }
}
