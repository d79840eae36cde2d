//! `ARC_PUBLISH_IN_TX`: a broker publish or an outbound creating call made while a database
//! transaction is open. If the transaction then aborts, the message is already out and says
//! something that never happened; a retry publishes it again. Takes precedence over
//! `ARC_DUAL_WRITE` for a publish inside the transaction (one defect, one finding).

use super::open_tx::open_transaction;
use super::{Hit, call_name};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::rule::RuleId;

/// The ops that send something out while a database transaction is open.
pub(crate) fn publishes_in_tx(facts: &FnFacts<'_>) -> Vec<usize> {
    sent_in_tx(facts)
        .into_iter()
        .filter(|&i| !enqueues_in_database(facts, i))
        .collect()
}

/// The ops, in an open transaction, that enqueue a job as a row of that transaction (see
/// [`enqueues_in_database`]): they commit or roll back with it, as an outbox row does.
pub(crate) fn enqueued_with_tx(facts: &FnFacts<'_>) -> Vec<usize> {
    sent_in_tx(facts)
        .into_iter()
        .filter(|&i| enqueues_in_database(facts, i))
        .collect()
}

/// Every publish or creating call made while a database transaction is open.
fn sent_in_tx(facts: &FnFacts<'_>) -> Vec<usize> {
    if !facts
        .acts
        .iter()
        .any(|a| matches!(a, Act::Publish | Act::HttpCreate))
    {
        return Vec::new();
    }
    let open = open_transaction(facts);
    facts
        .acts
        .iter()
        .enumerate()
        .filter(|(i, a)| matches!(a, Act::Publish | Act::HttpCreate) && open[*i])
        .map(|(i, _)| i)
        .collect()
}

/// `SendEmailJob.perform_later(…)`, `Mailer.receipt(o).deliver_later`: ActiveJob's enqueue,
/// a row of the database itself when the tree's adapter keeps jobs there (GoodJob).
fn enqueues_in_database(facts: &FnFacts<'_>, i: usize) -> bool {
    facts.schema.jobs_in_database()
        && matches!(&facts.func.ops[i].kind, crate::ir::OpKind::Call(c)
            if matches!(c.method().as_str(), "perform_later" | "deliver_later"))
}

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    for i in publishes_in_tx(facts) {
        let publish = matches!(facts.acts[i], Act::Publish);
        let op = &facts.func.ops[i];
        out.push(Hit {
            rule: RuleId::ArcPublishInTx,
            pos: op.pos,
            origin: op.origin.clone(),
            message: format!(
                "{} {} inside an open database transaction: if it aborts, the message is already out",
                call_name(facts, i),
                if publish { "publishes" } else { "calls out" },
            ),
            confidence: if publish {
                Confidence::High
            } else {
                Confidence::Medium
            },
        });
    }
}
