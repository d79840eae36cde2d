//! The errors of the Kafka consumer and publisher, with a [`kind`](KafkaError::kind) to decide on.

/// What went wrong setting up or running the Kafka consumer or publisher.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaError {
    /// A setting that cannot work: a topic name Kafka or idem's lease keys cannot hold, a lease
    /// ttl out of range, a renewal interval not below the ttl, a bad member id, no bootstrap
    /// broker.
    #[error("invalid Kafka configuration: {0}")]
    InvalidConfig(String),
    /// The Kafka client failed (cannot reach a bootstrap broker within the client's deadline,
    /// a broker refused the request).
    #[error("Kafka {operation} failed: {source}")]
    Client {
        /// What was being done, e.g. `metadata`.
        operation: &'static str,
        /// rskafka's error.
        #[source]
        source: rskafka::client::error::Error,
    },
    /// The topic does not exist on the cluster (Kafka's metadata does not list it).
    #[error("Kafka topic {topic:?} does not exist")]
    UnknownTopic {
        /// The topic.
        topic: String,
    },
    /// A partition the consumer was told to consume is not one of the topic's.
    #[error("Kafka topic {topic:?} has no partition {partition} (it has {count})")]
    UnknownPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// How many partitions the topic has.
        count: usize,
    },
    /// idem's store failed (the member lease, partition leases or offsets).
    #[error("store: {0}")]
    Store(#[from] idem_sql::Error),
}

/// What kind of failure a [`KafkaError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KafkaErrorKind {
    /// The configuration must change; retrying the same call fails the same way.
    InvalidConfig,
    /// The Kafka cluster could not be reached or refused the request; retrying later may work.
    Broker,
    /// The topic or partition does not exist; create it (or fix the name) first.
    UnknownTopic,
    /// idem's store failed; see [`idem_sql::Error::kind`] for whether a retry can work.
    Store,
}

impl KafkaError {
    /// The kind of failure; see [`KafkaErrorKind`].
    pub fn kind(&self) -> KafkaErrorKind {
        match self {
            Self::InvalidConfig(_) => KafkaErrorKind::InvalidConfig,
            Self::Client { .. } => KafkaErrorKind::Broker,
            Self::UnknownTopic { .. } | Self::UnknownPartition { .. } => {
                KafkaErrorKind::UnknownTopic
            }
            Self::Store(_) => KafkaErrorKind::Store,
        }
    }
}
