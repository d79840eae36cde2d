//! `ORD_LAST_WRITE_WINS`: a handler writes an event's version, sequence or timestamp into a
//! row (an UPDATE, an upsert's DO UPDATE, an ORM update) without comparing it with the stored
//! one, so an older event delivered late overwrites newer state.

use super::{Hit, describe};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::OpKind;
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::is_order_column;

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
                .map(|s| s.column.clone()),
            Act::Sql(SqlStmt::Insert {
                do_update,
                do_update_ordered: false,
                ..
            }) => do_update
                .iter()
                .find(|s| s.from_input && !s.relative && is_order_column(&s.column))
                .map(|s| s.column.clone()),
            Act::OrmUpdate {
                sets,
                ordered: false,
                relative: false,
                ..
            } => {
                let from_event = match &facts.func.ops[i].kind {
                    OpKind::Call(c) => c.arg_exprs().iter().any(|e| facts.mentions_tainted(e)),
                    _ => false,
                };
                sets.iter()
                    .find(|s| is_order_column(s))
                    .filter(|_| from_event)
                    .cloned()
            }
            _ => None,
        };
        let Some(column) = column else { continue };
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
