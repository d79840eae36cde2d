//! What a Spring bean method's annotations do around its body, the same in Java and Kotlin:
//! the transaction Spring's proxy opens, `@Async`'s executor, a listener's settings, a
//! repository method's `@Query`, and after the body its registration, `@SendTo` replies and
//! JPA's flush at commit.

use crate::ir::{Call, Expr, OpKind, Pos};
use crate::lang::builder::Builder;

use super::annotation::Annotation;

/// The transaction a method's body ran in, for [`finish`].
pub(crate) struct Opened {
    /// Whether Spring's proxy wraps the method in a transaction.
    pub(crate) transactional: bool,
    /// The transaction open around the body, if any.
    pub(crate) tx: Option<u32>,
}

/// A Spring Data repository method's `@Query`: the statement a call of it runs, and where.
pub(crate) fn repository_query(annotations: &[Annotation]) -> Option<(Expr, Pos)> {
    let query = annotations.iter().find(|a| a.name == "Query")?;
    query
        .args
        .iter()
        .find(|(k, _)| k == "value")
        .map(|(_, v)| (v.clone(), query.pos))
}

/// Opens what the annotations put around a method's body, after `begin_function`:
/// `transactional` (Spring's proxy intercepts the method and `@Transactional` applies) opens a
/// transaction, joined to a caller's when `joins` (propagation `REQUIRED`); a proxied `@Async`
/// method runs detached; a listener's settings (`ackMode = "NONE"`, `properties =
/// "enable.auto.commit=true"`) and the repository `query` become calls the checks read.
pub(crate) fn open(
    b: &mut Builder<'_>,
    annotations: &[Annotation],
    transactional: bool,
    proxied: bool,
    joins: bool,
    query: Option<(Expr, Pos)>,
) -> Opened {
    if proxied && annotations.iter().any(|a| a.name == "Async") {
        b.push_detached();
    }
    if transactional {
        b.push_tx();
    }
    let tx = b.open_tx();
    if transactional && joins {
        b.set_joins_caller_tx(tx);
    }
    for a in annotations.iter().filter(|a| a.name.ends_with("Listener")) {
        emit(b, vec![a.name.clone()], Vec::new(), a.args.clone(), a.pos);
    }
    // Spring's cache abstraction: `@Cacheable` answers from the cache when the key is in it,
    // `@CachePut` stores the key (a Redis or in-memory marker, not the database's).
    for a in annotations {
        let command = match a.name.as_str() {
            "Cacheable" => "get",
            "CachePut" => "set",
            _ => continue,
        };
        let name = |k: &str| a.args.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let key = name("key")
            .or_else(|| name("value"))
            .or_else(|| name("cacheNames"))
            .unwrap_or_else(|| Expr::Str(String::new()));
        let callee = vec!["cache".to_string(), command.to_string()];
        emit(b, callee, vec![key], Vec::new(), a.pos);
    }
    if let Some((q, pos)) = query {
        emit(b, vec!["query".to_string()], vec![q], Vec::new(), pos);
    }
    Opened { transactional, tx }
}

fn emit(
    b: &mut Builder<'_>,
    callee: Vec<String>,
    args: Vec<Expr>,
    kwargs: Vec<(String, Expr)>,
    pos: Pos,
) {
    let call = Call {
        callee,
        receiver: None,
        args,
        kwargs,
        is_new: false,
        pos,
    };
    b.emit(OpKind::Call(call), pos);
}

/// After `end_function`: the listener annotation registers the method (its group or queue
/// names the consumer), `@SendTo` publishes what it returns, and a transactional method's
/// loaded entities are flushed at its commit.
pub(crate) fn finish(b: &mut Builder<'_>, annotations: &[Annotation], opened: &Opened) {
    let Some(f) = b.module.functions.last_mut() else {
        return;
    };
    if let Some(a) = annotations.iter().find(|a| a.name.ends_with("Listener")) {
        f.registered_at = Some(a.pos);
    }
    if let Some(a) = annotations.iter().find(|a| a.name == "SendTo") {
        super::reply::publish_returns(f, a);
    }
    if let (true, Some(tx)) = (opened.transactional, opened.tx) {
        super::dirty::flush_at_commit(f, tx);
    }
}
