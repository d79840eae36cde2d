//! Unique keys of Mongoose schemas: `const UserSchema = new Schema({ clerkId: { type: String,
//! unique: true } })` declares a unique key on `clerkId` of the model `User` (the variable's
//! name without `Schema`, or the name given to `model("User", UserSchema)`).

use crate::ir::{Expr, Module, UniqueKey};

fn is_true(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.len() == 1 && p[0] == "true")
}

/// The unique fields of a schema's definition object.
fn unique_fields(definition: &Expr) -> Vec<String> {
    let Expr::Object { fields, .. } = definition else {
        return Vec::new();
    };
    fields
        .iter()
        .filter(|(_, v)| v.field("unique").is_some_and(is_true))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The model names given to a schema variable: `model("User", UserSchema)`.
fn model_names(module: &Module, schema_var: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut visit = |e: &Expr| {
        e.walk(&mut |x| {
            if let Expr::Call(c) = x
                && c.method() == "model"
                && matches!(c.args.get(1), Some(Expr::Path(p)) if p.len() == 1 && p[0] == schema_var)
                && let Some(name) = c.args.first().and_then(Expr::string_text)
            {
                names.push(name);
            }
        });
    };
    for (_, value) in &module.globals {
        visit(value);
    }
    names
}

/// The unique keys the file's Mongoose schemas declare.
pub(crate) fn unique_keys(module: &Module) -> Vec<UniqueKey> {
    let mut keys = Vec::new();
    for (var, value) in &module.globals {
        let Expr::Call(call) = value else { continue };
        if !(call.is_new && call.method() == "schema") {
            continue;
        }
        let Some(definition) = call.args.first() else {
            continue;
        };
        let mut tables = model_names(module, var);
        if let Some(stem) = var
            .strip_suffix("Schema")
            .or_else(|| var.strip_suffix("schema"))
            && !stem.is_empty()
        {
            tables.push(stem.to_string());
        }
        for table in tables {
            for column in unique_fields(definition) {
                keys.push(UniqueKey {
                    table: table.clone(),
                    columns: vec![column],
                });
            }
        }
    }
    keys
}
