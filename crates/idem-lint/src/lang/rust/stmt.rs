//! Items (functions, `impl` blocks, structs), statements and control flow.

use tree_sitter::Node;

use super::{FnFrame, Lower, kids, vocab};
use crate::ir::{Expr, Function, OpKind};

impl Lower<'_> {
    /// A file, module or `impl` body: items with the attributes written above them.
    pub(super) fn items(&mut self, n: Node<'_>) {
        if !self.b.enter() {
            return;
        }
        let mut attrs: Vec<String> = Vec::new();
        for c in kids(n) {
            match c.kind() {
                "attribute_item" => attrs.push(self.b.text(c).to_string()),
                "function_item" => {
                    self.function_item(c, &attrs);
                    attrs.clear();
                }
                "impl_item" => {
                    let saved = self.impl_type.take();
                    let saved_trait = self.impl_trait.take();
                    self.impl_type = c
                        .child_by_field_name("type")
                        .map(|t| self.b.text(t).to_string());
                    self.impl_trait = c
                        .child_by_field_name("trait")
                        .map(|t| vocab::type_base(self.b.text(t)));
                    if let Some(body) = c.child_by_field_name("body") {
                        self.items(body);
                    }
                    self.impl_type = saved;
                    self.impl_trait = saved_trait;
                    attrs.clear();
                }
                "mod_item" | "trait_item" => {
                    if let Some(body) = c.child_by_field_name("body") {
                        self.items(body);
                    }
                    attrs.clear();
                }
                "struct_item" => {
                    self.entity_keys(c, &attrs);
                    self.trait_fields(c);
                    attrs.clear();
                }
                "macro_invocation" => {
                    self.diesel_table(c);
                    self.expr(c);
                    attrs.clear();
                }
                "use_declaration" => {
                    let text = self.b.text(c).to_string();
                    self.imports.extend(vocab::use_paths(&text));
                    attrs.clear();
                }
                "extern_crate_declaration"
                | "enum_item"
                | "type_item"
                | "union_item"
                | "macro_definition"
                | "foreign_mod_item"
                | "function_signature_item"
                | "associated_type" => attrs.clear(),
                "const_item" | "static_item" => {
                    self.let_like(c, "name");
                    attrs.clear();
                }
                _ => {
                    self.stmt(c, false);
                    attrs.clear();
                }
            }
        }
        self.b.leave();
    }

    fn function_item(&mut self, n: Node<'_>, attrs: &[String]) {
        let name = n
            .child_by_field_name("name")
            .map(|x| self.b.text(x).to_string())
            .unwrap_or_default();
        let mut f = Function::new(name);
        f.pos = self.b.pos(n);
        // The trait of `impl Notifier for Mailer`, else the type of `impl Mailer`.
        f.owner =
            (self.impl_trait.clone()).or_else(|| self.impl_type.as_deref().map(vocab::type_base));
        for a in attrs {
            f.registrations.extend(vocab::attribute_registration(a));
        }
        if let Some(params) = n.child_by_field_name("parameters") {
            self.params(params, &mut f);
        }
        self.body(n.child_by_field_name("body"), f);
    }

    /// The parameters of a function or closure: names bound by each pattern (`Json(event):
    /// Json<Event>` binds `event`), types as written, and the registration their extractor or
    /// message types imply.
    pub(super) fn params(&mut self, params: Node<'_>, f: &mut Function) {
        for p in kids(params) {
            match p.kind() {
                "parameter" => {
                    let names = p
                        .child_by_field_name("pattern")
                        .map(|pat| self.bindings(pat))
                        .unwrap_or_default();
                    let ty = p
                        .child_by_field_name("type")
                        .map(|t| self.b.text(t).to_string())
                        .unwrap_or_default();
                    for (k, name) in names.into_iter().enumerate() {
                        f.params.push(name);
                        if k == 0 {
                            f.param_types.push(ty.clone());
                        } else {
                            f.param_types.push(String::new());
                        }
                    }
                    let full = self.qualified(&ty);
                    f.registrations.extend(vocab::type_registration(&full));
                }
                "identifier" => {
                    f.params.push(self.b.text(p).to_string());
                    f.param_types.push(String::new());
                }
                _ => {}
            }
        }
        f.registrations.sort();
        f.registrations.dedup();
    }

    /// A type with its base name's `use` path in front (`Message` →
    /// `async_nats::jetstream::Message Message`), as written when nothing imports it.
    fn qualified(&self, ty: &str) -> String {
        let base: String = ty
            .trim_start_matches(['&', ' '])
            .trim_start_matches("mut ")
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        match self.imports.iter().find(|(name, _)| *name == base) {
            Some((_, path)) => format!("{path} {ty}"),
            None => ty.to_string(),
        }
    }

    /// Lowers a function's body (its last expression returned) and closes the function.
    pub(super) fn body(&mut self, body: Option<Node<'_>>, f: Function) {
        let parsed_bodies = f
            .params
            .iter()
            .zip(&f.param_types)
            .filter(|(_, t)| vocab::parses_body(t))
            .map(|(p, _)| p.clone())
            .collect();
        let redis_vars = f
            .params
            .iter()
            .zip(&f.param_types)
            .filter(|(_, t)| vocab::redis_type(&self.qualified(t)))
            .map(|(p, _)| p.clone())
            .collect();
        let traits = (f.params.iter().zip(&f.param_types))
            .filter_map(|(p, t)| Some((p.clone(), vocab::trait_object(t)?)))
            .collect();
        self.b.begin_function(f);
        self.frames.push(FnFrame {
            parsed_bodies,
            redis_vars,
            traits,
            ..FnFrame::default()
        });
        if let Some(body) = body {
            if body.kind() == "block" {
                self.block(body, true);
            } else {
                self.tail(body);
            }
        }
        let frame = self.frames.pop().unwrap_or_default();
        self.b.end_function();
        if let Some(f) = self.b.module.functions.last_mut()
            && !frame.messages.is_empty()
        {
            // A function reading messages from a consumer handles them: the variables read
            // carry the event.
            f.registrations.push("consumer loop".to_string());
            f.params.extend(frame.messages);
        }
    }

    /// A block's statements; with `tail`, its last expression is what the function returns.
    pub(super) fn block(&mut self, n: Node<'_>, tail: bool) {
        if !self.b.enter() {
            return;
        }
        let stmts = kids(n);
        let last = stmts.len().saturating_sub(1);
        let mut attrs: Vec<String> = Vec::new();
        for (i, c) in stmts.iter().enumerate() {
            match c.kind() {
                "attribute_item" => attrs.push(self.b.text(*c).to_string()),
                "function_item" => {
                    self.function_item(*c, &attrs);
                    attrs.clear();
                }
                "impl_item" | "mod_item" | "struct_item" => {
                    attrs.clear();
                    self.items_one(*c);
                }
                _ if tail && i == last && c.kind() != "expression_statement" => self.tail(*c),
                _ => self.stmt(*c, false),
            }
        }
        self.b.leave();
    }

    fn items_one(&mut self, n: Node<'_>) {
        if n.kind() == "struct_item" {
            self.trait_fields(n);
        } else if let Some(body) = n.child_by_field_name("body") {
            self.items(body);
        }
    }

    /// A struct's fields declared as trait objects (`store: Arc<dyn EventStore>`).
    fn trait_fields(&mut self, n: Node<'_>) {
        let Some(body) = n.child_by_field_name("body") else {
            return;
        };
        for field in kids(body) {
            if field.kind() != "field_declaration" {
                continue;
            }
            let name = field.child_by_field_name("name").map(|x| self.b.text(x));
            let ty = field.child_by_field_name("type").map(|x| self.b.text(x));
            if let (Some(name), Some(t)) = (name, ty.and_then(vocab::trait_object)) {
                self.b.module.trait_fields.push((name.to_string(), t));
            }
        }
    }

    /// An expression in tail position: branches pass it on, anything else is returned.
    pub(super) fn tail(&mut self, n: Node<'_>) {
        match n.kind() {
            "if_expression" => self.if_expr(n, true),
            "match_expression" => self.match_expr(n, true),
            "block" => self.block(n, true),
            "unsafe_block" | "async_block" => {
                if let Some(b) = kids(n).into_iter().find(|c| c.kind() == "block") {
                    self.block(b, true);
                }
            }
            "return_expression"
            | "loop_expression"
            | "while_expression"
            | "for_expression"
            | "break_expression"
            | "continue_expression" => self.stmt(n, false),
            "unit_expression" => {}
            _ => {
                let pos = self.b.pos(n);
                let value = self.expr(n);
                match self.frames.last_mut().and_then(|f| f.sinks.last_mut()) {
                    Some(sink) => sink.push(value),
                    None => self.returned(value, pos),
                }
            }
        }
    }

    /// An `if`, `match` or block lowered for its value: the last expressions of its branches
    /// (one, or all of them as `Other`).
    pub(super) fn branch_value(&mut self, n: Node<'_>) -> Expr {
        if let Some(f) = self.frames.last_mut() {
            f.sinks.push(Vec::new());
        }
        self.tail(n);
        let mut values = self
            .frames
            .last_mut()
            .and_then(|f| f.sinks.pop())
            .unwrap_or_default();
        if values.len() == 1 {
            values.pop().unwrap_or(Expr::Other(Vec::new()))
        } else {
            Expr::Other(values)
        }
    }

    /// A statement (an expression statement, `let`, or an expression lowered for its effects).
    pub(super) fn stmt(&mut self, n: Node<'_>, tail: bool) {
        if !self.b.enter() {
            return;
        }
        match n.kind() {
            "expression_statement" => {
                for c in kids(n) {
                    self.stmt(c, false);
                }
            }
            "let_declaration" => self.let_decl(n),
            "if_expression" => self.if_expr(n, tail),
            "match_expression" => self.match_expr(n, tail),
            "block" => self.block(n, tail),
            "unsafe_block" | "async_block" | "const_block" => {
                if let Some(b) = kids(n).into_iter().find(|c| c.kind() == "block") {
                    self.block(b, tail);
                }
            }
            "loop_expression" => {
                if let Some(b) = n.child_by_field_name("body") {
                    self.block(b, false);
                }
            }
            "while_expression" => {
                let cond = n.child_by_field_name("condition");
                let test = cond.map_or(Expr::Other(Vec::new()), |c| self.condition(c));
                self.b.push_cond(test, false, false);
                if let Some(b) = n.child_by_field_name("body") {
                    self.block(b, false);
                }
                self.b.pop_cond();
            }
            "for_expression" => {
                let value = n
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                if let Some(pat) = n.child_by_field_name("pattern") {
                    let targets = self.bindings(pat);
                    self.bind(targets, value, self.b.pos(pat));
                }
                if let Some(b) = n.child_by_field_name("body") {
                    self.block(b, false);
                }
            }
            "return_expression" => {
                let pos = self.b.pos(n);
                match kids(n).into_iter().next() {
                    Some(v) => {
                        let value = self.expr(v);
                        self.returned(value, pos);
                    }
                    None => self.b.emit(OpKind::Return(None), pos),
                }
            }
            "break_expression" | "continue_expression" | "empty_statement" => {}
            "attribute_item" | "use_declaration" => {}
            _ => {
                self.expr(n);
            }
        }
        self.b.leave();
    }

    fn let_decl(&mut self, n: Node<'_>) {
        // `let work = async move { … }; tokio::spawn(work);`: the block runs detached.
        if let Some(v) = n.child_by_field_name("value")
            && v.kind() == "async_block"
            && let Some(pat) = n.child_by_field_name("pattern")
            && pat.kind() == "identifier"
            && self.spawned_later(n, self.b.text(pat))
        {
            self.b.push_detached();
            self.stmt(v, false);
            self.b.pop_detached();
            return;
        }
        // `let handle = tokio::spawn(…); … handle.await`: the spawned work is waited for. (The
        // later statements are walked only for a spawn, not for every `let`.)
        let spawns = n
            .child_by_field_name("value")
            .is_some_and(|v| self.b.text(v).contains("spawn"));
        let joined = spawns
            && n.child_by_field_name("pattern").is_some_and(|pat| {
                pat.kind() == "identifier" && self.awaited_later(n, self.b.text(pat))
            });
        let outer = std::mem::replace(&mut self.joined_spawn, joined);
        let value = n.child_by_field_name("value").map(|v| self.expr(v));
        self.joined_spawn = outer;
        let Some(pat) = n.child_by_field_name("pattern") else {
            return;
        };
        let targets = self.bindings(pat);
        let pos = self.b.pos(n);
        let value = match value {
            Some(v) => v,
            // `let tx;`: nothing assigned yet.
            None => return,
        };
        if let Some(name) = targets.first() {
            let annotated = n
                .child_by_field_name("type")
                .map(|t| self.path(t).join("::"));
            // `let mut con: redis::aio::MultiplexedConnection = …`, or a connection got from
            // a Redis client.
            let redis = annotated
                .as_deref()
                .is_some_and(|t| vocab::redis_type(&self.qualified(t)))
                || matches!(&value, Expr::Call(c) if c.callee.first().is_some_and(|r| r == "redis"));
            if redis && let Some(f) = self.frames.last_mut() {
                f.redis_vars.push(name.clone());
            }
            let written = n.child_by_field_name("type").map(|t| self.b.text(t));
            if let Some(t) = written.and_then(vocab::trait_object)
                && let Some(f) = self.frames.last_mut()
            {
                f.traits.push((name.clone(), t));
            }
            self.remember_struct(name, &value, annotated);
        }
        self.note_message_read(&targets, &value);
        // `let Some(row) = … else { return … };`: the `else` runs when the pattern fails.
        if let Some(alt) = n.child_by_field_name("alternative") {
            self.b
                .push_cond(Expr::Not(Box::new(value.clone())), false, false);
            self.block(alt, false);
            self.b.pop_cond();
        }
        self.bind(targets, value, pos);
    }

    /// Whether a node of a statement after `n` in its block satisfies `found` (at most 512
    /// nodes looked at, so a long function costs no more than that).
    fn later_node(&self, n: Node<'_>, found: impl Fn(Node<'_>) -> bool) -> bool {
        let mut next = n.next_named_sibling();
        let mut budget = 512usize;
        while let Some(stmt) = next {
            let mut stack = vec![stmt];
            while let Some(x) = stack.pop() {
                budget = budget.saturating_sub(1);
                if budget == 0 {
                    return false;
                }
                if found(x) {
                    return true;
                }
                stack.extend(kids(x));
            }
            next = stmt.next_named_sibling();
        }
        false
    }

    /// Whether a statement after `n` in its block awaits the local `name` (`name.await`, or
    /// `name` given to a join: `join_all(…)`, `try_join!(…)`).
    fn awaited_later(&self, n: Node<'_>, name: &str) -> bool {
        let named = |k: Node<'_>| k.kind() == "identifier" && self.b.text(k) == name;
        self.later_node(n, |x| {
            x.kind() == "await_expression" && kids(x).first().is_some_and(|k| named(*k))
                || matches!(x.kind(), "call_expression" | "macro_invocation")
                    && self.b.text(x).contains("join")
                    && self.b.text(x).contains(name)
        })
    }

    /// Whether a statement after `n` in its block hands the local `name` to a spawn
    /// (`tokio::spawn(name)`, `actix_web::rt::spawn(name)`).
    fn spawned_later(&self, n: Node<'_>, name: &str) -> bool {
        self.later_node(n, |x| {
            x.kind() == "call_expression"
                && x.child_by_field_name("function").is_some_and(|f| {
                    matches!(
                        self.b.text(f).rsplit("::").next(),
                        Some("spawn" | "spawn_local")
                    )
                })
                && x.child_by_field_name("arguments").is_some_and(|args| {
                    kids(args)
                        .iter()
                        .any(|a| a.kind() == "identifier" && self.b.text(*a) == name)
                })
        })
    }

    /// Records a local holding a struct literal, or an ActiveModel by its annotation (`let mut
    /// am: orders::ActiveModel = row.into()`) or conversion (`row.into_active_model()`), whose
    /// fields are then set one by one (`am.status = Set(…)`).
    fn remember_struct(&mut self, name: &str, value: &Expr, annotated: Option<String>) {
        let model = match (value, annotated) {
            (Expr::Object { .. }, _) => Some(value.clone()),
            (_, Some(t)) if t.ends_with("ActiveModel") => Some(Expr::Object {
                type_name: Some(t),
                fields: Vec::new(),
            }),
            (Expr::Call(c), _) if c.method() == "into_active_model" => Some(Expr::Object {
                type_name: Some("ActiveModel".into()),
                fields: Vec::new(),
            }),
            _ => None,
        };
        if let (Some(model), Some(frame)) = (model, self.frames.last_mut()) {
            frame.structs.push((name.to_string(), model));
        }
    }

    /// `am.status = Set(…)` on a remembered struct: one more field set.
    pub(super) fn set_struct_field(&mut self, target: &str, value: &Expr) {
        let Some((var, field)) = target.split_once('.') else {
            return;
        };
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        if let Some((_, Expr::Object { fields, .. })) =
            frame.structs.iter_mut().rev().find(|(n, _)| n == var)
        {
            fields.push((field.to_string(), value.clone()));
        }
    }

    /// `const`/`static` items at the top level: globals (SQL kept in a constant).
    fn let_like(&mut self, n: Node<'_>, name_field: &str) {
        let Some(name) = n.child_by_field_name(name_field) else {
            return;
        };
        let name = self.b.text(name).to_string();
        if let Some(v) = n.child_by_field_name("value") {
            let value = self.expr(v);
            let pos = self.b.pos(n);
            self.bind(vec![name], value, pos);
        }
    }

    pub(super) fn bind(&mut self, targets: Vec<String>, value: Expr, pos: crate::ir::Pos) {
        if targets.is_empty() {
            return;
        }
        self.b.assign(targets, value, pos);
    }

    /// The variables a pattern binds, in order (`(a, Some(b))` binds `a`, `b`; paths such as
    /// `None` or `Status::Paid` bind nothing).
    pub(super) fn bindings(&self, pat: Node<'_>) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_bindings(pat, &mut out, 0);
        out
    }

    fn collect_bindings(&self, n: Node<'_>, out: &mut Vec<String>, depth: u32) {
        if depth > 64 {
            return;
        }
        match n.kind() {
            "identifier" => {
                let t = self.b.text(n);
                // An uppercase lone identifier is a constant or unit variant, not a binding.
                if !t.starts_with(char::is_uppercase) && t != "_" {
                    out.push(t.to_string());
                }
            }
            "shorthand_field_identifier" => out.push(self.b.text(n).to_string()),
            "scoped_identifier"
            | "scoped_type_identifier"
            | "type_identifier"
            | "string_literal"
            | "integer_literal"
            | "boolean_literal" => {}
            "field_pattern" => {
                if let Some(p) = n.child_by_field_name("pattern") {
                    self.collect_bindings(p, out, depth + 1);
                } else if let Some(name) = n.child_by_field_name("name") {
                    out.push(self.b.text(name).to_string());
                }
            }
            _ => {
                let ty = n.child_by_field_name("type").map(|t| t.id());
                for c in kids(n) {
                    if Some(c.id()) != ty {
                        self.collect_bindings(c, out, depth + 1);
                    }
                }
            }
        }
    }

    /// An `if` or `while` condition: `let PATTERN = value` tests the value (`None` and
    /// `Err(…)` patterns as said below) and binds the pattern's variables in the branch.
    fn condition(&mut self, c: Node<'_>) -> Expr {
        match c.kind() {
            "let_condition" => {
                let value = c
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                let pat = c.child_by_field_name("pattern");
                if let Some(p) = pat {
                    let targets = self.bindings(p);
                    self.note_message_read(&targets, &value);
                    self.bind(targets, value.clone(), self.b.pos(p));
                }
                let head = pat.map(|p| self.b.text(p)).unwrap_or("");
                if head.trim() == "None" {
                    Expr::Not(Box::new(value))
                } else {
                    value
                }
            }
            "let_chain" => {
                let parts: Vec<Expr> = kids(c).into_iter().map(|p| self.condition(p)).collect();
                Expr::Other(parts)
            }
            _ => self.expr(c),
        }
    }

    /// Whether a pattern matches errors (`Err(e)`, `Err(sqlx::Error::Database(db))`).
    fn is_err_pattern(&self, p: Node<'_>) -> bool {
        self.b.text(p).trim_start().starts_with("Err")
    }

    pub(super) fn if_expr(&mut self, n: Node<'_>, tail: bool) {
        // An `else if` chain recurses once per arm: bounded like any nesting.
        if !self.b.enter() {
            return;
        }
        self.if_arms(n, tail);
        self.b.leave();
    }

    fn if_arms(&mut self, n: Node<'_>, tail: bool) {
        let cond = n.child_by_field_name("condition");
        let is_catch = cond.is_some_and(|c| {
            c.kind() == "let_condition"
                && c.child_by_field_name("pattern")
                    .is_some_and(|p| self.is_err_pattern(p))
        });
        // The condition's own calls run before either branch.
        let test = cond.map_or(Expr::Other(Vec::new()), |c| {
            if c.kind() == "let_condition" {
                let value = c
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                let head = c
                    .child_by_field_name("pattern")
                    .map(|p| self.b.text(p).trim().to_string())
                    .unwrap_or_default();
                if head == "None" {
                    Expr::Not(Box::new(value))
                } else {
                    value
                }
            } else {
                self.condition(c)
            }
        });
        if let Some(body) = n.child_by_field_name("consequence") {
            self.b.push_cond(test.clone(), false, is_catch);
            if let Some(c) = cond.filter(|c| c.kind() == "let_condition")
                && let Some(p) = c.child_by_field_name("pattern")
            {
                let targets = self.bindings(p);
                self.note_message_read(&targets, &test);
                self.bind(targets, test.clone(), self.b.pos(p));
            }
            self.block(body, tail);
            self.b.pop_cond();
        }
        if let Some(alt) = n.child_by_field_name("alternative") {
            self.b.push_cond(test, true, false);
            for c in kids(alt) {
                match c.kind() {
                    "block" => self.block(c, tail),
                    "if_expression" => self.if_expr(c, tail),
                    _ => self.stmt(c, tail),
                }
            }
            self.b.pop_cond();
        }
    }

    /// `match v { PATTERN if guard => arm, … }`: each arm a branch testing `v == PATTERN`
    /// (and the guard); an `Err(…)` arm is a catch.
    pub(super) fn match_expr(&mut self, n: Node<'_>, tail: bool) {
        if !self.b.enter() {
            return;
        }
        self.match_arms(n, tail);
        self.b.leave();
    }

    fn match_arms(&mut self, n: Node<'_>, tail: bool) {
        let value = n
            .child_by_field_name("value")
            .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
        let Some(body) = n.child_by_field_name("body") else {
            return;
        };
        for arm in kids(body) {
            if arm.kind() != "match_arm" {
                continue;
            }
            let pat = arm.child_by_field_name("pattern");
            let pattern_expr = pat.map_or(Expr::Other(Vec::new()), |p| self.pattern_expr(p));
            let guard = pat
                .and_then(|p| p.child_by_field_name("condition"))
                .map(|g| self.condition(g));
            let mut test = Expr::Binary {
                op: "==".into(),
                left: Box::new(value.clone()),
                right: Box::new(pattern_expr),
            };
            if let Some(g) = guard {
                test = Expr::Binary {
                    op: "&&".into(),
                    left: Box::new(test),
                    right: Box::new(g),
                };
            }
            let is_catch = pat.is_some_and(|p| self.is_err_pattern(p));
            self.b.push_cond(test, false, is_catch);
            if let Some(p) = pat {
                let targets = self.bindings(p);
                self.note_message_read(&targets, &value);
                self.bind(targets, value.clone(), self.b.pos(p));
            }
            if let Some(v) = arm.child_by_field_name("value") {
                if tail {
                    self.tail(v);
                } else {
                    self.stmt(v, false);
                }
            }
            self.b.pop_cond();
        }
    }

    /// A pattern as the expression it compares with: paths, literals and the words inside.
    fn pattern_expr(&self, p: Node<'_>) -> Expr {
        let mut words = Vec::new();
        let mut stack = vec![p];
        while let Some(n) = stack.pop() {
            match n.kind() {
                "identifier"
                | "type_identifier"
                | "field_identifier"
                | "shorthand_field_identifier" => {
                    words.push(Expr::Path(vec![self.b.text(n).to_string()]))
                }
                "string_literal" => {
                    words.push(Expr::Str(self.b.text(n).trim_matches('"').to_string()))
                }
                "integer_literal" => words.push(Expr::Num(
                    self.b.text(n).replace('_', "").parse().unwrap_or(f64::NAN),
                )),
                _ => {
                    if stack.len() < 256 {
                        let mut cs = kids(n);
                        cs.reverse();
                        stack.extend(cs);
                    }
                }
            }
        }
        if words.len() == 1 {
            words.pop().unwrap_or(Expr::Other(Vec::new()))
        } else {
            Expr::Other(words)
        }
    }

    /// Records variables bound to a message read from a consumer (`Some(m) =
    /// stream.next().await`, `Ok(m) = consumer.recv().await`).
    pub(super) fn note_message_read(&mut self, targets: &[String], value: &Expr) {
        let Some(frame) = self.frames.last_mut() else {
            return;
        };
        if vocab::message_source(value) {
            frame.sources.extend(targets.iter().cloned());
        }
        if targets.is_empty() || !vocab::reads_message(value, &frame.sources) {
            return;
        }
        frame.messages.extend(targets.iter().cloned());
    }
}
