//! Closures and async blocks (run in a transaction, detached, registered as handlers or
//! inline), and what a function returns (answers with a status, refusals).

use tree_sitter::Node;

use super::{Lower, kids, vocab};
use crate::ir::{Call, Expr, Function, OpKind, Pos};

impl Lower<'_> {
    /// A closure or async block passed to `call`: run in a transaction (`conn.transaction(|c|
    /// …)`, idem's `runner.run(&event, |tx| …)`), detached (`tokio::spawn`), registered as a
    /// handler (`post(|…| async {…})`, `subscribe`), or run inline (iterator and future
    /// combinators). Returns the closure's value where it runs inline (`key.unwrap_or_else(||
    /// Uuid::new_v4().to_string())` is the minted key on the fallback path).
    pub(super) fn closure_arg(&mut self, a: Node<'_>, call: &Call) -> Expr {
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
        let mut role = vocab::closure_role(call);
        if matches!(role, vocab::ClosureRole::Inline)
            && vocab::wrapper_transaction(call)
            && self
                .first_param(params)
                .is_some_and(|p| vocab::closure_takes_store(&p))
        {
            role = vocab::ClosureRole::Transaction { idem: false };
        }
        match role {
            vocab::ClosureRole::Transaction { idem } => {
                self.b.push_tx();
                if idem {
                    vocab::emit_idem_claim(self, call);
                }
                self.inline(params, body, call, false);
                self.b.pop_tx();
                Expr::Other(Vec::new())
            }
            vocab::ClosureRole::Detached if self.joined_spawn => {
                self.inline(params, body, call, false)
            }
            vocab::ClosureRole::Detached => {
                self.b.push_detached();
                self.inline(params, body, call, false);
                self.b.pop_detached();
                Expr::Other(Vec::new())
            }
            vocab::ClosureRole::Handler => {
                self.closure(a, String::new(), Some(call.name()));
                self.b.registered_last(call.pos);
                Expr::Other(Vec::new())
            }
            vocab::ClosureRole::Inline => self.inline(params, body, call, true),
        }
    }

    /// The name bound by a closure's first parameter (`|mut tx|`: `tx`).
    fn first_param(&self, params: Option<Node<'_>>) -> Option<String> {
        let p = kids(params?).into_iter().next()?;
        let pat = if p.kind() == "parameter" {
            p.child_by_field_name("pattern")?
        } else {
            p
        };
        self.bindings(pat).into_iter().next()
    }

    /// A closure's body lowered as part of the caller; its parameters take the receiver's
    /// value (`stream.for_each(|m| …)` binds `m` to what the stream yields); its value is
    /// what its body ends with.
    fn inline(
        &mut self,
        params: Option<Node<'_>>,
        body: Option<Node<'_>>,
        call: &Call,
        value: bool,
    ) -> Expr {
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
        match body {
            Some(b) if value && b.kind() != "async_block" => self.branch_value(b),
            Some(b) => {
                self.stmt(b, false);
                Expr::Other(Vec::new())
            }
            None => Expr::Other(Vec::new()),
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
