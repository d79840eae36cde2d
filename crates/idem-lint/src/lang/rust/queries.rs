//! Query builders lowered to the statement they send, as one call on the executor they run on
//! (`tx.execute("INSERT …", args…)`), so the checks read them as they read SQL in any
//! language and the executor's name (`tx`, `txn`, `conn`) places them in a transaction:
//!
//! - sqlx: `sqlx::query!("…", a)`, `query("…").bind(a)`, `query_as`, `query_scalar`, run by
//!   `.execute(&mut *tx)`, `.fetch_one(&pool)`, `.fetch_optional(…)`, `.fetch_all(…)`;
//! - diesel: `insert_into(t).values(…)` (`.on_conflict_do_nothing()`, `.on_conflict(c).
//!   do_update()`), `diesel::update(t.find(id)).set(col.eq(col + 1))`, `delete(…)`, and
//!   reads `t.filter(c.eq(v)).first(conn)`;
//! - sea-orm: `Entity::find().filter(Column::X.eq(v)).one(db)`, `Entity::find_by_id(id)`,
//!   `ActiveModel { … }.insert(db)`, `Entity::insert(am).on_conflict(…).exec(db)`,
//!   `am.update(db)`, `Entity::update_many().col_expr(C, Expr::col(C).add(n)).exec(db)`.

use super::super::builder::call_pos;
use super::chain::{Link, strip};
use super::statements::{Chain, diesel_sql, entity_sql, model_sql, select_sql, sqlx_sql};
use super::{Lower, kids};
use crate::ir::{Call, Expr, OpKind};

/// Methods that run a built query on an executor given as their argument.
const RUNS: &[&str] = &[
    "execute",
    "fetch_one",
    "fetch_optional",
    "fetch_all",
    "fetch",
    "fetch_many",
    "execute_many",
    "get_result",
    "get_results",
    "first",
    "load",
    "one",
    "all",
    "exec",
    "exec_with_returning",
    "exec_without_returning",
    "insert",
    "update",
    "save",
    "delete",
    "count",
];

const SQLX_FNS: &[&str] = &[
    "query",
    "query_as",
    "query_scalar",
    "query_with",
    "query_as_with",
    "query_scalar_with",
    "query_unchecked",
    "query_as_unchecked",
    "query_scalar_unchecked",
];

/// Which builder a chain is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlx,
    DieselWrite,
    DieselSelect,
    /// sea-orm `Entity::find()`, `Entity::insert(…)`, `Entity::update_many()`.
    Entity,
    /// diesel or sea-orm `t.filter(…)` / `t.find(id)` run by `.first(conn)`, `.one(db)`.
    TableRead,
    /// `am.insert(db)` on an ActiveModel local.
    ModelWrite,
}

/// The kind of builder a chain is (from its first link's path and where it is run), if any.
fn kind(lower: &Lower<'_>, first: &Link<'_>, root: &[String], runs: bool) -> Option<Kind> {
    let name = root.last().map(String::as_str).unwrap_or("");
    let plain = |krate: &str| root.len() == 1 || root[0] == krate;
    let macro_query = first.callee.kind() == "macro_invocation" && name.starts_with("query");
    if (SQLX_FNS.contains(&name) || macro_query) && plain("sqlx") {
        return Some(Kind::Sqlx);
    }
    if matches!(
        name,
        "insert_into" | "insert_or_ignore_into" | "replace_into"
    ) || matches!(name, "update" | "delete") && plain("diesel")
    {
        return Some(Kind::DieselWrite);
    }
    let entity = root.len() >= 2
        && root[root.len() - 2].starts_with(char::is_uppercase)
        && matches!(
            name,
            "find"
                | "find_by_id"
                | "insert"
                | "insert_many"
                | "update_many"
                | "update"
                | "delete_many"
                | "delete_by_id"
        );
    if entity {
        return Some(Kind::Entity);
    }
    if runs && matches!(name, "filter" | "find") && root.len() >= 2 {
        return Some(Kind::TableRead);
    }
    if runs && name == "select" && plain("diesel") {
        return Some(Kind::DieselSelect);
    }
    let model = root.len() == 2
        && matches!(name, "insert" | "update" | "save")
        && first.args.is_some_and(|a| kids(a).len() == 1)
        && lower.active_model(&root[0]).is_some();
    model.then_some(Kind::ModelWrite)
}

/// Lowers a chain that is a query builder's; `None` when it is not one.
pub(super) fn lower_chain(lower: &mut Lower<'_>, links: &[Link<'_>]) -> Option<Expr> {
    let first = links.first()?;
    let root = static_path(lower, first);
    let method_names: Vec<String> = links
        .iter()
        .skip(1)
        .map(|l| {
            l.method
                .map(|m| lower.b.text(m).to_string())
                .unwrap_or_default()
        })
        .collect();
    let runs_at = method_names
        .iter()
        .rposition(|m| RUNS.contains(&m.as_str()))
        .map(|i| i + 1);
    let kind = kind(lower, first, &root, runs_at.is_some())?;
    let end = if kind == Kind::ModelWrite {
        0
    } else {
        runs_at.unwrap_or(links.len() - 1)
    };
    let chain = gather(lower, links, root, &method_names, end);
    let text = |r: Option<(String, Vec<Expr>)>| r.map(|(s, v)| (Expr::Str(s), v));
    let (sql, values) = match kind {
        Kind::Sqlx => sqlx_sql(lower, first, &chain),
        Kind::DieselWrite => text(diesel_sql(lower, &chain)),
        Kind::ModelWrite => text(model_sql(lower, &chain)),
        Kind::DieselSelect => text(select_sql(&chain)),
        Kind::Entity | Kind::TableRead => text(entity_sql(&chain)),
    }?;
    let executor = if kind == Kind::ModelWrite {
        chain.args[0].first().and_then(executor_path)
    } else {
        chain.args[end]
            .first()
            .filter(|_| end > 0)
            .and_then(executor_path)
    };
    let mut callee =
        executor.unwrap_or_else(|| vec![if kind == Kind::Sqlx { "sqlx" } else { "query" }.into()]);
    let run = &chain.methods[end];
    callee.push(if run.is_empty() {
        "execute".into()
    } else {
        run.clone()
    });
    let mut args = vec![sql];
    args.extend(values);
    let pos = call_pos(&lower.b, first.node, first.method);
    let call = Call {
        callee,
        receiver: None,
        args,
        kwargs: Vec::new(),
        is_new: false,
        pos,
    };
    lower.b.emit(OpKind::Call(call.clone()), pos);
    Some(after_run(lower, &links[end + 1..], call))
}

/// The links' method names and lowered arguments up to the run (`end`).
fn gather(
    lower: &mut Lower<'_>,
    links: &[Link<'_>],
    root: Vec<String>,
    methods: &[String],
    end: usize,
) -> Chain {
    let mut chain = Chain {
        methods: vec![root.last().cloned().unwrap_or_default()],
        args: Vec::new(),
        root,
    };
    chain.methods.extend(methods.iter().take(end).cloned());
    for link in &links[..=end] {
        let mut scratch = Call {
            callee: Vec::new(),
            receiver: None,
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos: lower.b.pos(link.node),
        };
        lower.link_args(link, &mut scratch);
        chain.args.push(scratch.args);
    }
    chain
}

/// What follows the run (`.rows_affected()`, `.optional()`): calls on its result, at the
/// run's position, so `let n = ….execute(&mut *tx).await?.rows_affected()` holds the run's
/// outcome.
fn after_run(lower: &mut Lower<'_>, links: &[Link<'_>], run: Call) -> Expr {
    let mut prev = run;
    for link in links {
        let pos = prev.pos;
        let mut callee = prev.callee.clone();
        callee.push(
            link.method
                .map(|m| lower.b.text(m).to_string())
                .unwrap_or_default(),
        );
        let mut next = Call {
            callee,
            receiver: Some(Box::new(prev)),
            args: Vec::new(),
            kwargs: Vec::new(),
            is_new: false,
            pos,
        };
        lower.link_args(link, &mut next);
        lower.b.emit(OpKind::Call(next.clone()), pos);
        prev = next;
    }
    Expr::Call(Box::new(prev))
}

/// The executor a query runs on: `&mut *tx` (a path), `tx.as_mut()`, `self.pool.as_ref()`
/// (the path the conversion is called on).
fn executor_path(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::Path(p) => Some(p.clone()),
        Expr::Call(c)
            if c.callee.len() > 1
                && matches!(
                    c.method().as_str(),
                    "as_mut"
                        | "as_ref"
                        | "deref_mut"
                        | "deref"
                        | "get_mut"
                        | "borrow_mut"
                        | "clone"
                ) =>
        {
            Some(c.callee[..c.callee.len() - 1].to_vec())
        }
        _ => None,
    }
}

/// redis-rs `redis::cmd("SET").arg(&key).arg(1).arg("NX").query_async(&mut conn)` as the
/// command it sends: `redis.set(key, 1, "NX")`.
pub(super) fn redis_command(lower: &mut Lower<'_>, links: &[Link<'_>]) -> Option<Expr> {
    let first = links.first()?;
    let root = static_path(lower, first);
    if root.last().map(String::as_str) != Some("cmd") || !(root.len() == 1 || root[0] == "redis") {
        return None;
    }
    let Some(Expr::Str(command)) = lower.args_call(first).args.first().cloned() else {
        return None;
    };
    let mut args = Vec::new();
    for link in &links[1..] {
        let c = lower.args_call(link);
        let m = link.method.map(|m| lower.b.text(m)).unwrap_or("");
        if m == "arg" {
            args.extend(c.args);
        }
    }
    let pos = call_pos(&lower.b, first.node, first.method);
    let call = Call {
        callee: vec!["redis".into(), command.to_lowercase()],
        receiver: None,
        args,
        kwargs: Vec::new(),
        is_new: false,
        pos,
    };
    lower.b.emit(OpKind::Call(call.clone()), pos);
    Some(Expr::Call(Box::new(call)))
}

/// The path a chain's first link calls when it is a plain path or macro (no side effects).
fn static_path(lower: &Lower<'_>, link: &Link<'_>) -> Vec<String> {
    let c = link.callee;
    match c.kind() {
        "macro_invocation" => c
            .child_by_field_name("macro")
            .map(|m| lower.path(m))
            .unwrap_or_default(),
        "identifier" | "scoped_identifier" => lower.path(c),
        "field_expression" => {
            let value = c.child_by_field_name("value").map(strip);
            let field = link.method.map(|m| lower.b.text(m).to_string());
            match (value, field) {
                (Some(v), Some(f))
                    if matches!(v.kind(), "identifier" | "scoped_identifier" | "self") =>
                {
                    let mut p = lower.path(v);
                    p.push(f);
                    p
                }
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}
