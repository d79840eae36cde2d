//! Ruby expressions: names (`@x` is `self.x`, `Foo::Bar` a path), literals (a symbol is its
//! name as a string), hashes, operators, assignments and the ternary.

use tree_sitter::Node;

use super::Lower;
use crate::ir::{Expr, OpKind};
use crate::lang::builder::{named, unescape};

impl<'s> Lower<'s> {
    /// An expression (its calls emitted), within the depth limit.
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
            "identifier" => self.identifier(n),
            "constant" | "self" | "global_variable" | "class_variable" | "true" | "false"
            | "nil" => Expr::Path(vec![self.b.text(n).to_string()]),
            "instance_variable" => Expr::Path(vec![
                "self".to_string(),
                self.b.text(n).trim_start_matches('@').to_string(),
            ]),
            "scope_resolution" => {
                let name = n
                    .child_by_field_name("name")
                    .map(|x| self.b.text(x).to_string())
                    .unwrap_or_default();
                Expr::member(n.child_by_field_name("scope").map(|s| self.expr(s)), name)
            }
            "simple_symbol" | "hash_key_symbol" => {
                Expr::Str(self.b.text(n).trim_start_matches(':').to_string())
            }
            "delimited_symbol" | "string" | "heredoc_body" | "bare_string" | "bare_symbol" => {
                self.string(n)
            }
            "heredoc_beginning" => self.heredoc(n),
            "integer" | "float" => {
                Expr::Num(self.b.text(n).replace('_', "").parse().unwrap_or(f64::NAN))
            }
            "call" => self.call_expr(n),
            "element_reference" => {
                let obj = n.child_by_field_name("object").map(|o| self.expr(o));
                let idx = named(n).into_iter().nth(1).map(|i| self.expr(i));
                Expr::index(obj, idx)
            }
            "hash" => {
                let fields = named(n)
                    .into_iter()
                    .map(|c| self.pair(c))
                    .collect::<Vec<_>>();
                Expr::Object {
                    type_name: None,
                    fields,
                }
            }
            "array" | "string_array" | "symbol_array" | "right_assignment_list" => {
                Expr::List(named(n).into_iter().map(|c| self.expr(c)).collect())
            }
            "binary" => {
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string())
                    .unwrap_or_default();
                let op = match op.as_str() {
                    "and" => "&&".to_string(),
                    "or" => "||".to_string(),
                    _ => op,
                };
                let left = self.field_expr(n, "left");
                // `exists?(k) || create!(k)`: the right side runs only when the left did not
                // decide, as an `if` would.
                let short = matches!(op.as_str(), "&&" | "||");
                if short {
                    self.b.push_cond(left.clone(), op == "||", false);
                }
                let right = self.field_expr(n, "right");
                if short {
                    self.b.pop_cond();
                }
                Expr::Binary {
                    op,
                    left: Box::new(left),
                    right: Box::new(right),
                }
            }
            "unary" => {
                let operand = self.field_expr(n, "operand");
                let op = n
                    .child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string())
                    .unwrap_or_default();
                if op == "!" || op == "not" {
                    Expr::Not(Box::new(operand))
                } else {
                    Expr::Other(vec![operand])
                }
            }
            "parenthesized_statements" | "begin" | "body_statement" => {
                let mut last = Expr::Other(Vec::new());
                for c in named(n) {
                    last = self.expr(c);
                }
                last
            }
            "assignment" | "operator_assignment" => self.assignment(n),
            "conditional" => {
                let test = self.field_expr(n, "condition");
                self.b.push_cond(test.clone(), false, false);
                let yes = self.field_expr(n, "consequence");
                self.b.pop_cond();
                self.b.push_cond(test, true, false);
                let no = self.field_expr(n, "alternative");
                self.b.pop_cond();
                Expr::Other(vec![yes, no])
            }
            "lambda" => {
                self.lambda(n);
                Expr::Other(Vec::new())
            }
            "if" | "unless" | "case" | "case_match" | "while" | "until" | "if_modifier"
            | "unless_modifier" | "rescue_modifier" | "return" | "for" | "method"
            | "singleton_method" | "class" | "module" | "next" | "break" => {
                self.stmt(n);
                Expr::Other(Vec::new())
            }
            "pair" => {
                let (k, v) = self.pair(n);
                Expr::Object {
                    type_name: None,
                    fields: vec![(k, v)],
                }
            }
            "comment" | "regex" => Expr::Other(Vec::new()),
            _ => Expr::Other(named(n).into_iter().map(|c| self.expr(c)).collect()),
        }
    }

    /// A bare name: a local, an attribute reader of the class (`self.event`), or a method
    /// call without arguments (`verified_payload`), emitted as one. A controller's helpers
    /// read the request, so their value is taken to come from it.
    fn identifier(&mut self, n: Node<'_>) -> Expr {
        let name = self.b.text(n).to_string();
        self.bare_name(name, n)
    }

    /// The bare name `name`, written at `n` (an identifier, or the key of `{ topic: }`).
    fn bare_name(&mut self, name: String, n: Node<'_>) -> Expr {
        if self.is_local(&name) || self.classes.is_empty() && self.locals.len() == 1 {
            return Expr::Path(vec![name]);
        }
        let ctx = self.classes.last();
        if ctx.is_some_and(|c| c.attrs.contains(&name)) {
            return Expr::Path(vec!["self".to_string(), name]);
        }
        let pos = self.b.pos(n);
        let mut call = super::plain(vec![super::vocab::canonical(&name, false)], pos);
        if ctx.is_some_and(|c| c.kind == super::ClassKind::Controller) {
            call.args.push(Expr::Path(vec!["request".to_string()]));
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        Expr::Call(Box::new(call))
    }

    /// A hash entry: `key: v`, `:key => v`, `"key" => v`; a `**splat` as `...`.
    pub(super) fn pair(&mut self, n: Node<'_>) -> (String, Expr) {
        if n.kind() != "pair" {
            return ("...".to_string(), self.expr(n));
        }
        let key_node = n.child_by_field_name("key");
        let key = key_node.map(|k| self.expr(k));
        let value = match (n.child_by_field_name("value"), key_node) {
            (Some(v), _) => self.expr(v),
            // Ruby 3.1's `{ topic: }` is `{ topic: topic }`: the local or method of that name.
            (None, Some(k)) => {
                let name = self.b.text(k).trim_end_matches(':').to_string();
                self.bare_name(name, k)
            }
            (None, None) => Expr::Other(Vec::new()),
        };
        let key = match key {
            Some(Expr::Str(s)) => s,
            Some(Expr::Path(p)) => p.join("."),
            _ => "?".to_string(),
        };
        (key, value)
    }

    /// A string, symbol or heredoc body: its text, or its parts when it interpolates.
    fn string(&mut self, n: Node<'_>) -> Expr {
        let mut parts = Vec::new();
        let mut interpolated = false;
        for c in named(n) {
            match c.kind() {
                "string_content" | "escape_sequence" | "heredoc_content" => {
                    parts.push(Expr::Str(unescape(self.b.text(c))))
                }
                "interpolation" => {
                    interpolated = true;
                    let inner = named(c).into_iter().next();
                    parts.push(inner.map_or(Expr::Other(Vec::new()), |e| self.expr(e)));
                }
                _ => {}
            }
        }
        if interpolated {
            Expr::Template(parts)
        } else {
            Expr::Str(parts.iter().filter_map(Expr::string_text).collect())
        }
    }

    /// `<<~SQL`: the heredoc's body, which tree-sitter places after the line it starts on.
    fn heredoc(&mut self, n: Node<'_>) -> Expr {
        let mut next = n.parent();
        while let Some(p) = next {
            let mut cursor = p.walk();
            let body = p
                .children(&mut cursor)
                .find(|c| c.kind() == "heredoc_body" && c.start_byte() >= n.end_byte());
            if let Some(body) = body {
                return self.string(body);
            }
            next = p.parent();
        }
        Expr::Str(String::new())
    }

    /// `a = v`, `a += v` (`||=` sets once: an assignment); the names become locals.
    fn assignment(&mut self, n: Node<'_>) -> Expr {
        let value = self.field_expr(n, "right");
        let targets = n
            .child_by_field_name("left")
            .map(|l| self.targets(l))
            .unwrap_or_default();
        self.bind(&targets);
        let op = (n.kind() == "operator_assignment")
            .then(|| {
                n.child_by_field_name("operator")
                    .map(|o| self.b.text(o).to_string())
            })
            .flatten()
            // `x ||= v` sets x once: an assignment, not an update of it.
            .filter(|o| o != "||=" && o != "&&=");
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
}
