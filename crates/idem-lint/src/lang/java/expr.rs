//! Java expressions and calls: bean accessors as properties, lambdas by what their call does
//! with them, `BigDecimal` arithmetic and `java.time` comparisons as operators.

use tree_sitter::Node;

use super::{Lower, empty, kids, simple_type};
use crate::ir::{Call, Expr, Function, OpKind};
use crate::lang::builder::{call_pos, unescape};
use crate::lang::jvm::bean::{accessor, name_builder_value};
use crate::lang::jvm::lambda::{LambdaRole, role};

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
            // `data instanceof Invoice invoice`: the pattern's name holds the tested value.
            "instanceof_expression" => {
                let left = n
                    .child_by_field_name("left")
                    .map_or_else(empty, |c| self.expr(c));
                if let Some(name) = n.child_by_field_name("name") {
                    let pos = self.b.pos(n);
                    self.b.assign(vec![self.text(name)], left.clone(), pos);
                }
                Expr::Other(vec![left])
            }
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
    pub(super) fn lambda_function(
        &mut self,
        n: Node<'_>,
        registration: String,
        at: Option<crate::ir::Pos>,
    ) {
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

    pub(super) fn lambda_params(&self, n: Node<'_>) -> Vec<String> {
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
    pub(super) fn lambda_body(&mut self, n: Node<'_>, own: bool) {
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

    pub(super) fn new_object(&mut self, n: Node<'_>) -> Call {
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
    pub(super) fn invocation(&mut self, n: Node<'_>) -> Expr {
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
            if let ([arg], Some(op)) = (args.as_slice(), crate::lang::jvm::vocab::comparison(&name))
            {
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
                self.b.assign(vec![target.join(".")], value, pos);
                return empty();
            }
        }
        Expr::Call(Box::new(self.call(n)))
    }

    pub(super) fn call(&mut self, n: Node<'_>) -> Call {
        let name = self.field_text(n, "name");
        let pos = call_pos(&self.b, n, n.child_by_field_name("name"));
        let object = n.child_by_field_name("object");
        // `future.join()`, `mono.block()`: the work before it is waited for.
        if matches!(name.as_str(), "join" | "get" | "block")
            && let Some(o) = object.filter(|o| o.kind() == "method_invocation")
        {
            self.awaited = Some(o.id());
        }
        // Reactor's `…subscribe()`: the whole pipeline runs later, nobody waits for it.
        let fire_and_forget =
            name == "subscribe" && object.is_some_and(|o| o.kind() == "method_invocation");
        if fire_and_forget {
            self.b.push_detached();
        }
        let call = self.call_parts(n, name, pos);
        if fire_and_forget {
            self.b.pop_detached();
        }
        call
    }

    fn call_parts(&mut self, n: Node<'_>, name: String, pos: crate::ir::Pos) -> Call {
        let (callee, receiver) = match n.child_by_field_name("object") {
            Some(o)
                if matches!(o.kind(), "method_invocation" | "object_creation_expression")
                    && !self.b.enter_chain() =>
            {
                (vec!["?".to_string(), name], None)
            }
            Some(o) if matches!(o.kind(), "method_invocation" | "object_creation_expression") => {
                let inner = if o.kind() == "method_invocation" {
                    self.invocation(o)
                } else {
                    Expr::Call(Box::new(self.new_object(o)))
                };
                self.b.leave_chain();
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
    pub(super) fn arguments(&mut self, call: &mut Call, args: Node<'_>) {
        for (i, a) in kids(args).into_iter().enumerate() {
            if a.kind() == "lambda_expression" {
                let awaited = args.parent().map(|p| p.id()) == self.awaited;
                // `found.ifPresent(p -> …)` runs when the look-up found something,
                // `ifPresentOrElse`'s second lambda and `orElseGet` when it did not.
                let branch = crate::lang::jvm::lambda::presence_branch(call, i);
                if let Some(negated) = branch {
                    self.b.push_cond(
                        crate::lang::jvm::lambda::receiver_value(call),
                        negated,
                        false,
                    );
                }
                match role(call) {
                    LambdaRole::Registered => {
                        let reg = crate::lang::jvm::lambda::registration(call);
                        self.lambda_function(a, reg, Some(call.pos));
                        crate::lang::jvm::lambda::mark_route_registration(call);
                    }
                    LambdaRole::Detached if awaited => {
                        self.inline_lambda(call, a, LambdaRole::Inline)
                    }
                    r => self.inline_lambda(call, a, r),
                }
                if branch.is_some() {
                    self.b.pop_cond();
                }
                call.args.push(empty());
                continue;
            }
            if a.kind() == "method_reference" {
                self.referenced_call(call, a);
            }
            let v = self.expr(a);
            call.args.push(v);
        }
    }

    /// A method reference on a field or local given to a call that runs it
    /// (`flux.flatMap(orderRepository::save)`, `events.forEach(handler::apply)`): the call
    /// of that method on the receiver's element, where the call's role puts a lambda's body.
    fn referenced_call(&mut self, call: &Call, a: Node<'_>) {
        let pos = self.b.pos(a);
        let text = self.text(a);
        let Some((referenced, role)) = crate::lang::jvm::lambda::referenced_call(call, &text, pos)
        else {
            return;
        };
        let detached = role == LambdaRole::Detached
            && a.parent().and_then(|p| p.parent()).map(|p| p.id()) != self.awaited;
        let tx = role == LambdaRole::Transaction;
        if detached {
            self.b.push_detached();
        }
        if tx {
            self.b.push_tx();
        }
        self.b.emit(OpKind::Call(referenced), pos);
        if tx {
            self.b.pop_tx();
        }
        if detached {
            self.b.pop_detached();
        }
    }

    /// A lambda run by the call itself: its parameters take the call's receiver (the
    /// element of `orders.forEach(o -> …)`, the row of `repo.findById(id).ifPresent(o ->
    /// …)`), its body is lowered in place.
    pub(super) fn inline_lambda(&mut self, call: &Call, n: Node<'_>, r: LambdaRole) {
        let params = self.lambda_params(n);
        if !params.is_empty() && r == LambdaRole::Inline {
            let value = crate::lang::jvm::lambda::receiver_value(call);
            let pos = self.b.pos(n);
            self.b.assign(params, value, pos);
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
