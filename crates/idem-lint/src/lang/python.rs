//! Python (`.py`): tree-sitter-python. Decorators register handlers (`@app.post("/webhook")`);
//! `with transaction.atomic():`, `with session.begin():` and `@transaction.atomic` open
//! transactions; SQLAlchemy and Django model classes declare unique keys.

use std::path::Path;

use tree_sitter::Node;

use super::builder::{Builder, call_pos, named, opens_transaction, unescape};
use super::{Language, extension};
use crate::ir::{Call, Expr, Function, Module, OpKind, UniqueKey};

/// Python.
#[derive(Debug)]
pub(crate) struct Python;

impl Language for Python {
    fn name(&self, _: &Path) -> &'static str {
        "python"
    }

    fn handles(&self, path: &Path) -> bool {
        extension(path) == "py"
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_python::LANGUAGE.into()
    }

    fn implicit_transactions(&self) -> bool {
        true
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

/// `with` targets that are a transaction: `transaction.atomic()`, `session.begin()`,
/// `conn.transaction()`, `db.atomic()`.
fn with_opens_transaction(call: &Call) -> bool {
    opens_transaction(call)
        || matches!(
            call.method().as_str(),
            "atomic" | "begin_nested" | "begin" | "transaction" | "txn" | "tx" | "session_scope"
        )
        // `with db_txn() as cur:`, `with atomic_transaction():`.
        || call.method().ends_with("_txn")
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
            "module" | "block" => named(n).into_iter().for_each(|c| self.stmt(c)),
            "expression_statement" => {
                for c in named(n) {
                    self.expr(c);
                }
            }
            "function_definition" => self.function(n, Vec::new()),
            "decorated_definition" => {
                let mut decorators = Vec::new();
                for c in named(n) {
                    if c.kind() == "decorator" {
                        decorators.push(self.decorator(c));
                    }
                }
                if let Some(def) = n.child_by_field_name("definition") {
                    if def.kind() == "function_definition" {
                        self.function(def, decorators);
                    } else {
                        self.stmt(def);
                    }
                }
            }
            "class_definition" => {
                if let Some(body) = n.child_by_field_name("body") {
                    self.class_schema(n, body);
                    for c in named(body) {
                        if matches!(c.kind(), "function_definition" | "decorated_definition") {
                            self.stmt(c);
                        }
                    }
                }
            }
            "if_statement" | "elif_clause" => {
                let test = n
                    .child_by_field_name("condition")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                if let Some(c) = n.child_by_field_name("consequence") {
                    self.b.push_cond(test.clone(), false, false);
                    self.stmt(c);
                    self.b.pop_cond();
                }
                let mut cursor = n.walk();
                let alternatives: Vec<_> = n
                    .children_by_field_name("alternative", &mut cursor)
                    .collect();
                for a in alternatives {
                    self.b.push_cond(test.clone(), true, false);
                    if a.kind() == "else_clause" {
                        if let Some(body) = a.child_by_field_name("body") {
                            self.stmt(body);
                        }
                    } else {
                        self.stmt(a);
                    }
                    self.b.pop_cond();
                }
            }
            "for_statement" | "while_statement" => {
                if let Some(right) = n.child_by_field_name("right") {
                    let value = self.expr(right);
                    if let Some(left) = n.child_by_field_name("left") {
                        let targets = self.targets(left);
                        let pos = self.b.pos(left);
                        self.b.assign(targets, value, pos);
                    }
                }
                if let Some(c) = n.child_by_field_name("condition") {
                    self.expr(c);
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "try_statement" => {
                for c in named(n) {
                    match c.kind() {
                        "block" => self.stmt(c),
                        "except_clause" | "except_group_clause" => {
                            let test = c
                                .child_by_field_name("value")
                                .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                            self.b.push_cond(test, false, true);
                            for s in named(c) {
                                if s.kind() == "block" {
                                    self.stmt(s);
                                }
                            }
                            self.b.pop_cond();
                        }
                        _ => named(c).into_iter().for_each(|s| self.stmt(s)),
                    }
                }
            }
            "with_statement" => {
                let mut txs = 0;
                for clause in named(n) {
                    if clause.kind() != "with_clause" {
                        continue;
                    }
                    for item in named(clause) {
                        let Some(value) = item.child_by_field_name("value") else {
                            continue;
                        };
                        let (expr, alias) = if value.kind() == "as_pattern" {
                            let e = named(value).into_iter().next();
                            let alias = value.child_by_field_name("alias");
                            (e, alias)
                        } else {
                            (Some(value), None)
                        };
                        let Some(expr) = expr else { continue };
                        let v = self.expr(expr);
                        let opens = match &v {
                            Expr::Call(c) => with_opens_transaction(c),
                            // psycopg: `with conn:` is one transaction.
                            Expr::Path(p) => p
                                .last()
                                .is_some_and(|s| matches!(s.as_str(), "conn" | "connection")),
                            _ => false,
                        };
                        if opens {
                            self.b.push_tx();
                            txs += 1;
                        }
                        if let Some(alias) = alias {
                            let targets = self.targets(alias);
                            let pos = self.b.pos(alias);
                            self.b.assign(targets, v, pos);
                        }
                    }
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
                for _ in 0..txs {
                    self.b.pop_tx();
                }
            }
            "return_statement" => {
                let value = named(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Return(value), pos);
            }
            "raise_statement" => {
                let value = named(n).into_iter().next().map(|c| self.expr(c));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Throw(value), pos);
            }
            "match_statement" => {
                let subject = n
                    .child_by_field_name("subject")
                    .map_or(Expr::Other(Vec::new()), |s| self.expr(s));
                if let Some(body) = n.child_by_field_name("body") {
                    for case in named(body) {
                        let pattern = named(case)
                            .into_iter()
                            .find(|c| c.kind() == "case_pattern")
                            .map_or(Expr::Other(Vec::new()), |p| self.expr(p));
                        self.b.push_cond(
                            Expr::Binary {
                                op: "==".into(),
                                left: Box::new(subject.clone()),
                                right: Box::new(pattern),
                            },
                            false,
                            false,
                        );
                        if let Some(c) = case.child_by_field_name("consequence") {
                            self.stmt(c);
                        }
                        self.b.pop_cond();
                    }
                }
            }
            "import_statement"
            | "import_from_statement"
            | "comment"
            | "pass_statement"
            | "future_import_statement" => {}
            _ => named(n).into_iter().for_each(|c| self.stmt(c)),
        }
    }

    /// `@app.post("/webhook")` → `app.post /webhook`.
    fn decorator(&self, d: Node<'_>) -> String {
        let Some(e) = named(d).into_iter().next() else {
            return String::new();
        };
        if e.kind() != "call" {
            return self.b.text(e).to_string();
        }
        let mut out = e
            .child_by_field_name("function")
            .map(|f| self.b.text(f).to_string())
            .unwrap_or_default();
        if let Some(args) = e.child_by_field_name("arguments") {
            for a in named(args) {
                if a.kind() == "string" {
                    out.push(' ');
                    out.push_str(self.b.text(a).trim_matches(|c| c == '"' || c == '\''));
                }
            }
        }
        out
    }

    fn function(&mut self, n: Node<'_>, decorators: Vec<String>) {
        let name = n
            .child_by_field_name("name")
            .map(|x| self.b.text(x).to_string())
            .unwrap_or_default();
        let mut f = Function::new(name);
        f.pos = self.b.pos(n);
        if let Some(params) = n.child_by_field_name("parameters") {
            for p in named(params) {
                let name = match p.kind() {
                    "identifier" => Some(p),
                    "typed_parameter" => named(p).into_iter().find(|c| c.kind() == "identifier"),
                    _ => p.child_by_field_name("name"),
                };
                if let Some(name) = name {
                    let t = self.b.text(name).to_string();
                    if t != "self" && t != "cls" {
                        f.params.push(t);
                    }
                }
                if let Some(t) = p.child_by_field_name("type") {
                    f.param_types.push(self.b.text(t).to_string());
                }
            }
        }
        let atomic = decorators
            .iter()
            .any(|d| d.ends_with("atomic") || d.ends_with("transactional"));
        f.registrations = decorators;
        self.b.begin_function(f);
        if atomic {
            self.b.push_tx();
        }
        if let Some(body) = n.child_by_field_name("body") {
            self.stmt(body);
        }
        self.b.end_function();
    }

    fn targets(&self, n: Node<'_>) -> Vec<String> {
        match n.kind() {
            "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" => {
                named(n).into_iter().flat_map(|c| self.targets(c)).collect()
            }
            "as_pattern_target" => named(n).into_iter().flat_map(|c| self.targets(c)).collect(),
            _ => vec![self.b.text(n).to_string()],
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
            "identifier" => Expr::Path(vec![self.b.text(n).to_string()]),
            "attribute" => {
                let attr = n
                    .child_by_field_name("attribute")
                    .map(|a| self.b.text(a).to_string())
                    .unwrap_or_default();
                Expr::member(n.child_by_field_name("object").map(|o| self.expr(o)), attr)
            }
            "subscript" => {
                let obj = n.child_by_field_name("value").map(|o| self.expr(o));
                let idx = n.child_by_field_name("subscript").map(|i| self.expr(i));
                Expr::index(obj, idx)
            }
            "string" => {
                let mut parts = Vec::new();
                let mut interpolated = false;
                for c in named(n) {
                    match c.kind() {
                        "string_content" | "escape_sequence" => {
                            parts.push(Expr::Str(unescape(self.b.text(c))))
                        }
                        "interpolation" => {
                            interpolated = true;
                            if let Some(e) = c.child_by_field_name("expression") {
                                let v = self.expr(e);
                                parts.push(v);
                            }
                        }
                        _ => {}
                    }
                }
                if interpolated {
                    Expr::Template(parts)
                } else {
                    Expr::Str(
                        parts
                            .into_iter()
                            .filter_map(|p| match p {
                                Expr::Str(s) => Some(s),
                                _ => None,
                            })
                            .collect(),
                    )
                }
            }
            "concatenated_string" => {
                let parts: Vec<Expr> = named(n).into_iter().map(|c| self.expr(c)).collect();
                if parts.iter().all(|p| matches!(p, Expr::Str(_))) {
                    Expr::Str(parts.iter().filter_map(Expr::string_text).collect())
                } else {
                    Expr::Template(
                        parts
                            .into_iter()
                            .flat_map(|p| match p {
                                Expr::Template(inner) => inner,
                                other => vec![other],
                            })
                            .collect(),
                    )
                }
            }
            "integer" | "float" => {
                Expr::Num(self.b.text(n).replace('_', "").parse().unwrap_or(f64::NAN))
            }
            "call" => Expr::Call(Box::new(self.call(n))),
            "await" | "parenthesized_expression" | "list_splat" | "dictionary_splat" => named(n)
                .into_iter()
                .next()
                .map_or(Expr::Other(Vec::new()), |c| self.expr(c)),
            "dictionary" => {
                let mut fields = Vec::new();
                for c in named(n) {
                    if c.kind() == "pair" {
                        let key = c.child_by_field_name("key").map(|k| self.expr(k));
                        let value = c
                            .child_by_field_name("value")
                            .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                        let key = match key {
                            Some(Expr::Str(s)) => s,
                            Some(Expr::Path(p)) => p.join("."),
                            _ => "?".to_string(),
                        };
                        fields.push((key, value));
                    } else {
                        let v = self.expr(c);
                        fields.push(("...".to_string(), v));
                    }
                }
                Expr::Object {
                    type_name: None,
                    fields,
                }
            }
            "list" | "tuple" | "set" | "expression_list" => {
                Expr::List(named(n).into_iter().map(|c| self.expr(c)).collect())
            }
            "binary_operator" | "boolean_operator" => {
                let (op, left, right) = self.b.binary_fields(n);
                let left = left.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let right = right.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                Expr::binary(op, left, right)
            }
            "comparison_operator" => {
                let mut cursor = n.walk();
                let op = n
                    .children(&mut cursor)
                    .find(|c| !c.is_named())
                    .map(|o| self.b.text(o).to_string())
                    .unwrap_or_default();
                let mut sides = named(n).into_iter().map(|c| self.expr(c));
                let left = sides.next().unwrap_or(Expr::Other(Vec::new()));
                let right = Expr::Other(sides.collect());
                Expr::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                }
            }
            "not_operator" => {
                let arg = n
                    .child_by_field_name("argument")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                Expr::Not(Box::new(arg))
            }
            "assignment" | "augmented_assignment" => {
                let value = n
                    .child_by_field_name("right")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let targets = n
                    .child_by_field_name("left")
                    .map(|l| self.targets(l))
                    .unwrap_or_default();
                let op = (n.kind() == "augmented_assignment")
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
            "named_expression" => {
                let value = n
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let targets = n
                    .child_by_field_name("name")
                    .map(|l| vec![self.b.text(l).to_string()])
                    .unwrap_or_default();
                let pos = self.b.pos(n);
                self.b.assign(targets, value.clone(), pos);
                value
            }
            "true" | "false" | "none" => Expr::Path(vec![self.b.text(n).to_string()]),
            "lambda" | "comment" => Expr::Other(Vec::new()),
            _ => Expr::Other(named(n).into_iter().map(|c| self.expr(c)).collect()),
        }
    }

    /// `f().a.b` (attributes over a call): the call, lowered, and the attribute names.
    fn through_call(&mut self, n: Node<'_>) -> Option<(Call, Vec<String>)> {
        let mut attrs = Vec::new();
        let mut at = n;
        while at.kind() == "attribute" {
            attrs.push(
                self.b
                    .text(at.child_by_field_name("attribute")?)
                    .to_string(),
            );
            at = at.child_by_field_name("object")?;
        }
        if attrs.is_empty() || at.kind() != "call" {
            return None;
        }
        attrs.reverse();
        Some((self.call(at), attrs))
    }

    fn call(&mut self, n: Node<'_>) -> Call {
        let method = n
            .child_by_field_name("function")
            .filter(|f| f.kind() == "attribute")
            .and_then(|f| f.child_by_field_name("attribute"));
        let pos = call_pos(&self.b, n, method);
        let (callee, receiver) = match n.child_by_field_name("function") {
            Some(f) if f.kind() == "attribute" => {
                let attr = f
                    .child_by_field_name("attribute")
                    .map(|a| self.b.text(a).to_string())
                    .unwrap_or_default();
                match f.child_by_field_name("object") {
                    Some(o) if o.kind() == "call" => {
                        let inner = self.call(o);
                        let mut callee = inner.callee.clone();
                        callee.push(attr);
                        crate::ir::chained(callee, inner)
                    }
                    Some(o) if let Some((inner, attrs)) = self.through_call(o) => {
                        // `get_client().messages.create(…)`: the client's path through the call.
                        let mut callee = inner.callee.clone();
                        callee.extend(attrs);
                        callee.push(attr);
                        crate::ir::chained(callee, inner)
                    }
                    Some(o) => match self.expr(o) {
                        Expr::Path(mut segs) => {
                            segs.push(attr);
                            (segs, None)
                        }
                        Expr::Call(inner) => {
                            let mut callee = inner.callee.clone();
                            callee.push(attr);
                            (callee, Some(inner))
                        }
                        _ => (vec!["?".to_string(), attr], None),
                    },
                    None => (vec![attr], None),
                }
            }
            // `HANDLERS[event["type"]](event)`: a look-up in a dispatch table, called.
            Some(f)
                if f.kind() == "subscript"
                    && f.child_by_field_name("value")
                        .is_some_and(|v| v.kind() == "identifier") =>
            {
                if let Some(index) = f.child_by_field_name("subscript") {
                    self.expr(index);
                }
                let table = f.child_by_field_name("value").map(|v| self.b.text(v));
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
            for a in named(args) {
                if a.kind() == "keyword_argument" {
                    let name = a
                        .child_by_field_name("name")
                        .map(|x| self.b.text(x).to_string())
                        .unwrap_or_default();
                    let value = a
                        .child_by_field_name("value")
                        .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                    call.kwargs.push((name, value));
                } else if a.kind() != "comment" {
                    let v = self.expr(a);
                    call.args.push(v);
                }
            }
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        self.background_task(&call);
        call
    }

    /// FastAPI/Starlette `background_tasks.add_task(process, a, b)` and a pool's
    /// `executor.submit(process, a, b)`: `process(a, b)` runs after the response, in work
    /// nobody waits for; lowered as that call, detached, so call following reads what it does.
    fn background_task(&mut self, call: &Call) {
        let words = call.receiver_words();
        let background = call.method() == "add_task"
            && words
                .iter()
                .any(|w| w.contains("background") || w.contains("tasks"))
            // `executor.submit(handle, payload)` (a thread or process pool): the same.
            || call.method() == "submit"
                && words.iter().any(|w| w.contains("executor") || w.contains("pool"));
        let Some(Expr::Path(task)) = call.args.first().filter(|_| background) else {
            return;
        };
        let deferred = Call {
            callee: task.clone(),
            receiver: None,
            args: call.args[1..].to_vec(),
            kwargs: call.kwargs.clone(),
            is_new: false,
            pos: call.pos,
        };
        self.b.push_detached();
        self.b.emit(OpKind::Call(deferred), call.pos);
        self.b.pop_detached();
    }

    /// Unique keys of a SQLAlchemy or Django model class: `Column(unique=True)`,
    /// `primary_key=True`, `UniqueConstraint(...)`, `unique_together`.
    fn class_schema(&mut self, class: Node<'_>, body: Node<'_>) {
        let class_name = class
            .child_by_field_name("name")
            .map(|x| self.b.text(x).to_string())
            .unwrap_or_default();
        let mut table = class_name.clone();
        let mut keys: Vec<Vec<String>> = Vec::new();
        let visit = |lower: &mut Self,
                     stmt: Node<'_>,
                     keys: &mut Vec<Vec<String>>,
                     table: &mut String| {
            let Some(assign) = named(stmt).into_iter().find(|c| c.kind() == "assignment") else {
                return;
            };
            let (Some(left), Some(right)) = (
                assign.child_by_field_name("left"),
                assign.child_by_field_name("right"),
            ) else {
                return;
            };
            let name = lower.b.text(left).to_string();
            let value = lower.expr(right);
            match (name.as_str(), &value) {
                ("__tablename__" | "db_table", Expr::Str(s)) => *table = s.clone(),
                ("unique_together", v) => keys.extend(string_lists(v)),
                ("__table_args__" | "constraints", v) => v.walk(&mut |e| {
                    if let Expr::Call(c) = e
                        && (c.method() == "uniqueconstraint"
                            || c.method() == "primarykeyconstraint")
                    {
                        let mut cols: Vec<String> =
                            c.args.iter().filter_map(Expr::string_text).collect();
                        if let Some(fields) = c.option("fields") {
                            cols.extend(string_lists(fields).into_iter().flatten());
                        }
                        if !cols.is_empty() {
                            keys.push(cols);
                        }
                    }
                }),
                (_, Expr::Call(c)) => {
                    let is_true = |k: &str| matches!(c.option(k), Some(Expr::Path(p)) if p.last().is_some_and(|s| s == "True"));
                    if is_true("unique") || is_true("primary_key") {
                        keys.push(vec![name]);
                    }
                }
                _ => {}
            }
        };
        for stmt in named(body) {
            match stmt.kind() {
                "expression_statement" => visit(self, stmt, &mut keys, &mut table),
                "class_definition" => {
                    // Django's `class Meta:`.
                    if let Some(meta_body) = stmt.child_by_field_name("body") {
                        for s in named(meta_body) {
                            if s.kind() == "expression_statement" {
                                visit(self, s, &mut keys, &mut table);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        for columns in keys {
            self.b.module.unique_keys.push(UniqueKey {
                table: table.clone(),
                columns: columns.clone(),
            });
            if table != class_name {
                self.b.module.unique_keys.push(UniqueKey {
                    table: class_name.clone(),
                    columns,
                });
            }
        }
    }
}

/// `[("a", "b"), ("c",)]` or `("a", "b")` as lists of strings.
fn string_lists(v: &Expr) -> Vec<Vec<String>> {
    match v {
        Expr::List(items) if items.iter().all(|i| matches!(i, Expr::Str(_))) => {
            vec![items.iter().filter_map(Expr::string_text).collect()]
        }
        Expr::List(items) => items.iter().flat_map(string_lists).collect(),
        _ => Vec::new(),
    }
}
