//! Helpers that call following reads as a call instead of inlining: what their body says is
//! less than what the call says. A query module's function that only returns its statement
//! runs that statement where it is called; a generic repository's method works on whatever
//! repository it is called on.

use crate::ir::{Expr, Function, OpKind};

/// The SQL statement a function does nothing but return (`() => \`INSERT INTO t …\``), with
/// its interpolations and `{{name}}` placeholders as `?`; `None` for any other function.
pub(super) fn returned_statement(callee: &Function) -> Option<String> {
    let [op] = callee.ops.as_slice() else {
        return None;
    };
    let text = match &op.kind {
        OpKind::Return(Some(Expr::Str(s))) => s.clone(),
        OpKind::Return(Some(Expr::Template(parts))) => parts
            .iter()
            .map(|p| match p {
                Expr::Str(s) => s.clone(),
                _ => "?".to_string(),
            })
            .collect(),
        _ => return None,
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        out.push('?');
        rest = rest[start..]
            .find("}}")
            .map_or("", |end| &rest[start + end + 2..]);
    }
    out.push_str(rest);
    let verb = out.trim_start().to_ascii_uppercase();
    ["INSERT", "UPDATE", "DELETE"]
        .iter()
        .any(|v| verb.starts_with(v))
        .then_some(out)
}

/// Whether a method is a generic repository's (`BaseRepository.exist(db, **kw)` over
/// `self.model`): what it reads or writes is named by the repository it is called on
/// (`self.payment_repository.exist(…)`), which the call says and the body does not, so the
/// call is read as that repository's ORM call instead of being inlined.
pub(super) fn generic_repository(callee: &Function) -> bool {
    let generic = |e: &Expr| {
        let mut yes = false;
        e.walk(&mut |x| {
            yes |= matches!(x, Expr::Path(p) if p.len() == 2
                && matches!(p[0].as_str(), "self" | "this" | "cls")
                && matches!(p[1].as_str(), "model" | "_model" | "model_class" | "entity"));
        });
        yes
    };
    callee.ops.iter().any(|op| match &op.kind {
        OpKind::Call(c) => c.arg_exprs().into_iter().any(generic),
        OpKind::Assign { value, .. } => generic(value),
        _ => false,
    })
}
