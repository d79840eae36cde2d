//! Kotlin expressions and calls: string templates, trailing lambdas by what their call does
//! with them, `?.let` and `?:` branches, constructors as calls of capitalised names.

use tree_sitter::Node;

use super::{Lower, empty, kid, kids};
use crate::ir::{Call, Expr, Function, OpKind, Pos};
use crate::lang::builder::{call_pos, unescape};
use crate::lang::jvm::lambda::{LambdaRole, presence_branch, receiver_value, role};

impl Lower<'_> {
    pub(super) fn expr(&mut self, n: Node<'_>) -> Expr {
        if !self.b.enter() {
            return empty();
        }
        let e = self.expr_node(n);
        self.b.leave();
        e
    }

    pub(super) fn expr_node(&mut self, n: Node<'_>) -> Expr {
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
            "binary_expression" if self.typed_route(n) => empty(),
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
                // `return@withContext value`: the label is an identifier, not the value.
                let label = n.child_by_field_name("label").map(|l| l.id());
                let value = kids(n)
                    .into_iter()
                    .find(|c| c.kind() != "label" && Some(c.id()) != label)
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

    pub(super) fn unary(&mut self, n: Node<'_>) -> Expr {
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
    pub(super) fn string(&mut self, n: Node<'_>) -> Expr {
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

    pub(super) fn lambda_function(&mut self, n: Node<'_>, registration: String, at: Option<Pos>) {
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
    pub(super) fn lambda_params(&self, n: Node<'_>) -> Vec<String> {
        match kid(n, "lambda_parameters").or_else(|| kid(n, "function_value_parameters")) {
            Some(p) => kids(p).into_iter().map(|v| self.name_of(v)).collect(),
            None => vec!["it".to_string()],
        }
    }

    pub(super) fn lambda_body(&mut self, n: Node<'_>) {
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
    pub(super) fn call_expr(&mut self, n: Node<'_>) -> Expr {
        let parts = trailing_lambda_call(n);
        let Some(func) = parts.first().copied() else {
            return empty();
        };
        let method = (func.kind() == "navigation_expression")
            .then(|| kids(func).into_iter().last())
            .flatten();
        let pos = call_pos(&self.b, n, method);
        // `stored.isAfter(incoming)`: the comparison it is.
        if let (Some(m), [_, args]) = (method, parts.as_slice())
            && let Some(op) = crate::lang::jvm::vocab::comparison(self.b.text(m))
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
                    [object, _] if object.kind() == "call_expression" && !self.b.enter_chain() => {
                        (vec!["?".to_string(), name], None)
                    }
                    [object, _] if object.kind() == "call_expression" => {
                        // Reactor's `…subscribe()` (no callback given): the whole pipeline
                        // runs later, nobody waits for it, as in Java.
                        let fire_and_forget = name == "subscribe"
                            && parts.len() == 2
                            && kids(parts[1]).iter().all(|k| kids(*k).is_empty());
                        if fire_and_forget {
                            self.b.push_detached();
                        }
                        let inner = self.call_expr(*object);
                        if fire_and_forget {
                            self.b.pop_detached();
                        }
                        self.b.leave_chain();
                        match inner {
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
        // A nested class's (`Command.SaveTasks(…)`) too: Kotlin's methods are lower-case.
        let is_new = callee
            .last()
            .is_some_and(|c| c.starts_with(|ch: char| ch.is_ascii_uppercase()))
            && callee
                .iter()
                .all(|c| c.starts_with(|ch: char| ch.is_ascii_uppercase()));
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
        let mut lambdas = 0;
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
                            lambdas += 1;
                            continue;
                        }
                        if let Some(r) = kids(arg)
                            .into_iter()
                            .last()
                            // `repository::save` parses as a navigation with `::`.
                            .filter(|e| {
                                matches!(e.kind(), "callable_reference" | "navigation_expression")
                                    && self.b.text(*e).contains("::")
                            })
                        {
                            self.referenced_call(&call, r);
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
                        lambdas += 1;
                    }
                }
                _ => {}
            }
        }
        if lambdas > 0 {
            crate::lang::jvm::lambda::mark_route_registration(&mut call);
        }
        crate::lang::jvm::bean::name_builder_value(&mut call);
        self.b.emit(OpKind::Call(call.clone()), pos);
        Expr::Call(Box::new(call))
    }

    /// A callable reference given to `call` (`flux.flatMap(repository::save)`): that method
    /// called on the element, where a lambda's body would run.
    fn referenced_call(&mut self, call: &Call, r: Node<'_>) {
        let pos = self.b.pos(r);
        let text = self.b.text(r).to_string();
        let Some((referenced, role)) = crate::lang::jvm::lambda::referenced_call(call, &text, pos)
        else {
            return;
        };
        match role {
            LambdaRole::Detached => self.b.push_detached(),
            LambdaRole::Transaction => self.b.push_tx(),
            _ => {}
        }
        self.b.emit(OpKind::Call(referenced), pos);
        match role {
            LambdaRole::Detached => self.b.pop_detached(),
            LambdaRole::Transaction => self.b.pop_tx(),
            _ => {}
        }
    }

    /// A lambda given to `call`, run where [`role`] says.
    pub(super) fn lambda_arg(&mut self, call: &Call, l: Node<'_>, branch: Option<bool>) {
        if let Some(negated) = branch {
            self.b.push_cond(receiver_value(call), negated, false);
            self.lambda_arg_in_place(call, l);
            self.b.pop_cond();
        } else {
            self.lambda_arg_in_place(call, l);
        }
    }

    pub(super) fn lambda_arg_in_place(&mut self, call: &Call, l: Node<'_>) {
        let r = role(call);
        if r == LambdaRole::Registered {
            let reg = crate::lang::jvm::lambda::registration(call);
            self.lambda_function(l, reg, Some(call.pos));
            return;
        }
        let params = self.lambda_params(l);
        if r == LambdaRole::Inline {
            let value = receiver_value(call);
            let pos = self.b.pos(l);
            self.b.assign(params, value, pos);
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

/// A call's parts: the callee, then its arguments and trailing lambda. The grammar nests
/// `launch(Dispatchers.IO) { … }` and `post("/hook") { … }` as a call of the call
/// `launch(…)` given the lambda; that is one call taking both.
fn trailing_lambda_call(n: Node<'_>) -> Vec<Node<'_>> {
    let parts = kids(n);
    if let [inner, lambda] = parts.as_slice()
        && inner.kind() == "call_expression"
        && lambda.kind() == "annotated_lambda"
    {
        let mut inner_parts = kids(*inner);
        if inner_parts.len() >= 2
            && inner_parts
                .last()
                .is_some_and(|k| k.kind() == "value_arguments")
        {
            inner_parts.push(*lambda);
            return inner_parts;
        }
    }
    parts
}

fn push_text(parts: &mut Vec<Expr>, text: &str) {
    if let Some(Expr::Str(last)) = parts.last_mut() {
        last.push_str(text);
    } else {
        parts.push(Expr::Str(text.to_string()));
    }
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
