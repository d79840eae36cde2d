//! Unique keys of JPA entities (and Spring Data MongoDB documents): `@Id`, `@NaturalId`,
//! `@Column(unique = true)`, `@Indexed(unique = true)`, `@Table(uniqueConstraints =
//! @UniqueConstraint(columnNames = {…}))` and unique `@Index`es, under the entity's class name
//! and its `@Table(name = …)`.

use super::annotation::Annotation;
use crate::ir::{Expr, UniqueKey};

/// A field of a class: its name and annotations.
pub(crate) type Field = (String, Vec<Annotation>);

fn is_true(e: Option<&Expr>) -> bool {
    matches!(e, Some(Expr::Path(p)) if p.last().is_some_and(|s| s == "true"))
}

fn arg<'a>(a: &'a Annotation, key: &str) -> Option<&'a Expr> {
    a.args.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn strings(e: Option<&Expr>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = e {
        e.walk(&mut |x| {
            if let Expr::Str(s) = x {
                out.push(s.clone());
            }
        });
    }
    out
}

/// The nested annotations (lowered as calls) named `name` inside an argument.
fn nested<'a>(e: &'a Expr, name: &str, out: &mut Vec<&'a crate::ir::Call>) {
    e.walk(&mut |x| {
        if let Expr::Call(c) = x
            && c.callee.last().is_some_and(|n| n == name)
        {
            out.push(c);
        }
    });
}

fn kwarg<'a>(c: &'a crate::ir::Call, key: &str) -> Option<&'a Expr> {
    c.kwargs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The unique keys an entity class declares; none when it is no entity.
pub(crate) fn unique_keys(
    class: &str,
    annotations: &[Annotation],
    fields: &[Field],
) -> Vec<UniqueKey> {
    let entity = annotations.iter().any(|a| {
        matches!(
            a.name.as_str(),
            "Entity" | "Table" | "Document" | "Embeddable"
        )
    });
    if !entity {
        return Vec::new();
    }
    let mut tables = vec![class.to_string()];
    let mut keys: Vec<Vec<String>> = Vec::new();
    for a in annotations {
        if a.name == "Table" || a.name == "Document" {
            let name = strings(
                arg(a, "name")
                    .or_else(|| arg(a, "collection"))
                    .or_else(|| arg(a, "value")),
            );
            tables.extend(name.into_iter().take(1));
            let mut found = Vec::new();
            for (_, v) in &a.args {
                nested(v, "UniqueConstraint", &mut found);
            }
            for c in found {
                let cols = strings(kwarg(c, "columnNames").or_else(|| c.args.first()));
                if !cols.is_empty() {
                    keys.push(cols);
                }
            }
            let mut indexes = Vec::new();
            for (_, v) in &a.args {
                nested(v, "Index", &mut indexes);
            }
            for c in indexes.into_iter().filter(|c| is_true(kwarg(c, "unique"))) {
                let cols: Vec<String> = strings(kwarg(c, "columnList"))
                    .iter()
                    .flat_map(|s| s.split(','))
                    .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                if !cols.is_empty() {
                    keys.push(cols);
                }
            }
        }
    }
    for (name, anns) in fields {
        let column = anns
            .iter()
            .filter(|a| a.name == "Column" || a.name == "JoinColumn" || a.name == "Field")
            .flat_map(|a| strings(arg(a, "name")))
            .next()
            .unwrap_or_else(|| name.clone());
        let unique = anns.iter().any(|a| match a.name.as_str() {
            "Id" | "NaturalId" | "EmbeddedId" | "MongoId" => true,
            "Column" | "JoinColumn" | "Indexed" => is_true(arg(a, "unique")),
            _ => false,
        });
        if unique {
            keys.push(vec![column]);
        }
    }
    let mut out = Vec::new();
    for t in &tables {
        for k in &keys {
            out.push(UniqueKey {
                table: t.clone(),
                columns: k.clone(),
            });
        }
    }
    out
}

/// The `@Version` fields of an entity class: its optimistic-lock columns.
pub(crate) fn version_columns(
    class: &str,
    annotations: &[Annotation],
    fields: &[Field],
) -> Vec<(String, String)> {
    let entity = annotations
        .iter()
        .any(|a| matches!(a.name.as_str(), "Entity" | "Table" | "Document"));
    if !entity {
        return Vec::new();
    }
    let mut tables = vec![class.to_string()];
    for a in annotations.iter().filter(|a| a.name == "Table") {
        tables.extend(strings(arg(a, "name")).into_iter().take(1));
    }
    let mut out = Vec::new();
    for (name, anns) in fields {
        if anns.iter().any(|a| a.name == "Version") {
            for t in &tables {
                out.push((t.clone(), name.clone()));
            }
        }
    }
    out
}
