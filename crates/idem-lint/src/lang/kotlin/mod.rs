//! Kotlin (`.kt`, `.kts`): tree-sitter-kotlin-ng, lowered with the Java lowering's Spring
//! meaning: annotations as registrations and transactions, lambdas (trailing blocks
//! included) by what their call does with them, JPA keys on constructor properties,
//! self-invocations of `@Transactional` methods. Kotlin is expression-oriented: `if`, `when`
//! and `try` are lowered as statements wherever they appear, their value kept opaque.
//! Statements are lowered here, declarations in [`class`], expressions and calls in [`expr`],
//! Ktor's typed routes in [`ktor`].

mod class;
mod expr;
mod ktor;

use std::path::Path;

use tree_sitter::Node;

use super::builder::Builder;
use super::{Language, extension};
use crate::ir::{Expr, Module};

/// Kotlin.
#[derive(Debug)]
pub(crate) struct Kotlin;

impl Language for Kotlin {
    fn name(&self, _: &Path) -> &'static str {
        "kotlin"
    }

    fn handles(&self, path: &Path) -> bool {
        matches!(extension(path), "kt" | "kts")
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_kotlin_ng::LANGUAGE.into()
    }

    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module {
        let mut lower = Lower {
            b: Builder::new(source),
            return_type: String::new(),
        };
        lower.stmt(tree.root_node());
        lower.b.finish()
    }
}

/// The named children of a node, comments left out.
fn kids(node: Node<'_>) -> Vec<Node<'_>> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| !c.kind().ends_with("comment"))
        .collect()
}

fn kid<'t>(node: Node<'t>, kind: &str) -> Option<Node<'t>> {
    kids(node).into_iter().find(|c| c.kind() == kind)
}

fn empty() -> Expr {
    Expr::Other(Vec::new())
}

struct Lower<'s> {
    b: Builder<'s>,
    /// The declared return type of the function being lowered (a returned lambda is the
    /// bean it declares: `fun orders(): Consumer<OrderEvent> = Consumer { … }`).
    return_type: String,
}

impl<'s> Lower<'s> {
    fn text(&self, n: Node<'_>) -> String {
        self.b.text(n).to_string()
    }

    /// The name of a declaration: its first `identifier` child.
    fn name_of(&self, n: Node<'_>) -> String {
        n.child_by_field_name("name")
            .or_else(|| kid(n, "identifier"))
            .map(|x| self.text(x))
            .unwrap_or_default()
    }

    fn stmt(&mut self, n: Node<'_>) {
        if self.b.enter() {
            self.stmt_node(n);
            self.b.leave();
        }
    }

    fn stmt_node(&mut self, n: Node<'_>) {
        match n.kind() {
            "source_file" | "block" | "statements" | "anonymous_initializer" | "function_body" => {
                kids(n).into_iter().for_each(|c| self.stmt(c))
            }
            "class_declaration" | "object_declaration" | "companion_object" => self.class(n),
            "function_declaration" => {
                self.function(n, &[], false);
            }
            "property_declaration" => self.property(n),
            "for_statement" => {
                let target = kid(n, "variable_declaration")
                    .or_else(|| kid(n, "multi_variable_declaration"))
                    .map(|v| self.text(v))
                    .unwrap_or_default();
                let parts = kids(n);
                let iterable = parts.iter().find(|c| {
                    !matches!(
                        c.kind(),
                        "variable_declaration" | "multi_variable_declaration" | "block" | "label"
                    )
                });
                let value = iterable.map_or_else(empty, |c| self.expr(*c));
                let pos = self.b.pos(n);
                self.b.assign(vec![target], value, pos);
                if let Some(body) = parts.iter().rev().find(|c| c.kind() != "label")
                    && Some(body) != iterable
                {
                    self.stmt(*body);
                }
            }
            "while_statement" | "do_while_statement" => {
                for c in kids(n) {
                    if c.kind() == "block" {
                        self.stmt(c);
                    } else {
                        self.expr(c);
                    }
                }
            }
            "package_header" | "import" | "import_list" | "line_comment" | "block_comment"
            | "shebang" | "file_annotation" | "type_alias" => {}
            _ => {
                self.expr(n);
            }
        }
    }

    /// `val a: T = v` (locals, and properties of a class or the file).
    fn property(&mut self, n: Node<'_>) {
        let Some(decl) =
            kid(n, "variable_declaration").or_else(|| kid(n, "multi_variable_declaration"))
        else {
            return;
        };
        let targets: Vec<String> = if decl.kind() == "variable_declaration" {
            vec![self.name_of(decl)]
        } else {
            kids(decl).into_iter().map(|v| self.name_of(v)).collect()
        };
        let value_node = kids(n).into_iter().find(|c| {
            !matches!(
                c.kind(),
                "modifiers"
                    | "variable_declaration"
                    | "multi_variable_declaration"
                    | "getter"
                    | "setter"
                    | "type_constraints"
                    | "type_parameters"
                    | "user_type"
                    | "nullable_type"
            )
        });
        let value = match value_node {
            Some(v) if v.kind() == "property_delegate" => kids(v)
                .into_iter()
                .next()
                .map_or_else(empty, |e| self.expr(e)),
            Some(v) => self.expr(v),
            None => {
                let ty = kids(decl)
                    .into_iter()
                    .find(|c| c.kind().ends_with("type"))
                    .map(|t| simple_type(&self.text(t)))
                    .unwrap_or_default();
                Expr::Object {
                    type_name: Some(ty),
                    fields: Vec::new(),
                }
            }
        };
        let pos = self.b.pos(n);
        self.b.assign(targets, value, pos);
    }

    fn if_expr(&mut self, n: Node<'_>) {
        let parts = kids(n);
        let Some((cond, branches)) = parts.split_first() else {
            return;
        };
        let test = self.expr(*cond);
        for (i, branch) in branches.iter().take(2).enumerate() {
            self.b.push_cond(test.clone(), i == 1, false);
            self.stmt(*branch);
            self.b.pop_cond();
        }
    }

    /// `when (v) { a -> …; else -> … }`: each entry under `v == condition` (the `else` entry
    /// under the negation of the others).
    fn when(&mut self, n: Node<'_>) {
        let subject = kid(n, "when_subject")
            .and_then(|s| kids(s).into_iter().last())
            .map_or_else(empty, |s| self.expr(s));
        let mut seen: Vec<Expr> = Vec::new();
        for entry in kids(n).into_iter().filter(|e| e.kind() == "when_entry") {
            let parts = kids(entry);
            let conds: Vec<Node<'_>> = {
                let mut cursor = entry.walk();
                entry
                    .children_by_field_name("condition", &mut cursor)
                    .collect()
            };
            let label = Expr::List(conds.iter().map(|c| self.expr(*c)).collect());
            let (test, negated) = if conds.is_empty() {
                (Expr::List(seen.clone()), true)
            } else {
                seen.push(label.clone());
                (label, false)
            };
            let test = Expr::Binary {
                op: "==".into(),
                left: Box::new(subject.clone()),
                right: Box::new(test),
            };
            self.b.push_cond(test, negated, false);
            for body in parts.iter().filter(|p| !conds.contains(p)) {
                self.stmt(*body);
            }
            self.b.pop_cond();
        }
    }

    fn try_expr(&mut self, n: Node<'_>) {
        for c in kids(n) {
            match c.kind() {
                "block" => self.stmt(c),
                "catch_block" => {
                    let mut test = Vec::new();
                    let mut body = None;
                    for p in kids(c) {
                        match p.kind() {
                            "identifier" => test.push(Expr::Path(vec![self.text(p)])),
                            "block" => body = Some(p),
                            k if k.ends_with("type") => {
                                test.insert(0, Expr::Path(vec![simple_type(&self.text(p))]))
                            }
                            _ => {}
                        }
                    }
                    self.b.push_cond(Expr::List(test), false, true);
                    if let Some(b) = body {
                        self.stmt(b);
                    }
                    self.b.pop_cond();
                }
                "finally_block" => kids(c).into_iter().for_each(|b| self.stmt(b)),
                _ => {}
            }
        }
    }
}

/// `KafkaTemplate<String, String>` → `KafkaTemplate`, `Long?` → `Long`.
fn simple_type(ty: &str) -> String {
    let t = ty.split('<').next().unwrap_or(ty);
    t.trim_end_matches('?').trim().to_string()
}
