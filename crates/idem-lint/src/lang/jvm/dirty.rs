//! JPA's dirty checking: inside a transaction, an entity loaded through a repository or an
//! `EntityManager` and then changed (`order.setStatus(PAID)`, Kotlin `order.status = PAID`) is
//! written at commit without any `save`. The lowering makes that write visible: a `save` of the
//! entity, placed at its last change, in the method's transaction.

use std::collections::HashMap;

use crate::ir::{Call, Expr, Function, Op, OpKind};
use crate::words::has_any;

/// The repository (callee before the method) a local was loaded through, if it was.
fn loaded_through(value: &Expr) -> Option<Vec<String>> {
    let Expr::Call(c) = value else { return None };
    // `repo.findById(id).orElseThrow()`: the innermost call of the chain.
    let mut inner = c.as_ref();
    while let Some(r) = inner.receiver.as_deref() {
        inner = r;
    }
    let m = inner.method();
    let recv = inner.receiver_words().join(".");
    let reads = m.starts_with("find") || m.starts_with("get") || m == "getreferencebyid";
    let repository = has_any(&recv, &["repository", "repo", "dao"])
        || has_any(&recv, &["entitymanager"]) && m == "find";
    (reads && repository && inner.callee.len() > 1)
        .then(|| inner.callee[..inner.callee.len() - 1].to_vec())
}

/// Whether an entity's method of this (lowercased) name changes it: a name that starts with a
/// verb of change (`approve`, `markPaid`, `addItem`, `deductPoints`). Any other name
/// (`trackingUrl()`, `describe()`, `requireDeliverable()`) is taken for a read: the linter
/// does not see the method's body, and a pure method is as common as a mutator.
fn changes(method: &str) -> bool {
    const VERBS: &[&str] = &[
        "set",
        "update",
        "change",
        "mark",
        "apply",
        "approve",
        "reject",
        "cancel",
        "complete",
        "pay",
        "deliver",
        "ship",
        "confirm",
        "close",
        "open",
        "activate",
        "deactivate",
        "enable",
        "disable",
        "add",
        "remove",
        "increase",
        "decrease",
        "increment",
        "decrement",
        "deduct",
        "credit",
        "debit",
        "charge",
        "refund",
        "assign",
        "unassign",
        "accept",
        "decline",
        "start",
        "finish",
        "fail",
        "succeed",
        "settle",
        "capture",
        "void",
        "expire",
        "renew",
        "suspend",
        "resume",
        "archive",
        "reserve",
        "release",
        "allocate",
        "withdraw",
        "deposit",
        "transfer",
        "consume",
        "redeem",
        "block",
        "unblock",
        "reset",
        "attach",
        "detach",
        "move",
        "rename",
        "upgrade",
        "downgrade",
        "restore",
        "delete",
        "register",
        "record",
        "earn",
        "spend",
        "rollback",
        "revert",
        "process",
        "handle",
        "dispatch",
        "reopen",
        "hold",
        "freeze",
        "unfreeze",
        "grant",
        "revoke",
        "subscribe",
        "unsubscribe",
        "join",
        "leave",
        "submit",
        "publish",
        "take",
        "adjust",
        "reduce",
        "bump",
        "sell",
        "buy",
        "book",
        "fill",
        "pick",
    ];
    VERBS.iter().any(|v| method.starts_with(v)) && method != "hashcode"
}

/// Calls that take the entity out of an `Optional` or a nullable look-up, changing nothing.
const UNWRAPS: &[&str] = &[
    "orelsethrow",
    "orelse",
    "orelseget",
    "orelsenull",
    "getornull",
    "ifpresent",
    "ifpresentorelse",
    "map",
    "filter",
    "let",
    "also",
    "apply",
    "run",
    "takeif",
    "takeunless",
    "flatmap",
    "stream",
    "foreach",
];

/// Methods of what a look-up returns that are no entity's: a reactive or collection
/// result's (`repo.findById(id).block()`, `repo.findAll().size()`).
const PIPELINE: &[&str] = &[
    "block",
    "subscribe",
    "size",
    "count",
    "then",
    "switch",
    "default",
    "collect",
    "iterator",
    "first",
    "last",
    "single",
    "await",
    "sum",
    "join",
    "doon",
    "onerror",
    "zip",
    "log",
    "cache",
    "sort",
    "limit",
    "skip",
    "take",
    "blockoptional",
];

/// Whether the look-up returns many rows (`findAll`, `findAllByStatus`, `getAll`).
fn found_many(call: &Call) -> bool {
    let mut c = call;
    while let Some(inner) = c.receiver.as_deref() {
        c = inner;
    }
    let m = c.method();
    m.starts_with("findall")
        || m.starts_with("getall")
        || m.ends_with("list")
        || m.ends_with("s") && !m.ends_with("status") && !m.ends_with("address")
}

/// Whether the call is a repository look-up, possibly taken out of its `Optional`
/// (`repo.findById(id).orElseThrow()`), so that a method called on it is the entity's.
fn unwrapped_load(call: &Call) -> bool {
    let mut c = call;
    while let Some(inner) = c.receiver.as_deref() {
        if !UNWRAPS.contains(&c.method().as_str()) && c.method() != "get" {
            return false;
        }
        c = inner;
    }
    true
}

/// Adds the commit's write of each entity the function loaded and changed without saving.
/// The `repo.save(entity)` that JPA's flush at commit amounts to, placed at `op` (the entity's
/// last change), in transaction `tx`.
fn save_op(op: &Op, mut repo: Vec<String>, entity: Expr, tx: u32) -> Op {
    repo.push("save".to_string());
    let call = Call {
        callee: repo,
        receiver: None,
        args: vec![entity],
        kwargs: Vec::new(),
        is_new: false,
        pos: op.pos,
    };
    Op {
        kind: OpKind::Call(call),
        pos: op.pos,
        conds: op.conds.clone(),
        lexical_tx: Some(tx),
        origin: None,
        detached: op.detached,
    }
}

pub(crate) fn flush_at_commit(f: &mut Function, tx: u32) {
    // Local → (repository callee, index of its last change).
    let mut loaded: HashMap<String, (Vec<String>, Option<usize>)> = HashMap::new();
    // `repo.findById(id).orElseThrow().approve()`, Kotlin `repo.findByIdOrNull(id)?.approve()`:
    // the entity changed where it is loaded, never named.
    let mut chained: Vec<(usize, Vec<String>, Expr)> = Vec::new();
    for (i, op) in f.ops.iter().enumerate() {
        if let OpKind::Call(c) = &op.kind
            && let Some(found) = c.receiver.as_deref()
            && changes(&c.method())
            && !UNWRAPS.contains(&c.method().as_str())
            && !PIPELINE.iter().any(|p| c.method().starts_with(p))
            && unwrapped_load(found)
            && !found_many(found)
            && let Some(repo) = loaded_through(&Expr::Call(Box::new(found.clone())))
        {
            chained.push((i, repo, Expr::Call(Box::new(found.clone()))));
        }
        match &op.kind {
            OpKind::Assign { targets, value, .. } => {
                for t in targets {
                    if let Some(repo) = loaded_through(value) {
                        loaded.insert(t.clone(), (repo, None));
                    } else if let Some((root, _)) = t.split_once('.')
                        && let Some(entry) = loaded.get_mut(root)
                    {
                        entry.1 = Some(i);
                    }
                }
            }
            // `stock.decrease(qty)`: the entity's own method changes it (a read's name —
            // `getTotal`, `isPaid`, `canRefund(x)` — does not).
            OpKind::Call(c)
                if c.receiver.is_none()
                    && !c.args.is_empty()
                    && let [root, _] = c.callee.as_slice()
                    && loaded.contains_key(root)
                    && changes(&c.method()) =>
            {
                if let Some(entry) = loaded.get_mut(root) {
                    entry.1 = Some(i);
                }
            }
            OpKind::Call(c)
                if matches!(
                    c.method().as_str(),
                    "save" | "saveandflush" | "merge" | "persist" | "update" | "flush"
                ) =>
            {
                for a in &c.args {
                    if let Expr::Path(p) = a
                        && p.len() == 1
                    {
                        loaded.remove(&p[0]);
                    }
                }
            }
            _ => {}
        }
    }
    let mut writes: Vec<(usize, Op)> = loaded
        .into_iter()
        .filter_map(|(local, (repo, changed))| {
            let at = changed?;
            Some((at, save_op(&f.ops[at], repo, Expr::Path(vec![local]), tx)))
        })
        .collect();
    for (at, repo, entity) in chained {
        writes.push((at, save_op(&f.ops[at], repo, entity, tx)));
    }
    // Inserted right after each entity's last change, latest first so indices hold.
    writes.sort_by_key(|w| std::cmp::Reverse(w.0));
    for (at, op) in writes {
        f.ops.insert(at + 1, op);
    }
}
