//! A handler's consumer name as the code gives it: an idem name literal
//! (`Name::new("consumer", "billing_v1")`), else the name its registration gives the broker's
//! consumer — a Kafka group id, a NATS durable or queue group, a RabbitMQ queue.

use crate::handlers::reads_message;
use crate::ir::{Call, Expr, Function, Module, OpKind};
use crate::words::norm;

/// Where a handler's consumer name was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameSource {
    /// An `[[inventory.names]]` entry of the config file.
    Config,
    /// An idem name literal in the handler or its file: `Name::new("consumer", "billing_v1")`,
    /// `Name("consumer", "billing_v1")`.
    Idem,
    /// The registration: a Kafka group id, a NATS durable or queue group, a RabbitMQ queue.
    Registration,
}

impl NameSource {
    /// `config`, `idem` or `registration`.
    pub fn as_str(self) -> &'static str {
        match self {
            NameSource::Config => "config",
            NameSource::Idem => "idem",
            NameSource::Registration => "registration",
        }
    }
}

/// A handler's consumer name and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerName {
    /// The name as written (`billing_v1`, `payments-group`).
    pub name: String,
    /// Where it was found.
    pub source: NameSource,
}

/// Option keys (object fields, keyword arguments, struct fields) that name a consumer,
/// normalised: kafkajs `groupId`, kafka-python `group_id`, librdkafka `group.id`, kafka-go
/// `GroupID`, NATS `durable` / `durable_name` / `queue`, `consumer_name`.
const NAME_KEYS: &[&str] = &[
    "groupid",
    "durable",
    "durablename",
    "queue",
    // Spring's `@RabbitListener(queues = "payments")`.
    "queues",
    "queuegroup",
    "consumer",
    "consumername",
];

/// The name of the handler's consumer: an idem name literal in the handler (helpers inlined:
/// `judged`) or its file's top level, else one from the calls that register it or make the
/// client it reads from.
pub(super) fn find(module: &Module, func: &Function, judged: &Function) -> Option<ConsumerName> {
    let idem = calls_of(judged)
        .chain(module.top_calls.iter())
        .chain(module.globals.iter().filter_map(|(_, v)| match v {
            Expr::Call(c) => Some(&**c),
            _ => None,
        }))
        .find_map(idem_name);
    if let Some(name) = idem {
        return Some(ConsumerName {
            name,
            source: NameSource::Idem,
        });
    }
    registering_calls(module, func)
        .into_iter()
        .find_map(|(call, home)| registration_name(module, home, call))
        .map(|name| ConsumerName {
            name,
            source: NameSource::Registration,
        })
}

/// Every call of a function: statements' calls and calls whose result is assigned.
fn calls_of(f: &Function) -> impl Iterator<Item = &Call> {
    f.ops.iter().filter_map(|op| match &op.kind {
        OpKind::Call(c) => Some(c),
        OpKind::Assign {
            value: Expr::Call(c),
            ..
        } => Some(&**c),
        _ => None,
    })
}

/// `Name::new("consumer", "x")`, `Name("consumer", "x")`, `new Name("consumer", "x")`,
/// `idem.NewName("consumer", "x")`: the second argument.
fn idem_name(c: &Call) -> Option<String> {
    let method = norm(&c.method());
    let named = matches!(method.as_str(), "name" | "newname")
        || method == "new" && c.receiver_words().last().is_some_and(|r| r == "name");
    match (named, c.args.first(), c.args.get(1)) {
        (true, Some(Expr::Str(kind)), Some(Expr::Str(name))) if kind == "consumer" => {
            Some(name.clone())
        }
        _ => None,
    }
}

/// The calls that register `func` or make the client it reads from, each with the function
/// it is written in (`None`: the file's top level).
fn registering_calls<'m>(
    module: &'m Module,
    func: &'m Function,
) -> Vec<(&'m Call, Option<&'m Function>)> {
    let everywhere = module.top_calls.iter().map(|c| (c, None)).chain(
        module
            .functions
            .iter()
            .flat_map(|f| calls_of(f).map(move |c| (c, Some(f)))),
    );
    let mut out: Vec<(&Call, Option<&Function>)> = everywhere
        .filter(|(c, _)| {
            func.registered_at == Some(c.pos)
                || !func.name.is_empty() && passes_function(c, &func.name)
        })
        .collect();
    // A loop that reads messages itself: the client it reads from is made by the call that
    // names the consumer (`kafka.NewReader(kafka.ReaderConfig{GroupID: …})`).
    for c in calls_of(func).filter(|c| reads_message(c)) {
        out.push((c, Some(func)));
    }
    // A script or function that makes its consumer itself (`consumer = KafkaConsumer("t",
    // group_id="g")`, then `for message in consumer`).
    for op in &func.ops {
        if let OpKind::Assign {
            value: Expr::Call(c),
            ..
        } = &op.kind
            && norm(&c.name()).contains("consumer")
        {
            out.push((&**c, Some(func)));
        }
    }
    out
}

/// Whether the call is given the function `name` as a value (an argument, a keyword argument
/// or an object field: `on_message_callback=handle`, `{ eachMessage: handle }`).
fn passes_function(c: &Call, name: &str) -> bool {
    let is_fn = |e: &Expr| matches!(e, Expr::Path(p) if p.last().is_some_and(|l| l == name));
    c.args
        .iter()
        .chain(c.kwargs.iter().map(|(_, v)| v))
        .any(|a| {
            is_fn(a)
                || matches!(a, Expr::Object { fields, .. } if fields.iter().any(|(_, v)| is_fn(v)))
        })
}

/// The consumer name a registering call gives: its own options and arguments, else those of
/// the call that made its receiver (`consumer.run(…)` on `kafka.consumer({ groupId })`).
fn registration_name(module: &Module, home: Option<&Function>, call: &Call) -> Option<String> {
    named_by(module, call).or_else(|| {
        let root = call.callee.first()?;
        (call.callee.len() > 1)
            .then(|| made_by(module, home, root))
            .flatten()
            .and_then(|maker| named_by(module, maker))
    })
}

/// The call whose result the variable `root` holds, in the function or at the top level.
fn made_by<'m>(module: &'m Module, home: Option<&'m Function>, root: &str) -> Option<&'m Call> {
    let local = home
        .into_iter()
        .flat_map(|f| f.ops.iter())
        .rev()
        .find_map(|op| match &op.kind {
            OpKind::Assign {
                targets,
                value: Expr::Call(c),
                ..
            } if targets.first().is_some_and(|t| t == root) => Some(&**c),
            _ => None,
        });
    local.or_else(|| {
        module.globals.iter().rev().find_map(|(name, v)| match v {
            Expr::Call(c) if name == root => Some(&**c),
            _ => None,
        })
    })
}

/// The name a call gives its consumer: an option key of [`NAME_KEYS`] anywhere in its
/// arguments, a `nats.Durable("x")` option, a RabbitMQ `consume("queue", …)`, a NATS
/// `QueueSubscribe(subject, "group", …)` or a sarama `NewConsumerGroup(addrs, "group", …)`.
fn named_by(module: &Module, call: &Call) -> Option<String> {
    let method = norm(&call.method());
    let text = |e: &Expr| literal(module, e);
    let positional = match method.as_str() {
        "consume" | "basicconsume" => call.args.first().and_then(text),
        "queuesubscribe" | "queuesubscribesync" => call.args.get(1).and_then(text),
        m if m.contains("consumergroup") => call.args.iter().find_map(text),
        _ => None,
    };
    if positional.is_some() {
        return positional;
    }
    let keyed = call
        .kwargs
        .iter()
        .find(|(k, _)| NAME_KEYS.contains(&norm(k).as_str()))
        .and_then(|(_, v)| text(v));
    keyed.or_else(|| call.args.iter().find_map(|a| in_options(module, a)))
}

/// A name inside an argument: an object's (or struct literal's) field of [`NAME_KEYS`], or a
/// `Durable("x")` option call, searched depth first.
fn in_options(module: &Module, e: &Expr) -> Option<String> {
    let mut found = None;
    e.walk(&mut |inner| {
        if found.is_some() {
            return;
        }
        match inner {
            Expr::Object { fields, .. } => {
                found = fields
                    .iter()
                    .find(|(k, _)| NAME_KEYS.contains(&norm(k).as_str()))
                    .and_then(|(_, v)| literal(module, v));
            }
            Expr::Call(c) if matches!(norm(&c.method()).as_str(), "durable") => {
                found = c.args.iter().find_map(|a| literal(module, a));
            }
            _ => {}
        }
    });
    found
}

/// A string literal, or a top-level constant holding one.
fn literal(module: &Module, e: &Expr) -> Option<String> {
    match e {
        Expr::Str(s) if !s.is_empty() => Some(s.clone()),
        Expr::Path(p) if p.len() == 1 => module.globals.iter().find_map(|(name, v)| match v {
            Expr::Str(s) if name == &p[0] && !s.is_empty() => Some(s.clone()),
            _ => None,
        }),
        _ => None,
    }
}
