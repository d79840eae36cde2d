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

/// Whether an entity's method of this (lowercased) name changes it: not a read, a test or a
/// conversion.
fn changes(method: &str) -> bool {
    const READS: &[&str] = &[
        "get",
        "is",
        "has",
        "can",
        "to",
        "as",
        "equals",
        "contains",
        "compare",
        "matches",
        "validate",
        "check",
        "belongs",
        "find",
        "calculate",
        "compute",
        "format",
    ];
    !READS.iter().any(|r| method.starts_with(r)) && method != "hashcode"
}

/// Adds the commit's write of each entity the function loaded and changed without saving.
pub(crate) fn flush_at_commit(f: &mut Function, tx: u32) {
    // Local → (repository callee, index of its last change).
    let mut loaded: HashMap<String, (Vec<String>, Option<usize>)> = HashMap::new();
    for (i, op) in f.ops.iter().enumerate() {
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
            let op = &f.ops[at];
            let mut callee = repo;
            callee.push("save".to_string());
            let call = Call {
                callee,
                receiver: None,
                args: vec![Expr::Path(vec![local])],
                kwargs: Vec::new(),
                is_new: false,
                pos: op.pos,
            };
            Some((
                at,
                Op {
                    kind: OpKind::Call(call),
                    pos: op.pos,
                    conds: op.conds.clone(),
                    lexical_tx: Some(tx),
                    origin: None,
                    detached: op.detached,
                },
            ))
        })
        .collect();
    // Inserted right after each entity's last change, latest first so indices hold.
    writes.sort_by_key(|w| std::cmp::Reverse(w.0));
    for (at, op) in writes {
        f.ops.insert(at + 1, op);
    }
}
