//! Spring applies `@Transactional` through a proxy: a call from one method of a bean to
//! another of the same bean (`this.apply(event)`, `apply(event)`) bypasses the proxy, so the
//! callee runs without the transaction its annotation asks for. Such calls are pointed at a
//! copy of the callee without that transaction, named `name'0` (reports show `name`: the
//! suffix is the one call following gives renamed locals).

use std::collections::HashMap;

use crate::ir::{Function, Module, OpKind};

/// A `@Transactional` method of a class: its index in the module's functions and the
/// transaction its body was lowered in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TxMethod {
    pub(crate) index: usize,
    pub(crate) tx: u32,
}

/// The name of the copy of `name` run without its proxy.
fn direct_name(name: &str) -> String {
    format!("{name}'0")
}

/// Whether a call's callee is a method of the same object: `m(…)` or `this.m(…)`.
fn self_call(callee: &[String]) -> Option<&str> {
    match callee {
        [m] => Some(m),
        [this, m] if this == "this" => Some(m),
        _ => None,
    }
}

/// Rewrites the self-invocations of the class's transactional methods (`methods`, the class's
/// functions being `range`) and adds the copies they reach.
pub(crate) fn self_invocations(
    module: &mut Module,
    range: std::ops::Range<usize>,
    tx_methods: &HashMap<String, TxMethod>,
) {
    if tx_methods.is_empty() {
        return;
    }
    let mut copies: Vec<String> = Vec::new();
    for i in range {
        let Some(f) = module.functions.get_mut(i) else {
            continue;
        };
        for op in &mut f.ops {
            let OpKind::Call(call) = &mut op.kind else {
                continue;
            };
            let Some(m) = self_call(&call.callee) else {
                continue;
            };
            if !tx_methods.contains_key(m) || m == f.name {
                continue;
            }
            let m = m.to_string();
            call.callee = vec!["this".to_string(), direct_name(&m)];
            if !copies.contains(&m) {
                copies.push(m);
            }
        }
    }
    for m in copies {
        let Some(tm) = tx_methods.get(&m) else {
            continue;
        };
        let Some(original) = module.functions.get(tm.index) else {
            continue;
        };
        let mut copy: Function = original.clone();
        copy.name = direct_name(&m);
        for op in &mut copy.ops {
            if op.lexical_tx == Some(tm.tx) {
                op.lexical_tx = None;
            }
        }
        module.functions.push(copy);
    }
}
