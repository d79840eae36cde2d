//! A JSON path into an event's body (RFC 9535), and the body parsed for the paths a source
//! reads. A path of member names only (`$.data.object.id`: every built-in source's, and most
//! configurations') is followed member by member, and when every path of a source is one, the
//! body is parsed keeping only the members those paths reach: the rest is checked as JSON and
//! dropped, not built. Any other path (wildcards, filters, indices) is queried on the whole
//! parsed body. Either way a body is accepted or refused alike, and a path reads the same value.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use serde_json_path::JsonPath;

/// A JSON path into an event's body.
#[derive(Debug, Clone)]
pub(crate) struct BodyPath {
    query: JsonPath,
    /// The member names of a path of names only (`$.a.b` → `a`, `b`); `None` for any other.
    names: Option<Vec<String>>,
}

/// A path that selects more than one value where one is read.
#[derive(Debug)]
pub(crate) struct SeveralValues;

impl BodyPath {
    /// Parses `text` as a JSON path (RFC 9535).
    ///
    /// # Errors
    /// serde_json_path's error for text that is not one.
    pub(crate) fn parse(text: &str) -> Result<Self, serde_json_path::ParseError> {
        let query = JsonPath::parse(text)?;
        Ok(Self {
            query,
            names: member_names(text),
        })
    }

    /// The value at this path in `body`, `None` when there is none.
    ///
    /// # Errors
    /// [`SeveralValues`] when the path selects more than one.
    pub(crate) fn find<'a>(&self, body: &'a Value) -> Result<Option<&'a Value>, SeveralValues> {
        match &self.names {
            Some(names) => Ok(names.iter().try_fold(body, |value, name| value.get(name))),
            None => self
                .query
                .query(body)
                .at_most_one()
                .map_err(|_| SeveralValues),
        }
    }
}

/// The member names of `text` when it is `$` followed by one or more `.name` shorthands
/// (RFC 9535 §2.5.1.1, ASCII names only), else `None`.
fn member_names(text: &str) -> Option<Vec<String>> {
    let rest = text.strip_prefix('$')?.strip_prefix('.')?;
    let names: Vec<String> = rest.split('.').map(str::to_owned).collect();
    let shorthand = |name: &String| {
        let mut chars = name.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    names.iter().all(shorthand).then_some(names)
}

/// `body` parsed as JSON (RFC 8259) for reading `paths`: when each is a path of member names,
/// only the members they reach are kept (`Null` for a body that is not an object, where no
/// such path finds anything); otherwise the whole body.
///
/// # Errors
/// Why the body is not JSON: the same bodies are refused as by a whole parse.
pub(crate) fn parse_for(body: &[u8], paths: &[&BodyPath]) -> Result<Value, String> {
    let names: Option<Vec<&[String]>> = paths.iter().map(|p| p.names.as_deref()).collect();
    let Some(names) = names else {
        return serde_json::from_slice(body).map_err(|e| e.to_string());
    };
    // A whole parse checks every string's UTF-8; text checked first lets the members that are
    // skipped be read without a copy.
    let text = std::str::from_utf8(body)
        .map_err(|e| format!("invalid UTF-8 at byte {}", e.valid_up_to()))?;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = Kept {
        paths: &names,
        prefix: &[],
    }
    .deserialize(&mut deserializer)
    .map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())?;
    Ok(value)
}

/// A value at `prefix`, of which the members on `paths` are kept.
#[derive(Clone, Copy)]
struct Kept<'p> {
    paths: &'p [&'p [String]],
    prefix: &'p [String],
}

impl Kept<'_> {
    /// A value of which nothing is kept: read and checked as a whole parse would (strings'
    /// escapes included, which serde's `IgnoredAny` does not check), and dropped.
    const NOTHING: Kept<'static> = Kept {
        paths: &[],
        prefix: &[],
    };

    /// The paths that go on below `prefix` through member `name`, and whether one ends there.
    fn below(&self, name: &str) -> (Option<&[String]>, bool) {
        let depth = self.prefix.len();
        let mut through = None;
        let mut ends = false;
        for path in self.paths {
            if path.len() > depth && path[..depth] == *self.prefix && path[depth] == name {
                through = Some(&path[..=depth]);
                ends |= path.len() == depth + 1;
            }
        }
        (through, ends)
    }
}

impl<'de> DeserializeSeed<'de> for Kept<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Kept<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(name) = map.next_key_seed(Name)? {
            match self.below(&name) {
                (_, true) => {
                    kept.insert(name.into_owned(), map.next_value()?);
                }
                (Some(prefix), false) => {
                    let value = map.next_value_seed(Kept {
                        paths: self.paths,
                        prefix,
                    })?;
                    kept.insert(name.into_owned(), value);
                }
                (None, false) => {
                    map.next_value_seed(Kept::NOTHING)?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element_seed(Kept::NOTHING)?.is_some() {}
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// A member's name, borrowed from the body unless it holds an escape (serde's own `Cow`
/// always copies).
struct Name;

impl<'de> DeserializeSeed<'de> for Name {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_borrowed_str<E: de::Error>(self, name: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(name))
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRIPE: [&str; 5] = [
        "$.id",
        "$.type",
        "$.data.object.object",
        "$.data.object.id",
        "$.created",
    ];

    fn paths(texts: &[&str]) -> Vec<BodyPath> {
        texts.iter().map(|t| BodyPath::parse(t).unwrap()).collect()
    }

    /// Each path reads from the kept members what it reads from the whole body.
    fn same_reads(body: &str, texts: &[&str]) {
        let paths = paths(texts);
        let refs: Vec<&BodyPath> = paths.iter().collect();
        let kept = parse_for(body.as_bytes(), &refs).unwrap();
        let whole: Value = serde_json::from_str(body).unwrap();
        for path in &paths {
            assert_eq!(
                path.find(&kept).unwrap(),
                path.query.query(&whole).at_most_one().unwrap(),
                "{body}"
            );
        }
    }

    #[test]
    fn names_only_paths_are_followed_member_by_member() {
        let names = |t: &str| BodyPath::parse(t).unwrap().names;
        assert_eq!(
            names("$.data.object.id"),
            Some(vec!["data".into(), "object".into(), "id".into()])
        );
        assert_eq!(names("$._x1"), Some(vec!["_x1".into()]));
        for general in ["$", "$.a[0]", "$['a']", "$.*", "$..id", "$.é"] {
            assert_eq!(names(general), None, "{general}");
        }
        for refused in ["$.a-b", "$.1a", "$.", "a.b"] {
            assert!(BodyPath::parse(refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn the_kept_members_read_as_the_whole_body_does() {
        for body in [
            r#"{"id":"evt_1","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1","object":"charge","amount":100,"meta":{"k":[1,2,{"x":"\u00e9"}]}}}}"#,
            r#"{"data":{"object":5},"id":7}"#,
            r#"{"id":"a","id":"b","data":null}"#,
            r#"{"\u0069d":"escaped","data":{"obj\u0065ct":{"id":"x","object":"y"}}}"#,
            r#"{"data":{"object":{"id":{"nested":true}}},"type":["x"]}"#,
            r#"[{"id":"evt_1"}]"#,
            r#""evt""#,
            "{}",
        ] {
            same_reads(body, &STRIPE);
        }
    }

    #[test]
    fn a_body_is_refused_as_a_whole_parse_refuses_it() {
        let stripe = paths(&STRIPE);
        let refs: Vec<&BodyPath> = stripe.iter().collect();
        for body in [
            &br#"{"id":"a","skipped":"\ud800"}"#[..],
            br#"{"id":"a","skipped":"\q"}"#,
            b"{\"id\":\"a\",\"skipped\":\"\xff\"}",
            br#"{"id":"a"} trailing"#,
            br#"{"id":"a","skipped":[1,}"#,
            b"",
        ] {
            assert!(serde_json::from_slice::<Value>(body).is_err());
            assert!(
                parse_for(body, &refs).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn any_other_path_reads_the_whole_body() {
        let texts = ["$.id", "$.items[0].id"];
        same_reads(r#"{"id":"a","items":[{"id":"b"}],"other":1}"#, &texts);
        let several = BodyPath::parse("$.items[*].id").unwrap();
        let body: Value = serde_json::from_str(r#"{"items":[{"id":1},{"id":2}]}"#).unwrap();
        assert!(several.find(&body).is_err());
    }
}
