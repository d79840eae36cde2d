//! A RabbitMQ source: a consumer on an existing queue, manual acks, prefetch =
//! `max_in_flight`.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicNackOptions, BasicQosOptions,
    BasicRejectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{Intake, Message, RECONNECT_DELAY, Verdict, pause, retry_delay, until_stopped};
use crate::config::RabbitMqSource;
use crate::fields::{AMQP_MESSAGE_ID, AMQP_ROUTING_KEY, AMQP_TYPE};
use crate::store::GatewayDb;

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The quorum-queue header counting earlier deliveries of a message (RabbitMQ 3.10+).
const DELIVERY_COUNT: &str = "x-delivery-count";

/// A connected RabbitMQ source.
pub(crate) struct Reader {
    settings: RabbitMqSource,
    tag: String,
    connection: Connection,
    channel: Channel,
    consumer: lapin::Consumer,
}

impl Reader {
    /// Connects, checks that the queue exists, and starts consuming it.
    ///
    /// # Errors
    /// The reason, as text naming the server or queue.
    pub(crate) async fn connect(source: &str, settings: RabbitMqSource) -> Result<Self, String> {
        let tag = format!("idem-gateway-{source}");
        let (connection, channel, consumer) = consume(&settings, &tag).await?;
        Ok(Self {
            settings,
            tag,
            connection,
            channel,
            consumer,
        })
    }

    /// Takes deliveries until `stopped`, at most `max_in_flight` at once (the prefetch); then
    /// cancels the consumer, finishes those in flight and closes the connection (deliveries
    /// not yet taken go back to the queue).
    pub(crate) async fn run<DB: GatewayDb>(
        mut self,
        intake: Intake<DB>,
        stopped: watch::Receiver<bool>,
    ) {
        let source = intake.source_name().to_string();
        let mut in_flight = JoinSet::new();
        // Waited on in the loop below, while `stopped` itself is lent to the tasks.
        let mut stop = stopped.clone();
        'connect: loop {
            loop {
                tokio::select! {
                    () = until_stopped(&mut stop) => break 'connect,
                    Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
                    next = self.consumer.next(), if in_flight.len() < self.settings.max_in_flight => {
                        match next {
                            Some(Ok(delivery)) => {
                                in_flight.spawn(take(
                                    intake.clone(),
                                    self.settings.queue.clone(),
                                    delivery,
                                    stopped.clone(),
                                ));
                            }
                            Some(Err(error)) => {
                                tracing::warn!(%source, %error, "RabbitMQ consumer failed; connecting again");
                                break;
                            }
                            None => {
                                tracing::warn!(%source, "RabbitMQ consumer ended; connecting again");
                                break;
                            }
                        }
                    }
                }
            }
            // Deliveries of the lost channel are requeued by the broker; their acks fail
            // (logged) and the copies are acked as duplicates.
            loop {
                if pause(RECONNECT_DELAY, &stopped).await {
                    break 'connect;
                }
                match consume(&self.settings, &self.tag).await {
                    Ok((connection, channel, consumer)) => {
                        let _ = self.connection.close(200, "reconnecting".into()).await;
                        self.connection = connection;
                        self.channel = channel;
                        self.consumer = consumer;
                        continue 'connect;
                    }
                    Err(error) => tracing::warn!(%source, %error, "cannot consume from RabbitMQ"),
                }
            }
        }
        let _ = self
            .channel
            .basic_cancel(self.tag.as_str().into(), BasicCancelOptions::default())
            .await;
        while in_flight.join_next().await.is_some() {}
        let _ = self
            .channel
            .close(200, "idem gateway stopping".into())
            .await;
        let _ = self
            .connection
            .close(200, "idem gateway stopping".into())
            .await;
    }
}

/// Connects and starts a consumer with tag `tag` on the queue of `settings`.
async fn consume(
    settings: &RabbitMqSource,
    tag: &str,
) -> Result<(Connection, Channel, lapin::Consumer), String> {
    let url = idem_sql::redact_url(settings.url.expose());
    let connection = tokio::time::timeout(
        CONNECT_TIMEOUT,
        Connection::connect(settings.url.expose(), ConnectionProperties::default()),
    )
    .await
    .map_err(|_| format!("cannot connect to RabbitMQ at {url}: no answer within 5s"))?
    .map_err(|e| format!("cannot connect to RabbitMQ at {url}: {e}"))?;
    let channel = connection
        .create_channel()
        .await
        .map_err(|e| format!("cannot open a RabbitMQ channel at {url}: {e}"))?;
    let prefetch = u16::try_from(settings.max_in_flight).unwrap_or(u16::MAX);
    channel
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .map_err(|e| format!("cannot set the prefetch count at {url}: {e}"))?;
    channel
        .queue_declare(
            settings.queue.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| {
            format!(
                "RabbitMQ queue {:?} cannot be read ({e}); the gateway never declares queues: declare it, or fix `queue`",
                settings.queue
            )
        })?;
    let consumer = channel
        .basic_consume(
            settings.queue.as_str().into(),
            tag.into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(|e| format!("cannot consume RabbitMQ queue {:?}: {e}", settings.queue))?;
    Ok((connection, channel, consumer))
}

/// A header value's text; `None` for values that are not text, a number or a boolean.
fn text(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok()?.to_owned(),
        AMQPValue::ShortString(s) => s.as_str().to_owned(),
        AMQPValue::Boolean(b) => b.to_string(),
        AMQPValue::ShortShortInt(n) => n.to_string(),
        AMQPValue::ShortShortUInt(n) => n.to_string(),
        AMQPValue::ShortInt(n) => n.to_string(),
        AMQPValue::ShortUInt(n) => n.to_string(),
        AMQPValue::LongInt(n) => n.to_string(),
        AMQPValue::LongUInt(n) => n.to_string(),
        AMQPValue::LongLongInt(n) => n.to_string(),
        AMQPValue::Timestamp(n) => n.to_string(),
        _ => return None,
    })
}

/// The application headers of `delivery` as HTTP headers, then its properties as
/// pseudo-headers ([`AMQP_MESSAGE_ID`], [`AMQP_TYPE`], [`AMQP_ROUTING_KEY`], `content-type`),
/// which win over application headers of the same name. Headers HTTP cannot carry are left out.
fn headers(delivery: &Delivery) -> HeaderMap {
    let mut map = HeaderMap::new();
    let properties = &delivery.properties;
    if let Some(table) = properties.headers() {
        for (name, value) in table.inner() {
            let (Ok(name), Some(value)) = (
                HeaderName::from_bytes(name.as_str().as_bytes()),
                text(value),
            ) else {
                continue;
            };
            if let Ok(value) = HeaderValue::from_str(&value) {
                map.append(name, value);
            }
        }
    }
    let mut set = |name: &'static str, value: Option<&str>| {
        if let Some(value) = value.and_then(|v| HeaderValue::from_str(v).ok()) {
            map.insert(HeaderName::from_static(name), value);
        }
    };
    set(
        AMQP_MESSAGE_ID,
        properties.message_id().as_ref().map(|s| s.as_str()),
    );
    set(AMQP_TYPE, properties.kind().as_ref().map(|s| s.as_str()));
    set(
        AMQP_ROUTING_KEY,
        Some(delivery.routing_key.as_str()).filter(|k| !k.is_empty()),
    );
    set(
        "content-type",
        properties.content_type().as_ref().map(|s| s.as_str()),
    );
    map
}

/// The delivery count of `delivery`, this one included: `x-delivery-count` + 1 on quorum
/// queues; otherwise 2 for a redelivery, 1 for a first delivery.
fn delivered(delivery: &Delivery) -> u64 {
    let count = delivery
        .properties
        .headers()
        .as_ref()
        .and_then(|t| t.inner().get(DELIVERY_COUNT))
        .and_then(text)
        .and_then(|t| t.parse::<u64>().ok());
    match count {
        Some(n) => n.saturating_add(1),
        None if delivery.redelivered => 2,
        None => 1,
    }
}

/// Takes one delivery and acks, requeues (after a delay) or rejects it.
async fn take<DB: GatewayDb>(
    intake: Intake<DB>,
    queue: String,
    delivery: Delivery,
    stopped: watch::Receiver<bool>,
) {
    let delivered = delivered(&delivery);
    let taken = Message {
        headers: headers(&delivery),
        body: delivery.data.clone().into(),
        position: format!("queue {queue} delivery tag {}", delivery.delivery_tag),
        origin: queue,
        delivered,
    };
    let verdict = intake.take(&taken).await;
    let acker = &delivery.acker;
    let done = match verdict {
        Verdict::Ack(_) => acker.ack(BasicAckOptions::default()).await,
        Verdict::Reject => acker.reject(BasicRejectOptions { requeue: false }).await,
        Verdict::Retry => {
            // RabbitMQ has no delayed requeue: hold the delivery for the delay (it counts
            // against the prefetch, which slows the source while the store is failing), then
            // requeue it. On shutdown it is requeued at once.
            pause(retry_delay(delivered), &stopped).await;
            acker
                .nack(BasicNackOptions {
                    requeue: true,
                    ..BasicNackOptions::default()
                })
                .await
        }
    };
    if let Err(error) = done {
        let source = intake.source_name();
        tracing::warn!(%source, position = %taken.position, %error, "ack to RabbitMQ failed; the message comes again");
    }
}
