//! `DAT_RELATIVE_UPDATE`: an increment applied on delivery (`balance = balance - $1`,
//! `$inc`, Prisma `increment`, Django `F("n") + 1`, `INCRBY`, `account.balance -= x` then a
//! save) with no event-id ledger or dedup claim before it: each redelivery applies it again.

use super::{Hit, checked_first, describe, guarded};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_event(facts.func) {
        return;
    }
    let ops = &facts.func.ops;
    for (i, act) in facts.acts.iter().enumerate() {
        let (what, confidence) = match act {
            Act::Sql(SqlStmt::Update { sets, .. }) if sets.iter().any(|s| s.relative) => {
                let cols: Vec<&str> = sets
                    .iter()
                    .filter(|s| s.relative)
                    .map(|s| s.column.as_str())
                    .collect();
                (
                    format!(
                        "{} sets {} relative to its old value",
                        describe(act),
                        cols.join(", ")
                    ),
                    Confidence::High,
                )
            }
            // `current = am.balance.unwrap(); am.balance = Set(current + amount); am.update(db)`.
            Act::Sql(SqlStmt::Update { sets, .. })
                if let Some(col) = sets.iter().find(|s| computed_from_itself(facts, i, s)) =>
            {
                (
                    format!(
                        "{} sets {} to its loaded value plus or minus an amount",
                        describe(act),
                        col.column
                    ),
                    Confidence::Medium,
                )
            }
            Act::Sql(SqlStmt::Insert { do_update, .. }) if do_update.iter().any(|s| s.relative) => {
                (
                    format!("{} … DO UPDATE adds to the stored value", describe(act)),
                    Confidence::High,
                )
            }
            Act::OrmUpdate { relative: true, .. } => (
                format!("{} increments a stored value", describe(act)),
                Confidence::High,
            ),
            Act::RedisIncr => (
                format!("{} on delivery", super::call_name(facts, i)),
                Confidence::High,
            ),
            Act::Other => match &ops[i].kind {
                OpKind::Assign {
                    targets,
                    op: Some(o),
                    ..
                } if (o == "+=" || o == "-=")
                    && targets.iter().any(|t| {
                        t.contains('.') && !t.starts_with("self.") && !t.starts_with("this.")
                    })
                    && facts.acts[i + 1..]
                        .iter()
                        .any(|a| a.is_db_write() || matches!(a, Act::Commit)) =>
                {
                    (
                        format!("`{} {o}` on a loaded row, then saved", targets.join(", ")),
                        Confidence::Medium,
                    )
                }
                // `product.stock = product.stock - qty` (or through a local: `int n =
                // product.getStock() - qty; product.setStock(n)`), then a save.
                OpKind::Assign {
                    targets,
                    op: None,
                    value,
                } if facts.acts[i + 1..]
                    .iter()
                    .any(|a| a.is_db_write() || matches!(a, Act::Commit)) =>
                {
                    let Some(bin) = row_plus_minus(facts, targets, value) else {
                        continue;
                    };
                    (
                        format!(
                            "`{t} = {t} {bin} …` on a loaded row, then saved",
                            t = targets.join(", ")
                        ),
                        Confidence::Medium,
                    )
                }
                _ => continue,
            },
            _ => continue,
        };
        if guarded(facts, i)
            || checked_first(facts, i) && (!only_found(facts, i) || ledger_checked(facts, i))
        {
            continue;
        }
        out.push(Hit {
            rule: RuleId::DatRelativeUpdate,
            pos: ops[i].pos,
            origin: ops[i].origin.clone(),
            message: format!("{what}, with no event-id ledger: every redelivery applies it again"),
            confidence,
        });
    }
}

/// Whether a look-up that decided op `i` reads a table the function inserts into after it
/// (`findByRequestId(…)` of the history row it then saves): the event's own ledger entry,
/// whose existence is the check.
fn ledger_checked(facts: &FnFacts<'_>, i: usize) -> bool {
    (0..i).any(|k| {
        let Act::OrmRead { target } = &facts.acts[k] else {
            return false;
        };
        let table = crate::words::table_key(target);
        facts.acts[i + 1..].iter().any(
            |a| matches!(a, Act::OrmCreate { target: t, .. } if crate::words::table_key(t) == table),
        ) && super::decided_by(facts, k, i)
    })
}

/// Whether every look-up that decided op `i` was only asked whether its row exists
/// (`return head(:ok) if transaction.blank?`, `unless order`): a redelivery finds the row
/// again, so that is no check that the event was applied (`return if transaction.success?`
/// is one).
fn only_found(facts: &FnFacts<'_>, i: usize) -> bool {
    let ops = &facts.func.ops;
    let rows: Vec<&String> = ops[..i]
        .iter()
        .enumerate()
        .filter(|(k, _)| {
            matches!(
                facts.acts[*k],
                Act::OrmRead { .. } | Act::Sql(SqlStmt::Select { .. })
            )
        })
        .filter_map(|(k, _)| match &ops[k].kind {
            OpKind::Call(read) => Some((k, read.pos)),
            _ => None,
        })
        .flat_map(|(k, at)| {
            let direct = ops[..i].iter().filter_map(move |o| match &o.kind {
                OpKind::Assign {
                    targets,
                    value: Expr::Call(c),
                    ..
                } if c.pos == at => targets.first(),
                _ => None,
            });
            direct.chain(returned_row(ops, k, at, i))
        })
        .collect();
    let mut tested = false;
    let mut state = false;
    for c in ops[i]
        .conds
        .iter()
        .chain(ops[..i].iter().flat_map(|o| &o.conds))
    {
        let test = &facts.func.conds[*c].test;
        let amounts = compared_amounts(test);
        test.walk(&mut |e| {
            // `amount > wallet.getBalance()`: whether the row can bear the change, not
            // whether this event was applied.
            if amounts.iter().any(|a| std::ptr::eq(*a, e)) {
                tested = true;
                return;
            }
            let (root, rest) = match e {
                Expr::Path(p) => (p.first(), p.get(1)),
                Expr::Call(c) => (c.callee.first(), c.callee.get(1)),
                _ => return,
            };
            if root.is_some_and(|r| rows.contains(&r)) {
                tested = true;
                // `order.id` handed to the next look-up names the row, it tests nothing.
                state |= rest.is_some_and(|w| {
                    let names_row = w == "id" || w.ends_with("_id") || w.ends_with("Id");
                    !names_row && !crate::words::tests_presence(w)
                });
            }
        });
    }
    tested && !state
}

/// The local a look-up's row lands in when a helper inlined at its call returns it
/// (`Order::find_by_id(&pool, id)` returning `fetch_optional(…)`): the first assignment of a
/// call's value after the helper's `return` of look-up `k` (at `at`), before op `i`.
fn returned_row(ops: &[crate::ir::Op], k: usize, at: crate::ir::Pos, i: usize) -> Option<&String> {
    let back = ops[k + 1..i]
        .iter()
        .position(|o| matches!(&o.kind, OpKind::Return(Some(Expr::Call(c))) if c.pos == at))?
        + k
        + 1;
    ops[back + 1..i].iter().find_map(|o| match &o.kind {
        OpKind::Assign {
            targets,
            value: Expr::Call(_),
            ..
        } => targets.first(),
        _ => None,
    })
}

/// Whether an UPDATE's bound value for `set` was computed in the handler from the same column
/// of a loaded row (`current_balance = account.balance.unwrap()`, then `current_balance +
/// amount`): `col = col + x` written in two steps, as ORMs that set whole values (sea-orm's
/// `Set(v)`) make it.
fn computed_from_itself(facts: &FnFacts<'_>, i: usize, set: &crate::sql::SetColumn) -> bool {
    let OpKind::Call(call) = &facts.func.ops[i].kind else {
        return false;
    };
    let Some(value) = set.param.and_then(|n| call.args.get(n)) else {
        return false;
    };
    let column = crate::words::norm(&set.column);
    let own = |e: &Expr| {
        let mut path = Vec::new();
        match facts.resolved(e).unwrap_or(e) {
            Expr::Path(p) => path.extend(p.iter()),
            Expr::Call(c) => path.extend(c.callee.iter()),
            _ => {}
        }
        path.len() > 1 && path.iter().any(|s| crate::words::norm(s) == column)
    };
    let mut found = false;
    let mut seen = 0;
    let mut stack = vec![value];
    while let Some(e) = stack.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        match e {
            Expr::Binary { op, left, right } if op == "+" || op == "-" => {
                let text = |e: &Expr| matches!(e, Expr::Str(_) | Expr::Template(_));
                found |= (own(left) || own(right)) && !text(left) && !text(right);
            }
            // `Set(v)` and a lone local's value are followed.
            Expr::Call(c) if c.callee.len() == 1 => stack.extend(c.args.iter()),
            Expr::Path(p) if p.len() == 1 => stack.extend(facts.values.get(&p[0])),
            Expr::Other(parts) => stack.extend(parts.iter()),
            _ => {}
        }
    }
    found
}

/// The operands of the ordering comparisons in `test` (`amount > wallet.balance`): a row's
/// value compared with an amount is a limit (enough balance, enough stock), never a record
/// that the event was handled.
fn compared_amounts(test: &Expr) -> Vec<&Expr> {
    let mut out = Vec::new();
    test.walk(&mut |e| {
        if let Expr::Binary { op, left, right } = e
            && matches!(op.as_str(), "<" | ">" | "<=" | ">=")
        {
            out.extend([left.as_ref(), right.as_ref()]);
        }
    });
    out
}

/// The operator of `row.field = row.field ± x`, the sum written out or held in a local
/// first (`val total = row.field + x; row.field = total`).
fn row_plus_minus<'e>(
    facts: &'e FnFacts<'_>,
    targets: &[String],
    value: &'e Expr,
) -> Option<&'e str> {
    let Some(Expr::Binary { op, left, .. }) = facts.resolved(value) else {
        return None;
    };
    let own = targets.iter().any(|t| {
        t.contains('.')
            && !t.starts_with("self.")
            && !t.starts_with("this.")
            && matches!(left.as_ref(), Expr::Path(p) if p.join(".") == *t)
    });
    (own && (op == "+" || op == "-")).then_some(op.as_str())
}
