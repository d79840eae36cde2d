//! Unique keys declared anywhere in the scanned tree: SQL migrations (`CREATE TABLE` with
//! PRIMARY KEY / UNIQUE, `CREATE UNIQUE INDEX`, `ALTER TABLE … ADD CONSTRAINT`), Prisma
//! schemas (`@id`, `@unique`, `@@unique`, `@@id`, `@@map`), SQLAlchemy, Django and GORM models
//! (found by the languages' lowerings). A unique key that a duplicate would hit makes a
//! check-then-insert or a plain INSERT safe.

use std::collections::HashMap;

use crate::ir::UniqueKey;
use crate::words::{norm, table_key};

/// Unique keys by table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schema {
    tables: HashMap<String, Vec<Vec<String>>>,
    /// Models whose keys are another table's (Rails `self.table_name`, single-table
    /// inheritance), by table key.
    aliases: HashMap<String, String>,
    /// Version columns an ORM compares on every update (JPA `@Version`), by table key.
    versions: HashMap<String, Vec<String>>,
    /// Background jobs are rows of this database (GoodJob, Delayed::Job, Que): enqueuing one
    /// commits or rolls back with the transaction around it.
    jobs_in_database: bool,
}

impl Schema {
    /// Records that each model's rows live where the table or model after it says.
    pub(crate) fn alias_all(&mut self, aliases: &[(String, String)]) {
        for (model, table) in aliases {
            let (m, t) = (table_key(model), table_key(table));
            if m != t {
                self.aliases.entry(m).or_insert(t);
            }
        }
    }

    /// Records that updates of `table` compare `column` (an optimistic-lock version).
    pub(crate) fn add_version(&mut self, table: &str, column: &str) {
        self.versions
            .entry(table_key(table))
            .or_default()
            .push(norm(column));
    }

    /// Records that a file of the tree stores background jobs in the database.
    pub(crate) fn add_jobs_in_database(&mut self, yes: bool) {
        self.jobs_in_database |= yes;
    }

    /// Whether the tree's background jobs are rows of its database.
    pub(crate) fn jobs_in_database(&self) -> bool {
        self.jobs_in_database
    }

    /// Whether updates of `table` compare `column` with the stored value.
    pub(crate) fn is_version(&self, table: &str, column: &str) -> bool {
        self.versions
            .get(&table_key(table))
            .is_some_and(|cols| cols.contains(&norm(column)))
    }

    /// The unique keys of a table, or of the table its model is stored in (a few hops at
    /// most: `ProviderMerchant` → `Merchant` → `merchants`).
    fn keys(&self, table: &str) -> Option<&Vec<Vec<String>>> {
        let mut key = table_key(table);
        for _ in 0..4 {
            if let Some(keys) = self.tables.get(&key) {
                return Some(keys);
            }
            key = self.aliases.get(&key)?.clone();
        }
        None
    }

    pub(crate) fn add(&mut self, key: &UniqueKey) {
        let cols: Vec<String> = key.columns.iter().map(|c| norm(c)).collect();
        if cols.is_empty() {
            return;
        }
        let entry = self.tables.entry(table_key(&key.table)).or_default();
        if !entry.contains(&cols) {
            entry.push(cols);
        }
    }

    /// Whether a schema in the tree declares keys for `table`.
    pub(crate) fn knows(&self, table: &str) -> bool {
        self.keys(table).is_some()
    }

    /// Whether a row of `table` with these columns hits a unique key on a duplicate. With the
    /// columns unknown (an ORM call on a variable), any key but a lone surrogate `id` counts.
    /// A row that supplies its own `id` is taken to hit the primary key when the schema does
    /// not say otherwise.
    pub(crate) fn covers(&self, table: &str, columns: Option<&[String]>) -> bool {
        let Some(keys) = self.keys(table) else {
            return columns.is_some_and(|cols| cols.iter().any(|c| norm(c) == "id"));
        };
        match columns {
            Some(cols) if !cols.is_empty() => {
                let cols: Vec<String> = cols.iter().map(|c| norm(c)).collect();
                keys.iter()
                    .any(|k| k.iter().all(|c| cols.iter().any(|have| fills(have, c))))
            }
            _ => keys.iter().any(|k| k.as_slice() != ["id"]),
        }
    }

    /// Whether a unique key the insert's `columns` fill also contains one of the columns a
    /// look-up filtered by (`filter`): the key that answers "does it exist?" referees the race.
    /// With no filter known, as [`covers`](Self::covers).
    pub(crate) fn covers_lookup(
        &self,
        table: &str,
        columns: Option<&[String]>,
        filter: &[String],
    ) -> bool {
        if filter.is_empty() {
            return self.covers(table, columns);
        }
        let filter: Vec<String> = filter.iter().map(|c| norm(c)).collect();
        let Some(keys) = self.keys(table) else {
            return filter.iter().any(|c| c == "id");
        };
        let cols: Vec<String> = columns
            .unwrap_or_default()
            .iter()
            .map(|c| norm(c))
            .collect();
        // `find_or_create_by(family: f, …)` fills `family_id` as `covers` reads it.
        let given = |c: &String, have: &[String]| have.iter().any(|h| fills(h, c));
        keys.iter().any(|k| {
            k.iter().any(|c| given(c, &filter))
                && k.iter().all(|c| given(c, &cols) || given(c, &filter))
        })
    }
}

/// Whether a written column (normalised) fills a key column: itself, or the relation whose
/// foreign key it is (Prisma `Repository: { connect: … }` and Django `user=user` fill
/// `repository_id` and `user_id`).
fn fills(have: &str, key_column: &str) -> bool {
    have == key_column
        || key_column
            .strip_suffix("id")
            .is_some_and(|relation| !relation.is_empty() && relation == have)
}

/// Unique keys of a Prisma schema file.
pub(crate) fn prisma_keys(text: &str) -> Vec<UniqueKey> {
    let mut keys = Vec::new();
    let mut model: Option<(String, Option<String>, Vec<Vec<String>>)> = None;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        match (&mut model, words.next()) {
            (None, Some("model")) => {
                if let Some(name) = words.next() {
                    model = Some((name.trim_end_matches('{').to_string(), None, Vec::new()));
                }
            }
            (Some((name, map, cols)), Some(first)) => {
                if first == "}" {
                    let table = map.clone().unwrap_or_else(|| name.clone());
                    for columns in cols.drain(..) {
                        keys.push(UniqueKey {
                            table: table.clone(),
                            columns: columns.clone(),
                        });
                        if table != *name {
                            keys.push(UniqueKey {
                                table: name.clone(),
                                columns,
                            });
                        }
                    }
                    model = None;
                } else if line.starts_with("@@unique") || line.starts_with("@@id") {
                    let inside = line
                        .split_once('[')
                        .and_then(|(_, r)| r.split_once(']'))
                        .map_or("", |(i, _)| i);
                    let columns: Vec<String> = inside
                        .split(',')
                        .map(|c| c.trim().split('(').next().unwrap_or("").to_string())
                        .filter(|c| !c.is_empty())
                        .collect();
                    if !columns.is_empty() {
                        cols.push(columns);
                    }
                } else if let Some(rest) = line.strip_prefix("@@map(") {
                    *map = Some(rest.trim_end_matches(')').trim_matches('"').to_string());
                } else if !first.starts_with('@') {
                    let attrs: Vec<&str> = words.skip(1).collect();
                    if attrs.iter().any(|a| {
                        *a == "@id"
                            || *a == "@unique"
                            || a.starts_with("@id(")
                            || a.starts_with("@unique(")
                    }) {
                        cols.push(vec![first.to_string()]);
                    }
                }
            }
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prisma_models() {
        let keys = prisma_keys(
            "model ProcessedEvent {\n  eventId String @id\n  at DateTime @default(now())\n}\n\
             model Payment {\n  id Int @id @default(autoincrement())\n  chargeId String\n  orderId String\n  @@unique([chargeId, orderId])\n  @@map(\"payments\")\n}\n",
        );
        let mut schema = Schema::default();
        keys.iter().for_each(|k| schema.add(k));
        assert!(schema.covers("processed_events", Some(&["event_id".to_string()])));
        assert!(schema.covers("payments", None));
        assert!(!schema.covers("payments", Some(&["charge_id".to_string()])));
        assert!(schema.covers("Payment", Some(&["chargeId".into(), "orderId".into()])));
        assert!(!schema.covers("orders", None));
    }
}
