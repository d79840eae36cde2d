//! Java (`.java`): tree-sitter-java. Classes are walked member by member: a method's
//! annotations are its registrations (`@KafkaListener`, `@PostMapping`, JAX-RS `@POST`) and
//! `@Transactional` opens a transaction around its body; lambdas given to calls run in place,
//! in a transaction, on another thread or as registered callbacks ([`lambda`](super::jvm::lambda));
//! entities declare unique keys ([`entity`](super::jvm::entity)); self-invocations of
//! `@Transactional` methods bypass the proxy ([`proxy`](super::jvm::proxy)). Statements are
//! lowered here, declarations in [`class`], expressions and calls in [`expr`].

mod class;
mod expr;

use std::path::Path;

use tree_sitter::Node;

use super::builder::Builder;
use super::{Language, extension};
use crate::ir::{Expr, Module, OpKind};

/// Java.
#[derive(Debug)]
pub(crate) struct Java;

impl Language for Java {
    fn name(&self, _: &Path) -> &'static str {
        "java"
    }

    fn handles(&self, path: &Path) -> bool {
        extension(path) == "java"
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_java::LANGUAGE.into()
    }

    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module {
        let mut lower = Lower {
            b: Builder::new(source),
            return_type: String::new(),
            awaited: None,
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

fn empty() -> Expr {
    Expr::Other(Vec::new())
}

struct Lower<'s> {
    b: Builder<'s>,
    /// The return type of the method being lowered: a lambda it returns is the bean it
    /// declares (`Consumer<OrderEvent>` in Spring Cloud Stream).
    return_type: String,
    /// The call whose result is waited for by the call around it
    /// (`CompletableFuture.supplyAsync(…).join()`): its lambda runs before the caller goes on.
    awaited: Option<usize>,
}

impl<'s> Lower<'s> {
    fn text(&self, n: Node<'_>) -> String {
        self.b.text(n).to_string()
    }

    fn field_text(&self, n: Node<'_>, field: &str) -> String {
        n.child_by_field_name(field)
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
            "program" | "block" | "constructor_body" | "static_initializer" => {
                kids(n).into_iter().for_each(|c| self.stmt(c))
            }
            "class_declaration"
            | "interface_declaration"
            | "enum_declaration"
            | "record_declaration"
            | "annotation_type_declaration" => self.class(n),
            "expression_statement" | "yield_statement" | "explicit_constructor_invocation" => {
                kids(n).into_iter().for_each(|c| {
                    self.expr(c);
                })
            }
            "local_variable_declaration" | "field_declaration" | "constant_declaration" => {
                self.declaration(n)
            }
            "if_statement" => {
                let test = n
                    .child_by_field_name("condition")
                    .map_or_else(empty, |c| self.expr(c));
                if let Some(c) = n.child_by_field_name("consequence") {
                    self.b.push_cond(test.clone(), false, false);
                    self.stmt(c);
                    self.b.pop_cond();
                }
                if let Some(a) = n.child_by_field_name("alternative") {
                    self.b.push_cond(test, true, false);
                    self.stmt(a);
                    self.b.pop_cond();
                }
            }
            "while_statement" | "do_statement" => {
                if let Some(c) = n.child_by_field_name("condition") {
                    self.expr(c);
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "for_statement" => {
                let mut cursor = n.walk();
                let inits: Vec<Node<'_>> = n.children_by_field_name("init", &mut cursor).collect();
                for i in inits {
                    self.stmt(i);
                }
                if let Some(c) = n.child_by_field_name("condition") {
                    self.expr(c);
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
                let mut cursor = n.walk();
                let updates: Vec<Node<'_>> =
                    n.children_by_field_name("update", &mut cursor).collect();
                for u in updates {
                    self.expr(u);
                }
            }
            "enhanced_for_statement" => {
                let value = n
                    .child_by_field_name("value")
                    .map_or_else(empty, |v| self.expr(v));
                let target = self.field_text(n, "name");
                let pos = self.b.pos(n);
                self.b.assign(vec![target], value, pos);
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "try_statement" | "try_with_resources_statement" => self.try_stmt(n),
            "return_statement" => {
                let value = kids(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Return(value), pos);
            }
            "throw_statement" => {
                let value = kids(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Throw(value), pos);
            }
            "switch_expression" => {
                self.switch(n);
            }
            "synchronized_statement" | "labeled_statement" => {
                kids(n).into_iter().for_each(|c| self.stmt(c))
            }
            "package_declaration"
            | "import_declaration"
            | "line_comment"
            | "block_comment"
            | "break_statement"
            | "continue_statement"
            | "assert_statement"
            | "module_declaration"
            | ";" => {}
            _ => {
                self.expr(n);
            }
        }
    }

    /// `Type a = v, b;` (locals, fields, constants): each name assigned its value, or an
    /// empty object of its type (`Payment p;` gives `p` its model).
    fn declaration(&mut self, n: Node<'_>) {
        let ty = self.field_text(n, "type");
        let mut cursor = n.walk();
        let declarators: Vec<Node<'_>> = n
            .children_by_field_name("declarator", &mut cursor)
            .collect();
        for d in declarators {
            let name = self.field_text(d, "name");
            let value = match d.child_by_field_name("value") {
                Some(v) => self.expr(v),
                None => Expr::Object {
                    type_name: Some(simple_type(&ty)),
                    fields: Vec::new(),
                },
            };
            let pos = self.b.pos(d);
            self.b.assign(vec![name], value, pos);
        }
    }

    fn try_stmt(&mut self, n: Node<'_>) {
        if let Some(resources) = n.child_by_field_name("resources") {
            for r in kids(resources) {
                let value_node = r.child_by_field_name("value").unwrap_or(r);
                let value = self.expr(value_node);
                let name = self.field_text(r, "name");
                if !name.is_empty() {
                    let pos = self.b.pos(r);
                    self.b.assign(vec![name], value, pos);
                }
            }
        }
        if let Some(body) = n.child_by_field_name("body") {
            self.stmt(body);
        }
        for c in kids(n) {
            match c.kind() {
                "catch_clause" => {
                    let mut test = Vec::new();
                    for p in kids(c) {
                        if p.kind() != "catch_formal_parameter" {
                            continue;
                        }
                        for t in kids(p) {
                            if t.kind() == "catch_type" {
                                for ty in kids(t) {
                                    test.push(Expr::Path(vec![simple_type(&self.text(ty))]));
                                }
                            }
                        }
                        let name = self.field_text(p, "name");
                        test.push(Expr::Path(vec![name]));
                    }
                    self.b.push_cond(Expr::List(test), false, true);
                    if let Some(body) = c.child_by_field_name("body") {
                        self.stmt(body);
                    }
                    self.b.pop_cond();
                }
                "finally_clause" => kids(c).into_iter().for_each(|b| self.stmt(b)),
                _ => {}
            }
        }
    }

    /// `switch (v) { case A -> …; case B: … }`: each case's statements under `v == label`.
    fn switch(&mut self, n: Node<'_>) {
        let value = n
            .child_by_field_name("condition")
            .map_or_else(empty, |c| self.expr(c));
        let Some(body) = n.child_by_field_name("body") else {
            return;
        };
        for group in kids(body) {
            let mut label = Vec::new();
            let mut stmts = Vec::new();
            for c in kids(group) {
                if c.kind() == "switch_label" {
                    label.extend(kids(c).into_iter().map(|l| self.expr(l)));
                } else {
                    stmts.push(c);
                }
            }
            self.b.push_cond(
                Expr::Binary {
                    op: "==".into(),
                    left: Box::new(value.clone()),
                    right: Box::new(Expr::List(label)),
                },
                false,
                false,
            );
            for s in stmts {
                self.stmt(s);
            }
            self.b.pop_cond();
        }
    }
}

/// `List<Order>` → `List`, `com.acme.Order` → `com.acme.Order`, `Order[]` → `Order`.
fn simple_type(ty: &str) -> String {
    let t = ty.split('<').next().unwrap_or(ty);
    t.trim_end_matches("[]").trim().to_string()
}
