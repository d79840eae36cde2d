//! `ARC_DUAL_WRITE`: a handler writes to its database and publishes to a broker (or makes a
//! creating HTTP call) with no outbox or effect ledger: a crash between the two leaves one
//! done and the other not, and a redelivery publishes again.

use super::{Hit, describe};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_entry;
use crate::ir::{Expr, OpKind};
use crate::rule::RuleId;
use crate::words::{is_outbox_table, norm};

/// Statuses of a row that records an outgoing call before it is made.
const PENDING: &[&str] = &["pending", "queued", "sending", "processing", "scheduled"];

/// Whether a database write before op `i` records the outgoing call as pending (an effect
/// ledger row, `status: "pending"`), so a crash leaves a row to retry from.
fn ledger_row_before(facts: &FnFacts<'_>, i: usize) -> bool {
    (0..i).any(|k| {
        // A row recorded for the call; an entity's own status moved on (`meeting.status =
        // "processing"`) leaves nothing to retry the call from.
        let records = match &facts.acts[k] {
            Act::OrmUpdate { .. } => false,
            a => a.is_db_write(),
        };
        if !records {
            return false;
        }
        let OpKind::Call(call) = &facts.func.ops[k].kind else {
            return false;
        };
        call.args.iter().any(|a| {
            let value = facts.resolved(a).unwrap_or(a);
            let mut pending = false;
            value.walk(&mut |e| {
                if let Expr::Object { fields, .. } = e {
                    pending |= fields.iter().any(|(k, v)| {
                        matches!(norm(k).as_str(), "status" | "state")
                            && v.string_text()
                                .is_some_and(|s| PENDING.contains(&s.to_lowercase().as_str()))
                    });
                }
            });
            pending
        })
    })
}

/// Whether op `i`'s block returns (or raises) after it and before op `k`: `k` is not on
/// `i`'s path (`if rate_limited { reschedule; return }` then the write).
fn returns_between(facts: &FnFacts<'_>, i: usize, k: usize) -> bool {
    let ops = &facts.func.ops;
    // A return leaves the function it is written in: the handler, or one inlined call of a
    // helper (its ops carry the call's position).
    let scope = |j: usize| ops[j].origin.as_ref().map(|o| (&o.helper, ops[j].pos));
    k > i
        && (i + 1..k).any(|j| {
            matches!(ops[j].kind, OpKind::Return(_) | OpKind::Throw(_))
                && ops[j].conds == ops[i].conds
                && scope(j) == scope(i)
        })
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_entry(facts.func) {
        return;
    }
    let outbox = facts
        .acts
        .iter()
        .any(|a| a.is_db_write() && a.target().is_some_and(is_outbox_table));
    if outbox {
        return;
    }
    let writes = |k: usize| {
        facts.acts[k].is_db_write()
            || matches!(facts.acts[k], Act::Commit) && !super::open_tx::producer_callback(facts, k)
    };
    let Some(w) = (0..facts.acts.len()).find(|&k| writes(k)) else {
        return;
    };
    // A publish inside the open transaction is ARC_PUBLISH_IN_TX's finding; a job enqueued
    // as a row of that transaction commits with it.
    let mut in_tx = super::publish_in_tx::publishes_in_tx(facts);
    in_tx.extend(super::publish_in_tx::enqueued_with_tx(facts));
    for (i, act) in facts.acts.iter().enumerate() {
        if !matches!(act, Act::Publish | Act::HttpCreate)
            || in_tx.contains(&i)
            || ledger_row_before(facts, i)
        {
            continue;
        }
        // A publish on a path that writes nothing (`if rate_limited { reschedule; return }`
        // before the write) leaves no write to disagree with.
        let Some(w) = (w..facts.acts.len()).find(|&k| {
            writes(k)
                && !crate::branches::exclusive(facts.func, k, i)
                && !returns_between(facts, i, k)
        }) else {
            continue;
        };
        out.push(Hit {
            rule: RuleId::ArcDualWrite,
            pos: facts.func.ops[i].pos,
            origin: facts.func.ops[i].origin.clone(),
            message: format!(
                "{} {} beside the database write ({}) on line {}, with no outbox",
                super::call_name(facts, i),
                if matches!(act, Act::Publish) {
                    "publishes"
                } else {
                    "calls out"
                },
                describe(&facts.acts[w]),
                facts.func.ops[w].pos.line
            ),
            confidence: Confidence::High,
        });
    }
}
