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
use super::{Lower, kids, tokens};
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

/// A chain read so far: its links' method names and lowered arguments.
struct Chain {
    methods: Vec<String>,
    args: Vec<Vec<Expr>>,
    root: Vec<String>,
}

impl Chain {
    fn find(&self, m: &str) -> Option<usize> {
        self.methods.iter().position(|x| x == m)
    }
    fn has(&self, m: &str) -> bool {
        self.find(m).is_some()
    }
}

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
    let mut scratch = Call {
        callee: Vec::new(),
        receiver: None,
        args: Vec::new(),
        kwargs: Vec::new(),
        is_new: false,
        pos: lower.b.pos(first.node),
    };
    lower.link_args(first, &mut scratch);
    let Some(Expr::Str(command)) = scratch.args.first().cloned() else {
        return None;
    };
    let mut args = Vec::new();
    for link in &links[1..] {
        let mut c = scratch.clone();
        c.args.clear();
        lower.link_args(link, &mut c);
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

/// sqlx: the literal SQL (a macro's first string, or the function's first argument) and the
/// values bound (`query!`'s arguments after it, then each `.bind(…)`).
fn sqlx_sql(lower: &Lower<'_>, first: &Link<'_>, chain: &Chain) -> Option<(Expr, Vec<Expr>)> {
    let own = chain.args.first().cloned().unwrap_or_default();
    let at = own
        .iter()
        .position(|a| matches!(a, Expr::Str(_) | Expr::Template(_)))
        .or_else(|| (!own.is_empty()).then_some(0))?;
    let sql = match &own[at] {
        Expr::Path(_) | Expr::Str(_) | Expr::Template(_) => own[at].clone(),
        _ => Expr::Str(
            first
                .args
                .and_then(|t| tokens::first_string(lower, t))
                .unwrap_or_default(),
        ),
    };
    let mut values: Vec<Expr> = own[at + 1..].to_vec();
    for (i, m) in chain.methods.iter().enumerate() {
        if m == "bind" {
            values.extend(chain.args[i].iter().cloned());
        }
    }
    Some((sql, values))
}

/// The table named by a diesel or sea-orm target expression: `processed_events::table`,
/// `processed_events` (dsl), `accounts.find(id)`, `processed_event::Entity`.
fn table_of(e: &Expr) -> Option<String> {
    match e {
        Expr::Path(p) => {
            let segs: Vec<&String> = p
                .iter()
                .filter(|s| !matches!(s.as_str(), "table" | "dsl" | "schema" | "Entity"))
                .collect();
            segs.last().map(|s| s.to_string())
        }
        Expr::Call(c) => {
            let mut inner: &Call = c;
            while let Some(r) = inner.receiver.as_deref() {
                inner = r;
            }
            let n = inner.callee.len();
            table_of(&Expr::Path(inner.callee[..n.saturating_sub(1)].to_vec()))
        }
        _ => None,
    }
}

/// Columns compared in filters (`c.eq(v)`, `Column::EventId.eq(v)`, `find(id)`; `c.lt(v)` as
/// `c <`) anywhere in the expressions.
fn filter_columns(exprs: &[Expr], out: &mut Vec<String>) {
    for e in exprs {
        e.walk(&mut |x| {
            if let Expr::Call(c) = x {
                let m = c.method();
                let column = || c.callee[c.callee.len() - 2].clone();
                let compare = match m.as_str() {
                    "lt" => Some("<"),
                    "le" | "lte" => Some("<="),
                    "gt" => Some(">"),
                    "ge" | "gte" => Some(">="),
                    _ => None,
                };
                if matches!(m.as_str(), "eq" | "eq_any" | "is_in") && c.callee.len() >= 2 {
                    out.push(column());
                } else if let Some(op) = compare.filter(|_| c.callee.len() >= 2) {
                    // `updated_at.lt(event.at)`: an ordering predicate, kept as written.
                    out.push(format!("{} {op}", column()));
                } else if matches!(m.as_str(), "find" | "find_by_id")
                    && !out.iter().any(|o| o == "id")
                {
                    out.push("id".into());
                }
            }
        });
    }
}

/// The `SET` of diesel's `.set(…)`: `col.eq(value)` pairs (a tuple of them), or a changeset
/// struct's fields.
fn set_pairs(lower: &Lower<'_>, args: &[Expr]) -> Vec<(String, Expr)> {
    let mut out = Vec::new();
    for a in args {
        match a {
            Expr::Call(c) if c.method() == "eq" && c.callee.len() >= 2 => out.push((
                c.callee[c.callee.len() - 2].clone(),
                c.args.first().cloned().unwrap_or(Expr::Other(Vec::new())),
            )),
            Expr::List(items) => out.extend(set_pairs(lower, items)),
            Expr::Object { fields, .. } => out.extend(
                fields
                    .iter()
                    .filter(|(k, _)| k != "...")
                    .map(|(k, v)| (k.clone(), v.clone())),
            ),
            Expr::Path(p) if p.len() == 1 => {
                if let Some(Expr::Object { fields, .. }) = lower.struct_of(&p[0]) {
                    out.extend(
                        fields
                            .iter()
                            .filter(|(k, _)| k != "...")
                            .map(|(k, v)| (k.clone(), v.clone())),
                    );
                }
            }
            _ => {}
        }
    }
    out
}

/// `col = col + $n` when the value refers to its own column, else `col = $n`.
fn assignment(column: &str, value: &Expr, n: usize) -> String {
    let own = |e: &Expr| match e {
        Expr::Path(p) => p.last().is_some_and(|s| s == column),
        Expr::Call(c) => {
            // sea-orm `Expr::col(Column::Balance)`.
            c.args.iter().any(|a| matches!(a, Expr::Path(p) if p.last().is_some_and(|s| crate::words::norm(s) == crate::words::norm(column))))
        }
        _ => false,
    };
    match value {
        Expr::Binary { op, left, right }
            if (op == "+" || op == "-") && (own(left) || own(right)) =>
        {
            format!("{column} = {column} {op} ${n}")
        }
        Expr::Call(c) if matches!(c.method().as_str(), "add" | "sub") => {
            let op = if c.method() == "add" { "+" } else { "-" };
            let refers = c
                .receiver
                .as_deref()
                .map(|r| own(&Expr::Call(Box::new(r.clone()))))
                .unwrap_or(false)
                || own(value);
            if refers {
                format!("{column} = {column} {op} ${n}")
            } else {
                format!("{column} = ${n}")
            }
        }
        _ => format!("{column} = ${n}"),
    }
}

fn where_clause(columns: &[String], from: usize) -> String {
    if columns.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (column, op) = c.split_once(' ').unwrap_or((c, "="));
            format!("{column} {op} ${}", from + i)
        })
        .collect();
    format!(" WHERE {}", parts.join(" AND "))
}

/// diesel's `insert_into`/`update`/`delete` chains.
fn diesel_sql(lower: &Lower<'_>, chain: &Chain) -> Option<(String, Vec<Expr>)> {
    let target = chain.args.first()?.first()?;
    let table = table_of(target)?;
    let root = chain.methods[0].as_str();
    let mut filters = Vec::new();
    filter_columns(std::slice::from_ref(target), &mut filters);
    for (i, m) in chain.methods.iter().enumerate() {
        if m == "filter" {
            filter_columns(&chain.args[i], &mut filters);
        }
    }
    if root == "update" {
        return diesel_update(lower, chain, &table, &filters);
    }
    if root == "delete" {
        return Some((
            format!("DELETE FROM {table}{}", where_clause(&filters, 1)),
            Vec::new(),
        ));
    }
    let at = chain.find("values");
    let pairs = at
        .map(|i| set_pairs(lower, &chain.args[i]))
        .unwrap_or_default();
    let columns: Vec<String> = pairs.iter().map(|(c, _)| c.clone()).collect();
    let mut sql = if columns.is_empty() {
        format!("INSERT INTO {table} VALUES ($1)")
    } else {
        let holes: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
        format!(
            "INSERT INTO {table} ({}) VALUES ({})",
            columns.join(", "),
            holes.join(", ")
        )
    };
    // `replace_into` (MySQL/SQLite REPLACE) overwrites the row a key already holds.
    if root == "replace_into" {
        sql.push_str(" ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data");
        return Some((sql, pairs.into_iter().map(|(_, v)| v).collect()));
    }
    let ignores = root == "insert_or_ignore_into"
        || chain.has("on_conflict_do_nothing")
        || chain.has("do_nothing");
    if ignores {
        sql.push_str(" ON CONFLICT DO NOTHING");
    } else if let Some(du) = chain.find("do_update") {
        sql.push_str(&diesel_do_update(lower, chain, du, columns.len()));
    }
    Some((sql, pairs.into_iter().map(|(_, v)| v).collect()))
}

/// diesel's `update(target).set(…)`.
fn diesel_update(
    lower: &Lower<'_>,
    chain: &Chain,
    table: &str,
    filters: &[String],
) -> Option<(String, Vec<Expr>)> {
    let at = chain.find("set")?;
    let pairs = set_pairs(lower, &chain.args[at]);
    if pairs.is_empty() {
        return Some((
            format!("UPDATE {table} SET data = $1{}", where_clause(filters, 2)),
            chain.args[at].clone(),
        ));
    }
    let sets: Vec<String> = pairs
        .iter()
        .enumerate()
        .map(|(i, (c, v))| assignment(c, v, i + 1))
        .collect();
    let values = pairs.into_iter().map(|(_, v)| v).collect();
    let n = sets.len();
    Some((
        format!(
            "UPDATE {table} SET {}{}",
            sets.join(", "),
            where_clause(filters, n + 1)
        ),
        values,
    ))
}

/// diesel's `.on_conflict(target).do_update().set(…)` as the clause it adds (`n` values come
/// before its own).
fn diesel_do_update(lower: &Lower<'_>, chain: &Chain, du: usize, n: usize) -> String {
    let target: Vec<String> = chain
        .find("on_conflict")
        .map(|i| {
            chain.args[i]
                .iter()
                .filter_map(|e| match e {
                    Expr::Path(p) => p.last().cloned(),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let target = if target.is_empty() {
        vec!["id".to_string()]
    } else {
        target
    };
    let set_at = chain.methods[du..]
        .iter()
        .position(|m| m == "set")
        .map(|i| i + du);
    let pairs = set_at
        .map(|i| set_pairs(lower, &chain.args[i]))
        .unwrap_or_default();
    let sets: Vec<String> = if pairs.is_empty() {
        vec!["data = EXCLUDED.data".into()]
    } else {
        pairs
            .iter()
            .enumerate()
            .map(|(i, (c, v))| assignment(c, v, n + i + 1))
            .collect()
    };
    format!(
        " ON CONFLICT ({}) DO UPDATE SET {}",
        target.join(", "),
        sets.join(", ")
    )
}

/// sea-orm `Entity::…` chains and diesel/sea-orm table reads.
fn entity_sql(chain: &Chain) -> Option<(String, Vec<Expr>)> {
    let root_name = chain.methods[0].as_str();
    let table = table_of(&Expr::Path(
        chain.root[..chain.root.len().saturating_sub(1)].to_vec(),
    ))?;
    let mut filters = Vec::new();
    if matches!(root_name, "find_by_id" | "delete_by_id") {
        filters.push("id".to_string());
    }
    for (i, m) in chain.methods.iter().enumerate() {
        if m == "filter" || (i == 0 && root_name == "find") {
            filter_columns(&chain.args[i], &mut filters);
        }
    }
    let all_args: Vec<Expr> = chain.args.iter().flatten().cloned().collect();
    match root_name {
        "find" | "find_by_id" | "filter" => Some((
            format!("SELECT * FROM {table}{}", where_clause(&filters, 1)),
            all_args,
        )),
        "delete_many" | "delete_by_id" => Some((
            format!("DELETE FROM {table}{}", where_clause(&filters, 1)),
            all_args,
        )),
        "update_many" | "update" => {
            let mut sets = Vec::new();
            for (i, m) in chain.methods.iter().enumerate() {
                if m == "col_expr"
                    && let [Expr::Path(col), value, ..] = chain.args[i].as_slice()
                {
                    let column = col.last().cloned().unwrap_or_default();
                    sets.push(assignment(&column, value, sets.len() + 1));
                }
            }
            if sets.is_empty() {
                sets.push("data = $1".into());
            }
            let n = sets.len();
            Some((
                format!(
                    "UPDATE {table} SET {}{}",
                    sets.join(", "),
                    where_clause(&filters, n + 1)
                ),
                all_args,
            ))
        }
        "insert" | "insert_many" => {
            let columns = chain
                .args
                .first()
                .and_then(|a| a.first())
                .map(model_columns)
                .unwrap_or_default();
            let mut sql = insert_sql(&table, &columns);
            if let Some(i) = chain.find("on_conflict") {
                let words: Vec<String> = chain.args[i].iter().flat_map(Expr::words).collect();
                if words
                    .iter()
                    .any(|w| w.contains("do_nothing") || w == "do_nothing")
                {
                    sql.push_str(" ON CONFLICT DO NOTHING");
                } else {
                    sql.push_str(" ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data");
                }
            }
            if chain.has("do_nothing") || chain.has("on_conflict_do_nothing") {
                sql.push_str(" ON CONFLICT DO NOTHING");
            }
            Some((sql, all_args))
        }
        _ => None,
    }
}

/// diesel's `select(exists(t.filter(…)))`: a keyed look-up of the table filtered inside.
fn select_sql(chain: &Chain) -> Option<(String, Vec<Expr>)> {
    let args = chain.args.first()?;
    let mut filtered: Option<Expr> = None;
    for a in args {
        a.walk(&mut |e| {
            if let Expr::Call(c) = e
                && filtered.is_none()
                && matches!(c.method().as_str(), "filter" | "find")
            {
                filtered = Some(e.clone());
            }
        });
    }
    let filtered = filtered?;
    let table = table_of(&filtered)?;
    let mut filters = Vec::new();
    filter_columns(std::slice::from_ref(&filtered), &mut filters);
    Some((
        format!("SELECT * FROM {table}{}", where_clause(&filters, 1)),
        args.clone(),
    ))
}

/// The columns an ActiveModel literal sets (`NotSet` and `..Default::default()` left out).
fn model_columns(e: &Expr) -> Vec<String> {
    match e {
        Expr::Object { fields, .. } => fields
            .iter()
            .filter(|(k, v)| {
                k != "..." && !matches!(v, Expr::Path(p) if p.last().is_some_and(|s| s == "NotSet"))
            })
            .map(|(k, _)| k.clone())
            .collect(),
        _ => Vec::new(),
    }
}

fn insert_sql(table: &str, columns: &[String]) -> String {
    if columns.is_empty() {
        return format!("INSERT INTO {table} VALUES ($1)");
    }
    let holes: Vec<String> = (1..=columns.len()).map(|i| format!("${i}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({})",
        columns.join(", "),
        holes.join(", ")
    )
}

/// The value inside sea-orm's `Set(v)` / `ActiveValue::Set(v)`.
fn unset(v: &Expr) -> &Expr {
    match v {
        Expr::Call(c) if c.method() == "set" && c.args.len() == 1 => &c.args[0],
        other => other,
    }
}

/// `am.insert(db)`, `am.update(db)`, `am.save(db)` on a local holding an ActiveModel literal.
fn model_sql(lower: &Lower<'_>, chain: &Chain) -> Option<(String, Vec<Expr>)> {
    let var = chain.root.first()?;
    let model = lower.active_model(var)?;
    let Expr::Object { type_name, fields } = &model else {
        return None;
    };
    let type_name = type_name.clone().unwrap_or_default();
    let segs: Vec<&str> = type_name.split("::").collect();
    let table = if segs.len() >= 2 {
        segs[segs.len() - 2].to_string()
    } else {
        var.clone()
    };
    let columns = model_columns(&model);
    let values: Vec<Expr> = fields.iter().map(|(_, v)| v.clone()).collect();
    match chain.methods[0].as_str() {
        "insert" => Some((insert_sql(&table, &columns), values)),
        _ => {
            let sets: Vec<String> = fields
                .iter()
                .filter(|(c, _)| c != "id" && columns.contains(c))
                .enumerate()
                .map(|(i, (c, v))| assignment(c, unset(v), i + 1))
                .collect();
            let n = sets.len();
            Some((
                format!(
                    "UPDATE {table} SET {} WHERE id = ${}",
                    sets.join(", "),
                    n + 1
                ),
                values,
            ))
        }
    }
}

impl Lower<'_> {
    /// The struct literal a local of this function holds.
    pub(super) fn struct_of(&self, var: &str) -> Option<&Expr> {
        self.frames
            .last()?
            .structs
            .iter()
            .rev()
            .find(|(n, _)| n == var)
            .map(|(_, e)| e)
    }

    /// The ActiveModel literal (`x::ActiveModel { … }`) a local holds.
    pub(super) fn active_model(&self, var: &str) -> Option<Expr> {
        let e = self.struct_of(var)?;
        match e {
            Expr::Object {
                type_name: Some(t), ..
            } if t.ends_with("ActiveModel") => Some(e.clone()),
            _ => None,
        }
    }
}
