//! Java (`.java`): tree-sitter-java. Classes are walked member by member: a method's
//! annotations are its registrations (`@KafkaListener`, `@PostMapping`, JAX-RS `@POST`) and
//! `@Transactional` opens a transaction around its body; lambdas given to calls run in place,
//! in a transaction, on another thread or as registered callbacks ([`lambda`](super::jvm::lambda));
//! entities declare unique keys ([`entity`](super::jvm::entity)); self-invocations of
//! `@Transactional` methods bypass the proxy ([`proxy`](super::jvm::proxy)).

use std::collections::HashMap;
use std::path::Path;

use tree_sitter::Node;

use super::builder::{Builder, call_pos, unescape};
use super::jvm::annotation::{Annotation, method_role};
use super::jvm::bean::{accessor, name_builder_value};
use super::jvm::entity::{Field, unique_keys, version_columns};
use super::jvm::lambda::{LambdaRole, role};
use super::jvm::proxy::{TxMethod, self_invocations};
use super::{Language, extension};
use crate::ir::{Call, Expr, Function, Module, OpKind};

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
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op: None,
                        value,
                    },
                    pos,
                );
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
            self.b.emit(
                OpKind::Assign {
                    targets: vec![name],
                    op: None,
                    value,
                },
                pos,
            );
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
                    self.b.emit(
                        OpKind::Assign {
                            targets: vec![name],
                            op: None,
                            value,
                        },
                        pos,
                    );
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

    /// A class, interface, enum or record: its methods, nested classes, fields (for JPA
    /// keys) and initialisers.
    fn class(&mut self, n: Node<'_>) {
        let name = self.field_text(n, "name");
        let annotations = self.annotations_of(n);
        let start = self.b.module.functions.len();
        let mut fields: Vec<Field> = Vec::new();
        let mut tx_methods: HashMap<String, TxMethod> = HashMap::new();
        if let Some(params) = n.child_by_field_name("parameters") {
            for p in kids(params) {
                fields.push((self.field_text(p, "name"), self.annotations_of(p)));
            }
        }
        let interface = n.kind() == "interface_declaration";
        let mut members = Vec::new();
        if let Some(body) = n.child_by_field_name("body") {
            for m in kids(body) {
                if m.kind() == "enum_body_declarations" {
                    members.extend(kids(m));
                } else {
                    members.push(m);
                }
            }
        }
        for m in members {
            match m.kind() {
                "method_declaration"
                | "constructor_declaration"
                | "compact_constructor_declaration" => {
                    if let Some((method, tm)) = self.method(m, &annotations, interface) {
                        tx_methods.insert(method, tm);
                    }
                }
                "field_declaration" | "constant_declaration" => {
                    let anns = self.annotations_of(m);
                    let mut cursor = m.walk();
                    for d in m.children_by_field_name("declarator", &mut cursor) {
                        fields.push((self.field_text(d, "name"), anns.clone()));
                    }
                    self.declaration(m);
                }
                "enum_constant" => {
                    if let Some(body) = m.child_by_field_name("body") {
                        self.anonymous_class(body);
                    }
                }
                _ => self.stmt(m),
            }
        }
        let keys = unique_keys(&name, &annotations, &fields);
        self.b.module.unique_keys.extend(keys);
        let versions = version_columns(&name, &annotations, &fields);
        self.b.module.version_columns.extend(versions);
        let end = self.b.module.functions.len();
        self_invocations(&mut self.b.module, start..end, &tx_methods);
    }

    /// The methods of an anonymous class body (`new TransactionCallback<>() { … }`).
    fn anonymous_class(&mut self, body: Node<'_>) {
        for m in kids(body) {
            match m.kind() {
                "method_declaration" => {
                    self.method(m, &[], false);
                }
                _ => self.stmt(m),
            }
        }
    }

    /// The annotations in a declaration's modifiers.
    fn annotations_of(&mut self, n: Node<'_>) -> Vec<Annotation> {
        let Some(mods) = kids(n).into_iter().find(|c| c.kind() == "modifiers") else {
            return Vec::new();
        };
        kids(mods)
            .into_iter()
            .filter(|a| matches!(a.kind(), "annotation" | "marker_annotation"))
            .map(|a| self.annotation(a))
            .collect()
    }

    fn annotation(&mut self, a: Node<'_>) -> Annotation {
        let name = self.field_text(a, "name");
        let mut args = Vec::new();
        if let Some(list) = a.child_by_field_name("arguments") {
            for arg in kids(list) {
                if arg.kind() == "element_value_pair" {
                    let key = self.field_text(arg, "key");
                    let value = arg
                        .child_by_field_name("value")
                        .map_or_else(empty, |v| self.expr(v));
                    args.push((key, value));
                } else {
                    let value = self.expr(arg);
                    args.push(("value".to_string(), value));
                }
            }
        }
        Annotation::new(&name, args, self.b.pos(a))
    }

    /// A method: its parameters (annotations written into their types: `RequestBody
    /// String`), its registrations, and its body in the transaction its annotations open.
    /// Returns its name and transaction when it is a proxied `@Transactional` method.
    fn method(
        &mut self,
        n: Node<'_>,
        class: &[Annotation],
        interface: bool,
    ) -> Option<(String, TxMethod)> {
        let name = self.field_text(n, "name");
        let annotations = self.annotations_of(n);
        let role = method_role(class, &annotations);
        let mods = kids(n)
            .into_iter()
            .find(|c| c.kind() == "modifiers")
            .map(|m| self.text(m))
            .unwrap_or_default();
        // A proxy intercepts only calls of public, non-static methods from outside.
        let proxied = !mods.contains("private") && !mods.contains("static");
        let mut f = Function::new(name.clone());
        f.pos = self.b.pos(n);
        f.registrations = role.registrations;
        let joins = role.joins;
        if let Some(params) = n.child_by_field_name("parameters") {
            for p in kids(params) {
                if !matches!(p.kind(), "formal_parameter" | "spread_parameter") {
                    continue;
                }
                let anns: Vec<String> = self
                    .annotations_of(p)
                    .into_iter()
                    .map(|a| {
                        let mut s = a.name.clone();
                        for (_, v) in &a.args {
                            if let Some(t) = v.string_text() {
                                s.push(' ');
                                s.push_str(&t);
                            }
                        }
                        s
                    })
                    .collect();
                let ty = p
                    .child_by_field_name("type")
                    .map(|t| self.text(t))
                    .or_else(|| {
                        kids(p)
                            .into_iter()
                            .find(|c| c.kind().ends_with("type"))
                            .map(|t| self.text(t))
                    })
                    .unwrap_or_default();
                let pname = p
                    .child_by_field_name("name")
                    .or_else(|| {
                        kids(p)
                            .into_iter()
                            .find(|c| c.kind() == "variable_declarator")
                            .and_then(|d| d.child_by_field_name("name"))
                    })
                    .map(|x| self.text(x))
                    .unwrap_or_default();
                f.params.push(pname);
                let mut full = anns.join(" ");
                if !full.is_empty() {
                    full.push(' ');
                }
                full.push_str(&ty);
                f.param_types.push(full);
            }
        }
        let body = n.child_by_field_name("body");
        // A Spring Data repository method: its `@Query` is the SQL a call of it runs.
        let query = annotations
            .iter()
            .find(|a| a.name == "Query")
            .and_then(|a| {
                a.args
                    .iter()
                    .find(|(k, _)| k == "value")
                    .map(|(_, v)| (v.clone(), a.pos))
            });
        if body.is_none() && query.is_none() {
            return None;
        }
        let return_type = self.field_text(n, "type");
        let saved = std::mem::replace(&mut self.return_type, return_type);
        self.b.begin_function(f);
        // Spring's proxy applies `@Transactional` to methods it can intercept only.
        let transactional = role.transactional && proxied && (!interface || body.is_none());
        // An `@Async` method runs on an executor: nobody waits for its work.
        if proxied && annotations.iter().any(|a| a.name == "Async") {
            self.b.push_detached();
        }
        if transactional {
            self.b.push_tx();
        }
        let tx = self.b.open_tx();
        if transactional && joins {
            self.b.set_joins_caller_tx(tx);
        }
        // A listener's settings (`ackMode = "NONE"`, `properties = "enable.auto.commit=true"`)
        // are read by the checks as a call configuring its consumer.
        for a in annotations.iter().filter(|a| a.name.ends_with("Listener")) {
            let pos = a.pos;
            let call = Call {
                callee: vec![a.name.clone()],
                receiver: None,
                args: Vec::new(),
                kwargs: a.args.clone(),
                is_new: false,
                pos,
            };
            self.b.emit(OpKind::Call(call), pos);
        }
        if let Some((q, pos)) = query {
            let call = Call {
                callee: vec!["query".to_string()],
                receiver: None,
                args: vec![q],
                kwargs: Vec::new(),
                is_new: false,
                pos,
            };
            self.b.emit(OpKind::Call(call), pos);
        }
        if let Some(body) = body {
            self.stmt(body);
        }
        self.b.end_function();
        self.return_type = saved;
        let index = self.b.module.functions.len().checked_sub(1)?;
        if let (true, Some(tx), Some(f)) = (transactional, tx, self.b.module.functions.last_mut()) {
            super::jvm::dirty::flush_at_commit(f, tx);
        }
        match (transactional, tx) {
            (true, Some(tx)) => Some((name, TxMethod { index, tx })),
            _ => None,
        }
    }

    fn expr(&mut self, n: Node<'_>) -> Expr {
        if !self.b.enter() {
            return empty();
        }
        let e = self.expr_node(n);
        self.b.leave();
        e
    }

    fn expr_node(&mut self, n: Node<'_>) -> Expr {
        match n.kind() {
            "identifier" | "type_identifier" | "this" | "super" | "true" | "false"
            | "null_literal" => Expr::Path(vec![self.text(n)]),
            "scoped_identifier" | "scoped_type_identifier" | "class_literal" => Expr::Path(
                self.text(n)
                    .trim_end_matches(".class")
                    .split('.')
                    .map(|s| s.trim().to_string())
                    .collect(),
            ),
            "field_access" => {
                let field = self.field_text(n, "field");
                let object = n.child_by_field_name("object").map(|o| self.expr(o));
                Expr::member(object, field)
            }
            "array_access" => {
                let obj = n.child_by_field_name("array").map(|o| self.expr(o));
                let idx = n.child_by_field_name("index").map(|i| self.expr(i));
                Expr::index(obj, idx)
            }
            "string_literal" => {
                let t = self.b.text(n);
                let inner = if t.starts_with("\"\"\"") {
                    t.get(3..t.len().saturating_sub(3)).unwrap_or("")
                } else {
                    t.get(1..t.len().saturating_sub(1)).unwrap_or("")
                };
                Expr::Str(unescape(inner))
            }
            "character_literal" => {
                let t = self.b.text(n);
                Expr::Str(unescape(t.get(1..t.len().saturating_sub(1)).unwrap_or("")))
            }
            "decimal_integer_literal"
            | "hex_integer_literal"
            | "octal_integer_literal"
            | "binary_integer_literal"
            | "decimal_floating_point_literal" => Expr::Num(number(self.b.text(n))),
            "method_invocation" => self.invocation(n),
            "object_creation_expression" => Expr::Call(Box::new(self.new_object(n))),
            "parenthesized_expression" => kids(n)
                .into_iter()
                .next()
                .map_or_else(empty, |c| self.expr(c)),
            "cast_expression" => n
                .child_by_field_name("value")
                .map_or_else(empty, |v| self.expr(v)),
            "unary_expression" => {
                let arg = n
                    .child_by_field_name("operand")
                    .map_or_else(empty, |c| self.expr(c));
                if self.field_text(n, "operator") == "!" {
                    Expr::Not(Box::new(arg))
                } else {
                    Expr::Other(vec![arg])
                }
            }
            "binary_expression" => {
                let op = self.field_text(n, "operator");
                let left = n
                    .child_by_field_name("left")
                    .map_or_else(empty, |c| self.expr(c));
                let right = n
                    .child_by_field_name("right")
                    .map_or_else(empty, |c| self.expr(c));
                Expr::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                }
            }
            "assignment_expression" => {
                let target = self.field_text(n, "left").replace(char::is_whitespace, "");
                let op = Some(self.field_text(n, "operator")).filter(|o| o != "=");
                let value = n
                    .child_by_field_name("right")
                    .map_or_else(empty, |c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op,
                        value: value.clone(),
                    },
                    pos,
                );
                value
            }
            "update_expression" => {
                let text = self.text(n);
                let op = if text.contains("++") { "++" } else { "--" };
                let target = text.replace(['+', '-'], "").trim().to_string();
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op: Some(op.to_string()),
                        value: Expr::Num(1.0),
                    },
                    pos,
                );
                empty()
            }
            "array_initializer" | "element_value_array_initializer" => {
                Expr::List(kids(n).into_iter().map(|c| self.expr(c)).collect())
            }
            "method_reference" => {
                // `this::handle`, `OrderService::apply`: the method named.
                Expr::Path(
                    self.text(n)
                        .split("::")
                        .map(|s| s.trim().to_string())
                        .collect(),
                )
            }
            "lambda_expression" => {
                let reg = self.return_type.clone();
                self.lambda_function(n, reg, None);
                empty()
            }
            "switch_expression" => {
                self.switch(n);
                empty()
            }
            // `exists ? Mono.empty() : repo.save(row)`: each branch under its condition.
            "ternary_expression" => {
                let test = n
                    .child_by_field_name("condition")
                    .map_or_else(empty, |c| self.expr(c));
                let mut values = Vec::new();
                for (field, negated) in [("consequence", false), ("alternative", true)] {
                    if let Some(branch) = n.child_by_field_name(field) {
                        self.b.push_cond(test.clone(), negated, false);
                        values.push(self.expr(branch));
                        self.b.pop_cond();
                    }
                }
                Expr::Other(values)
            }
            "annotation" | "marker_annotation" => {
                let a = self.annotation(n);
                Expr::Call(Box::new(Call {
                    callee: vec![a.name],
                    receiver: None,
                    args: Vec::new(),
                    kwargs: a.args,
                    is_new: false,
                    pos: self.b.pos(n),
                }))
            }
            "line_comment" | "block_comment" => empty(),
            _ => Expr::Other(kids(n).into_iter().map(|c| self.expr(c)).collect()),
        }
    }

    /// A lambda kept as a function of its own, registered by `registration`.
    fn lambda_function(&mut self, n: Node<'_>, registration: String, at: Option<crate::ir::Pos>) {
        let mut f = Function::new(String::new());
        f.pos = self.b.pos(n);
        f.params = self.lambda_params(n);
        if !registration.is_empty() {
            f.registrations.push(registration);
        }
        self.b.begin_function(f);
        self.lambda_body(n, true);
        self.b.end_function();
        if let Some(at) = at {
            self.b.registered_last(at);
        }
    }

    fn lambda_params(&self, n: Node<'_>) -> Vec<String> {
        let Some(p) = n.child_by_field_name("parameters") else {
            return Vec::new();
        };
        if p.kind() == "identifier" {
            return vec![self.text(p)];
        }
        kids(p)
            .into_iter()
            .map(|c| match c.child_by_field_name("name") {
                Some(name) => self.text(name),
                None => self.text(c),
            })
            .collect()
    }

    /// A lambda's body; an expression body is what a lambda of its own returns (run in
    /// place, its value is the call's, not its caller's return).
    fn lambda_body(&mut self, n: Node<'_>, own: bool) {
        let Some(body) = n.child_by_field_name("body") else {
            return;
        };
        if body.kind() == "block" {
            self.stmt(body);
        } else {
            let v = self.expr(body);
            if own {
                let pos = self.b.pos(body);
                self.b.emit(OpKind::Return(Some(v)), pos);
            }
        }
    }

    fn new_object(&mut self, n: Node<'_>) -> Call {
        let ty = simple_type(&self.field_text(n, "type"));
        let pos = self.b.pos(n);
        let mut call = Call {
            callee: ty.split('.').map(str::to_string).collect(),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: true,
            pos,
        };
        if let Some(args) = n.child_by_field_name("arguments") {
            self.arguments(&mut call, args);
        }
        if let Some(body) = kids(n).into_iter().find(|c| c.kind() == "class_body") {
            self.anonymous_class(body);
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        call
    }

    /// A method call, or a bean property read or written through its accessor:
    /// `event.getData()` reads `event.data`, `payment.setStatus(s)` assigns `payment.status`
    /// (as Kotlin's property syntax and the other languages write them).
    fn invocation(&mut self, n: Node<'_>) -> Expr {
        let name = self.field_text(n, "name");
        let args = n
            .child_by_field_name("arguments")
            .map(kids)
            .unwrap_or_default();
        if let Some(o) = n.child_by_field_name("object") {
            // `account.getBalance().add(amount)`: `BigDecimal` arithmetic on a property.
            let getter = o.kind() == "method_invocation"
                && o.child_by_field_name("arguments")
                    .is_some_and(|a| kids(a).is_empty())
                && accessor(&self.field_text(o, "name"), &["get"]).is_some();
            let big_decimal = match name.as_str() {
                "add" | "plus" => Some("+"),
                "subtract" | "minus" => Some("-"),
                "multiply" => Some("*"),
                _ => None,
            };
            if let ([arg], true, Some(op)) = (args.as_slice(), getter, big_decimal) {
                let left = self.expr(o);
                let right = self.expr(*arg);
                return Expr::Binary {
                    op: op.to_string(),
                    left: Box::new(left),
                    right: Box::new(right),
                };
            }
            if let ([arg], Some(op)) = (args.as_slice(), super::jvm::vocab::comparison(&name)) {
                let left = self.expr(o);
                let right = self.expr(*arg);
                return Expr::Binary {
                    op: op.to_string(),
                    left: Box::new(left),
                    right: Box::new(right),
                };
            }
            if args.is_empty()
                && let Some(prop) = accessor(&name, &["get", "is"])
            {
                let object = self.expr(o);
                return Expr::member(Some(object), prop);
            }
            if let ([arg], Some(prop)) = (args.as_slice(), accessor(&name, &["set"]))
                && matches!(o.kind(), "identifier" | "field_access" | "this")
                && let Expr::Path(mut target) = self.expr(o)
            {
                target.push(prop);
                let value = arithmetic(self.expr(*arg), &target);
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target.join(".")],
                        op: None,
                        value,
                    },
                    pos,
                );
                return empty();
            }
        }
        Expr::Call(Box::new(self.call(n)))
    }

    fn call(&mut self, n: Node<'_>) -> Call {
        let name = self.field_text(n, "name");
        let pos = call_pos(&self.b, n, n.child_by_field_name("name"));
        let (callee, receiver) = match n.child_by_field_name("object") {
            Some(o) if matches!(o.kind(), "method_invocation" | "object_creation_expression") => {
                let inner = if o.kind() == "method_invocation" {
                    self.invocation(o)
                } else {
                    Expr::Call(Box::new(self.new_object(o)))
                };
                match inner {
                    Expr::Call(inner) => {
                        let mut callee = inner.callee.clone();
                        callee.push(name);
                        (callee, Some(inner))
                    }
                    Expr::Path(mut segs) => {
                        segs.push(name);
                        (segs, None)
                    }
                    _ => (vec!["?".to_string(), name], None),
                }
            }
            Some(o) => match self.expr(o) {
                Expr::Path(mut segs) => {
                    segs.push(name);
                    (segs, None)
                }
                _ => (vec!["?".to_string(), name], None),
            },
            None => (vec![name], None),
        };
        let mut call = Call {
            callee,
            receiver,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos,
        };
        if let Some(args) = n.child_by_field_name("arguments") {
            self.arguments(&mut call, args);
        }
        name_builder_value(&mut call);
        self.b.emit(OpKind::Call(call.clone()), pos);
        call
    }

    /// A call's arguments; lambdas (and anonymous classes) given to it run where
    /// [`role`] says.
    fn arguments(&mut self, call: &mut Call, args: Node<'_>) {
        for (i, a) in kids(args).into_iter().enumerate() {
            if a.kind() == "lambda_expression" {
                // `found.ifPresent(p -> …)` runs when the look-up found something,
                // `ifPresentOrElse`'s second lambda and `orElseGet` when it did not.
                let branch = super::jvm::lambda::presence_branch(call, i);
                if let Some(negated) = branch {
                    self.b
                        .push_cond(super::jvm::lambda::receiver_value(call), negated, false);
                }
                match role(call) {
                    LambdaRole::Registered => {
                        let mut reg = call.name();
                        for s in call.args.iter().filter_map(Expr::string_text) {
                            reg.push(' ');
                            reg.push_str(&s);
                        }
                        self.lambda_function(a, reg, Some(call.pos));
                    }
                    r => self.inline_lambda(call, a, r),
                }
                if branch.is_some() {
                    self.b.pop_cond();
                }
                call.args.push(empty());
                continue;
            }
            let v = self.expr(a);
            call.args.push(v);
        }
    }

    /// A lambda run by the call itself: its parameters take the call's receiver (the
    /// element of `orders.forEach(o -> …)`, the row of `repo.findById(id).ifPresent(o ->
    /// …)`), its body is lowered in place.
    fn inline_lambda(&mut self, call: &Call, n: Node<'_>, r: LambdaRole) {
        let params = self.lambda_params(n);
        if !params.is_empty() && r == LambdaRole::Inline {
            let value = super::jvm::lambda::receiver_value(call);
            let pos = self.b.pos(n);
            self.b.emit(
                OpKind::Assign {
                    targets: params,
                    op: None,
                    value,
                },
                pos,
            );
        }
        match r {
            LambdaRole::Transaction => {
                self.b.push_tx();
                self.lambda_body(n, false);
                self.b.pop_tx();
            }
            LambdaRole::Detached => {
                self.b.push_detached();
                self.lambda_body(n, false);
                self.b.pop_detached();
            }
            _ => self.lambda_body(n, false),
        }
    }
}

/// `balance.add(amount)` (`BigDecimal`, `BigInteger`) written to `balance`'s own property:
/// the arithmetic it is, `balance + amount`.
fn arithmetic(value: Expr, target: &[String]) -> Expr {
    if let Expr::Call(c) = &value
        && c.receiver.is_none()
        && c.args.len() == 1
        && c.callee.len() > 1
        && c.callee[..c.callee.len() - 1] == *target
    {
        let op = match c.method().as_str() {
            "add" | "plus" => "+",
            "subtract" | "minus" => "-",
            _ => return value,
        };
        return Expr::Binary {
            op: op.to_string(),
            left: Box::new(Expr::Path(target.to_vec())),
            right: Box::new(c.args[0].clone()),
        };
    }
    value
}

/// `List<Order>` → `List`, `com.acme.Order` → `com.acme.Order`, `Order[]` → `Order`.
fn simple_type(ty: &str) -> String {
    let t = ty.split('<').next().unwrap_or(ty);
    t.trim_end_matches("[]").trim().to_string()
}

/// A Java number literal's value (`1_000L`, `0.5f`).
fn number(text: &str) -> f64 {
    let t: String = text
        .chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .trim_end_matches(['L', 'l', 'f', 'F', 'd', 'D'])
        .to_string();
    t.parse().unwrap_or(f64::NAN)
}
