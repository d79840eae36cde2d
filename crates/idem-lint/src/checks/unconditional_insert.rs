//! `DAT_UNCONDITIONAL_INSERT`: an event handler inserts a row built from the event with no
//! conflict clause, upsert or unique key that a duplicate delivery would hit, and no dedup
//! claim before it: every redelivery adds another row.

use super::{Hit, describe, guarded};
use crate::analysis::{Act, FnFacts};
use crate::finding::Confidence;
use crate::handlers::is_event;
use crate::ir::{Expr, OpKind};
use crate::rule::RuleId;
use crate::sql::SqlStmt;
use crate::words::{is_log_table, is_marker_table, is_outbox_table, norm};

pub(super) fn check(facts: &FnFacts<'_>, out: &mut Vec<Hit>) {
    if !is_event(facts.func) {
        return;
    }
    for (i, act) in facts.acts.iter().enumerate() {
        let (table, columns) = match act {
            Act::Sql(SqlStmt::Insert {
                table,
                columns,
                conflict_clause: false,
                ..
            }) => (table.as_str(), Some(columns.as_slice())),
            Act::OrmCreate {
                target,
                columns,
                safe: false,
            } => (target.as_str(), columns.as_deref()),
            _ => continue,
        };
        // Exposed's statement builder names the columns; one filled with a minted id is no
        // key a redelivery would hit.
        let mut statement = statement_columns(facts, i);
        if let (true, Act::Sql(SqlStmt::Insert { columns: cols, .. })) = (statement.is_empty(), act)
        {
            statement = bound_columns(facts, i, cols);
        }
        let given: Vec<String> = statement
            .iter()
            .filter(|(_, v)| !minted(facts, v))
            .map(|(c, _)| c.to_string())
            .collect();
        let columns = if statement.is_empty() {
            columns
        } else {
            Some(given.as_slice())
        };
        if table.is_empty()
            || is_marker_table(table)
            || is_outbox_table(table)
            || is_log_table(table)
            || facts.schema.covers(table, columns)
            || guarded(facts, i)
            || super::conflict_handled(facts, i)
            || read_before(facts, i, table)
        {
            continue;
        }
        let OpKind::Call(call) = &facts.func.ops[i].kind else {
            continue;
        };
        let from_event = call.args.iter().any(|a| {
            facts.mentions_tainted(a)
                || matches!(a, Expr::Template(parts) if parts.iter().any(|p| facts.mentions_tainted(p)))
        }) || call.kwargs.iter().any(|(_, v)| facts.mentions_tainted(v))
            // `order = Order.new(id: event["id"]); order.save!`: the row built from the event.
            || call.callee.len() == 2
                && call.method() == "save"
                && facts.tainted.contains(&call.callee[0])
            || statement.iter().any(|(_, v)| facts.mentions_tainted(v));
        if !from_event {
            continue;
        }
        out.push(Hit {
            rule: RuleId::DatUnconditionalInsert,
            pos: facts.func.ops[i].pos,
            origin: facts.func.ops[i].origin.clone(),
            message: format!(
                "{} from the event has no conflict clause and no unique key a duplicate would hit",
                describe(act)
            ),
            confidence: if facts.schema.knows(table) {
                Confidence::High
            } else {
                Confidence::Medium
            },
        });
    }
}

/// Whether the function looked the row up before inserting it (a check-then-act, which
/// `REL_CHECK_THEN_ACT` reports).
fn read_before(facts: &FnFacts<'_>, i: usize, table: &str) -> bool {
    facts.acts[..i].iter().any(|a| {
        matches!(a, Act::Sql(SqlStmt::Select { .. }) | Act::OrmRead { .. })
            && a.target()
                .is_some_and(|t| crate::analysis::same_target(t, table))
    })
}

/// The columns and values a statement builder lambda gives the insert of op `i`: Exposed's
/// `Events.insert { it[eventId] = event.id }` is lowered as the lambda's parameter bound to
/// the table, its `it[column] = value` assignments, then the call.
fn statement_columns<'f>(facts: &'f FnFacts<'_>, i: usize) -> Vec<(&'f str, &'f Expr)> {
    let ops = &facts.func.ops;
    let table = match &ops[i].kind {
        OpKind::Call(c) => &c.callee[..c.callee.len().saturating_sub(1)],
        _ => &[],
    };
    let mut columns = Vec::new();
    for op in ops[..i].iter().rev() {
        match &op.kind {
            OpKind::Assign {
                value: Expr::Path(p),
                ..
            } if !table.is_empty() && p.as_slice() == table => return columns,
            OpKind::Assign { targets, value, .. } => {
                let Some(column) = targets.iter().find_map(|t| {
                    let inner = t.split_once('[')?.1;
                    inner.strip_suffix(']')
                }) else {
                    break;
                };
                columns.push((column, value));
            }
            OpKind::Call(_) => {}
            _ => break,
        }
    }
    Vec::new()
}

/// Whether a value is minted per call (`UUID.randomUUID()`, directly or through a local):
/// a unique key it fills never meets a redelivery's row.
fn minted(facts: &FnFacts<'_>, value: &Expr) -> bool {
    let value = facts.resolved(value).unwrap_or(value);
    match value {
        // `str(uuid.uuid4())`, `String(randomUUID())`: the id, as text.
        Expr::Call(c)
            if matches!(norm(&c.name()).as_str(), "str" | "string" | "tostring")
                && c.args.len() == 1 =>
        {
            minted(facts, &c.args[0])
        }
        Expr::Call(c) => {
            let n = norm(&c.name());
            crate::lang::jvm_vocab::is_random(&n) || crate::words::is_id_minting(&n)
        }
        _ => false,
    }
}

/// An SQL insert's columns with the values bound to them, when its placeholders are the
/// call's parameters in order (`query("INSERT … (id, payload) VALUES ($1, $2)", [jobId, body])`).
fn bound_columns<'f>(
    facts: &'f FnFacts<'_>,
    i: usize,
    columns: &'f [String],
) -> Vec<(&'f str, &'f Expr)> {
    let OpKind::Call(call) = &facts.func.ops[i].kind else {
        return Vec::new();
    };
    let params: Vec<&Expr> = match call.args.get(1) {
        // A list, or Python's tuple.
        Some(Expr::List(items) | Expr::Other(items)) => items.iter().collect(),
        _ => call.args.iter().skip(1).collect(),
    };
    let Some(sql) = call.args.first().and_then(Expr::string_text) else {
        return Vec::new();
    };
    // Each column's value in `VALUES (…)`: `$n` is parameter n, `?` the next one.
    let lower = sql.to_ascii_lowercase();
    let Some(start) = lower
        .find("values")
        .and_then(|v| lower[v..].find('(').map(|p| v + p + 1))
    else {
        return Vec::new();
    };
    let mut values = Vec::new();
    let (mut depth, mut from) = (0, start);
    for (k, ch) in sql[start..].char_indices() {
        match ch {
            '(' => depth += 1,
            ')' if depth == 0 => {
                values.push(sql[from..start + k].trim());
                break;
            }
            ')' => depth -= 1,
            ',' if depth == 0 => {
                values.push(sql[from..start + k].trim());
                from = start + k + 1;
            }
            _ => {}
        }
    }
    let mut next = 0;
    let mut out = Vec::new();
    for (column, value) in columns.iter().zip(values) {
        // `?` and psycopg's `%s` take the next parameter; `$n` parameter n.
        let index = if value == "?" || value == "%s" {
            next += 1;
            Some(next - 1)
        } else {
            value
                .strip_prefix('$')
                .and_then(|n| n.parse::<usize>().ok())
                .map(|n| n.saturating_sub(1))
        };
        if let Some(param) = index.and_then(|n| params.get(n)) {
            out.push((column.as_str(), *param));
        }
    }
    out
}
