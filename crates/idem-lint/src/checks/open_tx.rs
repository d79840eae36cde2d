//! Which operations run while a database transaction is open: inside a transaction callback
//! or `with` block, in a function decorated `@transaction.atomic`, between `BEGIN` and
//! `COMMIT`, or between `tx := db.BeginTx(…)` and `tx.Commit()`. A producer's own
//! transaction (kafkajs `producer.transaction()`) is no database transaction.

use crate::analysis::{Act, FnFacts};
use crate::ir::{Call, Expr, OpKind};
use crate::sql::SqlStmt;
use crate::words::has_any;

/// Methods whose result is an open transaction.
const BEGINS: &[&str] = &[
    "begin",
    "begintx",
    "beginx",
    "begintxx",
    "mustbegin",
    "mustbegintx",
    "starttransaction",
    "transaction",
    "begin_transaction",
];

/// Brokers' clients, whose transactions are not the database's.
const PRODUCERS: &[&str] = &["producer", "kafka", "pulsar", "publisher", "channel"];

fn begins_db_transaction(call: &Call) -> bool {
    call.callee.len() > 1
        && BEGINS.contains(&call.method().as_str())
        && !call.receiver_words().iter().any(|w| has_any(w, PRODUCERS))
}

/// One flag per op: whether a database transaction is open around it.
pub(crate) fn open_transaction(facts: &FnFacts<'_>) -> Vec<bool> {
    let atomic = facts
        .func
        .registrations
        .iter()
        .any(|r| r.to_lowercase().contains("atomic"));
    let mut explicit = false;
    let mut vars: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(facts.func.ops.len());
    for (i, op) in facts.func.ops.iter().enumerate() {
        match (&op.kind, &facts.acts[i]) {
            (OpKind::Call(_), Act::Sql(SqlStmt::Begin)) => explicit = true,
            (OpKind::Call(_), Act::Sql(SqlStmt::Commit | SqlStmt::Rollback)) => explicit = false,
            (OpKind::Call(c), _) if crate::analysis::begins_on_connection(c) => explicit = true,
            (OpKind::Call(c), _) if crate::analysis::ends_on_connection(c) => explicit = false,
            (OpKind::Call(c), Act::Commit) => {
                let root = c.callee.first().cloned().unwrap_or_default();
                vars.retain(|v| *v != root);
            }
            // Mongo/Mongoose sessions: `session.startTransaction()` … `commitTransaction()`.
            (OpKind::Call(c), _)
                if c.callee.len() > 1
                    && matches!(
                        c.method().as_str(),
                        "starttransaction" | "start_transaction" | "begintransaction"
                    )
                    && !c.receiver_words().iter().any(|w| has_any(w, PRODUCERS)) =>
            {
                vars.extend(c.callee.first().cloned());
            }
            (OpKind::Call(c), _)
                if matches!(
                    c.method().as_str(),
                    "committransaction"
                        | "aborttransaction"
                        | "commit_transaction"
                        | "abort_transaction"
                ) =>
            {
                let root = c.callee.first().cloned().unwrap_or_default();
                vars.retain(|v| *v != root);
            }
            (
                OpKind::Assign {
                    targets,
                    value: Expr::Call(c),
                    ..
                },
                _,
                // `const total = await db.transaction(async (tx) => …)` holds the callback's
                // result: that transaction has committed (the callback's ops carry it).
            ) if begins_db_transaction(c) && !takes_callback(c) => {
                vars.extend(targets.first().cloned())
            }
            _ => {}
        }
        let lexical = op.lexical_tx.is_some() && !producer_callback(facts, i);
        out.push(atomic || explicit || lexical || !vars.is_empty());
    }
    out
}

/// Whether op `i` is a call on a variable made by a producer's `transaction()`.
pub(crate) fn producer_callback(facts: &FnFacts<'_>, i: usize) -> bool {
    let OpKind::Call(call) = &facts.func.ops[i].kind else {
        return false;
    };
    let root = call.callee.first().map(String::as_str).unwrap_or("");
    // `producer.clone()` is the producer itself, no transaction of its own.
    matches!(facts.values.get(root), Some(Expr::Call(made))
        if made.receiver_words().iter().any(|w| has_any(w, PRODUCERS))
            && has_any(&made.method(), &["transaction", "begin"]))
}

/// Whether a call is given a function (lowered in place, its argument left as an empty
/// `Other`): a managed transaction's callback.
fn takes_callback(call: &Call) -> bool {
    call.args
        .iter()
        .any(|a| matches!(a, Expr::Other(parts) if parts.is_empty()))
}
