//! Go (`.go`): tree-sitter-go. Transactions are variables (`tx, err := db.BeginTx(…)`, found
//! by the checks) or GORM callbacks (`db.Transaction(func(tx *gorm.DB) error {…})`); GORM
//! struct tags declare unique keys; a returned error is how a consumer refuses a message.

use std::path::Path;

use tree_sitter::Node;

use super::builder::{Builder, call_pos, named, opens_transaction, unescape};
use super::{Language, extension};
use crate::ir::{Call, Expr, Function, Module, OpKind, UniqueKey};

/// Go.
#[derive(Debug)]
pub(crate) struct Go;

impl Language for Go {
    fn name(&self, _: &Path) -> &'static str {
        "go"
    }

    fn handles(&self, path: &Path) -> bool {
        extension(path) == "go"
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_go::LANGUAGE.into()
    }

    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module {
        let mut lower = Lower {
            b: Builder::new(source),
        };
        lower.stmt(tree.root_node());
        lower.b.finish()
    }
}

struct Lower<'s> {
    b: Builder<'s>,
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
            "source_file" | "block" | "statement_list" => {
                named(n).into_iter().for_each(|c| self.stmt(c))
            }
            "expression_statement" | "defer_statement" => {
                for c in named(n) {
                    self.expr(c);
                }
            }
            // `go f()`: nobody waits for the goroutine.
            "go_statement" => {
                self.b.push_detached();
                for c in named(n) {
                    self.expr(c);
                }
                self.b.pop_detached();
            }
            "function_declaration" | "method_declaration" => {
                let name = n
                    .child_by_field_name("name")
                    .map(|x| self.b.text(x).to_string())
                    .unwrap_or_default();
                self.function(n, name, None);
            }
            "type_declaration" => {
                for spec in named(n) {
                    if spec.kind() == "type_spec" {
                        self.struct_schema(spec);
                    }
                }
            }
            "short_var_declaration" | "assignment_statement" => {
                let value = n
                    .child_by_field_name("right")
                    .map_or(Expr::Other(Vec::new()), |r| self.expr(r));
                let targets = n
                    .child_by_field_name("left")
                    .map(|l| {
                        named(l)
                            .iter()
                            .map(|t| self.b.text(*t).to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string())
                    .filter(|o| o != "=");
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Assign { targets, op, value }, pos);
            }
            "var_declaration" | "const_declaration" => {
                // `var (…)` groups its specs in a list; a `const` holds SQL as often as a `var`.
                let specs = named(n).into_iter().flat_map(|c| {
                    if c.kind() == "var_spec_list" {
                        named(c)
                    } else {
                        vec![c]
                    }
                });
                for spec in specs {
                    if !matches!(spec.kind(), "var_spec" | "const_spec") {
                        continue;
                    }
                    // `var inv Invoice` gives GORM calls on `&inv` their model.
                    let value = match (
                        spec.child_by_field_name("value"),
                        spec.child_by_field_name("type"),
                    ) {
                        (Some(v), _) => self.expr(v),
                        (None, Some(t)) => Expr::Object {
                            type_name: Some(self.b.text(t).trim_start_matches('*').to_string()),
                            fields: Vec::new(),
                        },
                        (None, None) => continue,
                    };
                    let mut cursor = spec.walk();
                    let targets = spec
                        .children_by_field_name("name", &mut cursor)
                        .map(|t| self.b.text(t).to_string())
                        .collect();
                    let pos = self.b.pos(spec);
                    self.b.assign(targets, value, pos);
                }
            }
            "inc_statement" | "dec_statement" => {
                let target = named(n)
                    .into_iter()
                    .next()
                    .map(|t| self.b.text(t).to_string())
                    .unwrap_or_default();
                let op = if n.kind() == "inc_statement" {
                    "++"
                } else {
                    "--"
                };
                let pos = self.b.pos(n);
                self.b.emit(
                    OpKind::Assign {
                        targets: vec![target],
                        op: Some(op.to_string()),
                        value: Expr::Num(1.0),
                    },
                    pos,
                );
            }
            "if_statement" => {
                if let Some(init) = n.child_by_field_name("initializer") {
                    self.stmt(init);
                }
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
            "for_statement" => {
                for c in named(n) {
                    match c.kind() {
                        "range_clause" => {
                            let value = c
                                .child_by_field_name("right")
                                .map_or(Expr::Other(Vec::new()), |r| self.expr(r));
                            let targets = c
                                .child_by_field_name("left")
                                .map(|l| {
                                    named(l)
                                        .iter()
                                        .map(|t| self.b.text(*t).to_string())
                                        .collect()
                                })
                                .unwrap_or_default();
                            let pos = self.b.pos(c);
                            self.b.assign(targets, value, pos);
                        }
                        "for_clause" => named(c).into_iter().for_each(|s| self.stmt(s)),
                        "block" => {}
                        _ => {
                            self.expr(c);
                        }
                    }
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "expression_switch_statement" | "type_switch_statement" | "select_statement" => {
                if let Some(init) = n.child_by_field_name("initializer") {
                    self.stmt(init);
                }
                let value = n
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                for case in named(n) {
                    match case.kind() {
                        "expression_case" | "type_case" | "communication_case" | "default_case" => {
                            let test = case
                                .child_by_field_name("value")
                                .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                            self.b.push_cond(
                                Expr::Binary {
                                    op: "==".into(),
                                    left: Box::new(value.clone()),
                                    right: Box::new(test),
                                },
                                false,
                                false,
                            );
                            for s in named(case) {
                                if s.kind() == "statement_list" {
                                    self.stmt(s);
                                }
                            }
                            self.b.pop_cond();
                        }
                        _ => {}
                    }
                }
            }
            "return_statement" => {
                let value = named(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Return(value), pos);
            }
            "labeled_statement" => named(n).into_iter().for_each(|c| self.stmt(c)),
            "package_clause" | "import_declaration" | "comment" => {}
            _ => {
                self.expr(n);
            }
        }
    }

    fn function(&mut self, n: Node<'_>, name: String, registration: Option<String>) {
        let mut f = Function::new(name);
        for field in ["receiver", "parameters"] {
            let Some(params) = n.child_by_field_name(field) else {
                continue;
            };
            for p in named(params) {
                let ty = p
                    .child_by_field_name("type")
                    .map(|t| self.b.text(t).to_string())
                    .unwrap_or_default();
                let mut cursor = p.walk();
                for name in p.children_by_field_name("name", &mut cursor) {
                    if field == "parameters" {
                        f.params.push(self.b.text(name).to_string());
                    }
                }
                if field == "parameters" {
                    f.param_types.push(ty);
                }
            }
        }
        f.pos = self.b.pos(n);
        f.registrations.extend(registration);
        self.b.begin_function(f);
        if let Some(body) = n.child_by_field_name("body") {
            self.stmt(body);
        }
        self.b.end_function();
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
            "identifier" | "field_identifier" | "package_identifier" | "type_identifier" => {
                Expr::Path(vec![self.b.text(n).to_string()])
            }
            "selector_expression" => {
                let field = n
                    .child_by_field_name("field")
                    .map(|a| self.b.text(a).to_string())
                    .unwrap_or_default();
                Expr::member(
                    n.child_by_field_name("operand").map(|o| self.expr(o)),
                    field,
                )
            }
            "index_expression" => {
                let obj = n.child_by_field_name("operand").map(|o| self.expr(o));
                let idx = n.child_by_field_name("index").map(|i| self.expr(i));
                Expr::index(obj, idx)
            }
            "interpreted_string_literal" => {
                let t = self.b.text(n);
                Expr::Str(unescape(t.get(1..t.len().saturating_sub(1)).unwrap_or("")))
            }
            "raw_string_literal" => {
                let t = self.b.text(n);
                Expr::Str(
                    t.get(1..t.len().saturating_sub(1))
                        .unwrap_or("")
                        .to_string(),
                )
            }
            "int_literal" | "float_literal" => {
                Expr::Num(self.b.text(n).replace('_', "").parse().unwrap_or(f64::NAN))
            }
            "call_expression" => Expr::Call(Box::new(self.call(n))),
            "parenthesized_expression" | "literal_element" => named(n)
                .into_iter()
                .next()
                .map_or(Expr::Other(Vec::new()), |c| self.expr(c)),
            "unary_expression" => {
                let arg = n
                    .child_by_field_name("operand")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o))
                    .unwrap_or("");
                match op {
                    "!" => Expr::Not(Box::new(arg)),
                    // `&Order{…}` is the literal itself for the checks.
                    "&" | "*" => arg,
                    _ => Expr::Other(vec![arg]),
                }
            }
            "composite_literal" => {
                let type_name = n
                    .child_by_field_name("type")
                    .map(|t| self.b.text(t).trim_start_matches('*').to_string());
                let mut fields = Vec::new();
                if let Some(body) = n.child_by_field_name("body") {
                    for el in named(body) {
                        if el.kind() == "keyed_element" {
                            let key = el
                                .child_by_field_name("key")
                                .map(|k| self.b.text(k).trim_matches('"').to_string())
                                .unwrap_or_default();
                            let value = el
                                .child_by_field_name("value")
                                .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                            fields.push((key, value));
                        } else {
                            let v = self.expr(el);
                            fields.push((String::new(), v));
                        }
                    }
                }
                Expr::Object { type_name, fields }
            }
            "literal_value" => Expr::Other(named(n).into_iter().map(|c| self.expr(c)).collect()),
            "expression_list" => {
                let items: Vec<Expr> = named(n).into_iter().map(|c| self.expr(c)).collect();
                if items.len() == 1 {
                    items.into_iter().next().unwrap_or(Expr::Other(Vec::new()))
                } else {
                    Expr::List(items)
                }
            }
            "binary_expression" => {
                let (op, left, right) = self.b.binary_fields(n);
                let left = left.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let right = right.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                Expr::binary(op, left, right)
            }
            "func_literal" => {
                self.function(n, String::new(), None);
                Expr::Other(Vec::new())
            }
            "true" | "false" | "nil" => Expr::Path(vec![self.b.text(n).to_string()]),
            "comment" => Expr::Other(Vec::new()),
            _ => Expr::Other(named(n).into_iter().map(|c| self.expr(c)).collect()),
        }
    }

    /// `f().A.B` (selectors over a call): the call, lowered, and the field names.
    fn through_call(&mut self, n: Node<'_>) -> Option<(Call, Vec<String>)> {
        let mut fields = Vec::new();
        let mut at = n;
        while at.kind() == "selector_expression" {
            fields.push(self.b.text(at.child_by_field_name("field")?).to_string());
            at = at.child_by_field_name("operand")?;
        }
        if fields.is_empty() || at.kind() != "call_expression" {
            return None;
        }
        fields.reverse();
        Some((self.call(at), fields))
    }

    fn call(&mut self, n: Node<'_>) -> Call {
        let func = n.child_by_field_name("function");
        let method = func
            .filter(|f| f.kind() == "selector_expression")
            .and_then(|f| f.child_by_field_name("field"));
        let pos = call_pos(&self.b, n, method);
        let (callee, receiver) = match func {
            Some(f) if f.kind() == "selector_expression" => {
                let field = f
                    .child_by_field_name("field")
                    .map(|a| self.b.text(a).to_string())
                    .unwrap_or_default();
                match f.child_by_field_name("operand") {
                    Some(o) if o.kind() == "call_expression" => {
                        let inner = self.call(o);
                        let mut callee = inner.callee.clone();
                        callee.push(field);
                        crate::ir::chained(callee, inner)
                    }
                    Some(o) if let Some((inner, fields)) = self.through_call(o) => {
                        // `getClient().Messages.Create(…)`: the client's path through the call.
                        let mut callee = inner.callee.clone();
                        callee.extend(fields);
                        callee.push(field);
                        crate::ir::chained(callee, inner)
                    }
                    Some(o) => match self.expr(o) {
                        Expr::Path(mut segs) => {
                            segs.push(field);
                            (segs, None)
                        }
                        _ => (vec!["?".to_string(), field], None),
                    },
                    None => (vec![field], None),
                }
            }
            Some(f) if f.kind() == "func_literal" => {
                // `func() { … }()` runs inline.
                if let Some(body) = f.child_by_field_name("body") {
                    self.stmt(body);
                }
                (vec!["<iife>".to_string()], None)
            }
            // `handlers[evt.Type](evt)`: a look-up in a dispatch table, called.
            Some(f)
                if f.kind() == "index_expression"
                    && f.child_by_field_name("operand")
                        .is_some_and(|o| o.kind() == "identifier") =>
            {
                if let Some(index) = f.child_by_field_name("index") {
                    self.expr(index);
                }
                let table = f.child_by_field_name("operand").map(|o| self.b.text(o));
                (
                    vec![table.unwrap_or_default().to_string(), "[]".into()],
                    None,
                )
            }
            Some(f) => match self.expr(f) {
                Expr::Path(segs) => (segs, None),
                _ => (vec!["?".to_string()], None),
            },
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
            let mut reg = call.name();
            for a in named(args) {
                if a.kind() == "func_literal" {
                    if opens_transaction(&call) {
                        self.b.push_tx();
                        if let Some(body) = a.child_by_field_name("body") {
                            self.stmt(body);
                        }
                        self.b.pop_tx();
                    } else if retries(&call) {
                        // `backoff.Retry(func() …)`, `retry.Do(func() error …)`: the function
                        // runs in the call, as part of the caller.
                        if let Some(body) = a.child_by_field_name("body") {
                            self.stmt(body);
                        }
                    } else {
                        self.function(a, String::new(), Some(reg.clone()));
                        self.b.registered_last(call.pos);
                    }
                    call.args.push(Expr::Other(Vec::new()));
                    continue;
                }
                let v = self.expr(a);
                if let Expr::Str(s) = &v {
                    reg.push(' ');
                    reg.push_str(s);
                }
                call.args.push(v);
            }
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        call
    }

    /// Unique keys of a GORM model: fields tagged `gorm:"primaryKey"`, `gorm:"unique"`,
    /// `gorm:"uniqueIndex"` (fields sharing a named unique index form one key).
    fn struct_schema(&mut self, spec: Node<'_>) {
        let Some(name) = spec.child_by_field_name("name") else {
            return;
        };
        let table = self.b.text(name).to_string();
        let Some(ty) = spec.child_by_field_name("type") else {
            return;
        };
        if ty.kind() != "struct_type" {
            return;
        }
        let mut single = Vec::new();
        let mut named_indexes: Vec<(String, Vec<String>)> = Vec::new();
        for list in named(ty) {
            for field in named(list) {
                if field.kind() != "field_declaration" {
                    continue;
                }
                let Some(tag) = field.child_by_field_name("tag") else {
                    continue;
                };
                let raw = self.b.text(tag);
                let tag = if raw.starts_with('`') {
                    raw.trim_matches('`').to_string()
                } else {
                    unescape(raw.trim_matches('"'))
                };
                let tag = tag.as_str();
                let Some(gorm) = struct_tag(tag, "gorm") else {
                    continue;
                };
                let mut cursor = field.walk();
                let names: Vec<String> = field
                    .children_by_field_name("name", &mut cursor)
                    .map(|n| self.b.text(n).to_string())
                    .collect();
                for setting in gorm.split(';') {
                    let (key, value) = setting.split_once(':').unwrap_or((setting, ""));
                    let key = key.trim().to_ascii_lowercase();
                    if key == "primarykey" || key == "primary_key" || key == "unique" {
                        single.extend(names.iter().map(|n| vec![n.clone()]));
                    } else if key == "uniqueindex" {
                        let index = value.split(',').next().unwrap_or("").trim();
                        if index.is_empty() {
                            single.extend(names.iter().map(|n| vec![n.clone()]));
                        } else if let Some(entry) =
                            named_indexes.iter_mut().find(|(i, _)| i == index)
                        {
                            entry.1.extend(names.iter().cloned());
                        } else {
                            named_indexes.push((index.to_string(), names.clone()));
                        }
                    }
                }
            }
        }
        for columns in single
            .into_iter()
            .chain(named_indexes.into_iter().map(|(_, c)| c))
        {
            self.b.module.unique_keys.push(UniqueKey {
                table: table.clone(),
                columns,
            });
        }
    }
}

/// The value of `key` in a Go struct tag (`json:"id" gorm:"uniqueIndex"`).
fn struct_tag<'t>(tag: &'t str, key: &str) -> Option<&'t str> {
    let mut rest = tag;
    while let Some(colon) = rest.find(":\"") {
        let name = rest[..colon].trim();
        let after = &rest[colon + 2..];
        let end = after.find('"')?;
        if name == key {
            return Some(&after[..end]);
        }
        rest = &after[end + 1..];
    }
    None
}

/// A retry wrapper that runs its function argument in the call: `backoff.Retry(op, b)`,
/// `retry.Do(func() error {…})`.
fn retries(call: &Call) -> bool {
    let m = call.method();
    matches!(m.as_str(), "retry" | "retrynotify" | "retrywithdata")
        || m == "do"
            && call
                .callee
                .first()
                .is_some_and(|r| r.to_lowercase().contains("retry"))
}
