//! Expressions and method-call chains (a chain is a query builder's statement, a macro, or calls
//! on each link's result).

use tree_sitter::Node;

use super::super::builder::{call_pos, unescape};
use super::chain::{Link, raw_string, strip};
use super::{Lower, kids, queries, tokens, vocab};
use crate::ir::{Call, Expr, OpKind};

/// The longest call chain lowered as one: each link's call holds the links before it, so a
/// longer chain (a generated builder of thousands of calls) is lowered in pieces of this size.
const MAX_LINKS: usize = 32;

/// How many pieces of one long chain are lowered (`MAX_LINKS` links each).
const MAX_CHAIN_PIECES: u32 = 16;

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
                let (op, left, right) = self.b.binary_fields(n);
                let left = left.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                let right = right.map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                Expr::binary(op, left, right)
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
        for _ in 0..MAX_LINKS {
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
        self.root_callee_and_literal(link).0
    }

    /// [`root_callee`](Self::root_callee), and the struct literal the method is called on
    /// (`NewInvoice { … }.save(conn)`), which the call takes as its `self`.
    fn root_callee_and_literal(&mut self, link: &Link<'_>) -> (Vec<String>, Option<Expr>) {
        let (mut callee, literal) = self.written_callee(link);
        // A Redis client or connection by its type (`con: redis::aio::ConnectionManager`), and
        // async-stripe's objects imported by name (`PaymentIntent::create(&client, …)`): the
        // crate in front says what the call reaches.
        if let Some(root) = callee.first() {
            let redis = self
                .frames
                .last()
                .is_some_and(|f| f.redis_vars.contains(root));
            let stripe = self
                .imports
                .iter()
                .any(|(n, p)| n == root && p.starts_with("stripe::"));
            if redis {
                callee.insert(0, "redis".into());
            } else if stripe {
                callee.insert(0, "stripe".into());
            }
        }
        (callee, literal)
    }

    fn written_callee(&mut self, link: &Link<'_>) -> (Vec<String>, Option<Expr>) {
        let c = link.callee;
        let path = match c.kind() {
            "macro_invocation" => c
                .child_by_field_name("macro")
                .map(|m| self.path(m))
                .unwrap_or_default(),
            "field_expression" => {
                let field = link
                    .method
                    .map(|m| self.b.text(m).to_string())
                    .unwrap_or_default();
                // A chain longer than `MAX_LINKS` continues in the value: lowered in pieces,
                // at most `MAX_CHAIN_PIECES` deep (each piece holds a frame of the stack).
                if self.chain_pieces >= MAX_CHAIN_PIECES {
                    return (vec!["?".into(), field], None);
                }
                self.chain_pieces += 1;
                let value = c.child_by_field_name("value").map(|v| self.expr(v));
                self.chain_pieces -= 1;
                match value {
                    Some(Expr::Path(mut segs)) => {
                        segs.push(field);
                        segs
                    }
                    // `NewInvoice { … }.save(&mut conn)`: the type's method, on the literal.
                    Some(Expr::Object {
                        type_name: Some(t),
                        fields,
                    }) => {
                        let callee = vec![vocab::type_base(&t), field];
                        let literal = Expr::Object {
                            type_name: Some(t),
                            fields,
                        };
                        return (callee, Some(literal));
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
        };
        (path, None)
    }

    /// The arguments of a link, closures lowered as the call says (see [`closure_arg`]).
    /// A link's arguments lowered (their calls emitted) into a call of no callee at the link:
    /// for macros and commands read from their arguments, not from what they call.
    pub(super) fn args_call(&mut self, link: &Link<'_>) -> Call {
        let mut call = Call {
            callee: Vec::new(),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos: self.b.pos(link.node),
        };
        self.link_args(link, &mut call);
        call
    }

    pub(super) fn link_args(&mut self, link: &Link<'_>, call: &mut Call) {
        let Some(args) = link.args else { return };
        // `tokio::spawn(f).await`, `handles.push(tokio::spawn(f))` (joined later): a spawn
        // whose handle is used is waited for, not detached. Its closures read `joined_spawn`
        // (see `closure_arg`); a future it is given is detached here.
        let spawn = matches!(vocab::closure_role(call), vocab::ClosureRole::Detached);
        let outer = self.joined_spawn;
        self.joined_spawn |= spawn && handle_used(link.node);
        let detach_futures = spawn && !self.joined_spawn;
        self.lower_link_args(args, call, detach_futures);
        self.joined_spawn = outer;
    }

    /// The arguments of a link; with `detach_futures`, each runs detached (a spawn's future).
    fn lower_link_args(&mut self, args: Node<'_>, call: &mut Call, detach_futures: bool) {
        if args.kind() == "token_tree" {
            let (a, kw) = tokens::macro_args(self, args);
            call.args.extend(a);
            call.kwargs.extend(kw);
            return;
        }
        for a in kids(args) {
            if matches!(a.kind(), "closure_expression" | "async_block") {
                let v = self.closure_arg(a, call);
                call.args.push(v);
                continue;
            }
            if a.kind() == "attribute_item" {
                continue;
            }
            // `tokio::spawn(process(msg))`: the future the call builds runs detached too.
            if detach_futures {
                self.b.push_detached();
            }
            let v = self.expr(a);
            if detach_futures {
                self.b.pop_detached();
            }
            call.args.push(v);
        }
    }

    /// `"Invoice already exists".to_string()` (`to_owned`, `into`, `String::from` is a path
    /// call): the string itself, so an error built from it says what its message says. So is
    /// a tuple answer converted (`(StatusCode::CONFLICT, "duplicate").into_response()`): the
    /// tuple, whose status and message the checks read.
    fn converted_literal(&mut self, links: &[Link<'_>]) -> Option<Expr> {
        let first = links.first()?;
        let value = first.callee.child_by_field_name("value")?;
        let converts = links.iter().all(|l| {
            l.args.is_none_or(|a| kids(a).is_empty())
                && matches!(
                    l.method.map(|m| self.b.text(m)),
                    Some("to_string" | "to_owned" | "into" | "as_str" | "into_response")
                )
        });
        (first.callee.kind() == "field_expression"
            && matches!(
                value.kind(),
                "string_literal" | "raw_string_literal" | "tuple_expression"
            )
            && converts)
            .then(|| self.expr(value))
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
        if let Some(e) = self.macro_chain(&links) {
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
        if let Some(e) = self.converted_literal(&links) {
            return e;
        }
        // `self.charge_service.clone().charge(…)`: an `Arc` cloned only to call a method on it
        // is the field itself, so the call resolves as `self.charge_service.charge(…)` would.
        let mut cloned: Option<Vec<String>> = None;
        for (k, link) in links.iter().enumerate() {
            let method = link.method.map(|m| self.b.text(m)).unwrap_or("");
            if k == 0
                && method == "clone"
                && links.len() > 1
                && link.callee.kind() == "field_expression"
                && link.args.is_none_or(|a| kids(a).is_empty())
            {
                let mut path = self.root_callee(link);
                path.pop();
                cloned = Some(path);
                continue;
            }
            // Adapters of a result (`.unwrap_or(None)`, `.ok()`, `.expect(…)`, `.context(…)`)
            // are the call whose result they adapt: a variable assigned through them holds
            // that call's outcome (`let mut tx = pool.begin().await.expect(…)`).
            if let Some(p) = &mut prev
                && vocab::is_adapter(method)
            {
                let mut scratch = p.clone();
                scratch.args.clear();
                self.link_args(link, &mut scratch);
                // The fallback of `unwrap_or(…)`/`unwrap_or_else(|| …)` is the value on the
                // other path (`id.unwrap_or_else(|| Uuid::new_v4())`): kept beside the call's
                // arguments, so a check walking the value sees it, while the emitted call op
                // stays as sent.
                if method.starts_with("unwrap_or") {
                    p.kwargs
                        .extend(scratch.args.into_iter().map(|a| (method.to_string(), a)));
                }
                continue;
            }
            let pos = call_pos(&self.b, link.node, link.method);
            let mut literal = None;
            let callee = match &prev {
                None => match cloned.take() {
                    Some(mut path) => {
                        path.push(method.to_string());
                        path
                    }
                    None => {
                        let (mut path, on_literal) = self.root_callee_and_literal(link);
                        literal = on_literal;
                        // `notifier.send(…)` on a `&dyn Notifier`: the trait's method.
                        if path.len() == 2
                            && let Some(t) = self.trait_of(&path[0])
                        {
                            path[0] = t;
                        }
                        path
                    }
                },
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
            if let Some(object) = literal {
                call.kwargs.push(("self".into(), object));
            }
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
            // idem's `runner.run(&event, |tx| …)` is its claim (emitted in the closure's
            // transaction) and the closure's work, nothing besides.
            if !vocab::constructs(&call) && !vocab::is_idem_run(&call) && !vocab::idem_pure(&call) {
                self.b.emit(OpKind::Call(call.clone()), pos);
            }
            for route in vocab::routes(&call) {
                self.b.emit(OpKind::Call(route), pos);
            }
            prev = Some(call);
        }
        prev.map_or(Expr::Other(Vec::new()), |c| Expr::Call(Box::new(c)))
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

/// Whether the value of the call `node` is used where it is made (awaited, handed to another
/// call, put in a collection), rather than dropped by its statement.
fn handle_used(node: Node<'_>) -> bool {
    node.parent().is_some_and(|p| {
        matches!(
            p.kind(),
            "await_expression" | "arguments" | "array_expression" | "tuple_expression"
        )
    })
}
