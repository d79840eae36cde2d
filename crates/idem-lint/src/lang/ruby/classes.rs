//! Classes and methods: what a class is (a Rails controller, a job or consumer), which of
//! its methods receive requests or events, and each method lowered as a function.

use tree_sitter::Node;

use super::vocab::{JOB_ANCESTORS, JOB_ENTRIES, WEBHOOK_WORDS};
use super::{ClassCtx, ClassKind, Lower};
use crate::ir::{Expr, Function, OpKind, Pos};
use crate::lang::builder::named;
use crate::words::{has_any, is_key_name};

impl<'s> Lower<'s> {
    /// A class, module or `class << self`: what it is, then its body with it as context.
    pub(super) fn class(&mut self, n: Node<'_>) {
        let name = n
            .child_by_field_name("name")
            .map(|x| self.b.text(x).to_string())
            .unwrap_or_default();
        let superclass = named(n)
            .into_iter()
            .find(|c| c.kind() == "superclass")
            .map(|s| self.b.text(s).trim_start_matches('<').trim().to_string())
            .unwrap_or_default();
        let body = n.child_by_field_name("body");
        let mixins: Vec<String> = body
            .map(|b| {
                named(b)
                    .into_iter()
                    .filter(|c| c.kind() == "call" && self.b.text(*c).starts_with("include"))
                    .map(|c| self.b.text(c).to_string())
                    .collect()
            })
            .unwrap_or_default();
        let kind = if n.kind() == "singleton_class" {
            // `class << self`: the methods of the class around it.
            self.classes.last().map_or(ClassKind::Other, |c| c.kind)
        } else {
            class_kind(&name, &superclass, &mixins)
        };
        let name = if n.kind() == "singleton_class" {
            self.classes
                .last()
                .map(|c| c.name.clone())
                .unwrap_or_default()
        } else {
            name
        };
        if n.kind() == "class" {
            self.table_aliases(&name, &superclass, body);
        }
        self.classes.push(ClassCtx {
            name,
            kind,
            private: false,
            attrs: body
                .map(|b| self.names_given(b, &["attr_reader", "attr_accessor", "attr_writer"]))
                .unwrap_or_default()
                .into_iter()
                .map(|(name, _)| name)
                .collect(),
            before: body.map(|b| self.before_actions(b)).unwrap_or_default(),
        });
        if let Some(body) = body {
            self.body(body);
        }
        self.classes.pop();
    }

    /// Where a model's rows live when its name does not say: `self.table_name = "merchants"`,
    /// or its superclass's table (single-table inheritance: `ProviderMerchant < Merchant`).
    fn table_aliases(&mut self, name: &str, superclass: &str, body: Option<Node<'_>>) {
        let last = |s: &str| s.rsplit("::").next().unwrap_or(s).to_string();
        let model = last(name);
        let named_table = body.into_iter().flat_map(named).find_map(|c| {
            let left = c.child_by_field_name("left")?;
            let right = c.child_by_field_name("right")?;
            (c.kind() == "assignment" && self.b.text(left) == "self.table_name").then(|| {
                self.b
                    .text(right)
                    .trim_matches(|q| q == '"' || q == '\'')
                    .to_string()
            })
        });
        let framework = superclass.is_empty()
            || superclass.ends_with("Record")
            || superclass.ends_with("Base")
            || !superclass
                .chars()
                .all(|c| c.is_alphanumeric() || c == ':' || c == '_');
        let target = named_table.or_else(|| (!framework).then(|| last(superclass)));
        if let Some(table) = target {
            self.b.module.table_aliases.push((model, table));
        }
    }

    /// The symbols a class-body macro names (`attr_reader :a, :b`, `before_action
    /// :load_event, only: :create`), for the macros in `macros`.
    fn names_given(&self, body: Node<'_>, macros: &[&str]) -> Vec<(String, Pos)> {
        let mut out = Vec::new();
        for c in named(body).into_iter().filter(|c| c.kind() == "call") {
            let m = c
                .child_by_field_name("method")
                .map(|m| self.b.text(m))
                .unwrap_or("");
            if !macros.contains(&m) {
                continue;
            }
            if let Some(args) = c.child_by_field_name("arguments") {
                let pos = self.b.pos(c);
                out.extend(
                    named(args)
                        .into_iter()
                        .filter(|a| a.kind() == "simple_symbol")
                        .map(|a| (self.b.text(a).trim_start_matches(':').to_string(), pos)),
                );
            }
        }
        out
    }

    /// A bare `private`, `protected` or `public` in a class body.
    pub(super) fn visibility(&mut self, word: &str) {
        if let Some(c) = self.classes.last_mut() {
            match word {
                "private" | "protected" => c.private = true,
                "public" => c.private = false,
                _ => {}
            }
        }
    }

    /// A method (`def self.x` when `singleton`) as a function: registered as an action, a job
    /// or consumer entry or an event listener by its class, `initialize` named `Class#new`.
    pub(super) fn method(&mut self, n: Node<'_>, singleton: bool) {
        let raw = n
            .child_by_field_name("name")
            .map(|x| self.b.text(x).to_string())
            .unwrap_or_default();
        let mut name = raw.trim_end_matches(['!', '?', '=']).to_string();
        // `initialize` is what `Class.new(…)` runs: named so that only that call reaches it.
        if name == "initialize"
            && let Some(class) = self.classes.last()
        {
            let last = class.name.rsplit("::").next().unwrap_or(&class.name);
            name = format!("{last}#new");
        }
        let mut f = Function::new(name.clone());
        f.pos = self.b.pos(n);
        if let Some(params) = n.child_by_field_name("parameters") {
            f.params = self.targets(params);
        }
        let ctx = self.classes.last().cloned();
        if let Some(ctx) = &ctx {
            let entry = JOB_ENTRIES.contains(&name.as_str());
            match ctx.kind {
                ClassKind::Controller if !ctx.private && !singleton => {
                    // Rails hands every action its request and params.
                    // Only a controller named for deliveries is registered as receiving
                    // events (`TasksController`, `EventsController` serve users).
                    let what = format!("{}#{name}", ctx.name);
                    f.registrations.push(if webhook_controller(&what) {
                        format!("rails.post webhook {what}")
                    } else {
                        "rails.post".to_string()
                    });
                    // Named as Rails names it (`StripeController#create`): no code calls an
                    // action, and `Order.create` must never be taken for one.
                    let class = ctx.name.rsplit("::").next().unwrap_or(&ctx.name);
                    f.name = format!("{class}#{name}");
                    for implicit in ["params", "request"] {
                        f.params.push(implicit.to_string());
                    }
                }
                ClassKind::Job if entry => {
                    // `perform` is a job's (ActiveJob, Sidekiq, Resque); the others a
                    // consumer's (`consume`, `work`, `process`).
                    let role = if name == "perform" {
                        "job worker"
                    } else {
                        "worker"
                    };
                    f.registrations.push(format!("{role} {}#{name}", ctx.name));
                    // Karafka's batch, read in the method: `messages` (`params_batch` and
                    // `params` before Karafka 1.4).
                    if f.params.is_empty() {
                        for implicit in ["messages", "params_batch", "params"] {
                            f.params.push(implicit.to_string());
                        }
                    }
                }
                // A service object's entry given an event (`def call(event)`): the handler
                // stripe_event's `events.subscribe "invoice.paid", InvoicePaid.new` calls.
                ClassKind::Other
                    if entry
                        && f.params
                            .first()
                            .is_some_and(|p| has_any(p, &["event", "webhook"])) =>
                {
                    f.registrations
                        .push(format!("listener {}#{name}", ctx.name));
                }
                _ => {}
            }
        }
        let params_empty = n
            .child_by_field_name("parameters")
            .is_none_or(|p| named(p).is_empty());
        let before = match &ctx {
            Some(c) if c.kind == ClassKind::Controller && !c.private && !singleton => (c.before)
                .iter()
                .filter(|b| b.runs_before(&name))
                .cloned()
                .collect(),
            _ => Vec::new(),
        };
        self.locals.push(f.params.iter().cloned().collect());
        self.b.begin_function(f);
        // The action's `before_action` callbacks run first, on the same controller; what they
        // do is reported once, at the `before_action` line.
        for callback in before {
            let call = super::plain(vec![callback.name], callback.pos);
            self.b.emit(OpKind::Call(call), callback.pos);
        }
        if let Some(body) = n.child_by_field_name("body") {
            let key = params_empty && is_key_name(&name);
            if body.kind() == "body_statement" && key {
                self.key_reader(body, &name);
            } else if body.kind() == "body_statement" {
                self.body_returning(body);
            } else {
                // `def total = items.sum(&:price)`.
                let value = self.expr(body);
                if key {
                    let pos = self.b.pos(body);
                    self.b.assign(vec![format!("self.{name}")], value, pos);
                }
            }
        }
        self.b.end_function();
        self.locals.pop();
    }
}

impl<'s> Lower<'s> {
    /// A method's body whose last statement is a call: Ruby returns its value
    /// (`def find_payment(id) = Payment.find_by(ref: id)` written out), lowered as a return of
    /// it so that a caller's `payment = find_payment(id)` holds the row the finder loaded.
    fn body_returning(&mut self, body: Node<'_>) {
        let children: Vec<Node<'_>> = named(body)
            .into_iter()
            .filter(|c| c.kind() != "comment")
            .collect();
        match children.split_last() {
            Some((last, rest))
                if last.kind() == "call"
                    && !rest
                        .iter()
                        .any(|c| matches!(c.kind(), "rescue" | "ensure" | "else")) =>
            {
                for c in rest {
                    self.stmt(*c);
                }
                // Called for what it does as much as for its value (`grant.apply`): a call.
                let value = self.call_stmt(*last);
                let pos = self.b.pos(*last);
                self.b.emit(OpKind::Return(Some(value)), pos);
            }
            // `@redis_key ||= "lock:#{id}"`: a memoised reader returns what it keeps.
            Some((last, rest))
                if last.kind() == "operator_assignment"
                    && !rest
                        .iter()
                        .any(|c| matches!(c.kind(), "rescue" | "ensure" | "else")) =>
            {
                self.body(body);
                let kept = last.child_by_field_name("left").map(|l| self.targets(l));
                if let Some([target]) = kept.as_deref() {
                    let pos = self.b.pos(*last);
                    let path = target.split('.').map(str::to_string).collect();
                    self.b.emit(OpKind::Return(Some(Expr::Path(path))), pos);
                }
            }
            _ => self.body(body),
        }
    }

    /// `def idempotency_key = request.headers["Idempotency-Key"] || SecureRandom.uuid`: a
    /// reader named as a dedup or idempotency key is that key, so its value (the body's last
    /// expression) is assigned to `self.<name>` where the checks read keys.
    fn key_reader(&mut self, body: Node<'_>, name: &str) {
        let children = named(body);
        let Some((last, rest)) = children.split_last() else {
            return;
        };
        if children
            .iter()
            .any(|c| c.kind() == "rescue" || c.kind() == "ensure")
        {
            self.body(body);
            return;
        }
        for c in rest {
            self.stmt(*c);
        }
        let value = self.expr(*last);
        let pos = self.b.pos(*last);
        self.b.assign(vec![format!("self.{name}")], value, pos);
    }
}

/// Whether a controller or its action is named for a provider's deliveries
/// (`Webhooks::StripeController`, `PaymentsController#ipn`), not for OAuth sign-in callbacks.
fn webhook_controller(name: &str) -> bool {
    has_any(name, WEBHOOK_WORDS)
        || has_any(name, &["callback"]) && !has_any(name, &["omniauth", "oauth", "auth", "session"])
}

/// What a class is, from its name, superclass and `include`d mixins.
fn class_kind(name: &str, superclass: &str, mixins: &[String]) -> ClassKind {
    if name.ends_with("Controller") || superclass.contains("Controller") {
        return ClassKind::Controller;
    }
    if superclass.ends_with("Record") || superclass.ends_with("ActiveRecord::Base") {
        return ClassKind::Model;
    }
    let ancestry = format!("{name} {superclass} {}", mixins.join(" "));
    if has_any(&ancestry, JOB_ANCESTORS) && !has_any(superclass, &["record", "model"]) {
        ClassKind::Job
    } else {
        ClassKind::Other
    }
}
