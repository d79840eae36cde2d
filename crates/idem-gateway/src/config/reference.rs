//! The operator reference (`docs/gateway.md`) documents every key the configuration parser
//! accepts, each in the section of its table, and no key the parser does not accept.
//!
//! The keys come from the raw configuration types themselves: each type's `Deserialize` impl
//! is driven with [`Recorder`], a deserializer that keeps the field names serde's derive passes
//! to `deserialize_struct` (renames applied, so `type` rather than `event_type`) and then stops.
//! A key added to a raw type is therefore checked without anyone listing it here.

use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, Visitor};

use super::raw::{
    RawAlert, RawConfig, RawDestination, RawField, RawRelay, RawRoute, RawSource, RawTelemetry,
};

/// The operator reference, as the repository holds it.
const REFERENCE: &str = include_str!("../../../../docs/gateway.md");

/// Where `docs/gateway.md` sits, for failure messages.
const REFERENCE_PATH: &str = "docs/gateway.md";

/// Why [`Recorder`] stopped: it never produces a value.
#[derive(Debug)]
struct Stopped;

impl fmt::Display for Stopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the recorder stops after deserialize_struct")
    }
}

impl std::error::Error for Stopped {}

impl de::Error for Stopped {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Self
    }
}

/// A deserializer that records the struct name and field names a derived `Deserialize` impl
/// asks for, and refuses everything else.
#[derive(Debug, Default)]
struct Recorder {
    struct_name: Option<&'static str>,
    fields: &'static [&'static str],
}

impl<'de> de::Deserializer<'de> for &mut Recorder {
    type Error = Stopped;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, Stopped> {
        Err(Stopped)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Stopped> {
        self.struct_name = Some(name);
        self.fields = fields;
        Err(Stopped)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The keys `T`'s `Deserialize` impl accepts, with the struct name it gave.
fn keys_of<T: de::DeserializeOwned>() -> (&'static str, BTreeSet<&'static str>) {
    let mut recorder = Recorder::default();
    // Always `Err(Stopped)`: only what the recorder saw matters.
    let _ = T::deserialize(&mut recorder);
    let name = recorder
        .struct_name
        .expect("a derived Deserialize of a struct calls deserialize_struct");
    assert!(
        std::any::type_name::<T>().ends_with(&format!("::{name}")),
        "{} was deserialized as struct {name}",
        std::any::type_name::<T>()
    );
    (name, recorder.fields.iter().copied().collect())
}

/// One table of the configuration file: the raw type that parses it, the heading of its
/// section in the reference, and keys the recorder must find (so that the test cannot pass by
/// finding nothing, and sees serde's names rather than the Rust fields').
struct Table {
    raw_type: &'static str,
    heading: &'static str,
    keys: BTreeSet<&'static str>,
    expected_some: &'static [&'static str],
    at_least: usize,
}

fn table(
    (raw_type, keys): (&'static str, BTreeSet<&'static str>),
    heading: &'static str,
    expected_some: &'static [&'static str],
    at_least: usize,
) -> Table {
    Table {
        raw_type,
        heading,
        keys,
        expected_some,
        at_least,
    }
}

/// Every table of the configuration file.
fn tables() -> Vec<Table> {
    vec![
        table(
            keys_of::<RawConfig>(),
            "## Top-level keys",
            &["listen", "retention", "source", "relay"],
            8,
        ),
        table(
            keys_of::<RawSource>(),
            "## Sources: `[[source]]`",
            &["name", "kind", "type", "secrets_env", "stream", "queue"],
            15,
        ),
        table(
            keys_of::<RawField>(),
            "### Field tables: `{ header = … }` or `{ json = … }`",
            &["header", "json", "type"],
            3,
        ),
        table(
            keys_of::<RawDestination>(),
            "## Destinations: `[[destination]]`",
            &["name", "url", "retry_schedule", "signing_secret_env"],
            5,
        ),
        table(
            keys_of::<RawRoute>(),
            "## Routes: `[[route]]`",
            &["source", "destination", "event_types"],
            4,
        ),
        table(
            keys_of::<RawRelay>(),
            "## Outbox relays: `[[relay]]`",
            &["name", "target", "claim_ttl", "database_url_env"],
            8,
        ),
        table(
            keys_of::<RawAlert>(),
            "## Alerts: `[[alert]]`",
            &["name", "url", "format", "secret_env"],
            4,
        ),
        table(
            keys_of::<RawTelemetry>(),
            "## Traces: `[telemetry]`",
            &["endpoint", "service_name", "sample_ratio"],
            3,
        ),
    ]
}

/// A heading line's level (`## x` is 2), outside code blocks only.
fn heading_level(line: &str) -> Option<usize> {
    let level = line.bytes().take_while(|&b| b == b'#').count();
    (level > 0 && line[level..].starts_with(' ')).then_some(level)
}

/// The cells of a table row (`| a | b \| c |` gives `a`, `b \| c`); `None` for other lines.
fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    let mut cells = vec![String::new()];
    let mut escaped = false;
    for c in inner.chars() {
        match c {
            '|' if !escaped => cells.push(String::new()),
            _ => cells.last_mut().expect("one cell at least").push(c),
        }
        escaped = c == '\\';
    }
    Some(cells.into_iter().map(|c| c.trim().to_owned()).collect())
}

/// The code spans of `text`: what stands between pairs of backticks.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The keys of each table's section, as documented: the code spans in the first cell of every
/// row of a key table (a table whose header's first cell is `key`), by the table whose heading
/// the row falls under. A section runs from its heading to the next heading of its level or
/// above; a subsection that is another table's section belongs to that table. Lines in code
/// blocks are never headings or rows.
fn documented(reference: &str, tables: &[Table]) -> Vec<BTreeSet<String>> {
    let mut documented = vec![BTreeSet::new(); tables.len()];
    // (level, the table whose section this heading starts, if any)
    let mut open: Vec<(usize, Option<usize>)> = Vec::new();
    let mut in_code = false;
    let mut in_key_table = false;
    for line in reference.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            in_key_table = false;
            continue;
        }
        if in_code {
            continue;
        }
        if let Some(level) = heading_level(line) {
            open.retain(|&(open_level, _)| open_level < level);
            open.push((
                level,
                tables.iter().position(|t| t.heading == line.trim_end()),
            ));
            in_key_table = false;
            continue;
        }
        let Some(row) = cells(line) else {
            in_key_table = false;
            continue;
        };
        let first = row.first().map(String::as_str).unwrap_or_default();
        if first == "key" {
            in_key_table = true;
            continue;
        }
        let owner = open.iter().rev().find_map(|&(_, table)| table);
        if let (true, Some(table)) = (in_key_table, owner) {
            documented[table].extend(code_spans(first).into_iter().map(str::to_owned));
        }
    }
    documented
}

#[test]
fn the_recorder_finds_the_keys_of_every_raw_table() {
    for table in tables() {
        assert!(
            table.keys.len() >= table.at_least,
            "the recorder found only {:?} in {}: is it still a struct with named fields that \
             serde's derive hands to deserialize_struct (no `flatten`)?",
            table.keys,
            table.raw_type
        );
        for key in table.expected_some {
            assert!(
                table.keys.contains(key),
                "the recorder did not find `{key}` in {} (found {:?})",
                table.raw_type,
                table.keys
            );
        }
    }
}

#[test]
fn every_heading_the_test_reads_is_in_the_reference() {
    for table in tables() {
        assert!(
            REFERENCE
                .lines()
                .any(|line| line.trim_end() == table.heading),
            "{REFERENCE_PATH} has no heading line `{}` for the keys of {}",
            table.heading,
            table.raw_type
        );
    }
}

#[test]
fn every_key_the_parser_accepts_is_in_the_reference_under_its_table() {
    let tables = tables();
    let documented = documented(REFERENCE, &tables);
    let mut missing = Vec::new();
    for (table, documented) in tables.iter().zip(&documented) {
        for key in &table.keys {
            if !documented.contains(*key) {
                missing.push(format!(
                    "`{key}` (accepted by {}) has no row in a key table under \"{}\"",
                    table.raw_type, table.heading
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{REFERENCE_PATH} does not document every configuration key:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_reference_documents_no_key_the_parser_refuses() {
    let tables = tables();
    let documented = documented(REFERENCE, &tables);
    let mut unknown = Vec::new();
    for (table, documented) in tables.iter().zip(&documented) {
        for key in documented {
            if !table.keys.contains(key.as_str()) {
                unknown.push(format!(
                    "`{key}` under \"{}\" is not a key of {} (which accepts {:?})",
                    table.heading, table.raw_type, table.keys
                ));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "{REFERENCE_PATH} documents keys the configuration refuses:\n{}",
        unknown.join("\n")
    );
}

/// The example file of the reference is a configuration the gateway starts with (given its
/// environment variables), so that its keys are not only named but written as they are read.
#[test]
fn the_reference_example_is_a_valid_configuration() {
    let env = |var: &str| {
        Some(match var {
            "APP_DATABASE_URL" => "postgres://app@127.0.0.1:5432/app".to_owned(),
            // A Standard Webhooks secret, as a destination's signing secret must be; the
            // other secrets take any text.
            _ => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".to_owned(),
        })
    };
    let mut examples = 0;
    let mut block: Option<String> = None;
    for line in REFERENCE.lines() {
        match (&mut block, line.trim_end()) {
            (None, "```toml") => block = Some(String::new()),
            (Some(text), "```") => {
                let config = super::Config::from_toml(text, &env).unwrap_or_else(|e| {
                    panic!("the TOML example of {REFERENCE_PATH} is refused: {e}\n{text}")
                });
                assert!(
                    !config.sources.is_empty() && !config.routes.is_empty(),
                    "the example configures sources and routes"
                );
                examples += 1;
                block = None;
            }
            (Some(text), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(examples >= 1, "{REFERENCE_PATH} has no ```toml example");
}

/// The section rules on a reference of known shape: a subsection that is another table's
/// belongs to it, the next heading of the same level ends a section, code blocks hold no
/// headings, and only key tables count.
#[test]
fn sections_and_key_tables_are_read_as_written() {
    let tables = vec![
        table(("A", BTreeSet::new()), "## A", &[], 0),
        table(("B", BTreeSet::new()), "### B", &[], 0),
    ];
    let reference = "\
## A
Prose with `prose` in it.
```toml
# a comment, not a heading
```
| key | meaning |
|---|---|
| `a1` | x \\| `not-a-key` |
| `a2` or `a3` | y |

| kind | id |
|---|---|
| `not-a-key-either` | z |
### B
| key | meaning |
|---|---|
| `b1` | x |
### Other
| key | meaning |
|---|---|
| `a4` | x |
## After
| key | meaning |
|---|---|
| `nobody` | x |
";
    let found = documented(reference, &tables);
    let names = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>();
    assert_eq!(names(&found[0]), ["a1", "a2", "a3", "a4"]);
    assert_eq!(names(&found[1]), ["b1"]);
}
