//! `ORD_LAST_WRITE_WINS`: a handler writes an event's version, sequence or timestamp into a
//! row (an UPDATE, an upsert's DO UPDATE, an ORM update) without comparing it with the stored
//! one, so an older event delivered late overwrites newer state.

use super::{Hit, describe};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::OpKind;
use crate::ir::{Call, Expr};
use crate::rule::RuleId;
use crate::sql::{SetColumn, SqlStmt};
use crate::words::{is_event_time_column, is_order_column, norm, table_key};

/// Whether `e` carries the event's data only through objects fetched fresh from the provider
/// while handling (`subscription = await stripe.subscriptions.retrieve(id)`): those hold the
/// current state, which a late delivery cannot make older.
fn only_fetched_fresh(facts: &FnFacts<'_>, e: &Expr) -> bool {
    let mut roots = Vec::new();
    e.walk(&mut |x| {
        if let Expr::Path(p) = x
            && let Some(r) = p.first()
            && facts.tainted.contains(r)
        {
            roots.push(r.clone());
        }
    });
    !roots.is_empty()
        && roots.iter().all(|r| {
            matches!(facts.values.get(r), Some(Expr::Call(c))
                if c.method() == "retrieve" && c.callee.len() > 2 && !retrieves_event(c))
        })
}

/// `Stripe::Event.retrieve(id)`, `stripe.events.retrieve(id)`: the event itself, as it was
/// sent (an event never changes), not the object's current state.
fn retrieves_event(c: &Call) -> bool {
    c.callee
        .iter()
        .any(|s| matches!(norm(s).as_str(), "event" | "events"))
}

/// The update's value comes from the event as delivered, not from a fresh fetch.
fn from_delivery(facts: &FnFacts<'_>, e: &Expr) -> bool {
    facts.mentions_tainted(e) && !only_fetched_fresh(facts, e)
}

/// Whether the update sets `column` to a value derived from the event (`data: { endsAt }`
/// where `endsAt` came from the event, Django `endsAt=event[…]`).
fn set_from_event(facts: &FnFacts<'_>, call: &Call, column: &str) -> bool {
    let mut found = false;
    for (k, v) in &call.kwargs {
        found |= k == column && from_delivery(facts, v);
    }
    // The data held in a local: Prisma's `data`, or a lone argument (`sub.update!(attrs)`).
    let lone = call.args.first().filter(|_| call.args.len() == 1);
    // And Mongo's update document, second (`findOneAndUpdate(filter, updateData, …)`).
    let local = |e: Option<&Expr>| match e {
        Some(Expr::Path(p)) if p.len() == 1 => facts.values.get(&p[0]),
        _ => None,
    };
    let held = local(call.option("data").or(lone)).or_else(|| local(call.args.get(1)));
    // `row.current_period_end = event[…]; row.save()`: the field assigned before the save.
    // A repository's `save(row)` (Spring Data) saves the row it is given.
    let saved = match call.args.first() {
        Some(Expr::Path(p)) if p.len() == 1 => p.first(),
        _ => call.callee.first(),
    };
    if (matches!(call.method().as_str(), "save" | "add" | "merge")
        || crate::lang::jvm_vocab::is_save(&call.method()))
        && let Some(root) = saved
    {
        let target = format!("{root}.{column}");
        for op in &facts.func.ops {
            if let OpKind::Assign { targets, value, .. } = &op.kind {
                found |= targets.contains(&target) && from_delivery(facts, value);
            }
        }
    }
    for e in call.arg_exprs().into_iter().chain(held) {
        if let Expr::Object { fields, .. } = e {
            for (k, v) in fields {
                found |= k == column && from_delivery(facts, v);
            }
        }
    }
    found
}

/// A time the event carries (`current_period_end = $2`, `renews_at = EXCLUDED.renews_at`)
/// set from a placeholder bound to the event as delivered.
fn event_time_set<'s>(
    facts: &FnFacts<'_>,
    i: usize,
    sets: &'s [SetColumn],
) -> Option<&'s SetColumn> {
    let OpKind::Call(c) = &facts.func.ops[i].kind else {
        return None;
    };
    sets.iter().find(|s| {
        !s.relative
            && is_event_time_column(&s.column)
            && s.param
                .and_then(|n| bound(c, n))
                .is_some_and(|v| from_delivery(facts, v))
    })
}

/// The value bound to `$n` of a statement call: `query(sql).bind(a).bind(b)` and
/// `execute(sql, &[&a, &b])` / `query(sql, [a, b])` alike.
fn bound(call: &Call, n: usize) -> Option<&Expr> {
    match call.args.get(1) {
        Some(Expr::List(items)) if call.args.len() == 2 => items.get(n.checked_sub(1)?),
        _ => call.args.get(n),
    }
}

/// Whether the handler compares `column` before writing it (`if (stored.eventAt > eventAt)
/// return;`, `if row.version >= event.version: return`): the read-compare-write is the order
/// check.
fn guarded(facts: &FnFacts<'_>, column: &str) -> bool {
    let col = norm(column);
    // Django's `Model.objects.filter(updated_at__gt=occurred_at).exists()`: the stored order
    // compared in a look-up.
    let compares = |c: &Call| {
        c.kwargs.iter().any(|(k, _)| {
            k.rsplit_once("__").is_some_and(|(field, lookup)| {
                (norm(field) == col || is_order_column(field) || is_event_time_column(field))
                    && matches!(lookup, "gt" | "gte" | "lt" | "lte")
            })
        })
    };
    // (The call itself, or its result assigned: a call followed into a helper leaves that.)
    let django_compare = facts.func.ops.iter().any(|op| match &op.kind {
        OpKind::Call(c) => compares(c),
        OpKind::Assign {
            value: Expr::Call(c),
            ..
        } => compares(c),
        _ => false,
    });
    if django_compare {
        return true;
    }
    facts.func.conds.iter().any(|c| {
        let mut found = false;
        c.test.walk(&mut |e| {
            if let Expr::Binary { op, left, right } = e
                && matches!(op.as_str(), "<" | ">" | "<=" | ">=")
                && left
                    .words()
                    .iter()
                    .chain(right.words().iter())
                    .any(|w| norm(w) == col)
            {
                found = true;
            }
        });
        found
    })
}

/// The order or event-time column an ORM write `i` sets from the event, if any.
fn orm_column(facts: &FnFacts<'_>, i: usize, target: &str, sets: &[String]) -> Option<String> {
    // A JPA `@Version` column written to its entity is compared by the update itself
    // (`WHERE version = ?`): a stale event's save fails.
    let sets: Vec<&String> = sets
        .iter()
        .filter(|s| !facts.schema.is_version(target, s))
        .collect();
    let OpKind::Call(c) = &facts.func.ops[i].kind else {
        return None;
    };
    let from_event = c.arg_exprs().iter().any(|e| from_delivery(facts, e));
    sets.iter()
        .find(|s| is_order_column(s))
        .filter(|_| from_event)
        .or_else(|| {
            sets.iter()
                .find(|s| is_event_time_column(s) && set_from_event(facts, c, s))
        })
        .map(|s| s.to_string())
}

/// The order or event-time column the update of an ORM upsert (op `i`) sets from the event.
fn upsert_column(facts: &FnFacts<'_>, i: usize) -> Option<String> {
    let OpKind::Call(c) = &facts.func.ops[i].kind else {
        return None;
    };
    let update = match c.method().as_str() {
        "upsert" => c.option("update"),
        "update_or_create" | "aupdate_or_create" => c.option("defaults"),
        "findoneandupdate" | "updateone" | "findbyidandupdate" if c.option("upsert").is_some() => {
            c.args.get(1)
        }
        _ => None,
    }?;
    // The update held in a local (`const updateData = {…}`, `{ $set: updateData }`).
    let update = facts.resolved(update)?;
    let update = match update.field("$set") {
        Some(set) => facts.resolved(set)?,
        None => update,
    };
    let Expr::Object { fields, .. } = update else {
        return None;
    };
    fields
        .iter()
        .find(|(k, v)| (is_order_column(k) || is_event_time_column(k)) && from_delivery(facts, v))
        .map(|(k, _)| k.clone())
}

/// Whether create `i` saves a row that a look-up of its model just before may have found (a
/// find-or-build: `find_or_initialize_by`), the look-up deciding no branch around it.
fn found_or_built(facts: &FnFacts<'_>, i: usize, target: &str) -> bool {
    (0..i).any(|k| {
        matches!(&facts.acts[k], Act::OrmRead { target: t } if table_key(t) == table_key(target))
            && !super::decided_by(facts, k, i)
    })
}

/// The fields of the row that `row.save!` (op `i`) saves, assigned before it
/// (`row.current_period_end = …`).
fn assigned_before(facts: &FnFacts<'_>, i: usize) -> Vec<String> {
    let OpKind::Call(c) = &facts.func.ops[i].kind else {
        return Vec::new();
    };
    // `row.save!`, or a session's or repository's `add(row)`/`save(row)`.
    let row = match (c.callee.as_slice(), c.args.first()) {
        ([row, _], _) => row,
        (_, Some(Expr::Path(p))) if p.len() == 1 => &p[0],
        _ => return Vec::new(),
    };
    let prefix = format!("{row}.");
    facts.func.ops[..i]
        .iter()
        .filter_map(|o| match &o.kind {
            OpKind::Assign { targets, .. } => Some(targets),
            _ => None,
        })
        .flatten()
        .filter_map(|t| t.strip_prefix(&prefix).map(str::to_string))
        .collect()
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_event(facts.func) {
        return;
    }
    for (i, act) in facts.acts.iter().enumerate() {
        let column = match act {
            Act::Sql(SqlStmt::Update {
                sets,
                ordered: false,
                ..
            }) => sets
                .iter()
                .find(|s| s.from_input && !s.relative && is_order_column(&s.column))
                .or_else(|| event_time_set(facts, i, sets))
                .map(|s| s.column.clone()),
            Act::Sql(SqlStmt::Insert {
                do_update,
                do_update_ordered: false,
                ..
            }) => do_update
                .iter()
                .find(|s| s.from_input && !s.relative && is_order_column(&s.column))
                .or_else(|| event_time_set(facts, i, do_update))
                .map(|s| s.column.clone()),
            Act::OrmUpdate {
                sets,
                ordered: false,
                relative: false,
                target,
            } => orm_column(facts, i, target, sets),
            // Prisma's `upsert({ where, create, update })`, Django's
            // `update_or_create(…, defaults={…})`, Mongo's `findOneAndUpdate(f, u, { upsert })`:
            // a redelivered or late event lands in the update.
            Act::OrmCreate { .. } if upsert_column(facts, i).is_some() => upsert_column(facts, i),
            // `row = Model.find_or_initialize_by(k)` … `row.save!`: on a redelivery the row
            // exists, and the save overwrites it.
            Act::OrmCreate {
                target, columns, ..
            } if found_or_built(facts, i, target) => {
                let sets = columns.clone().unwrap_or_else(|| assigned_before(facts, i));
                orm_column(facts, i, target, &sets)
            }
            _ => None,
        };
        let Some(column) = column else { continue };
        if guarded(facts, &column) {
            continue;
        }
        out.push(Hit {
            rule: RuleId::OrdLastWriteWins,
            pos: facts.func.ops[i].pos,
            origin: facts.func.ops[i].origin.clone(),
            message: format!(
                "{} writes the event's {column} without comparing it with the stored {column}: an older event overwrites a newer state",
                describe(act)
            ),
            confidence: Confidence::High,
        });
    }
}
