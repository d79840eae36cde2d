//! Renaming an inlined helper's locals (`payload` becomes `payload'3`), so that its variables
//! and the handler's, or two helpers', never share a name in the handler's copy.

use std::collections::HashMap;

use crate::ir::{Call, Cond, Expr, Function, OpKind};

/// The new names of a helper's parameters and assigned variables, for inlined call `n`.
pub(super) fn locals(callee: &Function, n: u32) -> HashMap<String, String> {
    let mut names: Vec<&str> = callee.params.iter().map(String::as_str).collect();
    for op in &callee.ops {
        if let OpKind::Assign { targets, .. } = &op.kind {
            names.extend(targets.iter().map(|t| root(t)));
        }
    }
    names
        .into_iter()
        .filter(|n| !matches!(*n, "self" | "this" | "_" | ""))
        .map(|name| (name.to_string(), format!("{name}'{n}")))
        .collect()
}

/// An entity method inlined on `receiver`: `this` is the receiver, and a name the method
/// changes in place (`quantity -= n`) without declaring it first is the receiver's field.
pub(super) fn entity_fields(
    callee: &Function,
    receiver: &str,
    names: &mut HashMap<String, String>,
) {
    names.insert("this".to_string(), receiver.to_string());
    let mut declared: Vec<&str> = callee.params.iter().map(String::as_str).collect();
    for op in &callee.ops {
        if let OpKind::Assign { targets, op, .. } = &op.kind {
            for t in targets {
                let r = root(t);
                if op.is_none() {
                    declared.push(r);
                } else if r == t.as_str() && !declared.contains(&r) {
                    names.insert(r.to_string(), format!("{receiver}.{r}"));
                }
            }
        }
    }
}

fn root(target: &str) -> &str {
    target.split(['.', '[']).next().unwrap_or(target)
}

fn rename_root(name: &mut String, map: &HashMap<String, String>) {
    let r = root(name);
    if let Some(new) = map.get(r) {
        *name = format!("{new}{}", &name[r.len()..]);
    }
}

/// Renames the locals in an operation.
pub(super) fn op(kind: &mut OpKind, map: &HashMap<String, String>) {
    match kind {
        OpKind::Call(call) => self::call(call, map),
        OpKind::Assign { targets, value, .. } => {
            targets.iter_mut().for_each(|t| rename_root(t, map));
            expr(value, map);
        }
        OpKind::Return(Some(e)) | OpKind::Throw(Some(e)) => expr(e, map),
        OpKind::Return(None) | OpKind::Throw(None) => {}
    }
}

/// Renames the locals in a condition.
pub(super) fn cond(c: &mut Cond, map: &HashMap<String, String>) {
    expr(&mut c.test, map);
}

fn call(c: &mut Call, map: &HashMap<String, String>) {
    if c.callee.len() > 1
        && let Some(first) = c.callee.first_mut()
    {
        rename_root(first, map);
    }
    if let Some(r) = c.receiver.as_deref_mut() {
        call(r, map);
    }
    c.args.iter_mut().for_each(|a| expr(a, map));
    c.kwargs.iter_mut().for_each(|(_, v)| expr(v, map));
}

fn expr(e: &mut Expr, map: &HashMap<String, String>) {
    match e {
        Expr::Path(segs) => {
            if let Some(first) = segs.first_mut() {
                rename_root(first, map);
            }
        }
        Expr::Call(c) => call(c, map),
        Expr::Template(parts) | Expr::List(parts) | Expr::Other(parts) => {
            parts.iter_mut().for_each(|p| expr(p, map));
        }
        Expr::Object { fields, .. } => fields.iter_mut().for_each(|(_, v)| expr(v, map)),
        Expr::Binary { left, right, .. } => {
            expr(left, map);
            expr(right, map);
        }
        Expr::Not(inner) => expr(inner, map),
        Expr::Str(_) | Expr::Num(_) => {}
    }
}
