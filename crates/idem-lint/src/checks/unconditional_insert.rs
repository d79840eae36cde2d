//! `DAT_UNCONDITIONAL_INSERT`: an event handler inserts a row built from the event with no
//! conflict clause, upsert or unique key that a duplicate delivery would hit, and no dedup
//! claim before it: every redelivery adds another row.

use super::{Hit, describe, guarded};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::{is_log_table, is_marker_table, is_outbox_table};

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_event(facts.func) {
        return;
    }
    for (i, act) in facts.acts.iter().enumerate() {
        let (table, columns) = match act {
            Act::Sql(SqlStmt::Insert {
                table,
                columns,
                conflict_clause: false,
                ..
            }) => (table.as_str(), Some(columns.as_slice())),
            Act::OrmCreate {
                target,
                columns,
                safe: false,
            } => (target.as_str(), columns.as_deref()),
            _ => continue,
        };
        if table.is_empty()
            || is_marker_table(table)
            || is_outbox_table(table)
            || is_log_table(table)
            || facts.schema.covers(table, columns)
            || guarded(facts, i)
            || super::conflict_handled(facts, i)
            || read_before(facts, i, table)
        {
            continue;
        }
        let OpKind::Call(call) = &facts.func.ops[i].kind else {
            continue;
        };
        let from_event = call.args.iter().any(|a| {
            facts.mentions_tainted(a)
                || matches!(a, Expr::Template(parts) if parts.iter().any(|p| facts.mentions_tainted(p)))
        }) || call.kwargs.iter().any(|(_, v)| facts.mentions_tainted(v))
            // `order = Order.new(id: event["id"]); order.save!`: the row built from the event.
            || call.callee.len() == 2
                && call.method() == "save"
                && facts.tainted.contains(&call.callee[0]);
        if !from_event {
            continue;
        }
        out.push(Hit {
            rule: RuleId::DatUnconditionalInsert,
            pos: facts.func.ops[i].pos,
            origin: facts.func.ops[i].origin.clone(),
            message: format!(
                "{} from the event has no conflict clause and no unique key a duplicate would hit",
                describe(act)
            ),
            confidence: if facts.schema.knows(table) {
                Confidence::High
            } else {
                Confidence::Medium
            },
        });
    }
}

/// Whether the function looked the row up before inserting it (a check-then-act, which
/// `REL_CHECK_THEN_ACT` reports).
fn read_before(facts: &FnFacts<'_>, i: usize, table: &str) -> bool {
    facts.acts[..i].iter().any(|a| {
        matches!(a, Act::Sql(SqlStmt::Select { .. }) | Act::OrmRead { .. })
            && a.target()
                .is_some_and(|t| crate::analysis::same_target(t, table))
    })
}
