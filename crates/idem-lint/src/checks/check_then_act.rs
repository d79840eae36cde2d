//! `REL_CHECK_THEN_ACT`: a look-up ("does it exist?") then an insert of the same table or
//! key, with no unique key, lock (`FOR UPDATE`) or conflict clause to referee two copies of
//! one event running at once: both see "absent", both insert. Redis GET/EXISTS then SET
//! without NX is the same race.

use super::{Hit, describe};
use crate::analysis::{Act, FnFacts, same_target};
use crate::finding::Confidence;
use crate::handlers::{is_entry, is_event};
use crate::ir::{Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::{is_marker_table, norm};

fn read_target(act: &Act) -> Option<&str> {
    match act {
        Act::Sql(SqlStmt::Select {
            locked: false,
            filtered: true,
            ..
        })
        | Act::OrmRead { .. }
        | Act::RedisRead { .. } => act.target(),
        _ => None,
    }
}

/// An insert that a second copy would also make: its table and columns (when written out).
fn plain_insert(act: &Act) -> Option<(&str, Option<&[String]>)> {
    match act {
        Act::Sql(SqlStmt::Insert {
            table,
            columns,
            conflict_clause: false,
            ..
        }) => Some((table.as_str(), Some(columns.as_slice()))),
        Act::OrmCreate {
            target,
            columns,
            safe: false,
        } => Some((target.as_str(), columns.as_deref())),
        // A Redis key is a claim only when it names one (`processed:…`, `seen:…`); cache-aside
        // (`get`, compute, `set`) is no check-then-act.
        Act::RedisWrite { key, nx: false }
            if (is_marker_table(key) || norm(key).contains("seen"))
                && !norm(key).contains("cache") =>
        {
            Some((key.as_str(), None))
        }
        _ => None,
    }
}

/// The columns a look-up filters by: SQL's WHERE, Prisma/Sequelize `where: { … }`, Mongo's first object,
/// Django and SQLAlchemy keywords (`filter(event_id=…)`, `filter_by(…)`), along the chain.
fn lookup_columns(facts: &FnFacts<'_>, i: usize) -> Vec<String> {
    // SQL: the columns its WHERE names.
    if let Act::Sql(SqlStmt::Select { where_columns, .. }) = &facts.acts[i] {
        return where_columns.clone();
    }
    let OpKind::Call(call) = &facts.func.ops[i].kind else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut c = Some(call);
    while let Some(call) = c {
        out.extend(
            call.kwargs
                .iter()
                .map(|(k, _)| k.split("__").next().unwrap_or(k).to_string()),
        );
        // Drizzle's `select({ id: t.id })` names the columns read, not the filter.
        let projection = call.method() == "select";
        let object = call.option("where").or_else(|| {
            call.args
                .iter()
                .find(|a| !projection && matches!(a, Expr::Object { .. }))
        });
        if let Some(Expr::Object { fields, .. }) = object {
            out.extend(
                fields
                    .iter()
                    .filter(|(k, _)| k != "...")
                    .map(|(k, _)| k.clone()),
            );
        }
        // `user.charges.exists?(…)` filters by `charges.user_id` too.
        out.extend(facts.association_owner(call));
        // Spring Data's `existsByOrderId(…)` filters by `orderId`.
        out.extend(crate::lang::jvm_derived::filter_columns(call));
        c = call.receiver.as_deref();
    }
    out
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_event(facts.func) && !is_entry(facts.func) {
        return;
    }
    let ops = &facts.func.ops;
    // A Redis check in front of a database effect is REL_TTL_MARKER's finding.
    let ttl_marker = super::ttl_marker::applies(facts);
    for (j, act) in facts.acts.iter().enumerate() {
        let Some((written, columns)) = plain_insert(act) else {
            continue;
        };
        if super::conflict_handled(facts, j) {
            continue;
        }
        let redis = matches!(act, Act::RedisWrite { .. });
        // A Redis check in front of a database claim only saves work: the database decides.
        if redis && (ttl_marker || super::ttl_marker::database_claim(facts)) {
            continue;
        }
        let read = (0..j).rev().find(|&i| {
            read_target(&facts.acts[i]).is_some_and(|t| same_target(t, written))
                && redis == matches!(facts.acts[i], Act::RedisRead { .. })
        });
        let Some(i) = read else { continue };
        if !redis
            && facts
                .schema
                .covers_lookup(written, columns, &lookup_columns(facts, i))
        {
            continue;
        }
        // The look-up decides: the insert is in a branch, or a branch returned early.
        let decided = !ops[j].conds.is_empty()
            || ops[i + 1..j].iter().any(|o| {
                !o.conds.is_empty() && matches!(o.kind, OpKind::Return(_) | OpKind::Throw(_))
            });
        if !decided {
            continue;
        }
        out.push(Hit {
            rule: RuleId::RelCheckThenAct,
            pos: ops[j].pos,
            origin: ops[j].origin.clone(),
            message: format!(
                "{} on line {} then {} with no unique key, lock or conflict clause: two concurrent copies both insert",
                describe(&facts.acts[i]),
                ops[i].pos.line,
                describe(act),
            ),
            confidence: Confidence::High,
        });
    }
}
