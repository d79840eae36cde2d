//! SQL strings found in code (and migration files), parsed with `sqlparser`: what a statement
//! writes, whether it has a conflict clause, which columns an UPDATE sets relatively and
//! whether its WHERE compares an ordering column; and the unique keys a schema declares.

use sqlparser::ast::{
    AssignmentTarget, BinaryOperator, ColumnOption, Expr as SqlExpr, FromTable, OnConflictAction,
    OnInsert, SetExpr, Statement, TableConstraint, TableFactor, TableObject,
};
use sqlparser::dialect::{GenericDialect, MySqlDialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;

use crate::ir::UniqueKey;
use crate::words::is_order_column;

/// How one column of an UPDATE (or of an upsert's DO UPDATE) is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetColumn {
    pub(crate) column: String,
    /// `col = col + x` / `col = col - x`.
    pub(crate) relative: bool,
    /// Set from a bound parameter or the proposed row (`$1`, `?`, `EXCLUDED.col`,
    /// `VALUES(col)`): a value the event brought, not `NOW()`.
    pub(crate) from_input: bool,
    /// The number of the `$N` placeholder it is set from.
    pub(crate) param: Option<usize>,
}

/// What a statement does, as far as checks need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SqlStmt {
    Insert {
        table: String,
        columns: Vec<String>,
        /// ON CONFLICT, ON DUPLICATE KEY, INSERT IGNORE, OR IGNORE/REPLACE, REPLACE INTO.
        conflict_clause: bool,
        /// The DO UPDATE / ON DUPLICATE KEY UPDATE assignments.
        do_update: Vec<SetColumn>,
        /// The DO UPDATE has a WHERE comparing an ordering column.
        do_update_ordered: bool,
    },
    Update {
        table: String,
        sets: Vec<SetColumn>,
        /// The WHERE compares an ordering column with `<`, `<=`, `>`, `>=`.
        ordered: bool,
        /// The WHERE names these columns.
        where_columns: Vec<String>,
    },
    Select {
        tables: Vec<String>,
        /// FOR UPDATE / FOR SHARE.
        locked: bool,
        /// Has a WHERE (a look-up, not a scan).
        filtered: bool,
        /// The columns its WHERE names (a look-up's key).
        where_columns: Vec<String>,
    },
    Delete {
        table: String,
    },
    Begin,
    Commit,
    Rollback,
    Merge {
        table: String,
    },
}

impl SqlStmt {
    /// Whether the statement changes rows.
    pub(crate) fn is_write(&self) -> bool {
        matches!(
            self,
            SqlStmt::Insert { .. }
                | SqlStmt::Update { .. }
                | SqlStmt::Delete { .. }
                | SqlStmt::Merge { .. }
        )
    }
}

/// Replaces placeholders that no dialect parses (`%s`, `%(name)s`) by `?`.
fn normalise_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('s') => {
                chars.next();
                out.push('?');
            }
            Some('(') => {
                for d in chars.by_ref() {
                    if d == ')' {
                        break;
                    }
                }
                if chars.peek() == Some(&'s') {
                    chars.next();
                }
                out.push('?');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Whether the text starts like a statement (so ordinary strings are not parsed).
fn looks_like_sql(text: &str) -> bool {
    let head: String = past_leading_comments(text)
        .chars()
        .take(12)
        .collect::<String>()
        .to_ascii_uppercase();
    [
        "INSERT", "UPDATE", "SELECT", "DELETE", "BEGIN", "COMMIT", "ROLLBACK", "START", "WITH",
        "REPLACE", "MERGE", "UPSERT", "CREATE", "ALTER",
    ]
    .iter()
    .any(|k| head.starts_with(k))
}

/// `text` from its first token: whitespace, `-- …` lines and `/* … */` blocks skipped (a
/// migration's header comment must not hide its first statement).
fn past_leading_comments(text: &str) -> &str {
    let mut rest = text.trim_start();
    loop {
        if let Some(line) = rest.strip_prefix("--") {
            rest = line
                .split_once('\n')
                .map_or("", |(_, after)| after)
                .trim_start();
        } else if let Some(block) = rest.strip_prefix("/*") {
            rest = block
                .split_once("*/")
                .map_or("", |(_, after)| after)
                .trim_start();
        } else {
            return rest;
        }
    }
}

/// Parses one or more statements with the dialects idem's users write (PostgreSQL, MySQL,
/// SQLite), the first that accepts the text winning.
pub(crate) fn parse_statements(text: &str) -> Option<Vec<Statement>> {
    if !looks_like_sql(text) {
        return None;
    }
    let sql = normalise_placeholders(text);
    Parser::parse_sql(&PostgreSqlDialect {}, &sql)
        .or_else(|_| Parser::parse_sql(&MySqlDialect {}, &sql))
        .or_else(|_| Parser::parse_sql(&SQLiteDialect {}, &sql))
        .or_else(|_| Parser::parse_sql(&GenericDialect {}, &sql))
        .ok()
}

/// The first statement of an SQL string in code.
pub(crate) fn analyse(text: &str) -> Option<SqlStmt> {
    let upper = text.trim().to_ascii_uppercase();
    match upper.trim_end_matches(';') {
        "BEGIN" | "START TRANSACTION" | "BEGIN TRANSACTION" => return Some(SqlStmt::Begin),
        "COMMIT" | "END" => return Some(SqlStmt::Commit),
        "ROLLBACK" => return Some(SqlStmt::Rollback),
        _ => {}
    }
    let stmts = parse_statements(text)?;
    stmts.into_iter().find_map(|s| describe(&s))
}

fn describe(stmt: &Statement) -> Option<SqlStmt> {
    Some(match stmt {
        Statement::Insert(ins) => {
            let table = match &ins.table {
                TableObject::TableName(name) => name.to_string(),
                other => other.to_string(),
            };
            let columns: Vec<String> = ins.columns.iter().map(|c| c.to_string()).collect();
            let (conflict_on, mut do_update, do_update_ordered) = match &ins.on {
                Some(OnInsert::OnConflict(oc)) => match &oc.action {
                    OnConflictAction::DoNothing => (true, Vec::new(), false),
                    OnConflictAction::DoUpdate(du) => (
                        true,
                        du.assignments.iter().flat_map(set_columns).collect(),
                        du.selection.as_ref().is_some_and(compares_order),
                    ),
                },
                Some(OnInsert::DuplicateKeyUpdate(assignments)) => (
                    true,
                    assignments.iter().flat_map(set_columns).collect(),
                    false,
                ),
                Some(_) => (true, Vec::new(), false),
                None => (false, Vec::new(), false),
            };
            // `col = EXCLUDED.col`: the placeholder the inserted row's `col` came from.
            if let Some(rows) = ins.source.as_ref().and_then(|q| match q.body.as_ref() {
                sqlparser::ast::SetExpr::Values(v) => v.rows.first(),
                _ => None,
            }) {
                for set in do_update
                    .iter_mut()
                    .filter(|s| s.from_input && s.param.is_none())
                {
                    set.param = columns
                        .iter()
                        .position(|c| c.eq_ignore_ascii_case(&set.column))
                        .and_then(|i| rows.get(i))
                        .and_then(placeholder);
                }
            }
            SqlStmt::Insert {
                table,
                columns,
                conflict_clause: conflict_on || ins.ignore || ins.or.is_some() || ins.replace_into,
                do_update,
                do_update_ordered,
            }
        }
        Statement::Update(up) => {
            let table = match &up.table.relation {
                TableFactor::Table { name, .. } => name.to_string(),
                other => other.to_string(),
            };
            let mut where_columns = Vec::new();
            if let Some(sel) = &up.selection {
                collect_columns(sel, &mut where_columns);
            }
            SqlStmt::Update {
                table,
                sets: up.assignments.iter().flat_map(set_columns).collect(),
                ordered: up.selection.as_ref().is_some_and(compares_order),
                where_columns,
            }
        }
        Statement::Query(q) => {
            let (tables, filtered, where_columns) = query_tables(q);
            SqlStmt::Select {
                tables,
                locked: !q.locks.is_empty(),
                filtered,
                where_columns,
            }
        }
        Statement::Delete(del) => {
            let tables = match &del.from {
                FromTable::WithFromKeyword(t) | FromTable::WithoutKeyword(t) => t,
            };
            SqlStmt::Delete {
                table: tables
                    .first()
                    .map(|t| t.relation.to_string())
                    .unwrap_or_default(),
            }
        }
        Statement::Merge(m) => SqlStmt::Merge {
            table: m.table.to_string(),
        },
        Statement::StartTransaction { .. } => SqlStmt::Begin,
        Statement::Commit { .. } => SqlStmt::Commit,
        Statement::Rollback { .. } => SqlStmt::Rollback,
        _ => return None,
    })
}

/// The tables a query reads (its own FROM, or that of an `EXISTS (…)` or scalar subquery
/// it selects), whether it filters them with a WHERE, and the columns that WHERE names.
fn query_tables(q: &sqlparser::ast::Query) -> (Vec<String>, bool, Vec<String>) {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return (Vec::new(), false, Vec::new());
    };
    let tables: Vec<String> = sel
        .from
        .iter()
        .filter_map(|t| match &t.relation {
            TableFactor::Table { name, .. } => Some(name.to_string()),
            _ => None,
        })
        .collect();
    if !tables.is_empty() {
        let mut columns = Vec::new();
        if let Some(w) = &sel.selection {
            collect_columns(w, &mut columns);
        }
        return (tables, sel.selection.is_some(), columns);
    }
    for item in &sel.projection {
        let expr = match item {
            sqlparser::ast::SelectItem::UnnamedExpr(e)
            | sqlparser::ast::SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        match expr {
            SqlExpr::Exists { subquery, .. } | SqlExpr::Subquery(subquery) => {
                return query_tables(subquery);
            }
            _ => {}
        }
    }
    (Vec::new(), false, Vec::new())
}

fn set_columns(a: &sqlparser::ast::Assignment) -> Vec<SetColumn> {
    let names: Vec<String> = match &a.target {
        // `SET a.balance = a.balance + :amount` (MySQL, JPQL): the column is the last part.
        AssignmentTarget::ColumnName(n) => {
            vec![n.to_string().rsplit('.').next().unwrap_or("").to_string()]
        }
        AssignmentTarget::Tuple(ns) => ns.iter().map(|n| n.to_string()).collect(),
    };
    names
        .into_iter()
        .map(|column| SetColumn {
            relative: is_relative(&column, &a.value),
            from_input: is_input(&a.value),
            param: placeholder(&a.value),
            column,
        })
        .collect()
}

/// `$3` (also cast, `$3::timestamptz`): 3.
fn placeholder(value: &SqlExpr) -> Option<usize> {
    match value {
        SqlExpr::Value(v) => match &v.value {
            sqlparser::ast::Value::Placeholder(p) => p.strip_prefix('$')?.parse().ok(),
            _ => None,
        },
        SqlExpr::Nested(inner) | SqlExpr::Cast { expr: inner, .. } => placeholder(inner),
        SqlExpr::Function(f) => coalesced(f).and_then(placeholder),
        _ => None,
    }
}

/// `$1`, `?`, `:name`, `EXCLUDED.col`, `VALUES(col)`.
fn is_input(value: &SqlExpr) -> bool {
    match value {
        SqlExpr::Value(v) => matches!(v.value, sqlparser::ast::Value::Placeholder(_)),
        SqlExpr::CompoundIdentifier(parts) => parts
            .first()
            .is_some_and(|p| p.value.eq_ignore_ascii_case("excluded")),
        SqlExpr::Function(f) => {
            f.name.to_string().eq_ignore_ascii_case("values") || coalesced(f).is_some_and(is_input)
        }
        SqlExpr::Nested(inner) | SqlExpr::Cast { expr: inner, .. } => is_input(inner),
        _ => false,
    }
}

/// The value `COALESCE(x, col)` (or `IFNULL`, `NVL`) writes whenever `x` is given: `x`, so
/// `COALESCE($4, col)` writes the input, and the old value only in its absence.
fn coalesced(f: &sqlparser::ast::Function) -> Option<&SqlExpr> {
    let name = f.name.to_string().to_ascii_lowercase();
    if !matches!(name.as_str(), "coalesce" | "ifnull" | "nvl") {
        return None;
    }
    let sqlparser::ast::FunctionArguments::List(list) = &f.args else {
        return None;
    };
    match list.args.first()? {
        sqlparser::ast::FunctionArg::Unnamed(sqlparser::ast::FunctionArgExpr::Expr(e)) => Some(e),
        _ => None,
    }
}

/// `col + x`, `x + col`, `col - x`, `COALESCE(col, 0) + x`.
fn is_relative(column: &str, value: &SqlExpr) -> bool {
    match value {
        SqlExpr::BinaryOp { left, op, right } => {
            matches!(op, BinaryOperator::Plus | BinaryOperator::Minus)
                && (mentions(left, column) || mentions(right, column))
        }
        SqlExpr::Nested(inner) => is_relative(column, inner),
        _ => false,
    }
}

fn mentions(e: &SqlExpr, column: &str) -> bool {
    let mut cols = Vec::new();
    collect_columns(e, &mut cols);
    cols.iter().any(|c| c.eq_ignore_ascii_case(column))
}

/// Column names in an expression (the last part of compound names).
fn collect_columns(e: &SqlExpr, out: &mut Vec<String>) {
    match e {
        SqlExpr::Identifier(i) => out.push(i.value.clone()),
        SqlExpr::CompoundIdentifier(parts) => {
            if let Some(last) = parts.last() {
                out.push(last.value.clone());
            }
        }
        SqlExpr::BinaryOp { left, right, .. } => {
            collect_columns(left, out);
            collect_columns(right, out);
        }
        SqlExpr::Nested(inner) | SqlExpr::UnaryOp { expr: inner, .. } => {
            collect_columns(inner, out)
        }
        SqlExpr::Function(f) => {
            if let sqlparser::ast::FunctionArguments::List(list) = &f.args {
                for arg in &list.args {
                    if let sqlparser::ast::FunctionArg::Unnamed(
                        sqlparser::ast::FunctionArgExpr::Expr(inner),
                    ) = arg
                    {
                        collect_columns(inner, out);
                    }
                }
            }
        }
        SqlExpr::IsNull(inner) | SqlExpr::IsNotNull(inner) => collect_columns(inner, out),
        _ => {}
    }
}

/// Whether the predicate compares an ordering column (`version < $2`, `updated_at <= $3`).
fn compares_order(e: &SqlExpr) -> bool {
    match e {
        SqlExpr::BinaryOp { left, op, right } => match op {
            BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq => {
                let mut cols = Vec::new();
                collect_columns(left, &mut cols);
                collect_columns(right, &mut cols);
                // An event time compared (`t.current_period_end < EXCLUDED.current_period_end`)
                // orders the write as a version does.
                cols.iter()
                    .any(|c| is_order_column(c) || crate::words::is_event_time_column(c))
            }
            _ => compares_order(left) || compares_order(right),
        },
        SqlExpr::Nested(inner) => compares_order(inner),
        _ => false,
    }
}

/// Whether a WHERE fragment (GORM `.Where("version < ?", v)`) compares an ordering column.
pub(crate) fn fragment_compares_order(fragment: &str) -> bool {
    let sql = format!("SELECT 1 FROM t WHERE {}", normalise_placeholders(fragment));
    Parser::parse_sql(&PostgreSqlDialect {}, &sql)
        .or_else(|_| Parser::parse_sql(&MySqlDialect {}, &sql))
        .ok()
        .and_then(|stmts| stmts.into_iter().next())
        .is_some_and(|s| match s {
            Statement::Query(q) => match q.body.as_ref() {
                SetExpr::Select(sel) => sel.selection.as_ref().is_some_and(compares_order),
                _ => false,
            },
            _ => false,
        })
}

/// A GORM `gorm.Expr("balance - ?", x)` fragment: whether it adds to or subtracts from the
/// named column.
pub(crate) fn fragment_is_relative(column: &str, fragment: &str) -> bool {
    let sql = format!(
        "UPDATE t SET {column} = {}",
        normalise_placeholders(fragment)
    );
    matches!(
        analyse(&sql),
        Some(SqlStmt::Update { sets, .. }) if sets.iter().any(|s| s.relative)
    )
}

/// The unique keys (primary keys, UNIQUE columns and constraints, unique indexes) of the
/// statements in a migration or an SQL string.
pub(crate) fn unique_keys(text: &str) -> Vec<UniqueKey> {
    let Some(stmts) = parse_statements(text).or_else(|| {
        // One unparseable statement (a trigger, a dialect extension) should not hide the rest.
        let parts: Vec<Statement> = text
            .split(';')
            .filter_map(parse_statements)
            .flatten()
            .collect();
        (!parts.is_empty()).then_some(parts)
    }) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    for stmt in &stmts {
        match stmt {
            Statement::CreateTable(ct) => {
                let table = ct.name.to_string();
                for col in &ct.columns {
                    for opt in &col.options {
                        if matches!(
                            opt.option,
                            ColumnOption::PrimaryKey(_) | ColumnOption::Unique(_)
                        ) {
                            keys.push(UniqueKey {
                                table: table.clone(),
                                columns: vec![col.name.value.clone()],
                            });
                        }
                    }
                }
                for c in &ct.constraints {
                    if let Some(columns) = constraint_columns(c) {
                        keys.push(UniqueKey {
                            table: table.clone(),
                            columns,
                        });
                    }
                }
            }
            Statement::CreateIndex(ci) if ci.unique => keys.push(UniqueKey {
                table: ci.table_name.to_string(),
                columns: ci
                    .columns
                    .iter()
                    .map(|c| c.column.expr.to_string())
                    .collect(),
            }),
            Statement::AlterTable(at) => {
                for op in &at.operations {
                    if let sqlparser::ast::AlterTableOperation::AddConstraint { constraint, .. } =
                        op
                        && let Some(columns) = constraint_columns(constraint)
                    {
                        keys.push(UniqueKey {
                            table: at.name.to_string(),
                            columns,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    keys
}

fn constraint_columns(c: &TableConstraint) -> Option<Vec<String>> {
    match c {
        TableConstraint::Unique(u) => Some(
            u.columns
                .iter()
                .map(|c| c.column.expr.to_string())
                .collect(),
        ),
        TableConstraint::PrimaryKey(p) => Some(
            p.columns
                .iter()
                .map(|c| c.column.expr.to_string())
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migration's header comment (Flyway's and sqlx's often start with one) must not hide
    /// the statement after it.
    #[test]
    fn a_leading_comment_does_not_hide_the_first_statement() {
        let table = "CREATE TABLE shipments (order_id text UNIQUE, carrier text);";
        for text in [
            table.to_string(),
            format!("-- init\n{table}"),
            format!("/* init */\n{table}"),
            format!("-- one\n  /* two\n three */ -- four\n{table}"),
        ] {
            let keys = unique_keys(&text);
            assert_eq!(keys.len(), 1, "{text}");
            assert_eq!(keys[0].table, "shipments");
            assert_eq!(keys[0].columns, vec!["order_id".to_string()]);
        }
        assert!(unique_keys("-- only a comment").is_empty());
    }

    #[test]
    fn relative_and_ordered_updates() {
        let Some(SqlStmt::Update { sets, ordered, .. }) =
            analyse("UPDATE accounts SET balance = balance - $1 WHERE id = $2")
        else {
            panic!("not an update");
        };
        assert!(sets[0].relative);
        assert!(!ordered);
        let Some(SqlStmt::Update { sets, ordered, .. }) = analyse(
            "UPDATE inventory SET quantity = $1, version = $2 WHERE sku = $3 AND version < $2",
        ) else {
            panic!("not an update");
        };
        assert!(sets.iter().all(|s| !s.relative));
        assert!(ordered);
    }

    #[test]
    fn conflict_clauses() {
        for (sql, conflict) in [
            (
                "INSERT INTO processed_events (event_id) VALUES ($1) ON CONFLICT DO NOTHING",
                true,
            ),
            ("INSERT INTO orders (id, total) VALUES (%s, %s)", false),
            ("INSERT IGNORE INTO orders (id) VALUES (?)", true),
            (
                "INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = VALUES(a)",
                true,
            ),
        ] {
            let Some(SqlStmt::Insert {
                conflict_clause, ..
            }) = analyse(sql)
            else {
                panic!("{sql} is not an insert");
            };
            assert_eq!(conflict_clause, conflict, "{sql}");
        }
    }

    #[test]
    fn schema_keys() {
        let keys = unique_keys(
            "CREATE TABLE processed_events (event_id TEXT PRIMARY KEY, seen_at TIMESTAMPTZ);\n\
             CREATE TABLE payments (id SERIAL PRIMARY KEY, charge_id TEXT NOT NULL, UNIQUE (charge_id));\n\
             CREATE UNIQUE INDEX ON orders (external_id);",
        );
        let cols: Vec<_> = keys
            .iter()
            .map(|k| (k.table.as_str(), k.columns.join(",")))
            .collect();
        assert_eq!(
            cols,
            [
                ("processed_events", "event_id".to_string()),
                ("payments", "id".to_string()),
                ("payments", "charge_id".to_string()),
                ("orders", "external_id".to_string()),
            ]
        );
    }
}
