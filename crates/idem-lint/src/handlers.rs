//! Which functions handle events: webhook routes, broker consumer callbacks, jobs and the
//! helpers they call. Checks about redelivery look only at those (and, for dual writes, at
//! every HTTP route), so ordinary repository code stays quiet.

use std::collections::HashSet;
use std::path::Path;

use crate::ir::{Expr, Function, HandlerKind, Module, OpKind};
use crate::lang::MODULE;
use crate::words::{has_any, norm};

/// Words of a registration (route path, decorator, registering call) that mean "events".
const EVENT_REGISTRATION: &[&str] = &[
    "webhook",
    "hook",
    "callback",
    // Payment providers' notification routes: SePay's `receiver`, PayPal's and VNPay's `ipn`.
    "receiver",
    "ipn",
    // A route that takes in pushed events (`/ingest/{source}`).
    "ingest",
    "notify",
    "notification",
    "events",
    "stripe",
    "github",
    // Slack's event, command and interactivity deliveries (`post<Slack.Action>`).
    "slack",
    "eachmessage",
    "eachbatch",
    "consume",
    "subscribe",
    "subscriber",
    "listener",
    "onmessage",
    "eventpattern",
    "messagepattern",
    "task",
    "actor",
    "agent",
    "kafkalistener",
    "sqslistener",
    "rabbitlistener",
    "worker",
    "process",
    "jetstream",
    "handlemessage",
    "on message",
];

/// Parameter types of consumer and webhook callbacks (Go, Python annotations, TypeScript).
const EVENT_TYPES: &[&str] = &[
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
    "stripeevent",
    "stripe.event",
    "eachmessagepayload",
    "eachbatchpayload",
    "consumemessage",
    "jsmsg",
    "webhookevent",
    "consumergroupsession",
    "aio_pika",
    "incomingmessage",
    "cloudevent",
    "basicdeliver",
    "asynq.task",
    // Spring Kafka and Spring AMQP listener parameters.
    "consumerrecord",
    "acknowledgment",
];

/// Parameter names that carry an event or message.
const EVENT_PARAMS: &[&str] = &[
    "event",
    "evt",
    "message",
    "msg",
    "delivery",
    "record",
    "webhook",
    "notification",
    "payload",
    "envelope",
    "job",
];

/// Names of functions that handle events.
const EVENT_NAMES: &[&str] = &[
    "webhook",
    "consume",
    "onmessage",
    "handlemessage",
    "processmessage",
    "handleevent",
    "processevent",
    "eventhandler",
    "messagehandler",
    "onevent",
    "handledelivery",
    "eachmessage",
    "eachbatch",
    "handlerecord",
    "processrecord",
];

const ROUTE_REGISTRATION: &[&str] = &[
    ".get",
    ".post",
    ".put",
    ".patch",
    ".delete",
    ".route",
    ".all",
    "handlefunc",
    "handle",
    "api_view",
    "require_post",
    "require_http_methods",
    "csrf_exempt",
    // Spring's `@PostMapping`/`@RequestMapping`; JAX-RS's `@POST` and Micronaut's `@Post`
    // (lowered as `HttpMethod POST …`).
    "mapping",
    "httpmethod",
];

const ROUTE_TYPES: &[&str] = &[
    "http.responsewriter",
    "http.request",
    "gin.context",
    "echo.context",
    "fiber.ctx",
    "request",
    "httprequest",
    "nextrequest",
    "fastifyrequest",
    "nextapirequest",
];

/// Whether `text` holds one of the words of `list` (dotted, spaced or snake words as written,
/// others anywhere in the normalised text).
pub(crate) fn words_in(text: &str, list: &[&str]) -> bool {
    let lower = text.to_lowercase();
    let n = norm(text);
    list.iter().any(|w| {
        if w.contains(['.', ' ', '_']) {
            lower.contains(w) || n.contains(&norm(w))
        } else {
            n.contains(w)
        }
    })
}

/// Whether a parameter's name says it carries an event or message.
pub(crate) fn param_is_event(p: &str) -> bool {
    let n = norm(p);
    EVENT_PARAMS
        .iter()
        .any(|w| n == *w || n.ends_with(w) && n.len() <= w.len() + 8)
}

/// A script's top level consumes when it makes a consumer (`KafkaConsumer(…)`,
/// `kafka.consumer(…)`) and reads from it (`for message in consumer`, `consumer.poll()`):
/// the variables read from it are its events.
fn module_consumer(f: &mut Function) -> bool {
    let consumers: HashSet<String> = f
        .ops
        .iter()
        .filter_map(|op| match &op.kind {
            OpKind::Assign {
                targets,
                value: Expr::Call(c),
                ..
            } if norm(&c.name()).contains("consumer") => targets.first().cloned(),
            _ => None,
        })
        .collect();
    let mut events = Vec::new();
    for op in &f.ops {
        if let OpKind::Assign { targets, value, .. } = &op.kind {
            let reads = match value {
                Expr::Path(p) => p.first().is_some_and(|r| consumers.contains(r)),
                Expr::Call(c) => c.callee.first().is_some_and(|r| consumers.contains(r)),
                _ => false,
            };
            if reads {
                events.extend(targets.iter().cloned());
            }
        }
    }
    let found = !events.is_empty();
    f.params.extend(events);
    found
}

/// Methods that read the next message from a broker client in a loop.
const READS_MESSAGE: &[&str] = &[
    "readmessage",
    "fetchmessage",
    "poll",
    "receive_messages",
    "receivemessage",
    "receive",
];

/// A function that reads messages from a broker client itself (`m, err :=
/// reader.ReadMessage(ctx)`, `msg = consumer.poll(1.0)`): the variables read are its events.
fn loop_consumer(f: &mut Function) -> bool {
    // Clients made here by a consumer or reader constructor (`c, err :=
    // kafka.NewConsumer(…)`), whatever the variable is called.
    let mut clients: HashSet<&str> = HashSet::new();
    let mut events = Vec::new();
    for op in &f.ops {
        if let OpKind::Assign {
            targets,
            value: Expr::Call(c),
            ..
        } = &op.kind
        {
            let from_client = c.callee.len() > 1
                && READS_MESSAGE.contains(&c.method().as_str())
                && clients.contains(c.callee[0].as_str());
            if reads_message(c) || from_client {
                events.extend(targets.first().cloned());
            } else if has_any(&c.name(), &["newconsumer", "newreader", "newsubscriber"]) {
                clients.extend(targets.first().map(String::as_str));
            }
        }
    }
    let found = !events.is_empty();
    f.params.extend(events);
    found
}

/// Whether the call reads the next message from a broker client (`reader.ReadMessage(ctx)`,
/// `consumer.poll(1.0)`).
pub(crate) fn reads_message(c: &crate::ir::Call) -> bool {
    c.callee.len() > 1
        && READS_MESSAGE.contains(&c.method().as_str())
        && c.receiver_words()
            .iter()
            .any(|w| has_any(w, &["reader", "consumer", "kafka", "queue", "sqs", "sub"]))
}

/// Whether the function is shaped as an HTTP route: registered by a route call
/// (`app.post`, `http.HandleFunc`, `@api_view`), taking a request type, a Next.js or Django
/// verb method, or `(req, res)`.
pub(crate) fn route_shaped(f: &Function, path: &Path) -> bool {
    let regs = f.registrations.join(" ");
    let types = f.param_types.join(" ");
    // Next.js route exports; Django class-based views (`def post(self, request)`,
    // `def form_valid(self, form)`).
    let http_verb = matches!(f.name.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
        || matches!(f.name.as_str(), "post" | "put" | "patch")
            && f.params.first().is_some_and(|p| p == "request")
        || f.name == "form_valid" && path.extension().is_some_and(|e| e == "py");
    words_in(&regs, ROUTE_REGISTRATION)
        || words_in(&types, ROUTE_TYPES)
        || http_verb
        || (f.params.len() >= 2 && f.params[0] == "req" && f.params[1] == "res")
}

/// A function that acknowledges a message it was given (`payload.ack()`, `msg.Ack()`,
/// `channel.ack(msg)`) consumes it.
fn acks_param(f: &Function) -> bool {
    f.ops.iter().any(|op| match &op.kind {
        OpKind::Call(c) => matches!(
            c.method().as_str(),
            "ack" | "nack" | "basic_ack" | "basic_nack" | "acknowledge" | "basicack" | "basicnack"
        ) && (c.callee.first().is_some_and(|r| f.params.contains(r))
            || c.args.iter().any(
                |a| matches!(a, Expr::Path(p) if p.first().is_some_and(|r| f.params.contains(r))),
            )),
        _ => false,
    })
}

/// Whether a string names a signature header (`stripe-signature`, `x-razorpay-signature`,
/// `X-Hub-Signature-256`, `X-Shopify-Hmac-Sha256`).
fn signature_header(s: &str) -> bool {
    let s = s.to_ascii_lowercase();
    !s.contains(' ') && (s.contains("-signature") || s.contains("-hmac"))
}

/// A route that verifies a webhook delivery (`stripe.webhooks.constructEvent(…)`,
/// `Webhook.verify(…)`, `validateWebhookSignature(…)`, an HMAC of its own compared with a
/// signature header) receives events.
fn verifies_webhook(f: &Function) -> bool {
    let mut header = false;
    for op in &f.ops {
        let mut look = |e: &Expr| {
            // `headers.get("stripe-signature")`, or `req.headers["x-razorpay-signature"]` read
            // as a member path.
            e.walk(&mut |x| {
                header |= match x {
                    Expr::Str(s) => signature_header(s),
                    Expr::Path(p) => p.iter().any(|s| signature_header(s)),
                    _ => false,
                }
            });
        };
        match &op.kind {
            OpKind::Call(c) => c.arg_exprs().into_iter().for_each(&mut look),
            OpKind::Assign { value, .. } => look(value),
            _ => {}
        }
    }
    let calls = || {
        f.ops.iter().filter_map(|op| match &op.kind {
            OpKind::Call(c) => Some(norm(&c.name())),
            _ => None,
        })
    };
    // `crypto.createHmac(…)`, Go's `hmac.New(…)`, Python's `hmac.new(…)`, compared in
    // constant time with what the request carries (an HMAC alone may mint a token).
    let hmac = calls().any(|n| n.contains("createhmac") || n.ends_with("hmacnew"));
    let compared = calls().any(|n| {
        n.contains("timingsafeequal")
            || n.contains("comparedigest")
            || n.ends_with("hmacequal")
            || n.contains("constanttimecompare")
    });
    header || hmac && compared || calls().any(|n| verifier_name(&n))
}

/// A verifier known by its name.
fn verifier_name(n: &str) -> bool {
    n.contains("constructevent")
        || n.contains("webhook") && has_any(n, &["verify", "validate", "construct", "signature"])
        // A provider SDK's check of a signed callback (`validate_callback`,
        // `verify_notification`, `check_signature`).
        || has_any(n, &["verif", "validat", "check"])
            && has_any(n, &["signature", "callback", "notification"])
}

/// Last words of the event names providers send (`payment.succeeded`,
/// `checkout.session.completed`, `charge.success`, `invoice.paid`).
const EVENT_NAME_ENDINGS: &[&str] = &[
    "succeeded",
    "success",
    "completed",
    "paid",
    "created",
    "updated",
    "deleted",
    "failed",
    "canceled",
    "cancelled",
    "refunded",
    "captured",
    "approved",
    "expired",
    "activated",
    "renewed",
];

/// Whether `s` is written as a provider's event name: dotted lowercase words ending in what
/// happened (`customer.subscription.updated`), not a file name or a URL.
fn is_event_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        // `invoice.paid`, `order_paid`.
        && parts
            .last()
            .and_then(|w| w.rsplit('_').next())
            .is_some_and(|w| EVENT_NAME_ENDINGS.contains(&w))
}

/// Names of functions an event table maps provider event names to, anywhere in `value`
/// (`{"invoice.paid": handle_invoice_paid}`, `new Map([["customer.subscription.created",
/// subscriptionCreated]])`).
fn event_table_targets(value: &Expr, out: &mut HashSet<String>) {
    value.walk(&mut |e| match e {
        Expr::Object { fields, .. } => {
            for (k, v) in fields {
                if let Expr::Path(p) = v
                    && is_event_name(k)
                {
                    out.extend(p.last().cloned());
                }
            }
        }
        Expr::List(items) => {
            if let [Expr::Str(k), Expr::Path(p)] = items.as_slice()
                && is_event_name(k)
            {
                out.extend(p.last().cloned());
            }
        }
        _ => {}
    });
}

/// Marks as event handlers the functions of the whole tree that a table of provider event
/// names dispatches to: the table and the functions are usually in different files (a
/// `handlers/__init__.py` importing one module per event).
pub(crate) fn register_event_tables<'a>(modules: impl Iterator<Item = &'a mut Module>) {
    let mut modules: Vec<&mut Module> = modules.collect();
    let mut targets = HashSet::new();
    for m in &modules {
        for (_, value) in &m.globals {
            event_table_targets(value, &mut targets);
        }
        for f in &m.functions {
            for op in &f.ops {
                if let OpKind::Assign { value, .. } = &op.kind {
                    event_table_targets(value, &mut targets);
                }
            }
        }
    }
    if targets.is_empty() {
        return;
    }
    for m in &mut modules {
        for f in &mut m.functions {
            if f.kind != HandlerKind::Event && targets.contains(&f.name) {
                f.kind = HandlerKind::Event;
                f.registrations.push("event table".to_string());
            }
        }
    }
}

/// A function that branches on a provider's event name (`if event["event"] !=
/// "payment.succeeded"`, `case "invoice.paid":`) handles that event, wherever it is called
/// from: a webhook view often hands the parsed body to such a function in another file.
fn dispatches_on_event_name(f: &Function) -> bool {
    f.conds.iter().any(|c| {
        let mut found = false;
        c.test.walk(&mut |e| {
            if let Expr::Str(s) = e {
                found |= is_event_name(s);
            }
        });
        found
    })
}

/// A route that reads its client's idempotency key (`req.headers.get("Idempotency-Key")`)
/// expects the same request again: it handles redeliveries as a webhook does.
fn reads_idempotency_key(f: &Function) -> bool {
    f.ops.iter().any(|op| match &op.kind {
        OpKind::Call(c) => c.args.first().is_some_and(|a| {
            a.string_text().is_some_and(|s| {
                norm(&s).starts_with("idempotency") || norm(&s) == "xidempotencykey"
            })
        }),
        _ => false,
    })
}

/// A function that asks whether what it was given was handled already
/// (`processed_repo.is_processed(&signature)`, `events.alreadyHandled(id)`): it expects
/// redeliveries, so it is handling deliveries (a Solana indexer, a poller, a job).
fn asks_if_handled(f: &Function) -> bool {
    const ASKS: &[&str] = &[
        "isprocessed",
        "alreadyprocessed",
        "wasprocessed",
        "hasbeenprocessed",
        "ishandled",
        "alreadyhandled",
        "isduplicate",
    ];
    f.ops.iter().any(|op| {
        matches!(&op.kind, OpKind::Call(c) if c.callee.len() > 1 && {
            let m = norm(&c.method());
            ASKS.iter().any(|a| m.starts_with(a))
        })
    })
}

fn classify(f: &Function, path: &Path) -> HandlerKind {
    let name = norm(&f.name);
    let path_text = path.to_string_lossy().to_lowercase();
    let event_file = ["webhook", "consumer", "subscriber", "listener", "worker"]
        .iter()
        .any(|w| path_text.contains(w));
    let types = f.param_types.join(" ");
    if f.registrations
        .iter()
        .any(|r| words_in(r, EVENT_REGISTRATION))
        || words_in(&types, EVENT_TYPES)
        || EVENT_NAMES.iter().any(|w| name.contains(w))
        || (["handle", "process", "on", "apply", "sync"]
            .iter()
            .any(|p| name.starts_with(p))
            // `processIncoming(body, signature)`: a service method given the request body.
            && (f.params.iter().any(|p| param_is_event(p) || norm(p) == "body")
                || f.param_types.iter().any(|t| {
                    has_any(
                        t,
                        &["event", "notification", "webhook", "message", "delivery"],
                    )
                })))
        || name == "consumeclaim"
        || acks_param(f)
        || dispatches_on_event_name(f)
        || asks_if_handled(f)
    {
        return HandlerKind::Event;
    }
    let route = route_shaped(f, path);
    // A route named for hooks or receipt of messages (`PostHook`, `handle_hook`,
    // `receivedMessage`, `receive_event`) receives deliveries.
    let receives = name.contains("hook")
        || name.starts_with("receive")
            && ["message", "event", "notification", "update"]
                .iter()
                .any(|w| name.contains(w));
    if route && (event_file || verifies_webhook(f) || receives || reads_idempotency_key(f)) {
        HandlerKind::Event
    } else if route {
        HandlerKind::Route
    } else if event_file && f.params.iter().any(|p| param_is_event(p)) {
        HandlerKind::Event
    } else {
        HandlerKind::Other
    }
}

/// Sets every function's [`HandlerKind`]: registrations by name (`http.HandleFunc("/hook",
/// handleHook)`) are added first; helpers that an event handler of the file calls by name
/// are event handlers too.
pub(crate) fn classify_module(module: &mut Module, path: &Path) {
    let names: HashSet<String> = module.functions.iter().map(|f| f.name.clone()).collect();
    let mut refs: Vec<(String, String)> = Vec::new();
    let mut note = |callee: String, args: &[Expr], kwargs: &[(String, Expr)]| {
        let mut reg = callee;
        // Keyword arguments name callbacks too: pika's `on_message_callback=handle`.
        for a in args.iter().chain(kwargs.iter().map(|(_, v)| v)) {
            match a {
                Expr::Str(s) => {
                    reg.push(' ');
                    reg.push_str(s);
                }
                Expr::Path(p) => {
                    if let Some(last) = p.last()
                        && names.contains(last)
                    {
                        refs.push((last.clone(), reg.clone()));
                    }
                }
                _ => {}
            }
        }
    };
    for call in &module.top_calls {
        note(call.name(), &call.args, &call.kwargs);
    }
    for f in &module.functions {
        for op in &f.ops {
            if let OpKind::Call(call) = &op.kind {
                note(call.name(), &call.args, &call.kwargs);
            }
        }
    }
    for (name, reg) in refs {
        for f in module.functions.iter_mut().filter(|f| f.name == name) {
            f.registrations.push(reg.clone());
        }
    }
    for f in &mut module.functions {
        f.kind = if f.name == MODULE {
            if module_consumer(f) {
                HandlerKind::Event
            } else {
                HandlerKind::Other
            }
        } else if loop_consumer(f) {
            HandlerKind::Event
        } else {
            classify(f, path)
        };
    }
    // Helpers called by an event handler of this file handle the event too.
    let called: HashSet<String> = module
        .functions
        .iter()
        .filter(|f| f.kind == HandlerKind::Event)
        .flat_map(|f| {
            f.ops.iter().flat_map(|op| match &op.kind {
                OpKind::Call(c) if c.callee.len() <= 2 => {
                    c.callee.last().cloned().into_iter().collect()
                }
                // The functions of a dispatch table the handler builds (`{ "invoice.paid":
                // onPaid }`, Go's `map[string]func…{"a": h.onA}`): it calls them.
                OpKind::Assign {
                    value: Expr::Object { fields, .. },
                    ..
                } => fields
                    .iter()
                    .filter_map(|(_, v)| match v {
                        Expr::Path(p) if p.len() <= 2 => p.last().cloned(),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
                _ => Vec::new(),
            })
        })
        .collect();
    for f in &mut module.functions {
        if f.kind != HandlerKind::Event && !f.name.is_empty() && called.contains(&f.name) {
            f.kind = HandlerKind::Event;
            f.called_by_handler = true;
        }
    }
}

/// Whether a function handles events (for the redelivery checks).
pub(crate) fn is_event(f: &Function) -> bool {
    f.kind == HandlerKind::Event
}

/// Whether a function is an event handler or an HTTP route (for dual writes).
pub(crate) fn is_entry(f: &Function) -> bool {
    f.kind != HandlerKind::Other || has_any(&f.name, &["handler"])
}
