//! Calls and their blocks. `Foo.new(…)` is a construction of `Foo`; `raise` a throw; a block
//! runs inline unless its call registers it (a subscription, a consumer loop, a route) or
//! runs it later (a thread). ActiveRecord's compound methods are lowered as what they do:
//! `find_or_create_by(k)` is a look-up of `k` then, when missing, a create;
//! `update_all("n = n + ?", x)` is the UPDATE it sends.

use tree_sitter::Node;

use super::vocab;
use super::{Lower, plain};
use crate::ir::{Call, Expr, Function, OpKind};
use crate::lang::builder::{call_pos, named};
use crate::words::has_any;

impl<'s> Lower<'s> {
    /// A call node as an expression: the call, or what a throw or a desugared method leaves.
    pub(super) fn call_expr(&mut self, n: Node<'_>) -> Expr {
        if let Some(e) = self.presence(n) {
            return e;
        }
        // `HANDLERS = { "charge.refunded" => ChargeRefunded }.freeze`: `freeze` returns its
        // receiver, the table itself.
        if let Some(r) = n.child_by_field_name("receiver")
            && n.child_by_field_name("method")
                .is_some_and(|m| self.b.text(m) == "freeze")
            && n.child_by_field_name("arguments").is_none()
            && matches!(r.kind(), "hash" | "array" | "string")
        {
            return self.expr(r);
        }
        // `charge = event.data.object`: a value read through attributes, not an effect.
        if let Some(path) = self.attribute_path(n)
            && path.len() > 1
            && !path.last().is_some_and(|m| vocab::acts(m))
        {
            return Expr::Path(path);
        }
        self.call_stmt(n)
    }

    /// A call whose value is not used: whatever it names, it is called for what it does.
    pub(super) fn call_stmt(&mut self, n: Node<'_>) -> Expr {
        match self.call(n) {
            Some(c) => Expr::Call(Box::new(c)),
            None => Expr::Other(Vec::new()),
        }
    }

    /// `event.data.object`, `gateway.payment_method` as the receiver of a call: reads of
    /// attributes of a local (calls without arguments, parentheses or a block), kept as one
    /// member path as other languages' `a.b.c` is. A chain from a constant
    /// (`Order.active.find`: a scope) or through a call with arguments stays calls.
    fn attribute_path(&self, n: Node<'_>) -> Option<Vec<String>> {
        match n.kind() {
            "identifier" => Some(vec![self.b.text(n).to_string()]),
            "self" => Some(vec!["self".to_string()]),
            // Rails' request-wide attributes and the framework's singletons, not models.
            "constant" if matches!(self.b.text(n), "Current" | "Rails") => {
                Some(vec![self.b.text(n).to_string()])
            }
            "instance_variable" => Some(vec![
                "self".to_string(),
                self.b.text(n).trim_start_matches('@').to_string(),
            ]),
            "call" => {
                let m = n.child_by_field_name("method")?;
                let name = self.b.text(m);
                let bare = n.child_by_field_name("arguments").is_none()
                    && n.child_by_field_name("block").is_none()
                    && m.kind() == "identifier"
                    && !name.ends_with(['!', '?'])
                    && name != "new";
                if !bare {
                    return None;
                }
                let mut path = self.attribute_path(n.child_by_field_name("receiver")?)?;
                path.push(name.to_string());
                Some(path)
            }
            _ => None,
        }
    }

    /// `payment.present?` is `payment`, `payment.nil?`/`blank?` is `!payment`: a test of a
    /// local, not a call of anything.
    fn presence(&mut self, n: Node<'_>) -> Option<Expr> {
        let m = n.child_by_field_name("method")?;
        let r = n.child_by_field_name("receiver")?;
        if n.child_by_field_name("arguments").is_some()
            || n.child_by_field_name("block").is_some()
            || !matches!(r.kind(), "identifier" | "instance_variable")
        {
            return None;
        }
        let positive = match self.b.text(m) {
            "present?" | "any?" => true,
            "nil?" | "blank?" | "empty?" | "none?" => false,
            _ => return None,
        };
        let value = self.expr(r);
        Some(if positive {
            value
        } else {
            Expr::Not(Box::new(value))
        })
    }

    /// Lowers a call and emits it; `None` for `raise` (emitted as a throw) and for a call
    /// nested too deep to lower (each call, like each statement, counts against the depth
    /// limit: a chain of blocks nests calls and statements in turn).
    fn call(&mut self, n: Node<'_>) -> Option<Call> {
        if !self.b.enter() {
            return None;
        }
        let call = self.call_node(n);
        self.b.leave();
        call
    }

    /// [`call`](Self::call) within the depth limit.
    fn call_node(&mut self, n: Node<'_>) -> Option<Call> {
        let method_node = n.child_by_field_name("method");
        let raw = method_node
            .map(|m| self.b.text(m).to_string())
            .unwrap_or_else(|| "call".to_string());
        let receiver_node = n.child_by_field_name("receiver");
        // `Karafka.producer` on one line, `.produce_sync(…)` on the next: the call is where
        // its statement starts, not where the chain was broken.
        let pos = match (receiver_node, method_node) {
            (Some(r), Some(m))
                if plain_chain(r) && m.start_position().row != n.start_position().row =>
            {
                self.b.pos(n)
            }
            _ => call_pos(&self.b, n, method_node),
        };
        let attribute = receiver_node.and_then(|r| self.attribute_path(r));
        let (mut callee, receiver) = match receiver_node {
            _ if attribute.is_some() => (attribute.unwrap_or_default(), None),
            Some(r) if r.kind() == "call" => match self.call(r) {
                // `Service.new(event).call`: a method of Service, found by call following.
                Some(inner) if inner.is_new => (inner.callee.clone(), None),
                Some(inner) => (inner.callee.clone(), Some(Box::new(inner))),
                None => (vec!["?".to_string()], None),
            },
            Some(r) => match self.expr(r) {
                Expr::Path(segs) => (segs, None),
                Expr::Call(inner) => (inner.callee.clone(), Some(inner)),
                _ => (vec!["?".to_string()], None),
            },
            None => (Vec::new(), None),
        };
        let on_cache = callee.iter().any(|s| has_any(s, &["cache"]));
        // `Order.where(k).any?` asks whether a row exists.
        let method =
            if vocab::asks_existence(&raw) && receiver_node.is_some_and(|r| r.kind() == "call") {
                "exists".to_string()
            } else if vocab::mail_delivered_now(&raw, &callee) {
                "deliver_now".to_string()
            } else {
                vocab::canonical(&raw, on_cache)
            };
        let mut call = plain(Vec::new(), pos);
        call.receiver = receiver;
        if let Some(args) = n.child_by_field_name("arguments") {
            self.args(args, &mut call);
        }
        let method = if vocab::producer_class_called(&raw, &callee, call.option("topic").is_some())
        {
            "produce_sync".to_string()
        } else {
            method
        };
        if receiver_node.is_none() && matches!(raw.as_str(), "raise" | "fail") {
            let value = call.args.first().cloned();
            self.b.emit(OpKind::Throw(value), pos);
            return None;
        }
        if receiver_node.is_none() {
            self.visibility(&raw);
        }
        self.own_row(&raw, receiver_node.is_none(), &mut callee);
        // `def self.call(*args) = new(*args).call`: a bare `new` in a class builds that class.
        if method == "new"
            && callee.is_empty()
            && let Some(class) = self.classes.last()
        {
            callee.push(
                class
                    .name
                    .rsplit("::")
                    .next()
                    .unwrap_or(&class.name)
                    .to_string(),
            );
        }
        // `Order.new(attrs)` builds an Order, as `new Order(attrs)` does.
        if method == "new" && !callee.is_empty() {
            call.is_new = true;
        } else {
            callee.push(method.clone());
        }
        call.callee = callee;
        self.ruby_options(&raw, &mut call);
        let block = n.child_by_field_name("block");
        if let Some(done) = self.active_record(&raw, &mut call, block) {
            return Some(done);
        }
        // `results = Model.transaction do … end` holds the block's value once the transaction
        // has committed, not a transaction left open: marked as a call given its callback.
        if block.is_some() && vocab::opens_transaction(&method) {
            call.args.push(Expr::Other(Vec::new()));
        }
        self.b.emit(OpKind::Call(call.clone()), pos);
        if call.is_new {
            self.constructor(&call);
        }
        if let Some(block) = block {
            self.block(block, &call);
        }
        Some(call)
    }

    /// The arguments: `key: v` pairs as keyword arguments, splats as their value.
    fn args(&mut self, args: Node<'_>, call: &mut Call) {
        for a in named(args) {
            match a.kind() {
                "pair" => {
                    let kv = self.pair(a);
                    call.kwargs.push(kv);
                }
                "comment" => {}
                // `&:name` or `&block`.
                "block_argument" => {}
                "splat_argument" | "hash_splat_argument" => {
                    let v = named(a)
                        .into_iter()
                        .next()
                        .map_or(Expr::Other(Vec::new()), |c| self.expr(c));
                    call.args.push(v);
                }
                _ => {
                    let v = self.expr(a);
                    call.args.push(v);
                }
            }
        }
    }

    /// Ruby clients' options in the analysis's words: a Rails cache `write(…, unless_exist:
    /// true)` is a SET NX; a status symbol (`head :conflict`, `status: :ok`) names its code;
    /// a Bunny `subscribe` without `manual_ack: true` acknowledges on delivery.
    fn ruby_options(&self, raw: &str, call: &mut Call) {
        let truthy = |e: &Expr| matches!(e, Expr::Path(p) if p.len() == 1 && p[0] == "true");
        if call.option("unless_exist").is_some_and(truthy) {
            call.kwargs
                .push(("nx".to_string(), Expr::Path(vec!["true".into()])));
        }
        let as_status = |e: &mut Expr| {
            if let Expr::Str(s) = e {
                *e = Expr::Path(vec![s.clone()]);
            }
        };
        if matches!(raw, "head" | "render" | "redirect_to") {
            if raw == "head" {
                call.args.iter_mut().take(1).for_each(as_status);
            }
            for (k, v) in &mut call.kwargs {
                if k == "status" {
                    as_status(v);
                }
            }
        }
        let queue_like = call
            .receiver_words()
            .iter()
            .any(|w| has_any(w, &["queue", "channel", "bunny"]) || w == "q");
        if raw == "subscribe" && queue_like {
            let manual = call.option("manual_ack").is_some_and(truthy);
            if !manual {
                call.kwargs
                    .push(("auto_ack".to_string(), Expr::Path(vec!["true".into()])));
            }
        }
        // Sneakers `from_queue "q", ack: false`.
        if raw == "from_queue"
            && matches!(call.option("ack"), Some(Expr::Path(p)) if p.len() == 1 && p[0] == "false")
        {
            call.kwargs
                .push(("auto_ack".to_string(), Expr::Path(vec!["true".into()])));
        }
    }

    /// `Service.new(event)` runs `Service#initialize(event)`: emitted as a call of
    /// `Service#new` (the name `initialize` is lowered under), so call following reads what
    /// the constructor keeps (`@event = event`).
    fn constructor(&mut self, call: &Call) {
        let Some(class) = call
            .callee
            .last()
            .filter(|c| c.chars().next().is_some_and(char::is_uppercase))
        else {
            return;
        };
        let mut ctor = call.clone();
        ctor.is_new = false;
        ctor.callee.push(format!("{class}#new"));
        self.b.emit(OpKind::Call(ctor), call.pos);
    }

    /// Where a block runs: in a transaction, after the commit, later, as a callback of its
    /// own, or inline.
    fn block(&mut self, block: Node<'_>, call: &Call) {
        let m = call.callee.last().map(String::as_str).unwrap_or("");
        if vocab::opens_transaction(m) {
            let outermost = self.b.open_tx().is_none();
            self.b.push_tx();
            // ActiveRecord's `transaction do … end` inside one already open (the caller's)
            // joins it unless given `requires_new: true`: the method's outermost block commits
            // with its caller's transaction.
            if outermost && call.option("requires_new").is_none() {
                let tx = self.b.open_tx();
                self.b.set_joins_caller_tx(tx);
            }
            self.inline_block(block, call);
            self.b.pop_tx();
        } else if vocab::runs_after_commit(m) {
            let saved = self.b.suspend_tx();
            self.inline_block(block, call);
            self.b.resume_tx(saved);
        } else if vocab::runs_detached(call) {
            self.b.push_detached();
            self.inline_block(block, call);
            self.b.pop_detached();
        } else if vocab::REGISTERS_BLOCK.contains(&m) && self.registers(call) {
            self.callback(block, call);
        } else {
            self.inline_block(block, call);
        }
    }

    /// Whether a block-taking call registers its block: a route verb written bare (Sinatra),
    /// or a subscription/consumer method on a receiver (`queue.subscribe`,
    /// `consumer.each_message`).
    fn registers(&self, call: &Call) -> bool {
        let m = call.method();
        if vocab::ROUTE_VERBS.contains(&m.as_str()) {
            return call.callee.len() == 1
                || has_any(&call.receiver_words().join("."), &["app", "router", "r"]);
        }
        !matches!(m.as_str(), "task" | "define_method") || call.callee.len() == 1
    }

    /// The block's parameters bound to what the call yields — an iterator's elements come
    /// from its receiver (`messages.each do |message|`), anything else's from the call
    /// (`Sidekiq.redis do |conn|` yields a Redis connection) — then its body.
    pub(super) fn inline_block(&mut self, block: Node<'_>, call: &Call) {
        if let Some(p) = block.child_by_field_name("parameters") {
            let targets = self.targets(p);
            self.bind(&targets);
            if !targets.is_empty() {
                let pos = self.b.pos(p);
                let value = if vocab::iterates(&call.method()) {
                    Expr::Path(call.receiver_words())
                } else {
                    Expr::Call(Box::new(call.clone()))
                };
                self.b.assign(targets, value, pos);
            }
        }
        if let Some(body) = block.child_by_field_name("body") {
            self.body(body);
        }
    }

    /// A block registered as a callback: a function of its own, named by the call.
    fn callback(&mut self, block: Node<'_>, call: &Call) {
        let mut f = Function::new(String::new());
        f.pos = self.b.pos(block);
        f.registered_at = Some(call.pos);
        let mut reg = call.name();
        if call.callee.len() == 1 && vocab::ROUTE_VERBS.contains(&call.method().as_str()) {
            reg = format!("sinatra.{reg}");
        }
        // A Rake task is run by hand or by cron, not per delivery.
        let rake = call.method() == "task";
        if rake {
            reg = "rake".to_string();
        }
        for a in call.args.iter().filter(|_| !rake) {
            if let Some(s) = a.string_text() {
                reg.push(' ');
                reg.push_str(&s);
            }
        }
        f.registrations.push(reg);
        if let Some(p) = block.child_by_field_name("parameters") {
            f.params = self.targets(p);
        }
        if call.method() == "post" || call.method() == "put" {
            f.params
                .extend(["params".to_string(), "request".to_string()]);
        }
        self.b.begin_function(f);
        if let Some(body) = block.child_by_field_name("body") {
            self.body(body);
        }
        self.b.end_function();
    }

    /// `->(event) { … }` / `lambda do |event| … end`: a function of its own.
    pub(super) fn lambda(&mut self, n: Node<'_>) {
        let mut f = Function::new(String::new());
        f.pos = self.b.pos(n);
        if let Some(p) = n.child_by_field_name("parameters") {
            f.params = self.targets(p);
        }
        self.enter_locals(&f.params);
        self.b.begin_function(f);
        if let Some(body) = n.child_by_field_name("body")
            && let Some(inner) = body.child_by_field_name("body")
        {
            self.body(inner);
        }
        self.b.end_function();
        self.locals.pop();
    }

    /// A block's locals: its parameters and those of the code around it (a closure).
    fn enter_locals(&mut self, params: &[String]) {
        let mut l = self.locals.last().cloned().unwrap_or_default();
        l.extend(params.iter().cloned());
        self.locals.push(l);
    }
}

/// A receiver written as names only — constants, locals, `self`, `@x`, `Foo::Bar` and calls
/// without arguments or a block on them (`Karafka.producer`): nothing in it does anything.
fn plain_chain(n: Node<'_>) -> bool {
    match n.kind() {
        "identifier" | "constant" | "self" | "instance_variable" | "scope_resolution" => true,
        "call" => {
            n.child_by_field_name("arguments").is_none()
                && n.child_by_field_name("block").is_none()
                && n.child_by_field_name("receiver").is_some_and(plain_chain)
        }
        _ => false,
    }
}
