//! Unique keys declared in Rust: sea-orm entities (`#[sea_orm(table_name = "…")]`,
//! `#[sea_orm(primary_key)]`, `#[sea_orm(unique)]`, `#[sea_orm(unique_key = "name")]`) and
//! diesel's `table! { name (primary key) { … } }`. sqlx and diesel migrations are SQL files,
//! read with the other schema files.

use tree_sitter::Node;

use super::{Lower, kids};
use crate::ir::UniqueKey;

/// The value of `key = "value"` inside an attribute's text.
fn attr_value<'t>(attr: &'t str, key: &str) -> Option<&'t str> {
    let at = attr.find(key)?;
    let rest = attr[at + key.len()..].trim_start().strip_prefix('=')?;
    rest.split('"').nth(1)
}

/// Whether an attribute's text holds the bare flag `word` (`primary_key`, `unique`).
fn has_flag(attr: &str, word: &str) -> bool {
    attr.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

impl Lower<'_> {
    /// The keys of a sea-orm entity model.
    pub(super) fn entity_keys(&mut self, n: Node<'_>, attrs: &[String]) {
        let Some(table) = attrs
            .iter()
            .filter(|a| a.contains("sea_orm"))
            .find_map(|a| attr_value(a, "table_name"))
            .map(str::to_string)
        else {
            return;
        };
        let Some(body) = n.child_by_field_name("body") else {
            return;
        };
        let mut pending: Vec<String> = Vec::new();
        let mut named: Vec<(String, Vec<String>)> = Vec::new();
        let mut keys: Vec<Vec<String>> = Vec::new();
        let mut primary: Vec<String> = Vec::new();
        for c in kids(body) {
            match c.kind() {
                "attribute_item" => pending.push(self.b.text(c).to_string()),
                "field_declaration" => {
                    let name = c
                        .child_by_field_name("name")
                        .map(|x| self.b.text(x).to_string())
                        .unwrap_or_default();
                    for a in pending.drain(..).filter(|a| a.contains("sea_orm")) {
                        if has_flag(&a, "primary_key") {
                            primary.push(name.clone());
                        }
                        if has_flag(&a, "unique") {
                            keys.push(vec![name.clone()]);
                        }
                        if let Some(k) = attr_value(&a, "unique_key") {
                            match named.iter_mut().find(|(n, _)| n == k) {
                                Some(entry) => entry.1.push(name.clone()),
                                None => named.push((k.to_string(), vec![name.clone()])),
                            }
                        }
                    }
                }
                _ => pending.clear(),
            }
        }
        if !primary.is_empty() {
            keys.push(primary);
        }
        keys.extend(named.into_iter().map(|(_, cols)| cols));
        for columns in keys {
            self.b.module.unique_keys.push(UniqueKey {
                table: table.clone(),
                columns,
            });
        }
    }

    /// diesel's `table! { processed_events (event_id) { … } }`: the primary key.
    pub(super) fn diesel_table(&mut self, n: Node<'_>) {
        let name = n
            .child_by_field_name("macro")
            .map(|m| self.b.text(m))
            .unwrap_or("");
        if name != "table" && name != "diesel::table" {
            return;
        }
        let Some(tree) = kids(n).into_iter().find(|c| c.kind() == "token_tree") else {
            return;
        };
        let text = self.b.text(tree);
        let body = text.trim_start_matches(['{', '(', ' ', '\n', '\t', '\r']);
        // Attributes (`#[sql_name = …]`) may come first.
        let body = body
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#') && !l.starts_with("use ") && !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let Some((table, rest)) = body.split_once('(') else {
            return;
        };
        let table = table.trim();
        if table.is_empty() || table.contains('{') {
            return;
        }
        let Some((cols, _)) = rest.split_once(')') else {
            return;
        };
        let columns: Vec<String> = cols
            .split(',')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        if !columns.is_empty() {
            self.b.module.unique_keys.push(UniqueKey {
                table: table.to_string(),
                columns,
            });
        }
    }
}
