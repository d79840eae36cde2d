//! What a call does with the lambda (or method reference, or Kotlin trailing block) it is
//! given: run it in place (`forEach`, `ifPresent`, Kotlin `let`/`apply`), in a database
//! transaction (`transactionTemplate.execute`, Exposed `transaction { }`), later on another
//! thread (`CompletableFuture.runAsync`, `executor.submit`, Kotlin `launch`), or keep it as a
//! callback registered for events (`consumer.subscribe`, `setMessageListener`).

use crate::ir::{Call, Expr, Pos};
use crate::lang::builder::opens_transaction;
use crate::words::has_any;

/// Where a lambda argument runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LambdaRole {
    /// As part of the caller.
    Inline,
    /// As part of the caller, inside a database transaction.
    Transaction,
    /// On another thread or later; nobody waits for it.
    Detached,
    /// A callback of its own, registered by the call.
    Registered,
}

/// Methods whose lambda is run later by another thread.
const DETACHING: &[&str] = &[
    "runasync",
    "supplyasync",
    "thenrunasync",
    "thenacceptasync",
    "thenapplyasync",
    "submit",
    "schedule",
    // Kotlin's `launch` (its `async` is awaited almost always, so it runs in place).
    "launch",
    "thread",
    "startvirtualthread",
    "ofvirtual",
];

/// Methods whose lambda is a callback kept for later events.
const REGISTERING: &[&str] = &[
    "subscribe",
    "listen",
    "consume",
    "setmessagelistener",
    "setuppmessagelistener",
    "setupmessagelistener",
    "addlistener",
    "register",
    "on",
    "handler",
    "route",
    "post",
    "put",
    "get",
    "receive",
];

/// Where the lambda given to `call` runs.
pub(crate) fn role(call: &Call) -> LambdaRole {
    let m = call.method();
    let recv = call.receiver_words().join(".");
    // Kafka's own transaction (`kafkaTemplate.executeInTransaction`) is not a database's.
    if m == "executeintransaction" {
        return LambdaRole::Inline;
    }
    let template = has_any(
        &recv,
        &["transactiontemplate", "txtemplate", "transactionoperator"],
    ) || has_any(&recv, &["transaction", "tx"]) && m.starts_with("execute");
    if template
        && matches!(
            m.as_str(),
            "execute" | "executewithoutresult" | "transactional" | "executeandawait"
        )
        || matches!(
            m.as_str(),
            "transaction"
                | "newsuspendedtransaction"
                | "intransaction"
                | "withtransaction"
                | "suspendtransaction"
                | "transactional"
                | "dbquery"
                | "suspendedtransactionasync"
        )
        || opens_transaction(call) && m != "begin"
    {
        return LambdaRole::Transaction;
    }
    let executor = has_any(&recv, &["executor", "pool", "scheduler", "taskexecutor"]);
    if DETACHING.contains(&m.as_str()) || executor && m == "execute" || call.is_new && m == "thread"
    {
        return LambdaRole::Detached;
    }
    // `Consumer { event -> … }` (a Spring Cloud Stream binding written as a SAM constructor).
    if matches!(call.callee.as_slice(), [c] if matches!(c.as_str(), "Consumer" | "Function" | "BiConsumer"))
    {
        return LambdaRole::Registered;
    }
    if REGISTERING.contains(&m.as_str()) && call.callee.len() > 1
        || route_verb(call)
        || m.starts_with("on") && m.len() > 2 && !m.starts_with("onerror")
        || m.ends_with("listener")
    {
        return LambdaRole::Registered;
    }
    LambdaRole::Inline
}

/// A bare HTTP verb given a handler: Ktor's routing DSL (`post("/hook") { … }`,
/// `post<Hook> { … }` inside `routing { }` or a `Route` extension) and Spark Java's
/// `post("/hook", (req, res) -> …)`.
fn route_verb(call: &Call) -> bool {
    matches!(call.callee.as_slice(), [m] if matches!(m.as_str(), "post" | "put" | "patch" | "delete"))
}

/// The registration a registered lambda keeps: the call and its string arguments
/// (`kafkaConsumer.subscribe orders`); a bare verb's is written as a route's
/// (`route.post /hook`).
pub(crate) fn registration(call: &Call) -> String {
    let mut reg = call.name();
    if route_verb(call) {
        reg.insert_str(0, "route.");
    }
    for s in call.args.iter().filter_map(Expr::string_text) {
        reg.push(' ');
        reg.push_str(&s);
    }
    reg
}

/// Keeps a call that registers a route's handler (`post("/hook") { … }`) as the routing
/// DSL's (`routing.post`): it sends nothing, unlike an HTTP client's bare `post(url)`.
pub(crate) fn mark_route_registration(call: &mut Call) {
    if route_verb(call) {
        call.callee.insert(0, "routing".to_string());
    }
}

/// What a call is made on: the call its chain continues (`repo.findById(id)` for
/// `repo.findById(id).ifPresent(…)`) or the path before its method (`orders` for
/// `orders.forEach(…)`).
pub(crate) fn receiver_value(call: &Call) -> Expr {
    match &call.receiver {
        Some(inner) => Expr::Call(inner.clone()),
        None => Expr::Path(call.callee[..call.callee.len().saturating_sub(1)].to_vec()),
    }
}

/// A method reference on a field or local (`orderRepository::save`, Kotlin's
/// `repository::save`) given to `call`: the call of that method on the receiver's element,
/// and where it runs — none for a reference registered as a callback, on `this` or a type,
/// or to a constructor.
pub(crate) fn referenced_call(call: &Call, text: &str, pos: Pos) -> Option<(Call, LambdaRole)> {
    let role = role(call);
    let (object, method) = text.split_once("::")?;
    let (object, method) = (object.trim(), method.trim());
    let field = object.chars().next().is_some_and(char::is_lowercase)
        && object.chars().all(|c| c.is_alphanumeric() || c == '_')
        && !matches!(object, "this" | "super");
    if role == LambdaRole::Registered || !field || method == "new" || method.is_empty() {
        return None;
    }
    let referenced = Call {
        callee: vec![object.to_string(), method.to_string()],
        receiver: None,
        args: vec![receiver_value(call)],
        kwargs: Vec::new(),
        is_new: false,
        pos,
    };
    Some((referenced, role))
}

/// Whether the lambda at argument `index` runs only when the call's `Optional` (or nullable)
/// receiver holds a value (`Some(false)`: `ifPresent`, Kotlin `?.let`) or only when it does not
/// (`Some(true)`: `ifPresentOrElse`'s second lambda, `orElseGet`).
pub(crate) fn presence_branch(call: &Call, index: usize) -> Option<bool> {
    match (call.method().as_str(), index) {
        ("ifpresent", 0) | ("ifpresentorelse", 0) => Some(false),
        ("ifpresentorelse", 1) | ("orelseget", 0) => Some(true),
        _ => None,
    }
}
