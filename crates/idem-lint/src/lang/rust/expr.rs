//! Expressions, method-call chains and closures.

use tree_sitter::Node;

use super::super::builder::{call_pos, unescape};
use super::chain::{Link, raw_string, strip};
use super::{Lower, kids, queries, tokens, vocab};
use crate::ir::{Call, Expr, Function, OpKind, Pos};

impl Lower<'_> {
    pub(super) fn expr(&mut self, n: Node<'_>) -> Expr {
        if !self.b.enter() {
            return Expr::Other(Vec::new());
        }
        let e = self.expr_node(n);
        self.b.leave();
        e
    }

    fn expr_node(&mut self, n: Node<'_>) -> Expr {
        match n.kind() {
            "identifier" | "field_identifier" | "type_identifier" | "primitive_type" => {
                Expr::Path(vec![self.b.text(n).to_string()])
            }
            "self" => Expr::Path(vec!["self".into()]),
            "scoped_identifier" | "scoped_type_identifier" => Expr::Path(self.path(n)),
            "field_expression" => {
                let field = n
                    .child_by_field_name("field")
                    .map(|a| self.b.text(a).to_string())
                    .unwrap_or_default();
                let value = n.child_by_field_name("value").map(|v| self.expr(v));
                Expr::member(value, field)
            }
            "index_expression" => {
                let cs = kids(n);
                let obj = cs.first().map(|o| self.expr(*o));
                let idx = cs.get(1).map(|i| self.expr(*i));
                Expr::index(obj, idx)
            }
            "string_literal" => Expr::Str(self.string(n)),
            "raw_string_literal" => Expr::Str(raw_string(self.b.text(n))),
            "char_literal" => Expr::Str(self.b.text(n).trim_matches('\'').to_string()),
            "integer_literal" | "float_literal" => Expr::Num(number(self.b.text(n))),
            "boolean_literal" => Expr::Path(vec![self.b.text(n).to_string()]),
            "call_expression" | "macro_invocation" => self.call_chain(n),
            "await_expression" | "try_expression" | "parenthesized_expression" => kids(n)
                .into_iter()
                .next()
                .map_or(Expr::Other(Vec::new()), |c| self.expr(c)),
            "reference_expression" | "type_cast_expression" => n
                .child_by_field_name("value")
                .map_or(Expr::Other(Vec::new()), |c| self.expr(c)),
            "unary_expression" => {
                let op = n.child(0).map(|o| self.b.text(o)).unwrap_or("");
                let arg = kids(n)
                    .into_iter()
                    .next()
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                match op {
                    "!" => Expr::Not(Box::new(arg)),
                    "*" => arg,
                    _ => Expr::Other(vec![arg]),
                }
            }
            "binary_expression" => {
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string())
                    .unwrap_or_default();
                let left = n
                    .child_by_field_name("left")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let right = n
                    .child_by_field_name("right")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                Expr::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                }
            }
            "assignment_expression" | "compound_assignment_expr" => {
                let targets = n
                    .child_by_field_name("left")
                    .map(|l| vec![self.b.text(l).replace(' ', "")])
                    .unwrap_or_default();
                let value = n
                    .child_by_field_name("right")
                    .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string());
                let pos = self.b.pos(n);
                if op.is_none()
                    && let Some(t) = targets.first()
                {
                    self.set_struct_field(t, &value);
                }
                self.b.emit(OpKind::Assign { targets, op, value }, pos);
                Expr::Other(Vec::new())
            }
            "struct_expression" => self.struct_expr(n),
            "tuple_expression" | "array_expression" => {
                Expr::List(kids(n).into_iter().map(|c| self.expr(c)).collect())
            }
            "closure_expression" => {
                self.closure(n, String::new(), None);
                Expr::Other(Vec::new())
            }
            "if_expression" | "match_expression" | "block" | "unsafe_block" => self.branch_value(n),
            "async_block" | "loop_expression" | "while_expression" | "for_expression"
            | "return_expression" | "const_block" => {
                self.stmt(n, false);
                Expr::Other(Vec::new())
            }
            "generic_function" => n
                .child_by_field_name("function")
                .map_or(Expr::Other(Vec::new()), |f| self.expr(f)),
            "unit_expression"
            | "line_comment"
            | "block_comment"
            | "break_expression"
            | "continue_expression" => Expr::Other(Vec::new()),
            _ => Expr::Other(kids(n).into_iter().map(|c| self.expr(c)).collect()),
        }
    }

    pub(super) fn string(&self, n: Node<'_>) -> String {
        let t = self.b.text(n);
        let inner = t
            .strip_prefix('b')
            .unwrap_or(t)
            .strip_prefix('"')
            .and_then(|s| s.strip_suffix('"'))
            .unwrap_or("");
        // A line continuation (`\` then a newline) joins the lines without the indent.
        let mut joined = String::with_capacity(inner.len());
        let mut lines = inner.split("\\\n");
        if let Some(first) = lines.next() {
            joined.push_str(first);
        }
        for rest in lines {
            joined.push_str(rest.trim_start());
        }
        unescape(&joined)
    }

    /// A path's segments without `crate::`/`super::`/`self::` and generic arguments;
    /// `Self::` is the `impl` block's methods (`self`).
    pub(super) fn path(&self, n: Node<'_>) -> Vec<String> {
        let text = self.b.text(n);
        let mut segs: Vec<String> = Vec::new();
        let mut depth = 0;
        let mut cur = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                ':' if depth == 0 && chars.peek() == Some(&':') => {
                    chars.next();
                    segs.push(std::mem::take(&mut cur));
                }
                c if depth == 0 && !c.is_whitespace() => cur.push(c),
                _ => {}
            }
        }
        segs.push(cur);
        segs.retain(|s| !s.is_empty());
        while segs.len() > 1 && matches!(segs[0].as_str(), "crate" | "super" | "self") {
            segs.remove(0);
        }
        if segs.first().is_some_and(|s| s == "Self") && segs.len() > 1 {
            segs[0] = "self".into();
        }
        segs
    }

    fn struct_expr(&mut self, n: Node<'_>) -> Expr {
        let type_name = n
            .child_by_field_name("name")
            .map(|t| self.path(t).join("::"));
        let mut fields = Vec::new();
        if let Some(body) = n.child_by_field_name("body") {
            for f in kids(body) {
                match f.kind() {
                    "field_initializer" => {
                        let key = f
                            .child_by_field_name("field")
                            .map(|k| self.b.text(k).to_string())
                            .unwrap_or_default();
                        let value = f
                            .child_by_field_name("value")
                            .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                        fields.push((key, value));
                    }
                    "shorthand_field_initializer" => {
                        let key = self.b.text(f).to_string();
                        fields.push((key.clone(), Expr::Path(vec![key])));
                    }
                    "base_field_initializer" => {
                        let v = kids(f)
                            .into_iter()
                            .next()
                            .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                        fields.push(("...".into(), v));
                    }
                    _ => {}
                }
            }
        }
        Expr::Object { type_name, fields }
    }

    /// The links of a call chain, innermost first (`a.b(x).c(y).await?.d()` gives `a.b(x)`,
    /// `c(y)`, `d()`).
    pub(super) fn links<'t>(&self, n: Node<'t>) -> Vec<Link<'t>> {
        let mut out = Vec::new();
        let mut cur = n;
        for _ in 0..256 {
            match cur.kind() {
                "macro_invocation" => {
                    let args = kids(cur).into_iter().find(|c| c.kind() == "token_tree");
                    out.push(Link {
                        callee: cur,
                        args,
                        method: cur.child_by_field_name("macro"),
                        node: cur,
                    });
                    break;
                }
                "call_expression" => {
                    let func = cur.child_by_field_name("function");
                    let func = func.map(|f| {
                        if f.kind() == "generic_function" {
                            f.child_by_field_name("function").unwrap_or(f)
                        } else {
                            f
                        }
                    });
                    let args = cur.child_by_field_name("arguments");
                    match func {
                        Some(f) if f.kind() == "field_expression" => {
                            let value = f.child_by_field_name("value").map(strip);
                            let method = f.child_by_field_name("field");
                            match value {
                                Some(v)
                                    if matches!(
                                        v.kind(),
                                        "call_expression" | "macro_invocation"
                                    ) =>
                                {
                                    out.push(Link {
                                        callee: f,
                                        args,
                                        method,
                                        node: cur,
                                    });
                                    cur = v;
                                    continue;
                                }
                                _ => {
                                    out.push(Link {
                                        callee: f,
                                        args,
                                        method,
                                        node: cur,
                                    });
                                    break;
                                }
                            }
                        }
                        Some(f) => {
                            let method = match f.kind() {
                                "scoped_identifier" => f.child_by_field_name("name"),
                                _ => Some(f),
                            };
                            out.push(Link {
                                callee: f,
                                args,
                                method,
                                node: cur,
                            });
                            break;
                        }
                        None => break,
                    }
                }
                _ => break,
            }
        }
        out.reverse();
        out
    }

    /// The callee path of a chain's first link (`self.pool.begin` → `["self", "pool",
    /// "begin"]`; a field of a non-path value as `?`).
    pub(super) fn root_callee(&mut self, link: &Link<'_>) -> Vec<String> {
        let c = link.callee;
        match c.kind() {
            "macro_invocation" => c
                .child_by_field_name("macro")
                .map(|m| self.path(m))
                .unwrap_or_default(),
            "field_expression" => {
                let field = link
                    .method
                    .map(|m| self.b.text(m).to_string())
                    .unwrap_or_default();
                let value = c.child_by_field_name("value");
                match value.map(|v| self.expr(v)) {
                    Some(Expr::Path(mut segs)) => {
                        segs.push(field);
                        segs
                    }
                    _ => vec!["?".into(), field],
                }
            }
            "identifier" | "scoped_identifier" | "self" => self.path(c),
            "closure_expression" | "parenthesized_expression" => {
                self.expr(c);
                vec!["<iife>".into()]
            }
            _ => {
                self.expr(c);
                vec!["?".into()]
            }
        }
    }

    /// The arguments of a link, closures lowered as the call says (see [`closure_arg`]).
    pub(super) fn link_args(&mut self, link: &Link<'_>, call: &mut Call) {
        let Some(args) = link.args else { return };
        if args.kind() == "token_tree" {
            let (a, kw) = tokens::macro_args(self, args);
            call.args.extend(a);
            call.kwargs.extend(kw);
            return;
        }
        for a in kids(args) {
            if matches!(a.kind(), "closure_expression" | "async_block") {
                self.closure_arg(a, call);
                call.args.push(Expr::Other(Vec::new()));
                continue;
            }
            if a.kind() == "attribute_item" {
                continue;
            }
            let v = self.expr(a);
            call.args.push(v);
        }
    }

    /// A call chain: a query builder becomes the statement it sends; otherwise each link is
    /// a call on the previous one's result, emitted innermost first.
    fn call_chain(&mut self, n: Node<'_>) -> Expr {
        let links = self.links(n);
        if links.is_empty() {
            return Expr::Other(Vec::new());
        }
        if let Some(e) = queries::lower_chain(self, &links) {
            return e;
        }
        let mut prev: Option<Call> = None;
        if let Some(e) = self.format_macro(&links) {
            return e;
        }
        if let Some(e) = self.std_macro(&links) {
            return e;
        }
        if let [link] = links.as_slice()
            && link.callee.kind() == "macro_invocation"
            && vocab::code_macro(link.method.map(|m| self.b.text(m)).unwrap_or(""))
        {
            if let Some(tree) = link.args {
                tokens::scan(self, tree);
            }
            return Expr::Other(Vec::new());
        }
        if let Some(e) = queries::redis_command(self, &links) {
            return e;
        }
        if let Some(e) = self.fluent_builder(&links) {
            return e;
        }
        for link in &links {
            let method = link.method.map(|m| self.b.text(m)).unwrap_or("");
            // Adapters of a result (`.unwrap_or(None)`, `.ok()`, `.expect(…)`, `.context(…)`)
            // are the call whose result they adapt: a variable assigned through them holds
            // that call's outcome (`let mut tx = pool.begin().await.expect(…)`).
            if let Some(p) = &prev
                && vocab::ADAPTERS.contains(&method)
            {
                let mut scratch = p.clone();
                scratch.args.clear();
                self.link_args(link, &mut scratch);
                continue;
            }
            let pos = call_pos(&self.b, link.node, link.method);
            let callee = match &prev {
                None => self.root_callee(link),
                Some(p) => {
                    let mut c = p.callee.clone();
                    c.push(
                        link.method
                            .map(|m| self.b.text(m).to_string())
                            .unwrap_or_default(),
                    );
                    c
                }
            };
            let mut call = Call {
                callee,
                receiver: prev.take().map(Box::new),
                args: Vec::new(),
                kwargs: Vec::new(),
                is_new: false,
                pos,
            };
            self.link_args(link, &mut call);
            vocab::normalise_call(&mut call);
            self.reserialised_body(&mut call);
            if let Some(object) = vocab::key_object(&call) {
                return object;
            }
            // tokio-postgres `client.prepare("…")`: the statement is its SQL, sent by the
            // `execute(&stmt, …)` that runs it.
            if matches!(method, "prepare" | "prepare_cached" | "prepare_typed")
                && let Some(sql @ Expr::Str(_)) = call.args.first().cloned()
            {
                call.args.clear();
                self.b.emit(OpKind::Call(call), pos);
                return sql;
            }
            // `Some(x)`, `Set(v)`, `Json(body)`, `Box::new(f)`, `AppError::Conflict(id)` build a
            // value; they are no operation.
            if !vocab::constructs(&call) {
                self.b.emit(OpKind::Call(call.clone()), pos);
            }
            for route in vocab::routes(&call) {
                self.b.emit(OpKind::Call(route), pos);
            }
            prev = Some(call);
        }
        prev.map_or(Expr::Other(Vec::new()), |c| Expr::Call(Box::new(c)))
    }

    /// `format!("event:{}", id)` as the interpolated string it makes.
    fn format_macro(&mut self, links: &[Link<'_>]) -> Option<Expr> {
        let [link] = links else { return None };
        if link.callee.kind() != "macro_invocation" {
            return None;
        }
        let name = link.method.map(|m| self.b.text(m)).unwrap_or("");
        if !matches!(name, "format" | "format_args") {
            return None;
        }
        let mut call = Call {
            callee: Vec::new(),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos: self.b.pos(link.node),
        };
        self.link_args(link, &mut call);
        let mut args = call.args.into_iter();
        let Some(Expr::Str(fmt)) = args.next() else {
            return Some(Expr::Other(args.collect()));
        };
        Some(Expr::Template(vocab::interpolate(
            &fmt,
            args.collect(),
            &call.kwargs,
        )))
    }

    /// `payload.to_string()` / `to_vec()` of a body an extractor parsed (`Json<Value>`) is
    /// `serde_json::to_string(&payload)`: a re-serialisation.
    fn reserialised_body(&self, call: &mut Call) {
        let [root, method] = call.callee.as_slice() else {
            return;
        };
        if !matches!(method.as_str(), "to_string" | "to_vec" | "as_bytes")
            || !self
                .frames
                .last()
                .is_some_and(|f| f.parsed_bodies.contains(root))
        {
            return;
        }
        call.args = vec![Expr::Path(vec![root.clone()])];
        call.callee = vec!["serde_json".into(), "to_string".into()];
    }

    /// An AWS SDK fluent call, `client.send_message().queue_url(u).message_body(b).send()`: one
    /// call of the operation (`client.send_message(queue_url = u, message_body = b)`), the
    /// setters as its named arguments.
    fn fluent_builder(&mut self, links: &[Link<'_>]) -> Option<Expr> {
        let (first, last) = (links.first()?, links.last()?);
        let no_args = |l: &Link<'_>| l.args.is_none_or(|a| kids(a).is_empty());
        let src = self.b.src;
        let name = |l: &Link<'_>| l.method.and_then(|m| src.get(m.byte_range())).unwrap_or("");
        if links.len() < 2
            || first.callee.kind() != "field_expression"
            || !no_args(first)
            || !name(first).contains('_')
            || name(last) != "send"
            || !no_args(last)
        {
            return None;
        }
        let pos = call_pos(&self.b, first.node, first.method);
        let mut call = Call {
            callee: self.root_callee(first),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos,
        };
        for link in &links[1..links.len() - 1] {
            let mut setter = call.clone();
            setter.args.clear();
            self.link_args(link, &mut setter);
            let key = name(link).to_string();
            call.kwargs
                .extend(setter.args.into_iter().map(|v| (key.clone(), v)));
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        Some(Expr::Call(Box::new(call)))
    }

    /// The standard library's and logging crates' macros, which act on nothing outside:
    /// `matches!(v, P)` is a comparison, `bail!(…)`/`panic!(…)` a throw, `anyhow!(…)`,
    /// `json!(…)`, `vec![…]` values, `info!(…)`/`println!(…)` nothing. Calls in their
    /// arguments are still lowered.
    fn std_macro(&mut self, links: &[Link<'_>]) -> Option<Expr> {
        let [link] = links else { return None };
        if link.callee.kind() != "macro_invocation" {
            return None;
        }
        let name = link.method.map(|m| self.b.text(m)).unwrap_or("");
        let kind = vocab::macro_kind(name)?;
        let pos = self.b.pos(link.node);
        let mut call = Call {
            callee: self.root_callee(link),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos,
        };
        self.link_args(link, &mut call);
        Some(match kind {
            vocab::MacroKind::Compare => {
                let mut args = call.args.into_iter();
                Expr::Binary {
                    op: "==".into(),
                    left: Box::new(args.next().unwrap_or(Expr::Other(Vec::new()))),
                    right: Box::new(Expr::Other(args.collect())),
                }
            }
            vocab::MacroKind::Throw => {
                self.b
                    .emit(OpKind::Throw(Some(Expr::Call(Box::new(call)))), pos);
                Expr::Other(Vec::new())
            }
            // `json!({…})`, `doc! {…}`: the object itself.
            vocab::MacroKind::Value => match call.args.as_slice() {
                [Expr::Object { .. }] if call.kwargs.is_empty() => {
                    call.args.pop().unwrap_or(Expr::Other(Vec::new()))
                }
                _ => Expr::Call(Box::new(call)),
            },
            vocab::MacroKind::Nothing => Expr::Other(Vec::new()),
        })
    }

    /// A closure or async block passed to `call`: run in a transaction (`conn.transaction(|c|
    /// …)`, idem's `runner.run(&event, |tx| …)`), detached (`tokio::spawn`), registered as a
    /// handler (`post(|…| async {…})`, `subscribe`), or run inline (iterator and future
    /// combinators).
    fn closure_arg(&mut self, a: Node<'_>, call: &Call) {
        let body = if a.kind() == "closure_expression" {
            a.child_by_field_name("body")
        } else {
            Some(a)
        };
        let params = if a.kind() == "closure_expression" {
            a.child_by_field_name("parameters")
        } else {
            None
        };
        match vocab::closure_role(call) {
            vocab::ClosureRole::Transaction { idem } => {
                self.b.push_tx();
                if idem {
                    vocab::emit_idem_claim(self, call);
                }
                self.inline(params, body, call);
                self.b.pop_tx();
            }
            vocab::ClosureRole::Detached => {
                self.b.push_detached();
                self.inline(params, body, call);
                self.b.pop_detached();
            }
            vocab::ClosureRole::Handler => {
                self.closure(a, String::new(), Some(call.name()));
                self.b.registered_last(call.pos);
            }
            vocab::ClosureRole::Inline => self.inline(params, body, call),
        }
    }

    /// A closure's body lowered as part of the caller; its parameters take the receiver's
    /// value (`stream.for_each(|m| …)` binds `m` to what the stream yields).
    fn inline(&mut self, params: Option<Node<'_>>, body: Option<Node<'_>>, call: &Call) {
        if let Some(params) = params {
            let mut targets = Vec::new();
            for p in kids(params) {
                let pat = if p.kind() == "parameter" {
                    p.child_by_field_name("pattern")
                } else {
                    Some(p)
                };
                if let Some(pat) = pat {
                    targets.extend(self.bindings(pat));
                }
            }
            let recv = call
                .receiver
                .as_deref()
                .map(|r| Expr::Call(Box::new(r.clone())))
                .unwrap_or_else(|| {
                    Expr::Path(call.callee[..call.callee.len().saturating_sub(1)].to_vec())
                });
            self.note_message_read(&targets, &recv);
            self.bind(targets, recv, call.pos);
        }
        if let Some(b) = body {
            self.stmt(b, false);
        }
    }

    /// A closure as a function of its own.
    pub(super) fn closure(&mut self, n: Node<'_>, name: String, registration: Option<String>) {
        let mut f = Function::new(name);
        f.pos = self.b.pos(n);
        f.registrations.extend(registration);
        if let Some(params) = n.child_by_field_name("parameters") {
            self.params(params, &mut f);
        }
        let body = if n.kind() == "closure_expression" {
            n.child_by_field_name("body")
        } else {
            Some(n)
        };
        // `|x| async move { … }`: the async block is the body.
        let body = body.map(|b| {
            if b.kind() == "async_block" {
                kids(b)
                    .into_iter()
                    .find(|c| c.kind() == "block")
                    .unwrap_or(b)
            } else {
                b
            }
        });
        self.body(body, f);
    }

    /// What a function returns: `Err(e)` refuses (a throw); a value carrying an HTTP status
    /// (`StatusCode::CONFLICT`, `(StatusCode::OK, body)`, `HttpResponse::Conflict()`) is an
    /// answer with that status.
    pub(super) fn returned(&mut self, value: Expr, pos: Pos) {
        if let Expr::Call(c) = &value
            && c.callee.len() == 1
            && c.callee[0] == "Err"
        {
            let inner = c.args.first().cloned();
            if let Some(status) = inner.as_ref().and_then(vocab::status_in) {
                let answer = vocab::status_call(status, inner.clone(), pos);
                self.b.emit(OpKind::Call(answer), pos);
            }
            self.b.emit(OpKind::Throw(inner), pos);
            return;
        }
        if let Some(status) = vocab::status_in(&value) {
            let answer = vocab::status_call(status, Some(value), pos);
            self.b.emit(OpKind::Call(answer.clone()), pos);
            self.b
                .emit(OpKind::Return(Some(Expr::Call(Box::new(answer)))), pos);
            return;
        }
        self.b.emit(OpKind::Return(Some(value)), pos);
    }
}

fn number(t: &str) -> f64 {
    let digits: String = t
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '_')
        .filter(|c| *c != '_')
        .collect();
    digits.parse().unwrap_or(f64::NAN)
}
