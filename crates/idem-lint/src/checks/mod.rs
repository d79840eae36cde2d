//! The twelve checks. Each reads the [`FnFacts`] of one function and reports [`Hit`]s; the
//! engine adds the file, the fix and the suppressions.

mod ack_before_commit;
mod check_then_act;
mod dual_write;
mod duplicate_not_2xx;
mod key_volatile;
mod last_write_wins;
mod marker_outside_tx;
mod open_tx;
mod publish_in_tx;
mod relative_update;
mod sig_parsed_body;
mod ttl_marker;
mod unconditional_insert;

use std::sync::Arc;

pub(crate) use marker_outside_tx::marker_commits;
pub(crate) use ttl_marker::applies as ttl_marker_applies;

use crate::analysis::{Act, FnFacts};
use crate::branches::exclusive;
use crate::finding::Confidence;
use crate::handlers::is_entry;
use crate::ir::{Expr, Function, Module, OpKind, Origin, Pos};
use crate::rule::RuleId;
use crate::schema::Schema;
use crate::sql::SqlStmt;
use crate::words::{is_duplicate_word, is_marker_table, norm};

/// A finding before it has a file.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) rule: RuleId,
    pub(crate) pos: Pos,
    pub(crate) message: String,
    pub(crate) confidence: Confidence,
    /// Where the write is when it happens in a helper the handler calls.
    pub(crate) origin: Option<Arc<Origin>>,
}

/// What a check may need about the whole file.
#[derive(Debug)]
pub(crate) struct FileFacts {
    /// The file installs a JSON body parser (`express.json()`, `bodyParser.json()`) and no
    /// raw one, so `req.body` is parsed.
    pub(crate) parsed_body: bool,
}

/// Runs every check over a lowered file. `expand` gives a handler with the helpers it calls
/// inlined (call following), or `None` when it calls none.
pub(crate) fn run(
    module: &Module,
    schema: &Schema,
    implicit_tx: bool,
    expand: &dyn Fn(&Function) -> Option<Function>,
) -> Vec<Hit> {
    let file = FileFacts {
        parsed_body: parsed_body(module),
    };
    let mut hits = Vec::new();
    // A function that opens a transaction is followed into its helpers too: a publish made by
    // one of them while the transaction is open is ARC_PUBLISH_IN_TX's, handler or not.
    let expanded: Vec<Option<Function>> = module
        .functions
        .iter()
        .map(|func| {
            if is_entry(func) || opens_transaction(func) {
                expand(func)
            } else {
                // Or one whose transaction a helper opens and hands back (`let (tx, job) =
                // dequeue(pool)`, a loaded state struct holding it) and another commits.
                expand(func).filter(opens_transaction)
            }
        })
        .collect();
    // A helper that is an event handler only because a handler of this file calls it is
    // judged where that handler inlines it (after its claim, inside its transaction), not
    // again on its own.
    // Each by the helper's name and where its operations are written, so a function is
    // known by its own operations, not by a name another file's helper shares.
    let inlined: std::collections::HashSet<(&str, (u32, u32))> = expanded
        .iter()
        .zip(&module.functions)
        .filter(|(_, f)| !f.called_by_handler)
        .filter_map(|(e, _)| e.as_ref())
        .flat_map(|e| e.ops.iter().filter_map(|op| op.origin.as_ref()))
        .map(|o| (o.helper.as_str(), (o.pos.line, o.pos.column)))
        .collect();
    let inlined_here = |func: &Function| {
        func.ops
            .iter()
            .any(|op| inlined.contains(&(func.name.as_str(), (op.pos.line, op.pos.column))))
    };
    for (func, expanded) in module.functions.iter().zip(&expanded) {
        // A function this file's handlers inline is judged there, in their claims and
        // transactions, whether or not it would pass for a handler on its own (`onPaid(tx,
        // evt)` called by the webhook, in a dispatch table or a switch).
        if func.called_by_handler && inlined_here(func) {
            continue;
        }
        let func = expanded.as_ref().unwrap_or(func);
        let facts = FnFacts::new(func, &module.globals, schema, implicit_tx);
        if std::env::var("IDEM_LINT_TRACE").is_ok_and(|n| n == func.name) {
            eprintln!("== {} kind {:?}", func.name, func.kind);
            for (k, op) in func.ops.iter().enumerate() {
                eprintln!(
                    "{k:3} L{} c{:?} tx{:?} d{} {:?} | {:?}",
                    op.pos.line, op.conds, facts.tx[k], op.detached, facts.acts[k], op.kind
                );
            }
            for (c, cond) in func.conds.iter().enumerate() {
                eprintln!("cond {c}: {:?}", cond.test);
            }
        }
        key_volatile::check(&facts, &mut hits);
        check_then_act::check(&facts, &mut hits);
        marker_outside_tx::check(&facts, &mut hits);
        unconditional_insert::check(&facts, &mut hits);
        relative_update::check(&facts, &mut hits);
        dual_write::check(&facts, &mut hits);
        duplicate_not_2xx::check(&facts, &mut hits);
        sig_parsed_body::check(&facts, &file, &mut hits);
        last_write_wins::check(&facts, &mut hits);
        ack_before_commit::check(&facts, &mut hits);
        publish_in_tx::check(&facts, &mut hits);
        ttl_marker::check(&facts, &mut hits);
    }
    hits.sort_by_key(|h| (h.pos, h.rule, h.origin.as_ref().map(|o| o.pos.line)));
    // One finding per line and check, except that one call into a service may inline several
    // writes in different helpers (`Service.new(event).process!`): each is its own finding.
    hits.dedup_by_key(|h| (h.pos.line, h.rule, h.origin.as_ref().map(|o| o.pos.line)));
    hits
}

/// Whether the function opens a database transaction itself: a transaction callback or
/// block, or `tx := db.Begin(…)`.
fn opens_transaction(func: &Function) -> bool {
    func.ops.iter().any(|op| {
        op.lexical_tx.is_some()
            || matches!(&op.kind, OpKind::Assign { value: Expr::Call(c), .. }
                if c.callee.len() > 1
                    && matches!(c.method().as_str(), "begin" | "begintx" | "beginx" | "starttransaction"))
    })
}

fn parsed_body(module: &Module) -> bool {
    let mut json = false;
    let mut raw = false;
    let calls = module
        .top_calls
        .iter()
        .chain(module.functions.iter().flat_map(|f| {
            f.ops.iter().filter_map(|op| match &op.kind {
                OpKind::Call(c) => Some(c),
                _ => None,
            })
        }));
    for c in calls {
        let name = c.name().to_lowercase();
        if name.ends_with("express.json") || name.ends_with("bodyparser.json") {
            json = true;
            if c.option("verify").is_some() {
                raw = true;
            }
        }
        if name.ends_with(".raw")
            || name.ends_with(".text") && name.contains("express")
            || name.ends_with("bodyparser.raw")
        {
            raw = true;
        }
    }
    json && !raw
}

/// Whether the act records that an event was handled: an insert into a dedup table, a
/// `SET NX` / `SADD` on a key naming processed events.
pub(crate) fn is_marker(act: &Act) -> bool {
    match act {
        Act::Sql(SqlStmt::Insert {
            table,
            conflict_clause,
            ..
        }) => is_marker_table(table) || *conflict_clause && is_event_log_table(table),
        Act::OrmCreate { target, safe, .. } => {
            is_marker_table(target) || *safe && is_event_log_table(target)
        }
        // Lock keys are no Redis acts at all (`FnFacts::redis`).
        Act::RedisWrite { key, nx } => *nx || is_marker_table(key) || norm(key).contains("seen"),
        _ => false,
    }
}

/// A table of received events or messages (`payment_events`, `stripe_messages`): an insert
/// into it that ignores conflicts records that the event arrived, a claim by another name.
pub(crate) fn is_event_log_table(table: &str) -> bool {
    let key = crate::words::table_key(table);
    ["event", "message", "notification", "delivery"]
        .iter()
        .any(|w| key.ends_with(w))
}

/// Whether the act reads a dedup table or key.
pub(crate) fn is_marker_read(act: &Act) -> bool {
    match act {
        Act::Sql(SqlStmt::Select { tables, .. }) => tables.iter().any(|t| is_marker_table(t)),
        Act::OrmRead { target } => is_marker_table(target),
        Act::RedisRead { .. } => true,
        _ => false,
    }
}

/// Whether a condition says "this is a duplicate" where op `i` runs.
pub(crate) fn in_duplicate_branch(facts: &FnFacts<'_>, i: usize) -> bool {
    let op = &facts.func.ops[i];
    op.conds.iter().any(|&c| {
        let cond = &facts.func.conds[c];
        // `if (!dup)`, and `if (err.code !== "23505")`: the branch for everything else.
        let inequality = matches!(&cond.test, crate::ir::Expr::Binary { op, .. } if matches!(op.as_str(), "!=" | "!==" | "is not"));
        let negated = cond.negated ^ (matches!(cond.test, crate::ir::Expr::Not(_)) || inequality);
        !negated && cond.test.words().iter().any(|w| is_duplicate_word(w))
    })
}

/// Whether op `i` runs after the function checked or claimed the event's id (so a
/// duplicate does not reach it), or in one transaction with such a claim.
pub(crate) fn guarded(facts: &FnFacts<'_>, i: usize) -> bool {
    let tx = facts.tx[i];
    facts.acts.iter().enumerate().any(|(k, act)| {
        (k < i
            && (is_marker(act)
                || is_marker_read(act)
                || unique_claim(facts, act)
                || decided_claim(facts, k, i))
            && !exclusive(facts.func, k, i))
            || (tx.is_some() && facts.tx[k] == tx && is_marker(act) && !exclusive(facts.func, k, i))
    }) || in_duplicate_branch(facts, i)
        || facts.func.ops[i].conds.iter().any(|&c| {
            facts.func.conds[c]
                .test
                .words()
                .iter()
                .any(|w| norm(w).contains("processed") || norm(w).contains("duplicate"))
        })
}

/// A conflict-ignoring insert or get-or-create at `k` whose outcome returns early before `i`
/// (`_, created = Op.objects.get_or_create(…)`, `if not created: return`): a claim by any name.
fn decided_claim(facts: &FnFacts<'_>, k: usize, i: usize) -> bool {
    let claims = matches!(
        facts.acts[k],
        Act::OrmCreate { safe: true, .. }
            | Act::Sql(SqlStmt::Insert {
                conflict_clause: true,
                ..
            })
    );
    claims && decided_by(facts, k, i)
}

/// A plain insert into a table whose declared unique key its columns fill: a duplicate fails
/// there and never reaches what follows (an insert used as the claim).
fn unique_claim(facts: &FnFacts<'_>, act: &Act) -> bool {
    match act {
        Act::Sql(SqlStmt::Insert {
            table,
            columns,
            conflict_clause: false,
            ..
        }) => facts.schema.knows(table) && facts.schema.covers(table, Some(columns)),
        Act::OrmCreate {
            target,
            columns: Some(columns),
            safe: false,
        } => facts.schema.knows(target) && facts.schema.covers(target, Some(columns)),
        _ => false,
    }
}

/// Whether the function looked up a row by the event's data before op `i` and op `i` runs in
/// a branch (or after an early return) that the look-up decided: the event was checked first.
/// A race between two copies remains, and `REL_CHECK_THEN_ACT` reports it where it inserts.
/// Whether op `i` runs only on a path a condition about op `k`'s result decided: `i` is under
/// such a condition, or an early return or throw under one lies between them.
pub(crate) fn decided_by(facts: &FnFacts<'_>, k: usize, i: usize) -> bool {
    let ops = &facts.func.ops;
    let OpKind::Call(read) = &ops[k].kind else {
        return false;
    };
    // The look-up's call, or, for a look-up in a helper inlined here, the call of that helper
    // (`let p = Payments::find(conn, id)?`), which returns its result.
    let helper = ops[k].origin.as_ref().map(|o| {
        o.helper
            .rsplit(['.', ':'])
            .next()
            .unwrap_or(&o.helper)
            .to_lowercase()
    });
    let is_read = |c: &crate::ir::Call| {
        c.pos == read.pos
            || helper
                .as_ref()
                .is_some_and(|h| !h.is_empty() && c.method() == *h)
    };
    // What the look-up's result is kept in (in the helper, and where the helper returns it).
    let kept: Vec<String> = ops[k + 1..i]
        .iter()
        .filter_map(|o| match &o.kind {
            OpKind::Assign {
                targets,
                value: crate::ir::Expr::Call(c),
                ..
            } if is_read(c) => Some(targets.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    // A condition about the look-up: it tests the result, or makes the look-up itself.
    let about = |c: usize| {
        let test = &facts.func.conds[c].test;
        let mut yes = false;
        test.walk(&mut |e| match e {
            crate::ir::Expr::Path(p) => {
                yes |= p.first().is_some_and(|r| kept.iter().any(|t| t == r))
            }
            crate::ir::Expr::Call(c) => yes |= is_read(c),
            _ => {}
        });
        yes
    };
    let new_conds = |o: &crate::ir::Op| {
        o.conds
            .iter()
            .filter(|c| !ops[k].conds.contains(c))
            .any(|&c| about(c))
    };
    new_conds(&ops[i])
        || ops[k + 1..i]
            .iter()
            .any(|o| matches!(o.kind, OpKind::Return(_) | OpKind::Throw(_)) && new_conds(o))
}

pub(crate) fn checked_first(facts: &FnFacts<'_>, i: usize) -> bool {
    let ops = &facts.func.ops;
    (0..i).any(|k| {
        let OpKind::Call(read) = &ops[k].kind else {
            return false;
        };
        let keyed_read = matches!(
            facts.acts[k],
            Act::OrmRead { .. } | Act::Sql(SqlStmt::Select { filtered: true, .. })
        ) && read.arg_exprs().iter().any(|e| facts.mentions_tainted(e));
        if !keyed_read || exclusive(facts.func, k, i) {
            return false;
        }
        decided_by(facts, k, i)
    })
}

/// Words of an error that a unique key raised: the database refereed the insert.
const UNIQUE_VIOLATION: &[&str] = &[
    "23505",
    "p2002",
    "uniqueviolation",
    "integrityerror",
    "erdupentry",
    "uniqueconstraint",
    "duplicatekey",
    "duplicatedkey",
    "11000",
    // Rails: `rescue ActiveRecord::RecordNotUnique`.
    "recordnotunique",
    // Spring's `DataIntegrityViolationException`, JDBC's
    // `SQLIntegrityConstraintViolationException`.
    "dataintegrityviolation",
    "integrityconstraintviolation",
];

/// Whether the function handles a unique-key violation after op `i` (`except IntegrityError`,
/// `catch (e) { if (e.code === "P2002") … }`, `errors.Is(err, gorm.ErrDuplicatedKey)`): the
/// insert hits a unique key the linter cannot see, and the database referees a duplicate.
/// Whether a word names a unique-key violation (`23505`, `P2002`, `IntegrityError`, `11000`).
pub(crate) fn is_unique_violation(word: &str) -> bool {
    let n = norm(word);
    UNIQUE_VIOLATION.iter().any(|u| n.contains(u))
}

pub(crate) fn conflict_handled(facts: &FnFacts<'_>, i: usize) -> bool {
    let handled: Vec<usize> = facts
        .func
        .conds
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.test
                .words()
                .iter()
                .any(|w| UNIQUE_VIOLATION.iter().any(|u| norm(w).contains(u)))
        })
        .map(|(k, _)| k)
        .collect();
    let in_handled = |o: &crate::ir::Op| o.conds.iter().any(|c| handled.contains(c));
    // An empty clause (`except DuplicateKeyError: pass`) holds no operation to place, and
    // swallowing the violation is handling it.
    !handled.is_empty()
        && (facts.func.ops[i + 1..].iter().any(in_handled)
            || !facts.func.ops.iter().any(in_handled))
}

/// A short description of an act for messages.
pub(crate) fn describe(act: &Act) -> String {
    match act {
        Act::Sql(SqlStmt::Insert { table, .. }) => format!("INSERT INTO {table}"),
        Act::Sql(SqlStmt::Update { table, .. }) => format!("UPDATE {table}"),
        Act::Sql(SqlStmt::Select { tables, .. }) => format!("SELECT FROM {}", tables.join(", ")),
        Act::Sql(SqlStmt::Delete { table }) => format!("DELETE FROM {table}"),
        Act::Sql(other) => format!("{other:?}"),
        Act::OrmCreate { target, .. } => format!("create of {target}"),
        Act::OrmUpdate { target, .. } => format!("update of {target}"),
        Act::OrmRead { target } => format!("look-up of {target}"),
        Act::RedisRead { key } => format!("Redis read of {key}"),
        Act::RedisWrite { key, .. } => format!("Redis write of {key}"),
        Act::RedisIncr => "Redis increment".into(),
        Act::Publish => "broker publish".into(),
        Act::HttpCreate => "creating HTTP call".into(),
        Act::Commit => "commit".into(),
        Act::Begin => "begin".into(),
        Act::Other => "call".into(),
    }
}

/// The call's name as written, for messages.
pub(crate) fn call_name(facts: &FnFacts<'_>, i: usize) -> String {
    match &facts.func.ops[i].kind {
        OpKind::Call(c) => format!("{}()", c.name()),
        _ => String::new(),
    }
}
