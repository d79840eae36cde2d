//! Kotlin (`.kt`, `.kts`): tree-sitter-kotlin-ng, lowered with the Java lowering's Spring
//! meaning: annotations as registrations and transactions, lambdas (trailing blocks
//! included) by what their call does with them, JPA keys on constructor properties,
//! self-invocations of `@Transactional` methods. Kotlin is expression-oriented: `if`, `when`
//! and `try` are lowered as statements wherever they appear, their value kept opaque.

use std::collections::HashMap;
use std::path::Path;

use tree_sitter::Node;

use super::builder::{Builder, call_pos, unescape};
use super::jvm::annotation::{Annotation, method_role};
use super::jvm::entity::{Field, unique_keys, version_columns};
use super::jvm::lambda::{LambdaRole, presence_branch, receiver_value, role};
use super::jvm::proxy::{TxMethod, self_invocations};
use super::{Language, extension};
use crate::ir::{Call, Expr, Function, Module, OpKind, Pos};

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
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op: None,
                        value,
                    },
                    pos,
                );
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
        self.b.emit(
            OpKind::Assign {
                targets,
                op: None,
                value,
            },
            pos,
        );
    }

    /// A class, interface or object: its constructor properties (field types for receivers,
    /// JPA keys), members, and proxy self-invocations.
    fn class(&mut self, n: Node<'_>) {
        let name = self.name_of(n);
        let annotations = self.annotations_of(n);
        let interface = {
            let mut cursor = n.walk();
            n.children(&mut cursor).any(|c| c.kind() == "interface")
        };
        let start = self.b.module.functions.len();
        let mut fields: Vec<Field> = Vec::new();
        let mut tx_methods: HashMap<String, TxMethod> = HashMap::new();
        if let Some(params) = kid(n, "primary_constructor").and_then(|p| kid(p, "class_parameters"))
        {
            for p in kids(params) {
                let pname = self.name_of(p);
                let anns = self.annotations_of(p);
                let ty = kids(p)
                    .into_iter()
                    .find(|c| c.kind().ends_with("type"))
                    .map(|t| simple_type(&self.text(t)))
                    .unwrap_or_default();
                let pos = self.b.pos(p);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![pname.clone()],
                        op: None,
                        value: Expr::Object {
                            type_name: Some(ty),
                            fields: Vec::new(),
                        },
                    },
                    pos,
                );
                fields.push((pname, anns));
            }
        }
        let body = kid(n, "class_body").or_else(|| kid(n, "enum_class_body"));
        for m in body.map(kids).unwrap_or_default() {
            match m.kind() {
                "function_declaration" => {
                    if let Some((method, tm)) = self.function(m, &annotations, interface) {
                        tx_methods.insert(method, tm);
                    }
                }
                "property_declaration" => {
                    let anns = self.annotations_of(m);
                    if let Some(d) = kid(m, "variable_declaration") {
                        fields.push((self.name_of(d), anns));
                    }
                    self.property(m);
                }
                "enum_entry" => {
                    if let Some(b) = kid(m, "class_body") {
                        self.anonymous_class(b);
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

    fn anonymous_class(&mut self, body: Node<'_>) {
        for m in kids(body) {
            match m.kind() {
                "function_declaration" => {
                    self.function(m, &[], false);
                }
                _ => self.stmt(m),
            }
        }
    }

    fn annotations_of(&mut self, n: Node<'_>) -> Vec<Annotation> {
        let Some(mods) = kid(n, "modifiers") else {
            return Vec::new();
        };
        kids(mods)
            .into_iter()
            .filter(|a| a.kind() == "annotation")
            .map(|a| self.annotation(a))
            .collect()
    }

    /// `@Name`, `@Name(args)`, `@field:Name(args)`.
    fn annotation(&mut self, a: Node<'_>) -> Annotation {
        if let Some(ci) = kid(a, "constructor_invocation") {
            let name = kid(ci, "user_type")
                .map(|t| self.text(t))
                .unwrap_or_default();
            let mut args = Vec::new();
            if let Some(list) = kid(ci, "value_arguments") {
                for arg in kids(list) {
                    let (key, value) = self.value_argument(arg);
                    args.push((key.unwrap_or_else(|| "value".to_string()), value));
                }
            }
            return Annotation::new(&simple_type(&name), args, self.b.pos(a));
        }
        let name = kids(a)
            .into_iter()
            .find(|c| c.kind() != "use_site_target")
            .map(|t| self.text(t))
            .unwrap_or_default();
        Annotation::new(&simple_type(&name), Vec::new(), self.b.pos(a))
    }

    /// `name = value` or `value`.
    fn value_argument(&mut self, arg: Node<'_>) -> (Option<String>, Expr) {
        let parts = kids(arg);
        match parts.as_slice() {
            [name, value] if name.kind() == "identifier" => {
                let key = self.text(*name);
                (Some(key), self.expr(*value))
            }
            [value] => (None, self.expr(*value)),
            _ => (
                None,
                Expr::Other(parts.iter().map(|p| self.expr(*p)).collect()),
            ),
        }
    }

    /// A function or method, as the Java lowering's `method`.
    fn function(
        &mut self,
        n: Node<'_>,
        class: &[Annotation],
        interface: bool,
    ) -> Option<(String, TxMethod)> {
        let name = self.name_of(n);
        let annotations = self.annotations_of(n);
        let role = method_role(class, &annotations);
        let mods = kid(n, "modifiers")
            .map(|m| self.text(m))
            .unwrap_or_default();
        // Kotlin's classes and methods are final unless `open` (Spring's kotlin-spring plugin
        // opens annotated ones): private ones are never proxied.
        let proxied = !mods.contains("private");
        let mut f = Function::new(name.clone());
        f.pos = self.b.pos(n);
        f.registrations = role.registrations;
        let joins = role.joins;
        if let Some(params) = kid(n, "function_value_parameters") {
            let mut pending: Vec<String> = Vec::new();
            for p in kids(params) {
                match p.kind() {
                    "parameter_modifiers" => {
                        for a in kids(p).into_iter().filter(|a| a.kind() == "annotation") {
                            let a = self.annotation(a);
                            let mut s = a.name.clone();
                            for (_, v) in &a.args {
                                if let Some(t) = v.string_text() {
                                    s.push(' ');
                                    s.push_str(&t);
                                }
                            }
                            pending.push(s);
                        }
                    }
                    "parameter" => {
                        f.params.push(self.name_of(p));
                        let ty = kids(p)
                            .into_iter()
                            .find(|c| c.kind().ends_with("type"))
                            .map(|t| self.text(t))
                            .unwrap_or_default();
                        pending.push(ty);
                        f.param_types.push(pending.join(" "));
                        pending.clear();
                    }
                    _ => {}
                }
            }
        }
        let body = kid(n, "function_body");
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
        let return_type = kids(n)
            .into_iter()
            .find(|c| c.kind().ends_with("type") && c.kind() != "type_parameters")
            .map(|t| self.text(t))
            .unwrap_or_default();
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
            match kids(body).into_iter().next() {
                Some(b) if b.kind() == "block" => self.stmt(b),
                // `fun f() = expr`: the expression is what it returns.
                Some(e) => {
                    let v = self.expr(e);
                    let pos = self.b.pos(e);
                    self.b.emit(OpKind::Return(Some(v)), pos);
                }
                None => {}
            }
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
            "identifier" | "this_expression" | "super_expression" | "user_type" => {
                Expr::Path(vec![self.text(n)])
            }
            "navigation_expression" => {
                let parts = kids(n);
                let field = parts.last().map(|f| self.text(*f)).unwrap_or_default();
                let object = match parts.as_slice() {
                    [object, _] => Some(self.expr(*object)),
                    _ => None,
                };
                Expr::member(object, field)
            }
            "callable_reference" => Expr::Path(
                self.text(n)
                    .split("::")
                    .filter(|s| !s.is_empty())
                    .map(|s| s.trim().to_string())
                    .collect(),
            ),
            "index_expression" => {
                let parts = kids(n);
                let obj = parts.first().map(|o| self.expr(*o));
                let idx = parts.get(1).map(|i| self.expr(*i));
                Expr::index(obj, idx)
            }
            "string_literal" | "multiline_string_literal" => self.string(n),
            "character_literal" => {
                let t = self.b.text(n);
                Expr::Str(unescape(t.get(1..t.len().saturating_sub(1)).unwrap_or("")))
            }
            "number_literal" | "float_literal" => Expr::Num(number(self.b.text(n))),
            "call_expression" => self.call_expr(n),
            "parenthesized_expression" | "annotated_expression" | "labeled_expression" => kids(n)
                .into_iter()
                .rfind(|c| !matches!(c.kind(), "annotation" | "label"))
                .map_or_else(empty, |c| self.expr(c)),
            "as_expression" => n
                .child_by_field_name("left")
                .map_or_else(empty, |v| self.expr(v)),
            "unary_expression" => self.unary(n),
            "binary_expression" | "in_expression" | "is_expression" => {
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.text(o))
                    .unwrap_or_else(|| n.kind().trim_end_matches("_expression").to_string());
                let left = n
                    .child_by_field_name("left")
                    .map_or_else(empty, |c| self.expr(c));
                // `found ?: run { … }`: the right side runs only when the left is null.
                let elvis = op == "?:";
                if elvis {
                    let test = Expr::Binary {
                        op: "==".into(),
                        left: Box::new(left.clone()),
                        right: Box::new(Expr::Path(vec!["null".into()])),
                    };
                    self.b.push_cond(test, false, false);
                }
                let right = n
                    .child_by_field_name("right")
                    .map_or_else(empty, |c| self.expr(c));
                if elvis {
                    self.b.pop_cond();
                }
                Expr::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                }
            }
            "infix_expression" => {
                // `key to value`, `a until b`: a call of the infix function.
                let parts = kids(n);
                let [left, name, right] = parts.as_slice() else {
                    return Expr::Other(parts.iter().map(|p| self.expr(*p)).collect());
                };
                let args = vec![self.expr(*left), self.expr(*right)];
                let pos = self.b.pos(*name);
                let call = Call {
                    callee: vec![self.text(*name)],
                    receiver: None,
                    args,
                    kwargs: Vec::new(),
                    is_new: false,
                    pos,
                };
                self.b.emit(OpKind::Call(call.clone()), pos);
                Expr::Call(Box::new(call))
            }
            "assignment" => {
                let target = n
                    .child_by_field_name("left")
                    .map(|l| self.text(l).replace(char::is_whitespace, ""))
                    .unwrap_or_default();
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.text(o))
                    .filter(|o| o != "=");
                let value = n
                    .child_by_field_name("right")
                    .map_or_else(empty, |c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op,
                        value,
                    },
                    pos,
                );
                empty()
            }
            "if_expression" => {
                self.if_expr(n);
                empty()
            }
            "when_expression" => {
                self.when(n);
                empty()
            }
            "try_expression" => {
                self.try_expr(n);
                empty()
            }
            "return_expression" => {
                let value = kids(n)
                    .into_iter()
                    .find(|c| c.kind() != "label")
                    .map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Return(value), pos);
                empty()
            }
            "throw_expression" => {
                let value = kids(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Throw(value), pos);
                empty()
            }
            "collection_literal" => Expr::List(kids(n).into_iter().map(|c| self.expr(c)).collect()),
            "lambda_literal" | "anonymous_function" => {
                let reg = self.return_type.clone();
                self.lambda_function(n, reg, None);
                empty()
            }
            "object_literal" => {
                if let Some(b) = kid(n, "class_body") {
                    self.anonymous_class(b);
                }
                empty()
            }
            "block"
            | "statements"
            | "property_declaration"
            | "for_statement"
            | "while_statement"
            | "do_while_statement"
            | "class_declaration"
            | "function_declaration"
            | "object_declaration" => {
                self.stmt_node(n);
                empty()
            }
            "line_comment" | "block_comment" => empty(),
            _ => {
                if n.named_child_count() == 0 {
                    // `true`, `false`, `null` and other keywords.
                    return Expr::Path(vec![self.text(n)]);
                }
                Expr::Other(kids(n).into_iter().map(|c| self.expr(c)).collect())
            }
        }
    }

    fn unary(&mut self, n: Node<'_>) -> Expr {
        let arg = n
            .child_by_field_name("argument")
            .or_else(|| kids(n).into_iter().next());
        let op = n
            .child_by_field_name("operator")
            .map(|o| self.text(o))
            .unwrap_or_default();
        if matches!(op.as_str(), "++" | "--") {
            let target = arg.map(|a| self.text(a)).unwrap_or_default();
            let pos = self.b.pos(n);
            self.b.emit(
                OpKind::Assign {
                    targets: vec![target],
                    op: Some(op),
                    value: Expr::Num(1.0),
                },
                pos,
            );
            return empty();
        }
        let value = arg.map_or_else(empty, |a| self.expr(a));
        if op == "!" {
            Expr::Not(Box::new(value))
        } else {
            Expr::Other(vec![value])
        }
    }

    /// A string literal, or a template with its `${…}` and `$name` holes.
    fn string(&mut self, n: Node<'_>) -> Expr {
        let mut parts: Vec<Expr> = Vec::new();
        let mut dollar = false;
        for c in kids(n) {
            match c.kind() {
                "interpolation" => {
                    let v = kids(c)
                        .into_iter()
                        .next()
                        .map_or_else(empty, |e| self.expr(e));
                    parts.push(v);
                }
                _ => {
                    let raw = self.text(c);
                    let text = if c.kind() == "escape_sequence" {
                        unescape(&raw)
                    } else {
                        raw
                    };
                    if text == "$" {
                        dollar = true;
                        continue;
                    }
                    if dollar {
                        // `$name`: the identifier is a hole, the rest literal text.
                        dollar = false;
                        let end = text
                            .find(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                            .unwrap_or(text.len());
                        parts.push(Expr::Path(vec![text[..end].to_string()]));
                        if end < text.len() {
                            push_text(&mut parts, &text[end..]);
                        }
                        continue;
                    }
                    push_text(&mut parts, &text);
                }
            }
        }
        match parts.as_slice() {
            [] => Expr::Str(String::new()),
            [Expr::Str(s)] => Expr::Str(s.clone()),
            _ => Expr::Template(parts),
        }
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

    fn lambda_function(&mut self, n: Node<'_>, registration: String, at: Option<Pos>) {
        let mut f = Function::new(String::new());
        f.pos = self.b.pos(n);
        f.params = self.lambda_params(n);
        if !registration.is_empty() {
            f.registrations.push(registration);
        }
        self.b.begin_function(f);
        self.lambda_body(n);
        self.b.end_function();
        if let Some(at) = at {
            self.b.registered_last(at);
        }
    }

    /// A lambda's parameters; `it` when it declares none.
    fn lambda_params(&self, n: Node<'_>) -> Vec<String> {
        match kid(n, "lambda_parameters").or_else(|| kid(n, "function_value_parameters")) {
            Some(p) => kids(p).into_iter().map(|v| self.name_of(v)).collect(),
            None => vec!["it".to_string()],
        }
    }

    fn lambda_body(&mut self, n: Node<'_>) {
        for c in kids(n) {
            match c.kind() {
                "lambda_parameters" | "function_value_parameters" => {}
                "function_body" => self.stmt(c),
                _ => self.stmt(c),
            }
        }
    }

    /// A call: `f(a)`, `recv.m(a) { … }`, `Order(id = x)` (a constructor: its named
    /// arguments are the row's columns).
    fn call_expr(&mut self, n: Node<'_>) -> Expr {
        let parts = kids(n);
        let Some(func) = parts.first().copied() else {
            return empty();
        };
        let method = (func.kind() == "navigation_expression")
            .then(|| kids(func).into_iter().last())
            .flatten();
        let pos = call_pos(&self.b, n, method);
        // `stored.isAfter(incoming)`: the comparison it is.
        if let (Some(m), [_, args]) = (method, parts.as_slice())
            && let Some(op) = super::jvm::vocab::comparison(self.b.text(m))
            && let [arg] = kids(*args).as_slice()
            && let [object, _] = kids(func).as_slice()
        {
            let left = self.expr(*object);
            let right = kids(*arg)
                .into_iter()
                .last()
                .map_or_else(empty, |e| self.expr(e));
            return Expr::Binary {
                op: op.to_string(),
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        let (callee, receiver) = match func.kind() {
            "navigation_expression" => {
                let fparts = kids(func);
                let name = fparts.last().map(|x| self.text(*x)).unwrap_or_default();
                match fparts.as_slice() {
                    [object, _] if object.kind() == "call_expression" => {
                        match self.call_expr(*object) {
                            Expr::Call(inner) => {
                                let mut callee = inner.callee.clone();
                                callee.push(name);
                                (callee, Some(inner))
                            }
                            _ => (vec!["?".to_string(), name], None),
                        }
                    }
                    [object, _] => match self.expr(*object) {
                        Expr::Path(mut segs) => {
                            segs.push(name);
                            (segs, None)
                        }
                        _ => (vec!["?".to_string(), name], None),
                    },
                    _ => (vec![name], None),
                }
            }
            "identifier" | "user_type" => (vec![self.text(func)], None),
            _ => match self.expr(func) {
                Expr::Path(segs) => (segs, None),
                _ => (vec!["?".to_string()], None),
            },
        };
        // Kotlin has no `new`: a call of a capitalised name is a constructor (`Order(…)`).
        let is_new =
            matches!(callee.as_slice(), [c] if c.starts_with(|ch: char| ch.is_ascii_uppercase()));
        let mut call = Call {
            callee,
            receiver,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new,
            pos,
        };
        // `found?.let { … }`: the block runs only when the look-up found something.
        let safe = func.kind() == "navigation_expression"
            && self.b.text(func).contains("?.")
            && matches!(call.method().as_str(), "let" | "also" | "run" | "apply");
        for p in parts.iter().skip(1) {
            match p.kind() {
                "value_arguments" => {
                    for arg in kids(*p) {
                        let lambda = kids(arg).into_iter().last().filter(|e| {
                            matches!(e.kind(), "lambda_literal" | "anonymous_function")
                        });
                        if let Some(l) = lambda {
                            let branch =
                                presence_branch(&call, call.args.len()).or(safe.then_some(false));
                            self.lambda_arg(&call, l, branch);
                            call.args.push(empty());
                            continue;
                        }
                        match self.value_argument(arg) {
                            (Some(k), v) => call.kwargs.push((k, v)),
                            (None, v) => call.args.push(v),
                        }
                    }
                }
                "annotated_lambda" => {
                    if let Some(l) = kid(*p, "lambda_literal") {
                        let branch =
                            presence_branch(&call, call.args.len()).or(safe.then_some(false));
                        self.lambda_arg(&call, l, branch);
                        call.args.push(empty());
                    }
                }
                _ => {}
            }
        }
        super::jvm::bean::name_builder_value(&mut call);
        self.b.emit(OpKind::Call(call.clone()), pos);
        Expr::Call(Box::new(call))
    }

    /// A lambda given to `call`, run where [`role`] says.
    fn lambda_arg(&mut self, call: &Call, l: Node<'_>, branch: Option<bool>) {
        if let Some(negated) = branch {
            self.b.push_cond(receiver_value(call), negated, false);
            self.lambda_arg_in_place(call, l);
            self.b.pop_cond();
        } else {
            self.lambda_arg_in_place(call, l);
        }
    }

    fn lambda_arg_in_place(&mut self, call: &Call, l: Node<'_>) {
        let r = role(call);
        if r == LambdaRole::Registered {
            let mut reg = call.name();
            for s in call.args.iter().filter_map(Expr::string_text) {
                reg.push(' ');
                reg.push_str(&s);
            }
            self.lambda_function(l, reg, Some(call.pos));
            return;
        }
        let params = self.lambda_params(l);
        if r == LambdaRole::Inline {
            let value = receiver_value(call);
            let pos = self.b.pos(l);
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
                self.lambda_body(l);
                self.b.pop_tx();
            }
            LambdaRole::Detached => {
                self.b.push_detached();
                self.lambda_body(l);
                self.b.pop_detached();
            }
            _ => self.lambda_body(l),
        }
    }
}

fn push_text(parts: &mut Vec<Expr>, text: &str) {
    if let Some(Expr::Str(last)) = parts.last_mut() {
        last.push_str(text);
    } else {
        parts.push(Expr::Str(text.to_string()));
    }
}

/// `KafkaTemplate<String, String>` → `KafkaTemplate`, `Long?` → `Long`.
fn simple_type(ty: &str) -> String {
    let t = ty.split('<').next().unwrap_or(ty);
    t.trim_end_matches('?').trim().to_string()
}

/// A Kotlin number literal's value (`1_000L`, `0.5f`).
fn number(text: &str) -> f64 {
    text.chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .trim_end_matches(['L', 'l', 'f', 'F', 'u', 'U'])
        .parse()
        .unwrap_or(f64::NAN)
}
