//! The typed fields a helper of another file calls through (`lateinit var boards:
//! BoardRepository`, `private final OrderRepository orders;`). A check reads a receiver's
//! type from the file's fields; once a helper of another class is inlined into a handler,
//! the handler's file no longer says what `boards` is, and `boards.save(board)` would be
//! read as nobody's call. Its type goes along, as an assignment before the helper's body.

use crate::ir::{Expr, Function, Module, OpKind};

/// The helper's file's typed fields that its calls are made on, except names the
/// handler's own file declares (its own field of that name stays what it is).
pub(super) fn carried(
    handler: Option<&Module>,
    helper: &Module,
    callee: &Function,
) -> Vec<(String, Expr)> {
    let declared_by_handler =
        |name: &str| handler.is_some_and(|m| m.globals.iter().any(|(g, _)| g == name));
    let roots: std::collections::HashSet<&str> = (callee.ops.iter())
        .filter_map(|op| match &op.kind {
            OpKind::Call(c) if c.callee.len() > 1 => match c.callee.first().map(String::as_str) {
                Some("this" | "self") => c.callee.get(1).map(String::as_str),
                other => other,
            },
            _ => None,
        })
        .collect();
    (helper.globals.iter())
        .filter(|(name, value)| {
            matches!(value, Expr::Object { type_name: Some(_), fields } if fields.is_empty())
                && roots.contains(name.as_str())
                && !declared_by_handler(name)
                && !callee.params.contains(name)
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}
