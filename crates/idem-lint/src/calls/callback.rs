//! A lambda handed to a helper that runs it (`idempotentHandler.executeOnce(id, () -> {…})`,
//! `guard.protect(key, () -> …)`, Kotlin's `runOnce(id) { … }`). The lowering writes the
//! lambda's body where it is written, before the call, as for `forEach`; but the helper
//! runs it where it invokes its parameter (`handler.run()`, `block()`): after the helper's
//! claim and inside the helper's transaction. Once the helper is inlined, the body is moved
//! there, so a marker and the effects the lambda makes are judged in one transaction.

use crate::ir::{Call, Expr, Function, Op, OpKind, Pos, as_written};

/// The methods that run a functional parameter (`Runnable.run`, `Supplier.get`,
/// `Function.apply`, `Consumer.accept`, `Callable.call`, Kotlin's `invoke`).
const INVOKE: &[&str] = &["run", "get", "apply", "accept", "call", "invoke"];

/// Where the operations written inside the call at `call_pos` begin: the tail of `ops` at
/// or after the call's position (its arguments, a lambda's body and the helpers that body
/// calls, which are placed at their calls in the lambda). Positions are the handler's.
pub(super) fn args_start(ops: &[Op], call_pos: Pos) -> usize {
    let inside = ops.iter().rev().take_while(|op| op.pos >= call_pos).count();
    ops.len() - inside
}

/// Moves the operations `ops[args_from..callee_from]` (the call's arguments, lowered before
/// it) to where the inlined helper (`ops[callee_from..]`) runs a lambda given to it, when
/// it does: they take that place's transaction and conditions.
pub(super) fn run_where_invoked(
    ops: &mut Vec<Op>,
    call: &Call,
    callee: &Function,
    args_from: usize,
    callee_from: usize,
) {
    if args_from >= callee_from {
        return;
    }
    // The lambda's parameter (a lambda argument is lowered as an empty expression).
    let lambdas: Vec<&str> = (call.args.iter().zip(&callee.params))
        .filter(|(a, _)| matches!(a, Expr::Other(v) if v.is_empty()))
        .map(|(_, p)| p.as_str())
        .collect();
    if lambdas.is_empty() {
        return;
    }
    let Some(at) = (callee_from..ops.len()).find(|&k| invokes(&ops[k], &lambdas)) else {
        return;
    };
    let moved: Vec<Op> = ops.drain(args_from..callee_from).collect();
    let at = at - moved.len();
    let (tx, conds, detached) = {
        let inv = &ops[at];
        (inv.lexical_tx, inv.conds.clone(), inv.detached)
    };
    let moved = moved.into_iter().map(|mut op| {
        op.lexical_tx = tx.or(op.lexical_tx);
        let own = std::mem::take(&mut op.conds);
        op.conds = conds.iter().copied().chain(own).collect();
        if op.detached == 0 {
            op.detached = detached;
        }
        op
    });
    ops.splice(at..at, moved);
}

/// Whether `op` runs one of the lambda parameters (`handler'3.run()`, Kotlin's `block()`).
fn invokes(op: &Op, lambdas: &[&str]) -> bool {
    let OpKind::Call(c) = &op.kind else {
        return false;
    };
    let Some(root) = c.callee.first() else {
        return false;
    };
    let runs = match c.callee.len() {
        1 => true,
        2 => INVOKE.contains(&c.method().as_str()),
        _ => false,
    };
    // (A bare `block()` keeps its name: a call's callee is not renamed as a local is.)
    runs && c.receiver.is_none() && lambdas.contains(&as_written(root))
}
