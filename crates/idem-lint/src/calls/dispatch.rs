//! Dispatch tables: a handler that looks its event type up in a map of functions and calls
//! what it found (`handler = event_map.get(event["type"], default); handler(event)`,
//! `const fn = handlers[event.type]; await fn(event)`, Go's `fn := handlers[evt.Type]`, or the
//! lookup called directly: `handlers[event.type](event)`). Each function of the table is a
//! call the handler may make, one per event type, so each is followed as if the handler
//! switched on the type.

use crate::ir::{Call, Expr, Function, OpKind};

/// The most functions one table adds (a bound on the work per call; the handler's own bound
/// of inlined calls, `MAX_INLINED`, applies too).
const MAX_ENTRIES: usize = 32;

/// How far back a table or its look-up is searched for in the calling function: they sit
/// just above the call, and a bound keeps a file of 100,000 calls linear.
const LOOK_BACK: usize = 64;

/// For a call at op `at` of `src` whose callee is a table look-up, the calls it may make: one
/// per function in the table (and the look-up's default), each with the call's arguments and
/// the table key it is filed under (`None` for the default).
pub(super) fn targets(
    src: &Function,
    at: usize,
    globals: &[(String, Expr)],
    call: &Call,
) -> Vec<(Option<String>, Call)> {
    let value_of = |name: &str| -> Option<&Expr> {
        (src.ops[at.saturating_sub(LOOK_BACK)..at].iter().rev())
            .find_map(|op| match &op.kind {
                OpKind::Assign { targets, value, .. }
                    if targets.len() == 1 && targets[0] == name =>
                {
                    Some(value)
                }
                _ => None,
            })
            .or_else(|| {
                globals
                    .iter()
                    .rev()
                    .find(|(g, _)| g == name)
                    .map(|(_, v)| v)
            })
    };
    // `handler = HANDLERS[event.type]; handler.new(event).handle`: a table of classes, each
    // entry's method of that name (Ruby lowers the chain as a call of `handler.handle`).
    let mut method: Option<&String> = None;
    // The table's name, and the look-up's default.
    let (table, default) = match call.callee.as_slice() {
        [local, m] if m != "[]" => match value_of(local) {
            Some(Expr::Other(parts)) => match parts.first() {
                Some(Expr::Path(p)) if p.len() == 1 && parts.len() == 2 => {
                    method = Some(m);
                    (p[0].as_str(), None)
                }
                _ => return Vec::new(),
            },
            _ => return Vec::new(),
        },
        // `handlers[event.type](event)`, lowered as a call of `handlers.[]`.
        [table, index] if index == "[]" => (table.as_str(), None),
        [local] => match value_of(local) {
            Some(Expr::Call(get))
                if get.callee.len() == 2
                    && matches!(get.method().as_str(), "get" | "getordefault") =>
            {
                (get.callee[0].as_str(), get.args.get(1))
            }
            Some(Expr::Other(parts)) => match parts.first() {
                Some(Expr::Path(p)) if p.len() == 1 && parts.len() == 2 => (p[0].as_str(), None),
                _ => return Vec::new(),
            },
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let Some(Expr::Object { fields, .. }) = value_of(table) else {
        return Vec::new();
    };
    let entries = fields.iter().map(|(k, v)| (Some(k.clone()), v));
    (entries.chain(default.map(|d| (None, d))))
        .filter_map(|(key, value)| match value {
            // A function written in the table is lowered as one named by its key.
            Expr::Other(parts) if parts.is_empty() => {
                key.clone().map(|k| (key, entry(vec![k], call)))
            }
            Expr::Path(p) if !p.is_empty() => {
                let path = p.iter().chain(method).cloned().collect();
                Some((key, entry(path, call)))
            }
            _ => None,
        })
        .take(MAX_ENTRIES)
        .collect()
}

/// A call of `callee` with `call`'s arguments.
fn entry(callee: Vec<String>, call: &Call) -> Call {
    Call {
        callee,
        receiver: None,
        args: call.args.clone(),
        kwargs: call.kwargs.clone(),
        is_new: false,
        pos: call.pos,
    }
}
