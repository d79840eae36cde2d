//! ActiveRecord's compound methods lowered as what they send: `find_or_create_by(k)` is a
//! look-up of `k` then, in the branch where nothing was found, a create; `update_all("n = n +
//! ?", x)` the UPDATE statement; `assign_attributes(h)` the fields set one by one;
//! activerecord-import's `import` an insert (an upsert with `on_duplicate_key_*`); a bare
//! `update!` in a model a write of the model's row.

use tree_sitter::Node;

use super::{ClassKind, Lower, vocab};
use crate::ir::{Call, Expr, OpKind};

impl<'s> Lower<'s> {
    /// In a model, a bare `update!(…)` or `with_lock` is the model's own row: the model's name
    /// is put before the method. So is a bare `increment :failure_count` (the attribute
    /// raised in memory, for the `save!` that follows).
    pub(super) fn own_row(&self, raw: &str, bare: bool, callee: &mut Vec<String>) {
        if bare
            && (vocab::persists_self(raw)
                || matches!(raw, "increment" | "decrement")
                || queries_model(raw))
            && let Some(class) = self.classes.last().filter(|c| c.kind == ClassKind::Model)
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
    }

    /// Lowers the ActiveRecord idioms of the call (emitting what they do); `Some` with the
    /// call's value when the idiom replaces the call itself.
    pub(super) fn active_record(
        &mut self,
        raw: &str,
        call: &mut Call,
        block: Option<Node<'_>>,
    ) -> Option<Call> {
        // activerecord-import: `Model.import(rows)` inserts; with `on_duplicate_key_ignore`
        // or `on_duplicate_key_update` it is an upsert.
        if matches!(raw, "import" | "bulk_import" | "import!")
            && call.callee.len() == 2
            && call.callee[0]
                .chars()
                .next()
                .is_some_and(char::is_uppercase)
        {
            let upsert = [
                "on_duplicate_key_ignore",
                "on_duplicate_key_update",
                "ignore",
            ]
            .iter()
            .any(|k| call.option(k).is_some());
            call.callee[1] = if upsert { "upsert" } else { "insert_many" }.to_string();
        }
        if vocab::finds_or_creates(raw) {
            return Some(self.find_or_create(call.clone(), block));
        }
        // `find_or_initialize_by(k)`: a look-up of `k`, else a new row of `k` (saved later).
        if matches!(raw, "find_or_initialize_by" | "first_or_initialize") {
            let mut lookup = call.clone();
            if let Some(m) = lookup.callee.last_mut() {
                *m = "find_by".to_string();
            }
            self.b.emit(OpKind::Call(lookup), call.pos);
            call.callee.pop();
            call.is_new = true;
            if let Some(block) = block {
                self.inline_block(block, call);
            }
            return Some(call.clone());
        }
        if raw == "update_all" {
            update_all_sql(call);
        }
        if matches!(raw, "assign_attributes" | "attributes=") {
            self.assign_attributes(call);
        }
        None
    }

    /// `Model.find_or_create_by(k) { |m| … }`: a look-up of `k`, then a create of `k` in the
    /// branch where it was missing (with the block run there).
    fn find_or_create(&mut self, call: Call, block: Option<Node<'_>>) -> Call {
        let mut lookup = call.clone();
        let mut create = call;
        if let Some(m) = lookup.callee.last_mut() {
            *m = "find_by".to_string();
        }
        if let Some(m) = create.callee.last_mut() {
            *m = "create".to_string();
        }
        self.b.emit(OpKind::Call(lookup.clone()), lookup.pos);
        self.b.push_cond(
            Expr::Not(Box::new(Expr::Call(Box::new(lookup)))),
            false,
            false,
        );
        if let Some(block) = block {
            self.inline_block(block, &create);
        }
        self.b.emit(OpKind::Call(create.clone()), create.pos);
        self.b.pop_cond();
        create
    }

    /// `sub.assign_attributes(status: s, updated_at: t)`: the fields set one by one, as
    /// `sub.status = s` would, so the `save!` after it writes them.
    fn assign_attributes(&mut self, call: &Call) {
        let [root, _] = call.callee.as_slice() else {
            return;
        };
        let fields: Vec<(String, Expr)> = match call.args.first() {
            Some(Expr::Object { fields, .. }) => fields.clone(),
            _ => call.kwargs.clone(),
        };
        for (k, v) in fields {
            self.b.assign(vec![format!("{root}.{k}")], v, call.pos);
        }
    }
}

/// ActiveRecord's class-level queries and creates, written bare in a model's class methods
/// (`class << self; def sync!(obj) = find_by(stripe_id: obj.id) || create!(…)`): the model's.
fn queries_model(method: &str) -> bool {
    vocab::finds_or_creates(method)
        || matches!(
            method,
            "find"
                | "find_by"
                | "find_by!"
                | "where"
                | "exists?"
                | "create"
                | "create!"
                | "insert_all"
                | "upsert"
                | "upsert_all"
                | "find_or_initialize_by"
                | "update_all"
                | "update_counters"
                | "increment_counter"
                | "decrement_counter"
                | "lock"
        )
}

/// `Account.where(id: x).update_all("balance = balance + ?", amount)`: the UPDATE statement
/// it sends, so SQL analysis reads its SET clause (a hash argument stays keyword data).
fn update_all_sql(call: &mut Call) {
    let fragment = match call.args.first() {
        Some(Expr::List(items)) => items.first().and_then(Expr::string_text),
        Some(e) => e.string_text(),
        None => None,
    };
    let Some(fragment) = fragment else { return };
    if fragment
        .trim_start()
        .to_ascii_uppercase()
        .starts_with("UPDATE")
    {
        return;
    }
    let mut inner = &*call;
    while let Some(r) = inner.receiver.as_deref() {
        inner = r;
    }
    let model = inner
        .callee
        .iter()
        .find(|s| s.chars().next().is_some_and(char::is_uppercase))
        .or_else(|| inner.callee.iter().rev().nth(1))
        .cloned()
        .unwrap_or_else(|| "?".to_string());
    call.args[0] = Expr::Str(format!("UPDATE {model} SET {fragment}"));
}
