//! A `kind = "nats"` destination: each attempt publishes the event to its JetStream subject with
//! idem-broker's [`JetStreamPublisher`], `Nats-Msg-Id` = the delivery's `webhook-id`. The
//! stream's duplicate window drops a resend of one delivery (a publish ack with
//! `duplicate: true`, counted as delivered); two destinations on one stream have different ids,
//! so each gets every event.

use std::time::Duration;

use async_nats::jetstream;
use idem_broker::{JetStreamPublisher, PublishOutcome, Publisher};
use idem_core::Timestamp;

use super::attempted::Attempted;
use super::message::{Message, delivered, failed};

/// How long connecting to the server may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How much longer than the destination's `timeout` the JetStream context waits for an ack:
/// the attempt's timeout always ends the wait first.
const ACK_WAIT_MARGIN: Duration = Duration::from_secs(1);

/// A connected NATS destination: one connection (async-nats reconnects it on its own), its
/// JetStream publisher and the subject.
pub(crate) struct NatsTarget {
    client: async_nats::Client,
    publisher: JetStreamPublisher,
    subject: String,
}

impl NatsTarget {
    /// Connects to `url` and checks that a stream takes `subject`; a publish's wait for its ack
    /// is cut at `timeout` by the attempt ([`ACK_WAIT_MARGIN`] before the client's own).
    ///
    /// # Errors
    /// The reason, naming the server or subject: the server cannot be reached, or no stream
    /// takes the subject.
    pub(super) async fn connect(
        url: &str,
        subject: &str,
        timeout: Duration,
    ) -> Result<Self, String> {
        let shown = idem_sql::redact_url(url);
        let client = async_nats::ConnectOptions::new()
            .name("idem-gateway destination")
            .connection_timeout(CONNECT_TIMEOUT)
            .connect(url)
            .await
            .map_err(|e| format!("cannot connect to NATS at {shown}: {e}"))?;
        let mut context = jetstream::new(client.clone());
        // The attempt's own timeout (transport.rs) cuts a publish at `timeout`. The context's
        // ack wait must not end at the same instant: whichever timer the runtime woke first
        // would word the failed attempt (a flaky excerpt under load), so it ends a second later.
        context.set_timeout(timeout.saturating_add(ACK_WAIT_MARGIN));
        match tokio::time::timeout(CONNECT_TIMEOUT, context.stream_by_subject(subject)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(format!(
                    "no JetStream stream takes subject {subject:?} at {shown} ({e}); create one whose subjects include it"
                ));
            }
            Err(_) => {
                return Err(format!(
                    "NATS at {shown} did not say within {CONNECT_TIMEOUT:?} which stream takes subject {subject:?}"
                ));
            }
        }
        Ok(Self {
            client,
            publisher: JetStreamPublisher::new(context),
            subject: subject.to_owned(),
        })
    }

    /// Publishes `message` and waits for the stream's ack.
    pub(super) async fn publish(&self, message: Message, now: Timestamp) -> Attempted {
        let row = match message.into_row(self.subject.clone(), now) {
            Ok(row) => row,
            Err(unsendable) => return unsendable,
        };
        match self
            .publisher
            .publish(std::slice::from_ref(&row))
            .await
            .pop()
        {
            Some(PublishOutcome::Published) => delivered(format!("published to {}", self.subject)),
            Some(PublishOutcome::Duplicate) => delivered(format!(
                "duplicate: the stream already holds Nats-Msg-Id {} (published before)",
                row.message_id.as_str()
            )),
            Some(
                PublishOutcome::Failed { reason }
                | PublishOutcome::Unavailable { reason }
                | PublishOutcome::RetryLater { reason, .. },
            ) => failed(&reason),
            None => failed("no publish outcome"),
        }
    }

    /// Sends what is buffered and closes the connection.
    pub(super) async fn close(&self) {
        if let Err(e) = self.client.drain().await {
            tracing::debug!(error = %e, "closing the NATS connection of a destination");
        }
    }
}
