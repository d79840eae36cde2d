//! How a handler is reached: a webhook route, a broker consumer or a job.

use std::path::Path;

use crate::handlers::{reads_message, route_shaped, words_in};
use crate::ir::{Expr, Function, OpKind};
use crate::lang::MODULE;

/// How a handler is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HandlerRole {
    /// An HTTP route that receives webhooks.
    WebhookRoute,
    /// A broker consumer: a callback a Kafka, NATS, RabbitMQ or SQS client calls, or a loop
    /// that reads messages itself.
    BrokerConsumer,
    /// A job or task handler (Celery, Bull, a worker's job).
    Job,
}

impl HandlerRole {
    /// `webhook_route`, `broker_consumer` or `job`.
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerRole::WebhookRoute => "webhook_route",
            HandlerRole::BrokerConsumer => "broker_consumer",
            HandlerRole::Job => "job",
        }
    }
}

/// Words of a registration that name a broker's consumer API.
const BROKER_REGISTRATION: &[&str] = &[
    "eachmessage",
    "eachbatch",
    "consume",
    "subscribe",
    "listener",
    "onmessage",
    "jetstream",
    "kafka",
    "nats",
    "amqp",
    "rabbit",
    "sqs",
    "handlemessage",
    "on message",
];

/// Parameter types of broker callbacks.
const BROKER_TYPES: &[&str] = &[
    "consumermessage",
    "kafkamessage",
    "kafka.message",
    "natsmsg",
    "nats.msg",
    "jetstream.msg",
    "amqpdelivery",
    "amqp.delivery",
    "sqsevent",
    "pubsubmessage",
    "eachmessagepayload",
    "eachbatchpayload",
    "consumemessage",
    "jsmsg",
    "consumergroupsession",
    "aio_pika",
    "incomingmessage",
    "basicdeliver",
];

/// Words of a registration that name a job runner (Celery `@app.task`, Dramatiq `@actor`,
/// Bull `queue.process`, cron).
const JOB_REGISTRATION: &[&str] = &["task", "actor", "job", "cron", "schedul", ".process"];

/// The role of an event handler: a broker consumer when its registration, parameter types or
/// a message-reading loop say so; else a job when a job runner registers it; else a webhook
/// route when it is shaped as a route or lives in a webhook file; else a job when it takes a `job`,
/// else a broker consumer (an event handler reached by its name or parameters).
pub(crate) fn role(f: &Function, path: &Path) -> HandlerRole {
    let regs = f.registrations.join(" ");
    let types = f.param_types.join(" ");
    let reads_loop = f.ops.iter().any(
        |op| matches!(&op.kind, OpKind::Assign { value: Expr::Call(c), .. } if reads_message(c)),
    );
    if f.name == MODULE
        || reads_loop
        || words_in(&regs, BROKER_REGISTRATION)
        || words_in(&types, BROKER_TYPES)
    {
        return HandlerRole::BrokerConsumer;
    }
    if words_in(&regs, JOB_REGISTRATION) {
        return HandlerRole::Job;
    }
    let webhook_file = path.to_string_lossy().to_lowercase().contains("webhook");
    if route_shaped(f, path) || webhook_file {
        return HandlerRole::WebhookRoute;
    }
    if f.params.iter().any(|p| p.eq_ignore_ascii_case("job")) {
        HandlerRole::Job
    } else {
        HandlerRole::BrokerConsumer
    }
}
