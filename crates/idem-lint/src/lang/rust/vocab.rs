//! Rust frameworks' and clients' words: route attributes and extractors, broker message
//! types and reads, HTTP statuses, closures that run in a transaction or detached, idem's
//! runner and inbox, and rdkafka's configuration.

use super::Lower;
use crate::ir::{Call, Expr, OpKind, Pos};
use crate::words::{has_any, status_constant};

/// Methods that adapt a result or option without acting (`unwrap_or`, `ok`, `context`).
const ADAPTERS: &[&str] = &[
    "unwrap",
    "expect",
    "unwrap_or",
    "unwrap_or_default",
    "unwrap_or_else",
    "ok",
    "optional",
    "map_err",
    "context",
    "with_context",
    "ok_or",
    "ok_or_else",
    "is_some",
    "is_none",
    "is_ok",
    "is_err",
];

/// Whether a method adapts a result without acting: the ones above, and the error-wrapping
/// extension methods of eyre, anyhow, error-stack and crates' own error traits (`wrap_err`,
/// `change_context`, `wrap_internal_err`), which pass the value through on success.
pub(super) fn is_adapter(method: &str) -> bool {
    ADAPTERS.contains(&method)
        || method.starts_with("wrap_")
        || (method.ends_with("_err") && method != "is_err")
        || method.ends_with("_context")
}

/// Route attributes (actix-web, rocket, poem): `#[post("/webhooks/stripe")]`.
const ROUTE_ATTRS: &[&str] = &[
    "get", "post", "put", "patch", "delete", "route", "handler", "head",
];

/// The registration a function's attribute gives it: `route.post /webhooks/stripe`.
pub(super) fn attribute_registration(attr: &str) -> Option<String> {
    let inner = attr
        .trim_start_matches("#[")
        .trim_start_matches("#![")
        .trim_end_matches(']');
    let (name, rest) = inner.split_once('(').unwrap_or((inner, ""));
    let last = name.rsplit("::").next().unwrap_or(name).trim();
    if !ROUTE_ATTRS.contains(&last) {
        return None;
    }
    let path = rest.split('"').nth(1).unwrap_or("");
    Some(format!("route.{last} {path}").trim().to_string())
}

/// Extractor types of axum, actix-web and rocket handlers.
const EXTRACTORS: &[&str] = &[
    "Json<",
    "Form<",
    "State<",
    "Query<",
    "HeaderMap",
    "TypedHeader<",
    "Extension<",
    "web::",
    "HttpRequest",
    "Request<",
    "Bytes",
    "RawBody",
    "ConnectInfo<",
];

/// Message types of Rust broker clients: rdkafka, lapin, async-nats, aws-sdk-sqs and
/// aws_lambda_events.
const MESSAGE_TYPES: &[&str] = &[
    "BorrowedMessage",
    "OwnedMessage",
    "Delivery",
    "DeliveryResult",
    "KafkaMessage",
    "ConsumerRecord",
    "SqsEvent",
    "SqsMessage",
    "SnsEvent",
    "EventBridgeEvent",
];

/// A `Message` type of a broker crate (`jetstream::Message`, `async_nats::Message`,
/// `rdkafka::message::OwnedMessage`).
fn broker_message(ty: &str) -> bool {
    ty.contains("Message")
        && ["jetstream", "nats", "kafka", "pulsar", "sqs", "pubsub"]
            .iter()
            .any(|b| ty.to_lowercase().contains(b))
}

/// The registration a parameter's type implies: an HTTP extractor makes a route, a broker
/// message a consumer.
pub(super) fn type_registration(ty: &str) -> Option<String> {
    // The type's own name, without references, lifetimes and generic arguments
    // (`&BorrowedMessage<'_>` → `BorrowedMessage`): `DeliveryAddress` is no delivery.
    let base = ty.split('<').next().unwrap_or(ty);
    let base = base.rsplit("::").next().unwrap_or(base);
    let base = base
        .trim_start_matches(['&', ' '])
        .trim_start_matches("mut ")
        .trim();
    if MESSAGE_TYPES.contains(&base) || broker_message(ty) {
        return Some("consumer message".into());
    }
    if EXTRACTORS.iter().any(|t| ty.contains(t)) {
        return Some("http.route".into());
    }
    None
}

/// Receivers that are broker clients by name.
const BROKER_RECEIVERS: &[&str] = &[
    "consumer",
    "subscriber",
    "subscription",
    "jetstream",
    "kafka",
    "queue",
];

/// Whether a value is a stream of broker messages: `consumer.stream()`, `consumer.messages()`,
/// `client.subscribe(…)`, `channel.basic_consume(…)`.
pub(super) fn message_source(value: &Expr) -> bool {
    let Expr::Call(c) = value else {
        return false;
    };
    let recv = c.receiver_words().join(".");
    match c.method().as_str() {
        "subscribe" | "queue_subscribe" | "basic_consume" | "subscribe_with_options" => {
            c.callee.len() > 1
        }
        "stream" | "messages" | "fetch" | "consume" => has_any(&recv, BROKER_RECEIVERS),
        _ => false,
    }
}

/// Whether a value is a message read from a consumer: `consumer.recv()`, `stream.next()` on a
/// message stream (`sources`: the locals holding one), `consumer.poll(…)`, an SQS
/// `receive_message()`.
pub(super) fn reads_message(value: &Expr, sources: &[String]) -> bool {
    let Expr::Call(c) = value else {
        return false;
    };
    let m = c.method();
    // SQS `client.receive_message()…send()`: a batch of messages.
    if m == "receive_message" {
        return true;
    }
    if message_source(value) {
        return true;
    }
    let from_source = c.callee.len() == 2 && sources.contains(&c.callee[0])
        || c.receiver
            .as_deref()
            .is_some_and(|r| message_source(&Expr::Call(Box::new(r.clone()))));
    matches!(
        m.as_str(),
        "recv" | "next" | "try_next" | "poll" | "receive"
    ) && (from_source || has_any(&c.receiver_words().join("."), BROKER_RECEIVERS))
}

/// How a closure or async block passed to a call runs.
pub(super) enum ClosureRole {
    /// In a transaction the call opens; `idem`: the call is idem's runner, which claims the
    /// event in that transaction first.
    Transaction { idem: bool },
    /// Nobody waits for it (`tokio::spawn`).
    Detached,
    /// A handler the call registers (`post(|…| async {…})`, `subscribe`).
    Handler,
    /// Part of the caller (combinators, `Box::pin`, retries).
    Inline,
}

/// A project's own wrapper that may open a transaction around its closure:
/// `transactional(conn, |db| …)`, `transaction_with_mutex(&global, key, |tx| …)`. The name alone
/// is no proof (a tracing span's `transaction_with_name("order-paid", || …)` opens none): the
/// closure must also be handed a transaction or a connection (`closure_takes_store`).
pub(super) fn wrapper_transaction(call: &Call) -> bool {
    let m = call.method();
    m == "transactional" || m.starts_with("transaction_with") || m.starts_with("with_transaction")
}

/// Whether a closure's first parameter is named for a transaction or a connection (`|tx|`,
/// `|mut tx|`, `|db_connection|`, `|conn|`).
pub(super) fn closure_takes_store(first_param: &str) -> bool {
    let n = crate::words::norm(first_param);
    [
        "tx",
        "txn",
        "transaction",
        "db",
        "conn",
        "connection",
        "session",
        "executor",
    ]
    .iter()
    .any(|w| n == *w || n.starts_with(w) || n.ends_with(w))
}

/// How the call runs its closure argument.
pub(super) fn closure_role(call: &Call) -> ClosureRole {
    let m = call.method();
    if is_idem_run(call) {
        return ClosureRole::Transaction { idem: true };
    }
    if matches!(
        m.as_str(),
        "transaction"
            | "transaction_async"
            | "build_transaction"
            | "run_in_transaction"
            | "with_transaction"
            | "in_transaction"
    ) && call.callee.len() > 1
    {
        return ClosureRole::Transaction { idem: false };
    }
    if matches!(m.as_str(), "spawn" | "spawn_local" | "spawn_blocking")
        || call.callee.iter().any(|s| s == "spawn")
    {
        return ClosureRole::Detached;
    }
    let verb = matches!(
        m.as_str(),
        "get" | "post" | "put" | "patch" | "delete" | "any"
    ) && (call.callee.len() == 1 || call.callee.iter().any(|s| s == "routing"));
    if verb
        || matches!(
            m.as_str(),
            "subscribe"
                | "on_message"
                | "consume"
                | "basic_consume"
                | "handler"
                | "to"
                | "set_delegate"
                | "service_fn"
        )
    {
        return ClosureRole::Handler;
    }
    ClosureRole::Inline
}

/// idem's `runner.run(&event, |tx| …)` / `run_boxed`: a runner (or an `Event::new(…)`
/// argument) and a closure.
pub(super) fn is_idem_run(call: &Call) -> bool {
    let m = call.method();
    if !matches!(m.as_str(), "run" | "run_boxed") || call.callee.len() < 2 {
        return false;
    }
    let recv = call.receiver_words().join(".");
    let event_arg = call.args.iter().any(|a| {
        let mut found = false;
        a.walk(&mut |e| {
            // `Event::new(key).with_entity(…)`: the chain's first call is the event.
            let mut link = match e {
                Expr::Call(c) => Some(c.as_ref()),
                _ => None,
            };
            while let Some(c) = link {
                let n = c.name();
                found |= n.ends_with("Event.new") || n.contains("DedupKey");
                link = c.receiver.as_deref();
            }
        });
        found
    });
    has_any(&recv, &["idem", "runner"]) || event_arg
}

/// idem's claim of the event, where its runner opens the transaction: the inbox row it
/// inserts (what the checks read as a dedup claim in that transaction).
pub(super) fn emit_idem_claim(lower: &mut Lower<'_>, call: &Call) {
    let key = call
        .args
        .first()
        .cloned()
        .unwrap_or(Expr::Other(Vec::new()));
    let claim = Call {
        callee: vec!["idem".into(), "inbox".into(), "claim".into()],
        receiver: None,
        args: vec![
            Expr::Str(
                "INSERT INTO idem_inbox (consumer, dedup_key) VALUES ($1, $2) ON CONFLICT DO NOTHING"
                    .into(),
            ),
            key,
        ],
        kwargs: Vec::new(),
        is_new: false,
        pos: call.pos,
    };
    lower.b.emit(OpKind::Call(claim), call.pos);
}

/// Rewrites calls whose meaning sits in their arguments:
/// - idem's `inbox.claim(&mut *tx, &key)`: the inbox insert, on the transaction given;
/// - tokio-postgres' parameter slice: one argument per parameter;
/// - rdkafka's `ClientConfig::set("enable.auto.commit", "true")`: the setting as an option.
pub(super) fn normalise_call(call: &mut Call) {
    let m = call.method();
    if m.starts_with("claim")
        && call
            .receiver_words()
            .last()
            .is_some_and(|w| crate::words::norm(w).ends_with("inbox"))
        && let Some(Expr::Path(tx)) = call.args.first()
    {
        let mut callee = tx.clone();
        callee.extend(["inbox".to_string(), m.clone()]);
        let key = call.args.get(1).cloned().unwrap_or(Expr::Other(Vec::new()));
        call.callee = callee;
        call.args = vec![
            Expr::Str(
                "INSERT INTO idem_inbox (consumer, dedup_key) VALUES ($1, $2) ON CONFLICT DO NOTHING"
                    .into(),
            ),
            key,
        ];
        return;
    }
    // A builder setting a key by its name (lapin `BasicProperties::default().with_message_id(…)`,
    // `.idempotency_key(…)`, `.set_dedup_id(…)`): the key as a named argument.
    let field = m
        .strip_prefix("with_")
        .or_else(|| m.strip_prefix("set_"))
        .unwrap_or(&m)
        .to_string();
    if call.args.len() == 1 && call.kwargs.is_empty() && crate::words::is_key_name(&field) {
        let value = call.args[0].clone();
        call.kwargs.push((field, value));
        return;
    }
    // redis-rs `set_options(key, v, SetOptions::default().conditional_set(ExistenceCheck::NX))`.
    if m == "set_options" && call.args.iter().flat_map(Expr::words).any(|w| w == "nx") {
        call.args.push(Expr::Str("NX".into()));
        if let Some(last) = call.callee.last_mut() {
            *last = "set".into();
        }
        return;
    }
    // tokio-postgres `client.execute("… $1, $2", &[&a, &b])` (or a prepared statement):
    // the parameters in order.
    if let [Expr::Str(_) | Expr::Path(_), Expr::List(_)] = call.args.as_slice()
        && let Some(Expr::List(params)) = call.args.pop()
    {
        call.args.extend(params);
        return;
    }
    if m == "set"
        && let [Expr::Str(k), Expr::Str(v)] = call.args.as_slice()
        && k.starts_with("enable.auto.commit")
    {
        let value = Expr::Path(vec![v.to_ascii_lowercase()]);
        call.args = vec![Expr::Object {
            type_name: None,
            fields: vec![(k.clone(), value)],
        }];
    }
}

/// Types whose associated constants or constructors are HTTP statuses.
const STATUS_TYPES: &[&str] = &[
    "StatusCode",
    "Status",
    "HttpResponse",
    "HttpResponseBuilder",
];

/// The HTTP status a returned value carries: `StatusCode::CONFLICT`, `(StatusCode::OK,
/// body)`, `HttpResponse::Conflict().finish()`, `Status::Conflict`.
pub(super) fn status_in(value: &Expr) -> Option<u16> {
    let mut found = None;
    value.walk(&mut |e| {
        if found.is_some() {
            return;
        }
        let segs: &[String] = match e {
            Expr::Path(p) => p,
            Expr::Call(c) => &c.callee,
            _ => return,
        };
        for w in segs.windows(2) {
            if STATUS_TYPES.contains(&w[0].as_str())
                && let Some(code) = status_constant(&w[1])
            {
                found = Some(code);
                return;
            }
        }
        if let Expr::Call(c) = e
            && c.callee
                .ends_with(&["StatusCode".to_string(), "from_u16".to_string()])
        {
            found = c.args.first().and_then(Expr::status_code);
        }
    });
    found
}

/// The answer a returned status makes, as a response call (`response.status(409, value)`).
pub(super) fn status_call(status: u16, value: Option<Expr>, pos: Pos) -> Call {
    let mut args = vec![Expr::Num(f64::from(status))];
    args.extend(value);
    Call {
        callee: vec!["response".into(), "status".into()],
        receiver: None,
        args,
        kwargs: Vec::new(),
        is_new: false,
        pos,
    }
}

/// The parts of a `format!` string: its literal text and, for each `{}` / `{name}` hole, the
/// argument (positional in order, named from `name = value`, or the variable `name`).
pub(super) fn interpolate(fmt: &str, args: Vec<Expr>, named: &[(String, Expr)]) -> Vec<Expr> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut args = args.into_iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut spec = String::new();
                for n in chars.by_ref() {
                    if n == '}' {
                        break;
                    }
                    spec.push(n);
                }
                let name = spec.split(':').next().unwrap_or("").trim();
                if !text.is_empty() {
                    parts.push(Expr::Str(std::mem::take(&mut text)));
                }
                let value = if name.is_empty() || name.chars().all(|c| c.is_ascii_digit()) {
                    args.next()
                } else {
                    named
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .or_else(|| Some(Expr::Path(vec![name.to_string()])))
                };
                parts.push(value.unwrap_or(Expr::Other(Vec::new())));
            }
            _ => text.push(c),
        }
    }
    if !text.is_empty() {
        parts.push(Expr::Str(text));
    }
    parts
}

/// What a standard or logging macro is to the checks.
pub(super) enum MacroKind {
    /// `matches!`: a comparison.
    Compare,
    /// `bail!`, `panic!`, `unreachable!`: a throw.
    Throw,
    /// `anyhow!`, `json!`, `vec!`: a value.
    Value,
    /// `println!`, `info!`, `assert!`: nothing outside.
    Nothing,
}

/// The kind of a macro of the standard library or a logging or error crate, by its last name.
pub(super) fn macro_kind(name: &str) -> Option<MacroKind> {
    let last = name.rsplit("::").next().unwrap_or(name);
    Some(match last {
        "matches" => MacroKind::Compare,
        "bail" | "panic" | "unreachable" | "todo" | "unimplemented" => MacroKind::Throw,
        "anyhow" | "eyre" | "format_err" | "json" | "doc" | "bson" | "vec" | "concat"
        | "stringify" | "env" | "option_env" | "include_str" | "include_bytes" | "line"
        | "file" => MacroKind::Value,
        "println" | "eprintln" | "print" | "eprint" | "write" | "writeln" | "dbg" | "info"
        | "debug" | "warn" | "error" | "trace" | "event" | "span" | "info_span" | "debug_span"
        | "log" | "assert" | "assert_eq" | "assert_ne" | "debug_assert" | "debug_assert_eq"
        | "debug_assert_ne" | "ensure" | "instrument" => MacroKind::Nothing,
        // The metrics crate's handles: `counter!("x").increment(1)` counts, it writes nothing.
        "counter" | "gauge" | "histogram" | "describe_counter" | "describe_gauge"
        | "describe_histogram" => MacroKind::Nothing,
        _ => return None,
    })
}

const VERBS: &[&str] = &["get", "post", "put", "patch", "delete", "any"];

/// The handlers a router call names with its path: axum `.route("/hooks/stripe",
/// post(stripe_hook))`, actix `.route("/hooks", web::post().to(hook))`, each as a call
/// `route.post("/hooks/stripe", stripe_hook)`, which registers the function by that path.
pub(super) fn routes(call: &Call) -> Vec<Call> {
    if call.method() != "route" {
        return Vec::new();
    }
    // actix `web::resource("/hooks").route(web::post().to(hook))`: the path is the resource's.
    let resource = || {
        let mut r = call.receiver.as_deref();
        while let Some(c) = r {
            if matches!(c.method().as_str(), "resource" | "scope")
                && let Some(Expr::Str(p)) = c.args.first()
            {
                return Some(p.clone());
            }
            r = c.receiver.as_deref();
        }
        None
    };
    let (path, router) = match call.args.as_slice() {
        [Expr::Str(path), router, ..] => (path.clone(), router),
        [router] => match resource() {
            Some(p) => (p, router),
            None => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let path = &path;
    let mut out = Vec::new();
    router.walk(&mut |e| {
        let Expr::Call(outer) = e else { return };
        // `post(a).get(b)`: each link of the chain names its own handler.
        let mut link = Some(outer.as_ref());
        while let Some(c) = link {
            link = c.receiver.as_deref();
            let verb = match c.callee.last() {
                Some(m) if VERBS.contains(&m.as_str()) => m,
                // actix `web::post().to(hook)`: the verb is the link before `to`.
                Some(m) if m == "to" => {
                    match c.callee.iter().rev().find(|s| VERBS.contains(&s.as_str())) {
                        Some(v) => v,
                        None => continue,
                    }
                }
                _ => continue,
            };
            for a in &c.args {
                if let Expr::Path(p) = a
                    && let Some(name) = p.last()
                {
                    out.push(Call {
                        callee: vec!["route".into(), verb.clone()],
                        receiver: None,
                        args: vec![Expr::Str(path.clone()), Expr::Path(vec![name.clone()])],
                        kwargs: Vec::new(),
                        is_new: false,
                        pos: call.pos,
                    });
                }
            }
        }
    });
    out
}

/// Associated functions that construct a value of their type.
const CONSTRUCTORS: &[&str] = &[
    "new",
    "from",
    "default",
    "with_capacity",
    "from_str",
    "parse_str",
    "from_utf8",
    "from_utf8_lossy",
    "pin",
];

/// Whether a call only builds a value: a tuple struct or enum variant (`Some(x)`, `Set(v)`,
/// `AppError::Conflict(id)`) or a type's constructor (`Box::new`, `String::from`).
pub(super) fn constructs(call: &Call) -> bool {
    let upper = |s: &String| s.starts_with(|c: char| c.is_ascii_uppercase());
    match call.callee.as_slice() {
        [one] => upper(one),
        [.., ty, last] if upper(ty) && call.receiver.is_none() => {
            upper(last) || CONSTRUCTORS.contains(&last.as_str()) || builds_unconnected(call)
        }
        _ => false,
    }
}

/// Words of arguments that reach a store: a connection, pool, transaction, client or the state
/// holding one.
const STORE_WORDS: &[&str] = &[
    "conn",
    "db",
    "pool",
    "tx",
    "transaction",
    "executor",
    "client",
    "state",
    "ctx",
    "context",
    "data",
    "app",
    "store",
    "repo",
    "session",
    "manager",
    "pg",
    "redis",
    "txn",
];

/// `BenchmarkRequest::create_try(pr, kind)`: a type's `create…` function handed no connection,
/// pool, transaction or client builds a value; it can reach no store.
fn builds_unconnected(call: &Call) -> bool {
    let m = call.method();
    m.starts_with("create")
        && !call.args.is_empty()
        && !call.args.iter().flat_map(Expr::words).any(|w| {
            w.split(['.', '_'])
                .any(|p| STORE_WORDS.contains(&p) || p.starts_with("conn"))
        })
}

/// Whether a parameter's type is a body an extractor parsed: axum/actix `Json<…>`, `Form<…>`.
pub(crate) fn parses_body(ty: &str) -> bool {
    let t = ty.trim_start_matches('&');
    ["Json<", "web::Json<", "Form<", "web::Form<", "axum::Json<"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// A value that names an idempotency key by its type (async-stripe
/// `RequestStrategy::Idempotent(key)`): the key as a field the checks read.
pub(super) fn key_object(call: &Call) -> Option<Expr> {
    let last = call.callee.last()?;
    if call.callee.len() < 2 || last != "Idempotent" {
        return None;
    }
    Some(Expr::Object {
        type_name: Some(call.name()),
        fields: vec![(
            "idempotency_key".into(),
            call.args
                .first()
                .cloned()
                .unwrap_or(Expr::Other(Vec::new())),
        )],
    })
}

/// Macros whose body is code in their own syntax: `select!`, `join!`, `try_join!`.
pub(super) fn code_macro(name: &str) -> bool {
    matches!(
        name.rsplit("::").next().unwrap_or(name),
        "select" | "select_biased" | "join" | "try_join" | "pin_mut" | "spawn"
    )
}

/// The names a `use` declaration brings in, with their full paths: `use a::b::{C, D as E};`
/// gives `C` → `a::b::C` and `E` → `a::b::D`.
pub(super) fn use_paths(decl: &str) -> Vec<(String, String)> {
    let body = decl.trim().trim_end_matches(';');
    let body = body.strip_prefix("pub ").unwrap_or(body);
    let body = body.strip_prefix("use ").unwrap_or(body);
    let body: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    expand_use("", &body, &mut out, 0);
    out
}

fn expand_use(prefix: &str, tree: &str, out: &mut Vec<(String, String)>, depth: u8) {
    let tree = tree.trim();
    if depth > 8 || tree.is_empty() {
        return;
    }
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            format!("{a}::{b}")
        }
    };
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = tree[open + 1..]
            .trim_end()
            .strip_suffix('}')
            .unwrap_or(&tree[open + 1..]);
        let prefix = join(prefix, head);
        let (mut level, mut start) = (0i32, 0);
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => level += 1,
                '}' => level -= 1,
                ',' if level == 0 => {
                    expand_use(&prefix, &inner[start..i], out, depth + 1);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&prefix, &inner[start..], out, depth + 1);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), a.trim()),
        None => (tree, tree.rsplit("::").next().unwrap_or(tree)),
    };
    if matches!(alias, "*" | "self" | "_") {
        return;
    }
    out.push((alias.to_string(), join(prefix, path)));
}

/// Whether a type is a Redis client, connection or pool (`redis::Client`,
/// `redis::aio::ConnectionManager`, `deadpool_redis::Pool`, `bb8::Pool<RedisConnectionManager>`).
pub(super) fn redis_type(ty: &str) -> bool {
    let t = ty.to_lowercase();
    t.contains("redis") || t.contains("fred::")
}

/// idem's runner methods that compute rather than act (`runner.effect_key(…)`).
pub(super) fn idem_pure(call: &Call) -> bool {
    matches!(
        call.method().as_str(),
        "effect_key" | "effects_scope_name" | "consumer"
    ) && has_any(&call.receiver_words().join("."), &["idem", "runner"])
}

/// A type's base name: its last path segment without generic arguments
/// (`crate::notify::Notifier<T>` is `Notifier`).
pub(super) fn type_base(ty: &str) -> String {
    let t = ty.split('<').next().unwrap_or(ty);
    t.rsplit("::").next().unwrap_or(t).trim().to_string()
}

/// The trait of a trait object or `impl Trait` type (`&dyn Notifier`, `Arc<dyn Repo + Send>`,
/// `Box<dyn Store>`, `impl Notifier`), if the type is one.
pub(super) fn trait_object(ty: &str) -> Option<String> {
    let at = ty.find("dyn ").map(|i| i + 4).or_else(|| {
        ty.trim_start_matches(['&', ' '])
            .starts_with("impl ")
            .then(|| ty.find("impl ").map(|i| i + 5))
            .flatten()
    })?;
    let name: String = ty[at..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let base = type_base(&name);
    base.starts_with(|c: char| c.is_ascii_uppercase())
        .then_some(base)
}
