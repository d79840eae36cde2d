//! JavaScript and TypeScript (`.js`, `.jsx`, `.mjs`, `.cjs`, `.ts`, `.tsx`, `.mts`, `.cts`):
//! tree-sitter-javascript and tree-sitter-typescript, one lowering (their trees share node
//! kinds; TypeScript adds type nodes, which are skipped).

use std::path::Path;

use tree_sitter::Node;

use super::builder::{Builder, call_pos, named, opens_transaction, runs_inline, unescape};
use super::{Language, extension};
use crate::ir::{Call, Expr, Function, Module, OpKind, Pos};

/// JavaScript and TypeScript.
#[derive(Debug)]
pub(crate) struct JavaScript;

impl Language for JavaScript {
    fn name(&self, path: &Path) -> &'static str {
        match extension(path) {
            "ts" | "tsx" | "mts" | "cts" => "typescript",
            _ => "javascript",
        }
    }

    fn handles(&self, path: &Path) -> bool {
        matches!(
            extension(path),
            "js" | "jsx" | "mjs" | "cjs" | "ts" | "tsx" | "mts" | "cts"
        ) && !path.to_string_lossy().ends_with(".d.ts")
    }

    fn grammar(&self, path: &Path) -> tree_sitter::Language {
        match extension(path) {
            "tsx" => tree_sitter_typescript::LANGUAGE_TSX.into(),
            "ts" | "mts" | "cts" => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            _ => tree_sitter_javascript::LANGUAGE.into(),
        }
    }

    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module {
        let mut lower = Lower {
            b: Builder::new(source),
            registration: Vec::new(),
            registration_at: Vec::new(),
        };
        lower.stmt(tree.root_node());
        lower.b.finish()
    }
}

struct Lower<'s> {
    b: Builder<'s>,
    /// The call whose arguments are being lowered (callee and string arguments): a function
    /// found there is registered by it (`app.post /webhook`, `consumer.run eachMessage`).
    registration: Vec<String>,
    /// The positions of those calls, in step with `registration`.
    registration_at: Vec<Pos>,
}

fn is_function(kind: &str) -> bool {
    matches!(
        kind,
        "arrow_function" | "function_expression" | "function" | "generator_function"
    )
}

impl<'s> Lower<'s> {
    fn stmt(&mut self, n: Node<'_>) {
        if self.b.enter() {
            self.stmt_node(n);
            self.b.leave();
        }
    }

    fn stmt_node(&mut self, n: Node<'_>) {
        match n.kind() {
            "expression_statement" => {
                for c in named(n) {
                    // A call whose promise nobody awaits (`handle(event);`): its work may
                    // not have finished when the next statement runs.
                    // `void svc.trigger(…)` says so in as many words.
                    let unawaited = c.kind() == "call_expression"
                        || c.kind() == "unary_expression"
                            && c.child(0).is_some_and(|o| o.kind() == "void")
                            && c.named_child(0)
                                .is_some_and(|a| a.kind() == "call_expression");
                    if unawaited {
                        self.b.push_detached();
                    }
                    self.expr(c);
                    if unawaited {
                        self.b.pop_detached();
                    }
                }
            }
            "lexical_declaration" | "variable_declaration" => {
                for d in named(n) {
                    if d.kind() == "variable_declarator" {
                        self.declarator(d);
                    }
                }
            }
            "function_declaration" | "generator_function_declaration" | "method_definition" => {
                let name = n
                    .child_by_field_name("name")
                    .map(|x| self.b.text(x).to_string())
                    .unwrap_or_default();
                let reg = self.decorators(n);
                self.function(n, name, reg);
            }
            "public_field_definition" | "field_definition" => {
                let name = n
                    .child_by_field_name("name")
                    .or_else(|| n.child_by_field_name("property"))
                    .map(|x| self.b.text(x).to_string())
                    .unwrap_or_default();
                if let Some(v) = n.child_by_field_name("value") {
                    if is_function(v.kind()) {
                        self.function(v, name, None);
                    } else {
                        self.expr(v);
                    }
                }
            }
            "if_statement" => {
                let test = n
                    .child_by_field_name("condition")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
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
            "for_statement" | "for_in_statement" | "while_statement" | "do_statement" => {
                for field in ["initializer", "condition", "right", "increment"] {
                    if let Some(c) = n.child_by_field_name(field) {
                        self.stmt_or_expr(c);
                    }
                }
                if let (Some(left), Some(right)) = (
                    n.child_by_field_name("left"),
                    n.child_by_field_name("right"),
                ) {
                    let targets = self.pattern_names(left);
                    let value = Expr::Path(vec![self.b.text(right).to_string()]);
                    let pos = self.b.pos(left);
                    self.b.assign(targets, value, pos);
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "try_statement" => {
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
                if let Some(handler) = n.child_by_field_name("handler") {
                    let param = handler
                        .child_by_field_name("parameter")
                        .map_or(Expr::Other(Vec::new()), |p| {
                            Expr::Path(vec![self.b.text(p).to_string()])
                        });
                    self.b.push_cond(param, false, true);
                    if let Some(body) = handler.child_by_field_name("body") {
                        self.stmt(body);
                    }
                    self.b.pop_cond();
                }
                if let Some(fin) = n.child_by_field_name("finalizer") {
                    for c in named(fin) {
                        self.stmt(c);
                    }
                }
            }
            "return_statement" => {
                let value = named(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Return(value), pos);
            }
            "throw_statement" => {
                let value = named(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Throw(value), pos);
            }
            "switch_statement" => {
                let value = n
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                if let Some(body) = n.child_by_field_name("body") {
                    for case in named(body) {
                        let test = case.child_by_field_name("value");
                        let cond = test.map(|t| self.expr(t));
                        if let Some(cond) = cond.clone() {
                            self.b.push_cond(
                                Expr::Binary {
                                    op: "===".into(),
                                    left: Box::new(value.clone()),
                                    right: Box::new(cond),
                                },
                                false,
                                false,
                            );
                        }
                        for s in named(case) {
                            if Some(s) != test {
                                self.stmt(s);
                            }
                        }
                        if cond.is_some() {
                            self.b.pop_cond();
                        }
                    }
                }
            }
            "import_statement"
            | "comment"
            | "type_alias_declaration"
            | "interface_declaration"
            | "enum_declaration"
            | "ambient_declaration"
            | "empty_statement" => {}
            "class_declaration" | "abstract_class_declaration" | "class" => {
                if let Some(body) = n.child_by_field_name("body") {
                    for c in named(body) {
                        self.stmt(c);
                    }
                }
            }
            _ if self.is_expression(n) => {
                self.expr(n);
            }
            _ => {
                for c in named(n) {
                    self.stmt(c);
                }
            }
        }
    }

    fn is_expression(&self, n: Node<'_>) -> bool {
        n.kind().ends_with("_expression")
            || is_function(n.kind())
            || matches!(
                n.kind(),
                "identifier" | "string" | "template_string" | "object"
            )
    }

    fn stmt_or_expr(&mut self, n: Node<'_>) {
        if self.is_expression(n) {
            self.expr(n);
        } else {
            self.stmt(n);
        }
    }

    fn declarator(&mut self, d: Node<'_>) {
        let Some(name) = d.child_by_field_name("name") else {
            return;
        };
        let Some(value) = d.child_by_field_name("value") else {
            return;
        };
        let targets = self.pattern_names(name);
        if is_function(value.kind()) {
            let fname = targets.first().cloned().unwrap_or_default();
            self.function(value, fname, None);
            return;
        }
        let v = self.expr(value);
        let pos = self.b.pos(d);
        self.b.assign(targets, v, pos);
    }

    fn pattern_names(&self, n: Node<'_>) -> Vec<String> {
        match n.kind() {
            "identifier"
            | "shorthand_property_identifier_pattern"
            | "this"
            | "member_expression"
            | "subscript_expression" => vec![self.b.text(n).to_string()],
            "pair_pattern" => n
                .child_by_field_name("value")
                .map(|v| self.pattern_names(v))
                .unwrap_or_default(),
            "object_assignment_pattern" | "assignment_pattern" => n
                .child_by_field_name("left")
                .map(|v| self.pattern_names(v))
                .unwrap_or_default(),
            "required_parameter" | "optional_parameter" => n
                .child_by_field_name("pattern")
                .map(|v| self.pattern_names(v))
                .unwrap_or_default(),
            "type_annotation" | "predefined_type" | "type_identifier" => Vec::new(),
            _ => named(n)
                .into_iter()
                .flat_map(|c| self.pattern_names(c))
                .collect(),
        }
    }

    /// Lowers a function node as a function of its own.
    fn function(&mut self, n: Node<'_>, name: String, registration: Option<String>) {
        let mut f = Function::new(name);
        if let Some(params) = n
            .child_by_field_name("parameters")
            .or_else(|| n.child_by_field_name("parameter"))
        {
            if params.kind() == "identifier" {
                f.params.push(self.b.text(params).to_string());
            } else {
                for (position, p) in named(params).into_iter().enumerate() {
                    let names = self.pattern_names(p);
                    // `{ id, amount }: Args` (or `[a, b]`): the names are fields of one argument.
                    let shape = p.child_by_field_name("pattern").unwrap_or(p);
                    let destructured = matches!(shape.kind(), "object_pattern" | "array_pattern");
                    f.param_slots
                        .extend(names.iter().map(|_| (position, destructured)));
                    f.params.extend(names);
                    if let Some(t) = p.child_by_field_name("type") {
                        f.param_types.push(self.b.text(t).to_string());
                    }
                }
            }
        }
        f.pos = self.b.pos(n);
        if registration.is_some() {
            f.registered_at = self.registration_at.last().copied();
        }
        f.registrations.extend(registration);
        let saved = std::mem::take(&mut self.registration);
        let saved_at = std::mem::take(&mut self.registration_at);
        self.b.begin_function(f);
        self.body(n);
        self.b.end_function();
        self.registration = saved;
        self.registration_at = saved_at;
    }

    /// Lowers a function's body into the current function (transaction callbacks, `forEach`).
    fn inline(&mut self, n: Node<'_>, receiver: &Call) {
        let mut params = Vec::new();
        if let Some(p) = n
            .child_by_field_name("parameters")
            .or_else(|| n.child_by_field_name("parameter"))
        {
            params = self.pattern_names(p);
        }
        if !params.is_empty() {
            let pos = self.b.pos(n);
            let value = Expr::Path(receiver.receiver_words());
            self.b.assign(params, value, pos);
        }
        self.body(n);
    }

    fn body(&mut self, n: Node<'_>) {
        if let Some(body) = n.child_by_field_name("body") {
            if body.kind() == "statement_block" {
                for s in named(body) {
                    self.stmt(s);
                }
            } else {
                let v = self.expr(body);
                let pos = self.b.pos(body);
                self.b.emit(OpKind::Return(Some(v)), pos);
            }
        }
    }

    fn expr(&mut self, n: Node<'_>) -> Expr {
        if !self.b.enter() {
            return Expr::Other(Vec::new());
        }
        let e = self.expr_node(n);
        self.b.leave();
        e
    }

    fn expr_node(&mut self, n: Node<'_>) -> Expr {
        match n.kind() {
            "identifier"
            | "property_identifier"
            | "shorthand_property_identifier"
            | "this"
            | "super"
            | "private_property_identifier" => Expr::Path(vec![self.b.text(n).to_string()]),
            "member_expression" => {
                let prop = n
                    .child_by_field_name("property")
                    .map(|p| self.b.text(p).to_string())
                    .unwrap_or_default();
                Expr::member(n.child_by_field_name("object").map(|o| self.expr(o)), prop)
            }
            "subscript_expression" => {
                let obj = n.child_by_field_name("object").map(|o| self.expr(o));
                let idx = n.child_by_field_name("index").map(|i| self.expr(i));
                Expr::index(obj, idx)
            }
            "string" => {
                let t = self.b.text(n);
                let inner = t.get(1..t.len().saturating_sub(1)).unwrap_or("");
                Expr::Str(unescape(inner))
            }
            "template_string" => {
                let mut parts = Vec::new();
                for c in named(n) {
                    match c.kind() {
                        "string_fragment" | "escape_sequence" => {
                            parts.push(Expr::Str(unescape(self.b.text(c))))
                        }
                        "template_substitution" => {
                            for e in named(c) {
                                let v = self.expr(e);
                                parts.push(v);
                            }
                        }
                        _ => {}
                    }
                }
                Expr::Template(parts)
            }
            "number" => Expr::Num(self.b.text(n).replace('_', "").parse().unwrap_or(f64::NAN)),
            "call_expression" => Expr::Call(Box::new(self.call(n))),
            "new_expression" => {
                let mut call = Call {
                    callee: n
                        .child_by_field_name("constructor")
                        .map(|c| self.b.text(c).split('.').map(str::to_string).collect())
                        .unwrap_or_default(),
                    receiver: None,
                    args: Vec::new(),
                    kwargs: Vec::new(),
                    is_new: true,
                    pos: self.b.pos(n),
                };
                if let Some(args) = n.child_by_field_name("arguments") {
                    self.args(args, &mut call);
                }
                let pos = call.pos;
                self.b.emit(OpKind::Call(call.clone()), pos);
                Expr::Call(Box::new(call))
            }
            "await_expression"
            | "parenthesized_expression"
            | "as_expression"
            | "satisfies_expression"
            | "non_null_expression"
            | "type_assertion"
            | "spread_element" => named(n)
                .into_iter()
                .next()
                .map_or(Expr::Other(Vec::new()), |c| self.expr(c)),
            "object" => {
                let mut fields = Vec::new();
                for c in named(n) {
                    match c.kind() {
                        "pair" => {
                            let key = c
                                .child_by_field_name("key")
                                .map(|k| {
                                    let t = self.b.text(k);
                                    t.trim_matches(|ch| ch == '\'' || ch == '"' || ch == '`')
                                        .to_string()
                                })
                                .unwrap_or_default();
                            if let Some(v) = c.child_by_field_name("value") {
                                if is_function(v.kind()) {
                                    let reg = self.registration_with(&key);
                                    self.function(v, key.clone(), reg);
                                    fields.push((key, Expr::Other(Vec::new())));
                                } else {
                                    let value = self.expr(v);
                                    fields.push((key, value));
                                }
                            }
                        }
                        "shorthand_property_identifier" => {
                            let t = self.b.text(c).to_string();
                            fields.push((t.clone(), Expr::Path(vec![t])));
                        }
                        "method_definition" => {
                            let key = c
                                .child_by_field_name("name")
                                .map(|k| self.b.text(k).to_string())
                                .unwrap_or_default();
                            let reg = self.registration_with(&key);
                            self.function(c, key, reg);
                        }
                        _ => {
                            let v = self.expr(c);
                            fields.push(("...".to_string(), v));
                        }
                    }
                }
                Expr::Object {
                    type_name: None,
                    fields,
                }
            }
            "array" => Expr::List(named(n).into_iter().map(|c| self.expr(c)).collect()),
            "binary_expression" => {
                let (op, left, right) = self.b.binary_fields(n);
                let left = left.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let right = right.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                Expr::binary(op, left, right)
            }
            "unary_expression" => {
                let arg = n
                    .child_by_field_name("argument")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o))
                    .unwrap_or("");
                if op == "!" {
                    Expr::Not(Box::new(arg))
                } else {
                    Expr::Other(vec![arg])
                }
            }
            "update_expression" => {
                let target = n
                    .child_by_field_name("argument")
                    .map(|a| self.b.text(a).to_string())
                    .unwrap_or_default();
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string());
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op,
                        value: Expr::Num(1.0),
                    },
                    pos,
                );
                Expr::Other(Vec::new())
            }
            "assignment_expression" | "augmented_assignment_expression" => {
                // `exports.handler = async (event, context) => {…}` (a Lambda's entry),
                // `module.exports.onMessage = function (…) {…}`: the function is named by the
                // member it is assigned to, as a declaration would name it.
                if let (Some(left), Some(right)) = (
                    n.child_by_field_name("left"),
                    n.child_by_field_name("right"),
                ) && is_function(right.kind())
                    && left.kind() == "member_expression"
                    && let Some(name) = left.child_by_field_name("property")
                {
                    // `module.exports = async (event, context) => …` is a Lambda's `handler`.
                    let name = match self.b.text(name) {
                        "exports" => "handler".to_string(),
                        other => other.to_string(),
                    };
                    self.function(right, name, None);
                    return Expr::Other(Vec::new());
                }
                let value = n
                    .child_by_field_name("right")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let targets = n
                    .child_by_field_name("left")
                    .map(|l| self.pattern_names(l))
                    .unwrap_or_default();
                let op = (n.kind() == "augmented_assignment_expression")
                    .then(|| {
                        n.child_by_field_name("operator")
                            .map(|o| self.b.text(o).to_string())
                    })
                    .flatten();
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets,
                        op,
                        value: value.clone(),
                    },
                    pos,
                );
                value
            }
            k if is_function(k) => {
                let reg = self.registration.last().cloned();
                self.function(n, String::new(), reg);
                Expr::Other(Vec::new())
            }
            "true" | "false" | "null" | "undefined" => Expr::Path(vec![self.b.text(n).to_string()]),
            "comment" | "regex" | "type_arguments" | "type_annotation" => Expr::Other(Vec::new()),
            _ => Expr::Other(named(n).into_iter().map(|c| self.expr(c)).collect()),
        }
    }

    /// A method's decorators and its class's (`@Controller('payment')`, `@Post('receiver')`,
    /// `@MessagePattern('orders')`) as one registration, each written as a member call
    /// (`.Post('receiver')`) so route and event words read them as they read `app.post(…)`:
    /// NestJS registers its routes and consumers only this way.
    fn decorators(&self, method: Node<'_>) -> Option<String> {
        let mut found = Vec::new();
        // JavaScript's grammar puts a method's decorators inside it, TypeScript's before it.
        let mut c = method.walk();
        found.extend(method.children_by_field_name("decorator", &mut c));
        let mut prev = method.prev_named_sibling();
        while let Some(d) = prev.filter(|d| d.kind() == "decorator") {
            found.push(d);
            prev = d.prev_named_sibling();
        }
        if let Some(class) = method
            .parent()
            .filter(|b| b.kind() == "class_body")
            .and_then(|b| b.parent())
        {
            let mut c = class.walk();
            found.extend(class.children_by_field_name("decorator", &mut c));
            // `@Controller('payment') export class …`: TypeScript hangs them on the export.
            if let Some(export) = class.parent().filter(|e| e.kind() == "export_statement") {
                let mut c = export.walk();
                found.extend(export.children_by_field_name("decorator", &mut c));
            }
        }
        let text: Vec<String> = found
            .iter()
            .map(|d| format!(".{}", self.b.text(*d).trim_start_matches('@')))
            .collect();
        (!text.is_empty()).then(|| text.join(" "))
    }

    fn registration_with(&self, key: &str) -> Option<String> {
        Some(match self.registration.last() {
            Some(r) => format!("{r} {key}"),
            None => key.to_string(),
        })
    }

    /// The callee path of a call and the call it is made on, if any.
    fn callee(&mut self, n: Node<'_>) -> (Vec<String>, Option<Box<Call>>) {
        match n.kind() {
            "member_expression" => {
                let prop = n
                    .child_by_field_name("property")
                    .map(|p| self.b.text(p).to_string())
                    .unwrap_or_default();
                let Some(obj) = n.child_by_field_name("object") else {
                    return (vec![prop], None);
                };
                let obj = unwrap_await(obj);
                if obj.kind() == "call_expression" {
                    let inner = self.call(obj);
                    let mut callee = inner.callee.clone();
                    callee.push(prop);
                    crate::ir::chained(callee, inner)
                } else if obj.kind() == "member_expression"
                    && obj
                        .child_by_field_name("object")
                        .is_some_and(|o| unwrap_await(o).kind() == "call_expression")
                {
                    // `getResend().emails.send(…)`: the client's path through the call.
                    let (mut callee, inner) = self.callee(obj);
                    callee.push(prop);
                    (callee, inner)
                } else {
                    match self.expr(obj) {
                        Expr::Path(mut segs) => {
                            segs.push(prop);
                            (segs, None)
                        }
                        Expr::Call(inner) => {
                            let mut callee = inner.callee.clone();
                            callee.push(prop);
                            (callee, Some(inner))
                        }
                        _ => (vec!["?".to_string(), prop], None),
                    }
                }
            }
            "identifier" | "super" | "import" => (vec![self.b.text(n).to_string()], None),
            // `handlers[event.type](event)`: a look-up in a dispatch table, called.
            "subscript_expression"
                if n.child_by_field_name("object")
                    .is_some_and(|o| o.kind() == "identifier") =>
            {
                if let Some(index) = n.child_by_field_name("index") {
                    self.expr(index);
                }
                let table = n.child_by_field_name("object").map(|o| self.b.text(o));
                (
                    vec![table.unwrap_or_default().to_string(), "[]".into()],
                    None,
                )
            }
            _ => match self.expr(n) {
                Expr::Path(segs) => (segs, None),
                _ => (vec!["?".to_string()], None),
            },
        }
    }

    fn call(&mut self, n: Node<'_>) -> Call {
        let func = n.child_by_field_name("function");
        let method = func
            .filter(|f| f.kind() == "member_expression")
            .and_then(|f| f.child_by_field_name("property"));
        let pos = call_pos(&self.b, n, method);
        let (callee, receiver) = match func {
            Some(f) if is_function(unwrap_await(f).kind()) => {
                // An immediately invoked function runs inline.
                self.body(unwrap_await(f));
                (vec!["<iife>".to_string()], None)
            }
            Some(f) => self.callee(f),
            None => (Vec::new(), None),
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
            if args.kind() == "template_string" {
                let t = self.expr(args);
                call.args.push(t);
            } else {
                self.args(args, &mut call);
            }
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        call
    }

    fn args(&mut self, args: Node<'_>, call: &mut Call) {
        let mut reg = call.name();
        for a in named(args) {
            if is_function(a.kind()) {
                if opens_transaction(call) {
                    self.b.push_tx();
                    self.inline(a, call);
                    self.b.pop_tx();
                } else if runs_inline(call) {
                    self.inline(a, call);
                } else if runs_later(call) {
                    self.b.push_detached();
                    self.inline(a, call);
                    self.b.pop_detached();
                } else {
                    self.registration_at.push(call.pos);
                    self.function(a, String::new(), Some(reg.clone()));
                    self.registration_at.pop();
                }
                call.args.push(Expr::Other(Vec::new()));
                continue;
            }
            // Prisma's `$transaction([a, b])`: the calls of the array run in it.
            let tx = a.kind() == "array" && opens_transaction(call);
            if tx {
                self.b.push_tx();
            }
            self.registration.push(reg.clone());
            self.registration_at.push(call.pos);
            let v = self.expr(a);
            self.registration.pop();
            self.registration_at.pop();
            if tx {
                self.b.pop_tx();
            }
            if let Expr::Str(s) = &v {
                reg.push(' ');
                reg.push_str(s);
            }
            call.args.push(v);
        }
    }
}

/// Timers and queues whose function argument runs later, after the caller has gone on.
/// Next.js `after(…)` and `waitUntil(…)` (Vercel, Cloudflare's `ctx.waitUntil`) run it after
/// the response is sent.
fn runs_later(call: &Call) -> bool {
    call.callee.len() <= 2
        && matches!(
            call.method().as_str(),
            "setimmediate" | "settimeout" | "nexttick" | "queuemicrotask" | "waituntil"
        )
        || call.callee.len() == 1 && call.callee[0] == "after"
}

fn unwrap_await(mut n: Node<'_>) -> Node<'_> {
    while matches!(n.kind(), "await_expression" | "parenthesized_expression") {
        match named(n).into_iter().next() {
            Some(c) => n = c,
            None => break,
        }
    }
    n
}
