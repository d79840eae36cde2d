//! Ktor's typed routes, `post<Hook.Delivery> { … }`, which the Kotlin grammar reads as the
//! comparisons `post < Hook.Delivery > { … }`.

use tree_sitter::Node;

use super::Lower;
use crate::ir::{Call, Expr, OpKind};

impl Lower<'_> {
    /// Ktor's typed route, `post<Hook.Delivery> { … }`, which the grammar reads as `post <
    /// Hook.Delivery > { … }`: the lambda is registered as the route's handler.
    pub(super) fn typed_route(&mut self, n: Node<'_>) -> bool {
        let (Some(inner), Some(lambda)) = (
            n.child_by_field_name("left"),
            n.child_by_field_name("right"),
        ) else {
            return false;
        };
        let Some(verb) = inner.child_by_field_name("left") else {
            return false;
        };
        let resource = inner.child_by_field_name("right");
        let verb_text = self.text(verb);
        if lambda.kind() != "lambda_literal"
            || inner.kind() != "binary_expression"
            || verb.kind() != "identifier"
            || !matches!(verb_text.as_str(), "post" | "put" | "patch" | "delete")
        {
            return false;
        }
        let mut call = Call {
            callee: vec![verb_text],
            receiver: None,
            args: resource
                .map(|r| Expr::Str(self.text(r)))
                .into_iter()
                .collect(),
            kwargs: Vec::new(),
            is_new: false,
            pos: self.b.pos(n),
        };
        self.lambda_arg_in_place(&call, lambda);
        crate::lang::jvm::lambda::mark_route_registration(&mut call);
        self.b.emit(OpKind::Call(call), self.b.pos(n));
        true
    }
}
