//! Calls whose meaning is not their name: `format!` strings, the standard and logging macros,
//! AWS SDK fluent builders, and bodies an extractor parsed and the handler re-serialises.

use super::super::builder::call_pos;
use super::chain::Link;
use super::{Lower, kids, vocab};
use crate::ir::{Call, Expr, OpKind};

impl Lower<'_> {
    /// `format!("event:{}", id)` as the interpolated string it makes.
    pub(super) fn format_macro(&mut self, links: &[Link<'_>]) -> Option<Expr> {
        let [link] = links else { return None };
        if link.callee.kind() != "macro_invocation" {
            return None;
        }
        let name = link.method.map(|m| self.b.text(m)).unwrap_or("");
        if !matches!(name, "format" | "format_args") {
            return None;
        }
        let call = self.args_call(link);
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
    pub(super) fn reserialised_body(&self, call: &mut Call) {
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

    /// A chain on a value a known macro makes (`metrics::counter!("x").increment(1)`,
    /// `json!({…}).to_string()`): nothing outside, the calls in its arguments aside.
    pub(super) fn macro_chain(&mut self, links: &[Link<'_>]) -> Option<Expr> {
        let (first, rest) = links.split_first()?;
        if rest.is_empty() || first.callee.kind() != "macro_invocation" {
            return None;
        }
        let name = first.method.map(|m| self.b.text(m)).unwrap_or("");
        vocab::macro_kind(name)?;
        for link in links {
            self.args_call(link);
        }
        Some(Expr::Other(Vec::new()))
    }

    /// An AWS SDK fluent call, `client.send_message().queue_url(u).message_body(b).send()`: one
    /// call of the operation (`client.send_message(queue_url = u, message_body = b)`), the
    /// setters as its named arguments.
    pub(super) fn fluent_builder(&mut self, links: &[Link<'_>]) -> Option<Expr> {
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
    pub(super) fn std_macro(&mut self, links: &[Link<'_>]) -> Option<Expr> {
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
}
