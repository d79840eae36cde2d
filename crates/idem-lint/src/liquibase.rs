//! Unique keys of Liquibase changelogs in XML and YAML (its SQL changelogs are read as SQL):
//! `createTable` columns whose constraints say `unique` or `primaryKey`,
//! `addUniqueConstraint`, `addPrimaryKey`, unique `createIndex`, and `sql` changes. Read by a
//! tolerant reader of the few elements and keys these need (no XML or YAML parser: a
//! changelog is flat enough, and a malformed one still yields what it declares).

use crate::ir::UniqueKey;

/// One thing the reader meets, in document order.
#[derive(Debug, PartialEq)]
enum Token {
    /// An element (XML) or a key without a scalar value (YAML): `createTable`, `column`.
    Open(String),
    /// An attribute (XML) or a key with its value (YAML); an XML `<sql>` element's text is
    /// the attribute `sql`.
    Attr(String, String),
}

/// Whether a text is a Liquibase changelog.
pub(crate) fn is_changelog(text: &str) -> bool {
    text.contains("databaseChangeLog")
}

/// The unique keys a changelog declares.
pub(crate) fn unique_keys(text: &str, xml: bool) -> Vec<UniqueKey> {
    let tokens = if xml {
        xml_tokens(text)
    } else {
        yaml_tokens(text)
    };
    let mut keys = Vec::new();
    let mut change = String::new();
    let mut table = String::new();
    let mut column: Option<String> = None;
    let mut index_unique = false;
    let mut columns: Vec<String> = Vec::new();
    let mut flush = |change: &str, table: &str, unique: bool, columns: &mut Vec<String>| {
        let keyed = matches!(change, "addUniqueConstraint" | "addPrimaryKey")
            || change == "createIndex" && unique;
        if keyed && !table.is_empty() && !columns.is_empty() {
            keys.push(UniqueKey {
                table: table.to_string(),
                columns: std::mem::take(columns),
            });
        }
        columns.clear();
    };
    let mut found = Vec::new();
    for t in tokens {
        match t {
            Token::Open(name) if name == "column" => column = None,
            Token::Open(name) if name != "constraints" && name != "columns" => {
                flush(&change, &table, index_unique, &mut columns);
                change = name;
                table.clear();
                index_unique = false;
                column = None;
            }
            Token::Open(_) => {}
            Token::Attr(k, v) => match k.as_str() {
                "tableName" => table = v,
                "name" if change == "createTable" => column = Some(v),
                "name" if change == "createIndex" => columns.push(v),
                "columnNames" => columns.extend(
                    v.split(',')
                        .map(|c| c.trim().to_string())
                        .filter(|c| !c.is_empty()),
                ),
                "unique" | "primaryKey" if v.eq_ignore_ascii_case("true") => {
                    if change == "createIndex" {
                        index_unique = true;
                    } else if let Some(c) = &column {
                        found.push(UniqueKey {
                            table: table.clone(),
                            columns: vec![c.clone()],
                        });
                    }
                }
                "sql" => found.extend(crate::sql::unique_keys(&v)),
                _ => {}
            },
        }
    }
    flush(&change, &table, index_unique, &mut columns);
    keys.extend(found);
    keys
}

/// Elements and attributes of an XML text; comments and declarations left out.
fn xml_tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        if rest.starts_with("!--") {
            rest = rest.find("-->").map_or("", |e| &rest[e + 3..]);
            continue;
        }
        if rest.starts_with(['/', '?', '!']) {
            continue;
        }
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        let name_end = tag
            .find(|c: char| c.is_whitespace() || c == '/')
            .unwrap_or(tag.len());
        let name = tag[..name_end].rsplit(':').next().unwrap_or("").to_string();
        out.push(Token::Open(name.clone()));
        out.extend(xml_attributes(&tag[name_end..]));
        rest = rest.get(end + 1..).unwrap_or("");
        if name == "sql" || name == "createProcedure" {
            let close = rest.find("</").unwrap_or(rest.len());
            let body = rest[..close].trim();
            let body = body
                .strip_prefix("<![CDATA[")
                .and_then(|b| b.strip_suffix("]]>"))
                .unwrap_or(body);
            out.push(Token::Attr("sql".to_string(), body.to_string()));
        }
    }
    out
}

/// `k="v"` and `k='v'` pairs of a tag.
fn xml_attributes(mut tag: &str) -> Vec<Token> {
    let mut out = Vec::new();
    while let Some(eq) = tag.find('=') {
        let key = tag[..eq].trim().to_string();
        let after = tag[eq + 1..].trim_start();
        let Some(quote) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            break;
        };
        let value_end = after[1..].find(quote).map_or(after.len(), |e| e + 1);
        let value = after.get(1..value_end).unwrap_or("").to_string();
        out.push(Token::Attr(key, value));
        tag = after.get(value_end + 1..).unwrap_or("");
    }
    out
}

/// Keys of a YAML text: `key:` opens, `key: value` is an attribute (a list item's dash and
/// quotes dropped).
fn yaml_tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start().trim_start_matches("- ").trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().trim_matches(['"', '\'']).to_string();
        let value = value.split(" #").next().unwrap_or("").trim();
        if value.is_empty() {
            out.push(Token::Open(key));
        } else {
            out.push(Token::Attr(
                key,
                value.trim_matches(['"', '\'']).to_string(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(keys: &[UniqueKey], table: &str, cols: &[&str]) -> bool {
        keys.iter().any(|k| {
            k.table == table
                && k.columns
                    .iter()
                    .map(String::as_str)
                    .eq(cols.iter().copied())
        })
    }

    #[test]
    fn xml_changelog() {
        let keys = unique_keys(
            r#"<databaseChangeLog>
  <changeSet id="1" author="a">
    <createTable tableName="payments">
      <column name="id" type="bigint"><constraints primaryKey="true"/></column>
      <column name="event_id" type="varchar(64)"><constraints unique="true" nullable="false"/></column>
      <column name="amount" type="bigint"/>
    </createTable>
    <addUniqueConstraint tableName="refunds" columnNames="order_id, event_id"/>
    <createIndex indexName="ix" tableName="shipments" unique="true"><column name="order_id"/></createIndex>
    <createIndex indexName="ix2" tableName="shipments"><column name="carrier"/></createIndex>
    <sql>CREATE UNIQUE INDEX ux ON invoices (stripe_id)</sql>
  </changeSet>
</databaseChangeLog>"#,
            true,
        );
        assert!(has(&keys, "payments", &["id"]));
        assert!(has(&keys, "payments", &["event_id"]));
        assert!(!has(&keys, "payments", &["amount"]));
        assert!(has(&keys, "refunds", &["order_id", "event_id"]));
        assert!(has(&keys, "shipments", &["order_id"]));
        assert!(!has(&keys, "shipments", &["carrier"]));
        assert!(has(&keys, "invoices", &["stripe_id"]));
    }

    #[test]
    fn yaml_changelog() {
        let keys = unique_keys(
            "databaseChangeLog:\n  - changeSet:\n      id: 1\n      changes:\n        - createTable:\n            tableName: payments\n            columns:\n              - column:\n                  name: event_id\n                  type: varchar(64)\n                  constraints:\n                    unique: true\n              - column:\n                  name: amount\n                  type: bigint\n        - addUniqueConstraint:\n            tableName: refunds\n            columnNames: order_id\n",
            false,
        );
        assert!(has(&keys, "payments", &["event_id"]));
        assert!(!has(&keys, "payments", &["amount"]));
        assert!(has(&keys, "refunds", &["order_id"]));
    }
}
