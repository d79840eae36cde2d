//! A `kind = "rabbitmq"` destination: each attempt publishes the event to its exchange with
//! idem-broker's [`RabbitMqPublisher`] (a confirm-mode channel, `mandatory`, persistent), AMQP
//! `message_id` = the delivery's `webhook-id`. A message no queue takes (returned), a nack or a
//! lost confirm is a failed attempt naming the reason. RabbitMQ does not deduplicate: a resend
//! is a second message with the same `message_id`.

use std::time::Duration;

use idem_broker::{PublishOutcome, Publisher, RabbitMqPublisher};
use idem_core::Timestamp;
use lapin::options::ExchangeDeclareOptions;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties, ExchangeKind};

use super::attempted::Attempted;
use super::message::{Message, delivered, failed};

/// How long connecting and checking the exchange may take at start.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected RabbitMQ destination: one connection (opened again by the publisher when lost),
/// the exchange and the routing key.
pub(crate) struct RabbitMqTarget {
    publisher: RabbitMqPublisher,
    exchange: String,
    routing_key: Option<String>,
}

impl RabbitMqTarget {
    /// Checks that `exchange` exists at `url` (a passive declare, on a connection closed
    /// afterwards), then connects the publisher.
    ///
    /// # Errors
    /// The reason, naming the server or exchange.
    pub(super) async fn connect(
        url: &str,
        exchange: &str,
        routing_key: Option<&str>,
    ) -> Result<Self, String> {
        let shown = idem_sql::redact_url(url);
        let late = || format!("no answer from RabbitMQ at {shown} within {CONNECT_TIMEOUT:?}");
        tokio::time::timeout(CONNECT_TIMEOUT, check_exchange(url, exchange, &shown))
            .await
            .map_err(|_| late())??;
        let publisher = tokio::time::timeout(CONNECT_TIMEOUT, RabbitMqPublisher::connect(url))
            .await
            .map_err(|_| late())?
            .map_err(|e| format!("cannot connect to RabbitMQ at {shown}: {e}"))?;
        Ok(Self {
            publisher,
            exchange: exchange.to_owned(),
            routing_key: routing_key.map(str::to_owned),
        })
    }

    /// Publishes `message` and waits for the broker's confirm.
    pub(super) async fn publish(&self, message: Message, now: Timestamp) -> Attempted {
        // The configured key, else the event's type, else the source's name (an event without
        // a type); a routing key may hold any text, '/' included (split off at the first).
        let routing_key = self
            .routing_key
            .clone()
            .or_else(|| message.event_type.clone())
            .unwrap_or_else(|| message.source.clone());
        let to = format!("{}/{routing_key}", self.exchange);
        let row = match message.into_row(to, now) {
            Ok(row) => row,
            Err(unsendable) => return unsendable,
        };
        match self
            .publisher
            .publish(std::slice::from_ref(&row))
            .await
            .pop()
        {
            Some(PublishOutcome::Published | PublishOutcome::Duplicate) => delivered(format!(
                "confirmed by the broker: exchange {}, routing key {routing_key}",
                self.exchange
            )),
            Some(PublishOutcome::Unavailable { reason }) => {
                failed(&format!("RabbitMQ unreachable: {reason}"))
            }
            Some(PublishOutcome::Failed { reason } | PublishOutcome::RetryLater { reason, .. }) => {
                failed(&reason)
            }
            None => failed("no publish outcome"),
        }
    }

    /// Closes the connection.
    pub(super) async fn close(&self) {
        if let Err(e) = self.publisher.close().await {
            tracing::debug!(error = %e, "closing the RabbitMQ connection of a destination");
        }
    }
}

/// Declares `exchange` passively on a connection of its own to `url`: it must exist.
async fn check_exchange(url: &str, exchange: &str, shown: &str) -> Result<(), String> {
    let connection = Connection::connect(url, ConnectionProperties::default())
        .await
        .map_err(|e| format!("cannot connect to RabbitMQ at {shown}: {e}"))?;
    let checked = async {
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel at {shown}: {e}"))?;
        channel
            .exchange_declare(
                exchange.into(),
                // Not compared by a passive declare.
                ExchangeKind::Direct,
                ExchangeDeclareOptions {
                    passive: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                format!("exchange {exchange:?} does not exist at {shown} ({e}); declare it first")
            })
    }
    .await;
    let _ = connection.close(200, "checked".into()).await;
    checked
}
