//! A NATS JetStream pull consumer that acknowledges a message only after its transaction
//! committed: a [`JetStreamSource`] whose sink is a [`Processor`].

use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use idem_sql::Backend;

use crate::{ConsumerError, DeliveryStats, JetStreamSource, Processor};

/// A JetStream pull consumer running a [`Processor`] for each message: claim + handler + version
/// guard + effects + outbox rows in one transaction, then the acknowledgement (C2).
///
/// ```no_run
/// # async fn example(store: idem_sql::PgStore) -> Result<(), Box<dyn std::error::Error>> {
/// use idem_broker::{Delivery, JetStreamConsumer, Processor, RetryPolicy};
/// use idem_core::Name;
/// use idem_sql::{Runner, handler, sqlx};
/// use std::time::Duration;
///
/// let client = async_nats::connect("127.0.0.1:4222").await?;
/// let js = async_nats::jetstream::new(client);
/// let stream = js.get_stream("ORDERS").await?;
/// let pull = stream
///     .get_or_create_consumer(
///         "billing_v2",
///         async_nats::jetstream::consumer::pull::Config {
///             durable_name: Some("billing_v2".into()),
///             ack_wait: Duration::from_secs(30),
///             ..Default::default()
///         },
///     )
///     .await?;
/// let consumer = Name::new("consumer", "billing_v2")?;
/// let processor = Processor::new(
///     store.clone(),
///     Runner::new(store.clone(), &consumer),
///     Name::new("source", "orders")?,
///     handler!(async move |tx, delivery: &Delivery| {
///         sqlx::query("INSERT INTO invoices (order_json) VALUES ($1)")
///             .bind(&delivery.payload[..])
///             .execute(&mut *tx)
///             .await?;
///         Ok(())
///     }),
/// )
/// .retry(RetryPolicy::new(5, vec![Duration::from_secs(1), Duration::from_secs(30)])?);
/// JetStreamConsumer::new(pull, processor)?
///     .concurrency(8)
///     .run(async { tokio::signal::ctrl_c().await.ok(); })
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct JetStreamConsumer<DB: Backend> {
    source: JetStreamSource,
    processor: Processor<DB>,
}

impl<DB: Backend> JetStreamConsumer<DB> {
    /// A consumer of `pull` (a durable pull consumer with `AckPolicy::Explicit`, the default)
    /// running `processor`, one message at a time, sending in-progress acks every half of the
    /// consumer's ack_wait (read from `pull`'s cached info).
    ///
    /// # Errors
    /// [`ConsumerError::InvalidConfig`] when `pull`'s ack policy is not explicit (acknowledging
    /// after commit needs one acknowledgement per message).
    pub fn new(pull: PullConsumer, processor: Processor<DB>) -> Result<Self, ConsumerError> {
        processor.register(idem_sql::ConsumerKind::Jetstream);
        Ok(Self {
            source: JetStreamSource::new(pull)?,
            processor,
        })
    }

    /// Sets how many messages are processed at once (each in its own transaction); at least 1
    /// (see [`JetStreamSource::concurrency`]).
    pub fn concurrency(self, concurrency: usize) -> Self {
        Self {
            source: self.source.concurrency(concurrency),
            ..self
        }
    }

    /// Sets the period of in-progress acks sent while a handler runs, or `None` to send none;
    /// default half the consumer's ack_wait (see [`JetStreamSource::progress_interval`]).
    ///
    /// # Errors
    /// [`ConsumerError::InvalidConfig`] when the interval is zero or not below the consumer's
    /// ack_wait.
    pub fn progress_interval(self, interval: Option<Duration>) -> Result<Self, ConsumerError> {
        Ok(Self {
            source: self.source.progress_interval(interval)?,
            ..self
        })
    }

    /// The live delivery counters (the processor's).
    pub fn stats(&self) -> DeliveryStats {
        self.processor.stats()
    }

    /// Pulls and processes messages until `shutdown` completes or a pull fails; on shutdown it
    /// stops pulling, finishes the messages in flight and settles them (ack, NAK or TERM), then
    /// returns `Ok(())`. Either way it then flushes the consumer registry's pending counts
    /// ([`Store::flush_consumer_counts`](idem_sql::Store::flush_consumer_counts), a failure
    /// logged). [`new`](Self::new) registers the consumer as
    /// [`ConsumerKind::Jetstream`](idem_sql::ConsumerKind::Jetstream); each delivery reports
    /// the consumer's pending count as its lag.
    ///
    /// # Errors
    /// As [`JetStreamSource::run`]: [`ConsumerError::Deleted`] when the durable consumer or its
    /// stream was deleted, [`ConsumerError::Pull`] when a pull request cannot be made.
    pub async fn run<S>(self, shutdown: S) -> Result<(), ConsumerError>
    where
        S: Future<Output = ()> + Send,
    {
        let processor = self.processor.clone();
        let result = self.source.run(self.processor, shutdown).await;
        processor.flush_counts().await;
        result
    }
}
