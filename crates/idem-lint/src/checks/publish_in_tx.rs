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
