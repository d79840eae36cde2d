//! The statements query builders send, as SQL text: sqlx's own, and the `INSERT`, `UPDATE`,
//! `DELETE` and `SELECT` that diesel and sea-orm chains build (their tables, columns, filters,
//! conflict clauses and relative sets).

use super::chain::Link;
use super::{Lower, tokens};
use crate::ir::{Call, Expr};

/// A chain read so far: its links' method names and lowered arguments.
pub(super) struct Chain {
    pub(super) methods: Vec<String>,
    pub(super) args: Vec<Vec<Expr>>,
    pub(super) root: Vec<String>,
}

impl Chain {
    pub(super) fn find(&self, m: &str) -> Option<usize> {
        self.methods.iter().position(|x| x == m)
    }
    fn has(&self, m: &str) -> bool {
        self.find(m).is_some()
    }
}

/// sqlx: the literal SQL (a macro's first string, or the function's first argument) and the
/// values bound (`query!`'s arguments after it, then each `.bind(…)`).
pub(super) fn sqlx_sql(
    lower: &Lower<'_>,
    first: &Link<'_>,
    chain: &Chain,
) -> Option<(Expr, Vec<Expr>)> {
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
        // Not `label + " (synced)"`: text appended is no amount.
        Expr::Binary { op, left, right }
            if (op == "+" || op == "-")
                && (own(left) || own(right))
                && ![left, right]
                    .iter()
                    .any(|e| matches!(e.as_ref(), Expr::Str(_) | Expr::Template(_))) =>
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
pub(super) fn diesel_sql(lower: &Lower<'_>, chain: &Chain) -> Option<(String, Vec<Expr>)> {
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
pub(super) fn entity_sql(chain: &Chain) -> Option<(String, Vec<Expr>)> {
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
pub(super) fn select_sql(chain: &Chain) -> Option<(String, Vec<Expr>)> {
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
pub(super) fn model_sql(lower: &Lower<'_>, chain: &Chain) -> Option<(String, Vec<Expr>)> {
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

    /// The trait a parameter or local is declared as (`notifier: &dyn Notifier`).
    pub(super) fn trait_of(&self, var: &str) -> Option<String> {
        let frame = self.frames.last()?;
        frame
            .traits
            .iter()
            .rev()
            .find(|(n, _)| n == var)
            .map(|(_, t)| t.clone())
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
