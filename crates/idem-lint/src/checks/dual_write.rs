//! `ARC_DUAL_WRITE`: a handler writes to its database and publishes to a broker (or makes a
//! creating HTTP call) with no outbox or effect ledger: a crash between the two leaves one
//! done and the other not, and a redelivery publishes again.

use super::{Hit, describe};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_entry;
use crate::rule::RuleId;
use crate::words::is_outbox_table;

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
    let Some(w) = facts
        .acts
        .iter()
        .position(|a| a.is_db_write() || matches!(a, Act::Commit))
    else {
        return;
    };
    for (i, act) in facts.acts.iter().enumerate() {
        if !matches!(act, Act::Publish | Act::HttpCreate) {
            continue;
        }
        out.push(Hit {
            rule: RuleId::ArcDualWrite,
            pos: facts.func.ops[i].pos,
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
