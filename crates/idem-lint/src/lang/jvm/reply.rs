//! `@SendTo("topic")` on a listener: what the method returns is published to the topic (Spring
//! Kafka's and Spring AMQP's reply). Each `return value` becomes, just before it, a send of the
//! value, so the checks see the publish.

use super::annotation::Annotation;
use crate::ir::{Call, Expr, Function, Op, OpKind};

/// Adds a send of each returned value of `f`, as `@SendTo` publishes it.
pub(crate) fn publish_returns(f: &mut Function, send_to: &Annotation) {
    let topic: Vec<Expr> = send_to
        .args
        .iter()
        .map(|(_, v)| v.clone())
        .take(1)
        .collect();
    let mut at = 0;
    while at < f.ops.len() {
        let op = &f.ops[at];
        let OpKind::Return(Some(value)) = &op.kind else {
            at += 1;
            continue;
        };
        let call = Call {
            callee: vec!["SendTo".to_string(), "send".to_string()],
            receiver: None,
            args: topic
                .iter()
                .cloned()
                .chain(std::iter::once(value.clone()))
                .collect(),
            kwargs: Vec::new(),
            is_new: false,
            pos: op.pos,
        };
        let send = Op {
            kind: OpKind::Call(call),
            pos: op.pos,
            conds: op.conds.clone(),
            lexical_tx: op.lexical_tx,
            origin: None,
            detached: op.detached,
        };
        f.ops.insert(at, send);
        at += 2;
    }
}
