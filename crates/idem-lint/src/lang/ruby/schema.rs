//! Unique indexes declared by Rails schema files and migrations: `create_table "orders" do |t|
//! … t.index ["stripe_id"], unique: true … end` (db/schema.rb), `t.string :key, index: {
//! unique: true }`, `add_index :orders, [:a, :b], unique: true` and `t.references :user,
//! index: { unique: true }` (which indexes `user_id`), `change_table` blocks and
//! `add_reference …, index: { unique: true }`. Model validations (`validates …,
//! uniqueness: true`) are not constraints and do not count: two concurrent requests both
//! pass them.

use tree_sitter::Node;

use crate::ir::UniqueKey;

/// Every unique index of the file. The tree is walked with a cursor, not recursion, so no
/// nesting can exhaust the stack.
pub(super) fn unique_keys(root: Node<'_>, src: &str) -> Vec<UniqueKey> {
    let mut out = Vec::new();
    let mut cursor = root.walk();
    loop {
        let n = cursor.node();
        if n.kind() == "call" {
            read_call(n, src, &mut out);
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return out;
            }
        }
    }
}

fn text<'s>(n: Node<'_>, src: &'s str) -> &'s str {
    src.get(n.byte_range()).unwrap_or("")
}

/// A symbol's or string's name (`:orders`, `"orders"`).
fn name_of(n: Node<'_>, src: &str) -> Option<String> {
    match n.kind() {
        "simple_symbol" | "string" | "delimited_symbol" | "hash_key_symbol" => Some(
            text(n, src)
                .trim_start_matches(':')
                .trim_matches(|c| c == '"' || c == '\'')
                .to_string(),
        ),
        _ => None,
    }
}

/// The names of a column argument: one name or an array of names.
fn columns(n: Node<'_>, src: &str) -> Vec<String> {
    if n.kind() == "array" {
        let mut c = n.walk();
        n.named_children(&mut c)
            .filter_map(|x| name_of(x, src))
            .collect()
    } else {
        name_of(n, src).into_iter().collect()
    }
}

fn args<'t>(call: Node<'t>) -> Vec<Node<'t>> {
    call.child_by_field_name("arguments")
        .map(|a| {
            let mut c = a.walk();
            a.named_children(&mut c)
                .filter(|x| x.kind() != "comment")
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the arguments carry `unique: true`, directly or in `index: { unique: true }`.
fn says_unique(args: &[Node<'_>], src: &str) -> bool {
    args.iter().any(|a| {
        if a.kind() != "pair" {
            return false;
        }
        let key = a
            .child_by_field_name("key")
            .and_then(|k| name_of(k, src))
            .unwrap_or_default();
        let value = a
            .child_by_field_name("value")
            .map(|v| text(v, src))
            .unwrap_or("");
        let compact: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        (key == "unique" && value == "true")
            || (key == "index" && compact.contains("unique:true"))
            || (key == "primary_key" && value == "true")
    })
}

fn method<'s>(call: Node<'_>, src: &'s str) -> &'s str {
    call.child_by_field_name("method")
        .map(|m| text(m, src))
        .unwrap_or("")
}

/// The unique keys one schema call declares (`add_index`, `create_table`, …).
fn read_call(n: Node<'_>, src: &str, out: &mut Vec<UniqueKey>) {
    let a = args(n);
    match method(n, src) {
        "add_index" if says_unique(&a, src) => {
            if let (Some(table), Some(cols)) = (a.first(), a.get(1)) {
                push(out, name_of(*table, src), columns(*cols, src));
            }
        }
        // `add_reference :orders, :cart, index: { unique: true }` indexes `cart_id`.
        "add_reference" | "add_belongs_to" if says_unique(&a, src) => {
            if let (Some(table), Some(col)) = (a.first(), a.get(1)) {
                let cols = columns(*col, src).into_iter().map(|c| format!("{c}_id"));
                push(out, name_of(*table, src), cols.collect());
            }
        }
        "change_table" => {
            let table = a.first().and_then(|t| name_of(*t, src));
            if let Some(block) = n.child_by_field_name("block") {
                table_block(block, table, src, out);
            }
        }
        "create_table" => {
            let table = a.first().and_then(|t| name_of(*t, src));
            // Every table has its primary key unless `id: false` says otherwise.
            let no_id = a.iter().any(|x| {
                x.kind() == "pair"
                    && x.child_by_field_name("key")
                        .and_then(|k| name_of(k, src))
                        .as_deref()
                        == Some("id")
                    && x.child_by_field_name("value").map(|v| text(v, src)) == Some("false")
            });
            if !no_id {
                push(out, table.clone(), vec!["id".to_string()]);
            }
            if let Some(block) = n.child_by_field_name("block") {
                table_block(block, table, src, out);
            }
        }
        _ => {}
    }
}

/// The calls on the table builder inside `create_table … do |t| … end`.
fn table_block(block: Node<'_>, table: Option<String>, src: &str, out: &mut Vec<UniqueKey>) {
    let Some(body) = block.child_by_field_name("body") else {
        return;
    };
    let mut c = body.walk();
    for stmt in body.named_children(&mut c) {
        if stmt.kind() != "call" || stmt.child_by_field_name("receiver").is_none() {
            continue;
        }
        let a = args(stmt);
        if !says_unique(&a, src) {
            continue;
        }
        let Some(first) = a.first() else { continue };
        let mut cols = columns(*first, src);
        if matches!(method(stmt, src), "references" | "belongs_to") {
            cols = cols.into_iter().map(|c| format!("{c}_id")).collect();
        }
        push(out, table.clone(), cols);
    }
}

fn push(out: &mut Vec<UniqueKey>, table: Option<String>, columns: Vec<String>) {
    if let Some(table) = table
        && !columns.is_empty()
    {
        out.push(UniqueKey { table, columns });
    }
}
