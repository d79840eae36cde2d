//! Ruby (`.rb`, `.rake`): tree-sitter-ruby. Rails controller actions, ActiveJob/Sidekiq jobs
//! and Karafka/Racecar/Hutch consumers are handlers by their class; a block given to
//! `subscribe`, `each_message` or a Sinatra verb is a callback of its own; every other block
//! (`each`, `transaction do … end`, `with_lock`) runs inline, in a transaction where it opens
//! one. `db/schema.rb` and migrations declare unique indexes (see [`schema`]).

mod active_record;
mod before_action;
mod callbacks;
mod calls;
mod classes;
mod exprs;
mod job_queue;
mod partial;
mod schema;
mod vocab;

use std::path::Path;

use tree_sitter::Node;

use super::builder::{Builder, named};
use super::{Language, extension};
use crate::ir::{Call, Expr, Module, OpKind, Pos};

/// Ruby.
#[derive(Debug)]
pub(crate) struct Ruby;

impl Language for Ruby {
    fn name(&self, _: &Path) -> &'static str {
        "ruby"
    }

    fn handles(&self, path: &Path) -> bool {
        matches!(extension(path), "rb" | "rake")
    }

    fn grammar(&self, _: &Path) -> tree_sitter::Language {
        tree_sitter_ruby::LANGUAGE.into()
    }

    fn lowers_with_errors(&self, root: Node<'_>) -> bool {
        partial::only_the_file_is_unclosed(root)
    }

    fn lower(&self, tree: &tree_sitter::Tree, source: &str) -> Module {
        let mut lower = Lower {
            b: Builder::new(source),
            classes: Vec::new(),
            locals: vec![Default::default()],
        };
        lower.stmt(tree.root_node());
        let mut module = lower.b.finish();
        module
            .unique_keys
            .extend(schema::unique_keys(tree.root_node(), source));
        module.jobs_in_database = job_queue::jobs_in_database(tree.root_node(), source);
        module
    }
}

/// What a class is, read from its name, superclass and mixins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClassKind {
    /// A Rails controller (`< ApplicationController`, `< ActionController::API`).
    Controller,
    /// An ActiveRecord model (`< ApplicationRecord`): a bare `update!(…)` in it writes its row.
    Model,
    /// A background job or broker consumer (`< ApplicationJob`, `include Sidekiq::Job`,
    /// `< Karafka::BaseConsumer`).
    Job,
    /// A module or any other class.
    Other,
}

/// A class or module being lowered.
#[derive(Debug, Clone)]
pub(super) struct ClassCtx {
    pub(super) name: String,
    pub(super) kind: ClassKind,
    /// After a bare `private` / `protected`: the methods that follow are helpers.
    pub(super) private: bool,
    /// `attr_reader`/`attr_accessor` names: a bare `event` in a method reads `self.event`.
    pub(super) attrs: Vec<String>,
    /// A controller's `before_action :load_event` callbacks: each action runs them first.
    before: Vec<before_action::BeforeAction>,
}

/// A call with no arguments.
pub(super) fn plain(callee: Vec<String>, pos: Pos) -> Call {
    Call {
        callee,
        receiver: None,
        args: Vec::new(),
        kwargs: Vec::new(),
        is_new: false,
        pos,
    }
}

/// The state of one file's lowering.
struct Lower<'s> {
    b: Builder<'s>,
    /// The classes and modules around the node being lowered, innermost last.
    classes: Vec<ClassCtx>,
    /// The local variables of each function being lowered (parameters, assigned names, block
    /// parameters): a bare name that is none of them is a method call.
    locals: Vec<std::collections::HashSet<String>>,
}

impl<'s> Lower<'s> {
    /// Whether `name` is a local of the function being lowered.
    fn is_local(&self, name: &str) -> bool {
        self.locals.last().is_some_and(|l| l.contains(name))
    }

    /// Records the names an assignment or block binds as locals.
    fn bind(&mut self, names: &[String]) {
        if let Some(l) = self.locals.last_mut() {
            l.extend(names.iter().filter(|n| !n.contains('.')).cloned());
        }
    }

    /// A statement, within the depth limit.
    fn stmt(&mut self, n: Node<'_>) {
        if self.b.enter() {
            self.stmt_node(n);
            self.b.leave();
        }
    }

    fn stmts(&mut self, n: Node<'_>) {
        for c in named(n) {
            self.stmt(c);
        }
    }

    fn stmt_node(&mut self, n: Node<'_>) {
        match n.kind() {
            // The root of a file that lost its last `end` (see `partial`): its statements.
            "ERROR" if n.parent().is_none() => self.stmts(n),
            "program"
            | "then"
            | "else"
            | "do"
            | "block_body"
            | "parenthesized_statements"
            | "begin_block"
            | "end_block"
            | "ensure" => self.stmts(n),
            "body_statement" | "begin" => self.body(n),
            "class" | "module" | "singleton_class" => self.class(n),
            "method" => self.method(n, false),
            "singleton_method" => self.method(n, true),
            "if" | "unless" | "elsif" => self.if_stmt(n),
            "if_modifier" | "unless_modifier" => {
                let test = self.field_expr(n, "condition");
                self.b.push_cond(test, n.kind() == "unless_modifier", false);
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
                self.b.pop_cond();
            }
            "while" | "until" | "while_modifier" | "until_modifier" => {
                self.field_expr(n, "condition");
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "for" => {
                let value = n
                    .child_by_field_name("value")
                    .map_or(Expr::Other(Vec::new()), |v| self.expr(v));
                if let Some(p) = n.child_by_field_name("pattern") {
                    let targets = self.targets(p);
                    self.bind(&targets);
                    let pos = self.b.pos(p);
                    self.b.assign(targets, value, pos);
                }
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
            }
            "case" | "case_match" => self.case(n),
            "return" | "next" | "break" => {
                let value = named(n)
                    .into_iter()
                    .next()
                    .and_then(|a| named(a).into_iter().next().or(Some(a)))
                    .map(|a| self.expr(a));
                let pos = self.b.pos(n);
                self.b.emit(OpKind::Return(value), pos);
            }
            "rescue_modifier" => {
                if let Some(body) = n.child_by_field_name("body") {
                    self.stmt(body);
                }
                let test = self.field_expr(n, "handler");
                self.b.push_cond(test, false, true);
                self.b.pop_cond();
            }
            // A bare name in statement position is a method call (`verify_signature!`).
            "identifier" => {
                let name = self.b.text(n).to_string();
                let pos = self.b.pos(n);
                let call = plain(vec![vocab::canonical(&name, false)], pos);
                self.visibility(&name);
                self.b.emit(OpKind::Call(call), pos);
            }
            "call" => {
                self.call_stmt(n);
            }
            "comment" | "empty_statement" | "uninterpreted" | "alias" | "undef" => {}
            _ => {
                self.expr(n);
            }
        }
    }

    /// A body that may hold `rescue`, `else` and `ensure` clauses (a method's, a `begin`'s).
    fn body(&mut self, n: Node<'_>) {
        for c in named(n) {
            if c.kind() == "rescue" {
                let test = c
                    .child_by_field_name("exceptions")
                    .map_or(Expr::Other(Vec::new()), |e| self.expr(e));
                self.b.push_cond(test, false, true);
                if let Some(v) = c.child_by_field_name("variable") {
                    let targets = self.targets(v);
                    self.bind(&targets);
                    let pos = self.b.pos(v);
                    self.b
                        .assign(targets, Expr::Path(vec!["error".into()]), pos);
                }
                if let Some(body) = c.child_by_field_name("body") {
                    self.stmt(body);
                }
                self.b.pop_cond();
            } else {
                self.stmt(c);
            }
        }
    }

    /// `if`/`unless`/`elsif`: each branch under its test (negated for the other branch).
    fn if_stmt(&mut self, n: Node<'_>) {
        let test = self.field_expr(n, "condition");
        let unless = n.kind() == "unless";
        if let Some(c) = n.child_by_field_name("consequence") {
            self.b.push_cond(test.clone(), unless, false);
            self.stmt(c);
            self.b.pop_cond();
        }
        if let Some(a) = n.child_by_field_name("alternative") {
            self.b.push_cond(test, !unless, false);
            self.stmt(a);
            self.b.pop_cond();
        }
    }

    /// `case x when a then … else … end`: each branch under `x == a`, the `else` under the
    /// negation of the first test.
    fn case(&mut self, n: Node<'_>) {
        let subject = self.field_expr(n, "value");
        let mut first: Option<Expr> = None;
        for c in named(n) {
            match c.kind() {
                "when" | "in_clause" => {
                    let mut cursor = c.walk();
                    let patterns: Vec<Node<'_>> =
                        c.children_by_field_name("pattern", &mut cursor).collect();
                    let pats: Vec<Expr> = patterns
                        .into_iter()
                        .flat_map(|p| named(p).into_iter().next().or(Some(p)))
                        .map(|p| self.expr(p))
                        .collect();
                    let test = Expr::Binary {
                        op: "==".into(),
                        left: Box::new(subject.clone()),
                        right: Box::new(Expr::List(pats)),
                    };
                    first.get_or_insert_with(|| test.clone());
                    self.b.push_cond(test, false, false);
                    if let Some(body) = c.child_by_field_name("body") {
                        self.stmt(body);
                    }
                    self.b.pop_cond();
                }
                "else" => {
                    let test = first.clone().unwrap_or(Expr::Other(Vec::new()));
                    self.b.push_cond(test, true, false);
                    self.stmt(c);
                    self.b.pop_cond();
                }
                _ => {}
            }
        }
    }

    /// The expression in a field of `n`, or an empty one.
    fn field_expr(&mut self, n: Node<'_>, field: &str) -> Expr {
        n.child_by_field_name(field)
            .map_or(Expr::Other(Vec::new()), |c| self.expr(c))
    }

    /// The names an assignment or a block parameter list binds; `@x` is `self.x`.
    fn targets(&self, n: Node<'_>) -> Vec<String> {
        match n.kind() {
            "left_assignment_list"
            | "destructured_left_assignment"
            | "block_parameters"
            | "lambda_parameters"
            | "method_parameters"
            | "destructured_parameter"
            | "exception_variable"
            | "rest_assignment"
            | "splat_parameter"
            | "hash_splat_parameter"
            | "block_parameter" => named(n).into_iter().flat_map(|c| self.targets(c)).collect(),
            "optional_parameter" | "keyword_parameter" => n
                .child_by_field_name("name")
                .map(|x| vec![self.b.text(x).to_string()])
                .unwrap_or_default(),
            "instance_variable" => vec![format!("self.{}", self.b.text(n).trim_start_matches('@'))],
            "call" => {
                let recv = n
                    .child_by_field_name("receiver")
                    .map(|r| self.targets(r).join("."))
                    .unwrap_or_default();
                let m = n
                    .child_by_field_name("method")
                    .map(|m| self.b.text(m).to_string())
                    .unwrap_or_default();
                vec![if recv.is_empty() {
                    m
                } else {
                    format!("{recv}.{m}")
                }]
            }
            _ => vec![self.b.text(n).to_string()],
        }
    }
}

#[cfg(test)]
mod tests;
