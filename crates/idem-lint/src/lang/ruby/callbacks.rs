//! A controller's `before_action` callbacks and the actions they run for: `before_action
//! :load_event, only: [:show]` runs before `show` alone, `except: :index` before every action
//! but `index`. An action is lowered with the callbacks that run before it.

use tree_sitter::Node;

use super::Lower;
use super::before_action::BeforeAction;
use crate::lang::builder::named;

impl<'s> Lower<'s> {
    /// The `before_action` (and `prepend_before_action`) callbacks of a class body.
    pub(super) fn before_actions(&self, body: Node<'_>) -> Vec<BeforeAction> {
        let mut out = Vec::new();
        for c in named(body).into_iter().filter(|c| c.kind() == "call") {
            let m = c
                .child_by_field_name("method")
                .map_or("", |m| self.b.text(m));
            if !matches!(m, "before_action" | "prepend_before_action") {
                continue;
            }
            let Some(args) = c.child_by_field_name("arguments") else {
                continue;
            };
            let pos = self.b.pos(c);
            let (mut only, mut except) = (None, Vec::new());
            for pair in named(args).into_iter().filter(|a| a.kind() == "pair") {
                let key = pair
                    .child_by_field_name("key")
                    .map_or("", |k| self.b.text(k));
                let value = pair.child_by_field_name("value");
                match key.trim_end_matches(':').trim_start_matches(':') {
                    "only" => only = Some(value.map(|v| self.symbols(v)).unwrap_or_default()),
                    "except" => except = value.map(|v| self.symbols(v)).unwrap_or_default(),
                    _ => {}
                }
            }
            out.extend(
                named(args)
                    .into_iter()
                    .filter(|a| a.kind() == "simple_symbol")
                    .map(|a| BeforeAction {
                        name: self.b.text(a).trim_start_matches(':').to_string(),
                        pos,
                        only: only.clone(),
                        except: except.clone(),
                    }),
            );
        }
        out
    }

    /// The names in `:show`, `[:show, :edit]` or `%i[show edit]`.
    fn symbols(&self, n: Node<'_>) -> Vec<String> {
        let name = |c: Node<'_>| {
            self.b
                .text(c)
                .trim_start_matches(':')
                .trim_matches(|q| q == '"' || q == '\'')
                .to_string()
        };
        match n.kind() {
            "array" => named(n).into_iter().map(name).collect(),
            _ => vec![name(n)],
        }
    }
}
